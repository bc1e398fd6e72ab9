"""Leader election on the API server twin: the Lease adapter, takeover, the write fence, and two real
processes with the leader killed mid-cycle.

Run as a script (`python test_leader.py --worker KUBECONFIG IDENTITY`) this file is the worker process:
a Controller whose cycle writes five steps into a ConfigMap through the fenced client.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client

from reconciler.adapters.kube.lease import FencedApiClient, KubeLease, LeaseConflict, NotLeader
from reconciler.controller.leader import LeaderElector
from reconciler.controller.loop import CycleContext, CycleOutcome, kube_configuration
from reconciler.model.cycles import CycleStatus
from reconciler.model.revisions import Revision
from reconciler.sourcing import SourceResult
from reconciler.twin.apiserver import ApiServerTwin

NS = "migplan"
LOG_CM = "leader-log"


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServerTwin, Path]]:
    with ApiServerTwin(namespaces=("default", NS)) as api:
        kubeconfig = api.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        yield api, Path(kubeconfig)


def coordination(kubeconfig: Path) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(client.ApiClient(kube_configuration(str(kubeconfig))))


def test_lease_adapter_writes_microtime_the_server_accepts(twin: tuple[ApiServerTwin, Path]) -> None:
    api, kubeconfig = twin
    lease = KubeLease(coordination(kubeconfig), namespace=NS, name="adapter-test")
    assert lease.get() is None
    # microsecond == 0 is the trap: isoformat() would drop the fraction and the server answer 400.
    at = datetime(2026, 12, 2, 10, 28, 4, 0, tzinfo=UTC)
    first = lease.create(holder="a", duration=15, now=at)
    stored = api.store.get("leases.coordination.k8s.io", "adapter-test", NS)
    assert stored["spec"]["renewTime"] == "2026-12-02T10:28:04.000000Z"
    assert first.holder == "a" and first.transitions == 0
    with pytest.raises(LeaseConflict):
        lease.create(holder="b", duration=15, now=at)
    renewed = lease.update(first, holder="a", duration=15, acquire=at, renew=datetime.now(UTC), transitions=0)
    assert renewed.resource_version != first.resource_version
    with pytest.raises(LeaseConflict):  # stale resourceVersion: 409, as leases.json records
        lease.update(first, holder="b", duration=15, acquire=at, renew=at, transitions=1)
    lease.request_trigger("x")
    assert lease.get() is not None and lease.get().trigger == "x"  # type: ignore[union-attr]


def elector(kubeconfig: Path, name: str, identity: str, *, duration: int = 2) -> LeaderElector:
    return LeaderElector(
        KubeLease(coordination(kubeconfig), namespace=NS, name=name),
        identity=identity,
        duration=duration,
        renew_deadline=duration * 0.75,
        retry_period=0.2,
    )


def test_takeover_after_the_holder_stops_renewing(twin: tuple[ApiServerTwin, Path]) -> None:
    _, kubeconfig = twin
    a, b = elector(kubeconfig, "takeover", "a"), elector(kubeconfig, "takeover", "b")
    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and not b.is_leader() and b.holder == "a"
    t0 = time.monotonic()
    while not b.try_acquire_or_renew():  # a is "dead": it renews no more
        assert time.monotonic() - t0 < 4, "b did not take over within the lease duration"
        time.sleep(0.1)
    took = time.monotonic() - t0
    assert 1.8 <= took <= 3.5, took  # not before the lease expired, and promptly after
    assert not a.is_leader()  # its renew deadline has passed: it stopped considering itself leader
    assert not a.try_acquire_or_renew()
    b.release()
    assert a.try_acquire_or_renew()  # released: taken at once, no waiting for expiry


def test_a_replica_that_loses_the_lease_stops_writing(twin: tuple[ApiServerTwin, Path]) -> None:
    api, kubeconfig = twin
    a = elector(kubeconfig, "fence", "a", duration=30)  # long: only losing the Lease may stop a here
    core = client.CoreV1Api(FencedApiClient(kube_configuration(str(kubeconfig)), a.is_leader))
    assert a.try_acquire_or_renew()
    core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="fenced")))
    # Someone else takes the Lease (e.g. after a partition healed): a's next round sees it and stops.
    lease = api.store.get("leases.coordination.k8s.io", "fence", NS)
    lease["spec"]["holderIdentity"] = "intruder"
    api.store.update("leases.coordination.k8s.io", lease, NS)
    assert not a.try_acquire_or_renew()
    api.reset_counts()
    with pytest.raises(NotLeader):
        core.patch_namespaced_config_map("fenced", NS, {"data": {"x": "1"}})
    assert not any(verb in ("patch", "update", "create") for (_, _, verb) in api.request_counts())
    assert core.read_namespaced_config_map("fenced", NS).data is None  # reads still work


# --- two real processes ----------------------------------------------------------------------------


def worker(kubeconfig: str, identity: str) -> int:
    from reconciler.controller.logs import setup_logging
    from reconciler.controller.loop import Controller
    from reconciler.settings import LogFormat, load_settings

    setup_logging(LogFormat.JSON, "INFO")
    settings = load_settings(
        env={},
        flags={
            "kubeconfig": kubeconfig,
            "namespace": NS,
            "identity": identity,
            "listen": "127.0.0.1:0",
            "interval_seconds": 0.5,
            "jitter_seconds": 0.05,
            "lease_duration_seconds": 3,
            "renew_deadline_seconds": 2,
            "retry_period_seconds": 0.3,
            "shutdown_grace_seconds": 3,
        },
    )

    def cycle(ctx: CycleContext) -> CycleOutcome:
        core = client.CoreV1Api(ctx.api_client)
        n = int(time.time() * 1000)
        for step in range(5):
            stamp = f"{time.time():.3f}"
            core.patch_namespaced_config_map(
                LOG_CM,
                NS,
                {"data": {f"{identity}.{n}.{step}": stamp}},
                _content_type="application/merge-patch+json",
            )
            time.sleep(0.15)
        revision = Revision(ref="test", sha="0" * 40)
        source = SourceResult(desired=None, revision=revision, latest=revision, changed=False)
        return CycleOutcome(CycleStatus.SUCCESS, source=source)

    controller = Controller(settings, cycle, kube_config=kube_configuration(kubeconfig))
    return controller.run_forever()


def entries(api: ApiServerTwin) -> list[tuple[float, str, int, int]]:
    data = api.store.get("configmaps", LOG_CM, NS).get("data") or {}
    out = []
    for key, stamp in data.items():
        ident, n, step = key.rsplit(".", 2)
        out.append((float(stamp), ident, int(n), int(step)))
    return sorted(out)


@pytest.mark.timeout(120)
def test_two_processes_leader_killed_mid_cycle(twin: tuple[ApiServerTwin, Path], tmp_path: Path) -> None:
    api, kubeconfig = twin
    api.store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": LOG_CM}}, NS)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    try:
        for ident in ("replica-a", "replica-b"):
            logs[ident] = tmp_path / f"{ident}.log"
            procs[ident] = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(kubeconfig), ident],
                stdout=subprocess.DEVNULL,
                stderr=logs[ident].open("wb"),
            )

        def holder() -> str:
            try:
                return str(api.store.get("leases.coordination.k8s.io", "migplan-leader", NS)["spec"]["holderIdentity"])
            except Exception:
                return ""

        deadline = time.monotonic() + 30
        while holder() not in procs and time.monotonic() < deadline:
            time.sleep(0.1)
        leader = holder()
        assert leader in procs, "no replica became leader"
        standby = next(i for i in procs if i != leader)
        # Wait until the leader is in the middle of a cycle (step 2 written), then kill it.
        while time.monotonic() < deadline:
            mine = [e for e in entries(api) if e[1] == leader]
            if mine and mine[-1][3] == 2:
                break
            time.sleep(0.02)
        procs[leader].send_signal(signal.SIGKILL)
        killed_at = time.time()
        procs[leader].wait(10)
        t0 = time.monotonic()
        while holder() != standby:
            assert time.monotonic() - t0 < 3 + 3, "the standby did not take over within the lease duration"
            time.sleep(0.05)
        takeover = time.monotonic() - t0
        # The new leader runs full cycles.
        while time.monotonic() - t0 < 15:
            if sum(1 for e in entries(api) if e[1] == standby and e[3] == 4) >= 2:
                break
            time.sleep(0.1)
        log = entries(api)
        by_leader = [e for e in log if e[1] == leader]
        by_standby = [e for e in log if e[1] == standby]
        assert by_standby, "the standby never wrote"
        assert by_leader and max(e[0] for e in by_leader) <= killed_at + 0.05
        # Never two writers at once: every standby write comes after the leader's last write.
        assert min(e[0] for e in by_standby) > max(e[0] for e in by_leader)
        assert sum(1 for e in by_standby if e[3] == 4) >= 2, logs[standby].read_text()[-3000:]
        print(f"\nleader {leader} killed mid-cycle; {standby} took over in {takeover:.2f}s (lease 3s)")

        # SIGTERM on the new leader: it stops and releases the Lease (empty holder) right away.
        procs[standby].send_signal(signal.SIGTERM)
        assert procs[standby].wait(20) == 0
        assert holder() == ""
        lines = [json.loads(x) for x in logs[standby].read_text().splitlines() if x.startswith("{")]
        assert any(x.get("message") == "became leader" for x in lines)
        assert any(x.get("message") == "cycle finished" and x.get("revision") for x in lines)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(5)


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--worker":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(worker(sys.argv[2], sys.argv[3]))


def test_lease_conflict_has_its_own_code() -> None:
    """A Lease conflict is not a validation finding: its code is unique across families (MP301 is 'unknown model')."""
    from reconciler.logic.inventory.rules import CODES

    assert LeaseConflict("x").code == "MP821"
    assert LeaseConflict.code not in CODES
