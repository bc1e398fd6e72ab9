"""API failures during a cycle: 429/500, connection resets and timeouts are retried with backoff; a
persistent failure or a stale write (409) ends the cycle with a report of what was not done; a process
killed mid-apply converges on the next run. A fault-injecting HTTP proxy sits between the official
client and the cluster twin."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from helpers.twinclock import TwinClock
from httpforward import forward

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.cycles import EXIT_ERROR
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"


@dataclass
class Fault:
    method: str
    path: str  # substring of the request path
    action: int | str  # HTTP status, "reset" (close without answering) or "hang" (never answer in time)
    times: int = 1  # how many matching requests it hits (-1: all)
    real_only: bool = True  # skip server-side dry runs (dryRun=All)
    before: Callable[[], None] | None = None  # run before forwarding instead of failing
    hits: int = 0


@dataclass
class FaultProxy:
    upstream: str
    faults: list[Fault] = field(default_factory=list)
    seen: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def match(self, method: str, path: str) -> Fault | None:
        with self.lock:
            self.seen.append((method, path))
            for f in self.faults:
                applies = f.method == method and f.path in path and (not f.real_only or "dryRun" not in path)
                if applies and (f.times == -1 or f.hits < f.times):
                    f.hits += 1
                    return f
        return None


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    up = urlparse(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            fault = proxy.match(self.command, self.path)
            if fault is not None and fault.before is not None:
                fault.before()
            elif fault is not None and fault.action == "reset":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            elif fault is not None and fault.action == "hang":
                time.sleep(3)
                self.close_connection = True
                return
            elif fault is not None:
                payload = (
                    b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","code":%d}'
                    % int(fault.action)
                )
                self.send_response(int(fault.action))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                if fault.action == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(payload)
                return
            assert up.hostname is not None and up.port is not None
            forward(self, up.hostname, up.port, body, timeout=30)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    return Handler


@pytest.fixture()
def rig(tmp_path: Path) -> Iterator[tuple[ClusterTwin, FaultProxy, Path]]:
    with ClusterTwin.from_inventory(
        INVENTORY, strategy="single", device_plugin_config="old-plugin-config", tls=False, **CLOCK.twin_kwargs()
    ) as twin:
        twin.settle()
        proxy = FaultProxy(upstream=twin.url)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
        server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]  # injected resets
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        kc = yaml.safe_load(Path(twin.kubeconfig).read_text())
        kc["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{server.server_address[1]}"
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(kc))
        try:
            yield twin, proxy, path
        finally:
            server.shutdown()
            server.server_close()


CLOCK = TwinClock()  # each cycle one configPropagationSeconds after the last; the twins model the delay


def _desired() -> DesiredState:
    desired, diagnostics = load_desired(INVENTORY)
    assert desired is not None, diagnostics
    return desired


def _run(kubeconfig: Path) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(kubeconfig), page_size=3, request_timeout=(2.0, 1.0))
    try:
        return reconcile_once(desired=_desired(), cluster=cluster, now=CLOCK.cycle_now())
    finally:
        cluster.close()


def test_transient_failures_are_retried_with_backoff(rig: tuple[ClusterTwin, FaultProxy, Path]) -> None:
    twin, proxy, kubeconfig = rig
    proxy.faults = [
        Fault("GET", "/api/v1/nodes", 429, real_only=False),
        Fault("PATCH", "/clusterpolicies/", 500),
        Fault("PATCH", "/api/v1/nodes/", "reset"),
        Fault("PATCH", "/configmaps/", "hang"),
    ]
    result = _run(kubeconfig)
    assert not result.errors, result.errors
    twin.settle()
    relabels = _run(kubeconfig)  # one propagation delay later: the node relabels (and their PATCH fault)
    assert not relabels.errors, relabels.errors
    assert all(f.hits == 1 for f in proxy.faults)
    assert {c.kind for c in result.applied} >= {Kind.MIG_CONFIG_MAP, Kind.CLUSTER_POLICY}
    assert Kind.NODE_MIG_CONFIG in {c.kind for c in relabels.applied}
    assert twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]["mig"]["strategy"] == "mixed"


def test_persistent_failure_is_reported_and_the_next_run_resumes(rig: tuple[ClusterTwin, FaultProxy, Path]) -> None:
    twin, proxy, kubeconfig = rig
    proxy.faults = [Fault("PATCH", "/clusterpolicies/", 503, times=-1)]
    first = _run(kubeconfig)
    (err,) = first.errors
    assert err.code == "MP554" and "clusterpolicy/cluster-policy" in err.message
    assert "1 of" in err.message  # the ConfigMap was written before it
    assert first.not_applied[0].kind is Kind.CLUSTER_POLICY
    assert first.status.exit_code == EXIT_ERROR and first.report is not None

    proxy.faults = []
    second = _run(kubeconfig)  # the ClusterPolicy patch is still owed and made now
    assert not second.errors
    assert Kind.CLUSTER_POLICY in [c.kind for c in second.applied]
    # The DaemonSet is the operator's: its own update rolled it for the strategy; migplan never restarts it.
    assert Kind.RESTART_DEVICE_PLUGIN not in [c.kind for c in (*first.applied, *second.applied)]
    twin.settle()
    third = _run(kubeconfig)
    twin.settle()
    final = _run(kubeconfig)
    assert final.converged, [str(f) for f in final.report.findings] if final.report else third.errors


def test_stale_write_is_a_conflict_not_an_overwrite(rig: tuple[ClusterTwin, FaultProxy, Path]) -> None:
    twin, proxy, kubeconfig = rig

    def someone_else_edits() -> None:
        twin.store.patch("clusterpolicies.nvidia.com", "cluster-policy", {"metadata": {"labels": {"edited": "yes"}}})

    proxy.faults = [Fault("PATCH", "/clusterpolicies/", 0, before=someone_else_edits)]
    first = _run(kubeconfig)
    (err,) = first.errors
    assert err.code == "MP553" and "409" in err.message
    cp = twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")
    assert cp["spec"]["mig"]["strategy"] == "single" and cp["metadata"]["labels"]["edited"] == "yes"
    second = _run(kubeconfig)  # re-observed: the patch now carries the new resourceVersion
    assert not second.errors
    assert twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]["mig"]["strategy"] == "mixed"


def test_killed_mid_apply_converges_on_the_next_run(rig: tuple[ClusterTwin, FaultProxy, Path]) -> None:
    twin, proxy, kubeconfig = rig
    reached = threading.Event()

    def hold() -> None:
        reached.set()
        time.sleep(30)  # the process is killed while this write is in flight

    proxy.faults = [Fault("PATCH", "/clusterpolicies/", 0, before=hold)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "reconcile",
            "--once",
            "--kubeconfig",
            str(kubeconfig),
            "--inventory",
            str(INVENTORY),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert reached.wait(60), "the reconcile never reached the ClusterPolicy write"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    proxy.faults = []
    assert twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]["mig"]["strategy"] == "single"
    for _ in range(5):
        result = _run(kubeconfig)
        twin.settle()
        if result.converged:
            break
    assert result.converged
    ds = twin.store.get("daemonsets.apps", "nvidia-device-plugin-daemonset", "gpu-operator")
    (plugin,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-device-plugin"]
    assert {"name": "MIG_STRATEGY", "value": "mixed"} in plugin["env"]  # rendered by the operator, which rolled it
    assert "kubectl.kubernetes.io/restartedAt" not in (ds["spec"]["template"]["metadata"].get("annotations") or {})
