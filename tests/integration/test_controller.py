"""`migplan run` end to end on the cluster twin with a real Git server (git daemon):

the article's cluster (single strategy, a stale device-plugin config) is reconciled by the controller
loop — leader-elected, Git source, engine, report committed back — until it converges; then the signals
are checked: /metrics, Events on the Node and the ClusterPolicy, the node marks, a signed webhook that
starts a cycle, a drift injected while it runs that is reported and repaired, and the one-shot CLI.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gitserver import GitDaemon, git, make_bare, seed
from helpers.twinclock import TwinClock
from kubernetes import client

from reconciler.adapters.kube.events import REASON_ANNOTATION, STATE_ANNOTATION
from reconciler.controller.loop import Controller, kube_configuration
from reconciler.gitops import GitCycle
from reconciler.resources import inventory_dir
from reconciler.settings import load_settings
from reconciler.twin.cluster import ClusterTwin

SECRET = "hook-secret"


def inventory_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.yaml"))}


@dataclass
class Running:
    twin: ClusterTwin
    controller: Controller
    cycle: GitCycle
    bare: Path
    work: Path
    port: int


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


CLOCK = TwinClock()


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("ctl")
    daemon = GitDaemon(root / "srv")
    (root / "srv").mkdir()
    bare = make_bare(root / "srv", "inventory")
    seed(bare, root / "work", inventory_files(inventory_dir()), message="inventory")
    daemon.start()
    twin = ClusterTwin.from_inventory(
        inventory_dir(), strategy="single", device_plugin_config="device-plugin-config", **CLOCK.twin_kwargs()
    )
    twin.start()
    twin.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "migplan"}})
    settings = load_settings(
        env={},
        flags={
            "repo": daemon.url("inventory"),
            "branch": "main",
            "cache_dir": str(root / "cache"),
            "kubeconfig": str(twin.kubeconfig),
            "namespace": "migplan",
            "identity": "ctl-test",
            "listen": "127.0.0.1:0",
            "interval_seconds": 1.0,
            "jitter_seconds": 0.1,
            "lease_duration_seconds": 4,
            "renew_deadline_seconds": 3,
            "retry_period_seconds": 0.5,
            "webhook_secret": SECRET,
            "shutdown_grace_seconds": 10,
        },
    )
    # As `migplan run` builds it (watch-fed caches), each cycle a propagation delay after the last (simulated)
    cycle = GitCycle(settings, now=CLOCK.cycle_now, watch_cluster=True)
    controller = Controller(settings, cycle, kube_config=kube_configuration(str(twin.kubeconfig)))
    controller.start()
    try:
        yield Running(twin, controller, cycle, bare, root / "work", controller.http.port)
    finally:
        assert controller.shutdown()
        twin.stop()
        daemon.stop()


def core(r: Running) -> Any:  # Any: the client's Optional-typed models would need a check per field
    return client.CoreV1Api(client.ApiClient(kube_configuration(str(r.twin.kubeconfig))))


def get(r: Running, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{r.port}{path}", timeout=5) as resp:
        return resp.status, resp.read().decode()


def last_result(r: Running) -> float:
    value = r.controller.metrics.registry.get_sample_value("migplan_reconcile_total", {"result": "success"})
    return float(value or 0.0)


def converged(r: Running) -> bool:
    h = list(r.controller.runner.history)
    return bool(h) and h[-1].ok and (last_result(r) or 0) > 0 and r.controller.cycles_run > 0


def test_converges_and_commits_the_report(running: Running) -> None:
    r = running
    wait_for("the controller to lead", lambda: r.controller.elector is not None and r.controller.elector.is_leader())
    wait_for("a converged cycle", lambda: converged(r), timeout=90)
    policy = r.twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")
    assert policy["spec"]["mig"]["strategy"] == "mixed"
    assert "config" not in policy["spec"].get("devicePlugin", {})
    alloc = r.twin.store.get("nodes", "gpu-h200-01")["status"]["allocatable"]
    assert alloc["nvidia.com/mig-1g.18gb"] == "4" and alloc["nvidia.com/mig-3g.71gb"] == "2"
    # The report is on the reports branch of the real remote.
    wait_for("a committed report", lambda: any(o.status in ("committed", "unchanged") for o in r.cycle.reports))
    files = git("ls-tree", "-r", "--name-only", "migplan-reports", cwd=r.bare)
    assert "reports/drift.yaml" in files.splitlines() and "reports/README.md" in files.splitlines()
    assert "drift report for main@sha1:" in git("log", "-1", "--format=%s", "migplan-reports", cwd=r.bare)
    # The long-lived controller keeps the last report's node pages (as blob ids in Git, with the values each was
    # rendered from): an in-sync cycle renders none again.
    memo = r.cycle.render_memo
    wait_for("a cycle that renders no node page again", lambda: bool(memo.stored) and memo.rendered == 0)
    assert {f"nodes/{n}.md" for n in ("gpu-a100-01", "gpu-h100-01", "gpu-h200-01")} <= set(memo.stored)
    assert memo.pages == {}  # the bytes are in the object database, not kept in the process


def test_metrics_health_and_signals(running: Running) -> None:
    r = running
    wait_for("a converged cycle", lambda: converged(r), timeout=90)
    status, page = get(r, "/metrics")
    assert status == 200
    head = git("rev-parse", "main", cwd=r.bare)
    assert f'migplan_git_revision_info{{revision="main@sha1:{head}"}} 1.0' in page
    assert 'migplan_partitions{node="gpu-h200-01",profile="1g.18gb",state="total"} 4.0' in page
    assert "migplan_reconcile_duration_seconds_count" in page and "migplan_last_success_timestamp_seconds" in page
    assert "migplan_leader 1.0" in page
    # What the alerting rules (deploy/prometheus/migplan-rules.yaml) read: partitions per owner (two
    # 3g.71gb on gpu-h200-01 belong to vllm-llama-70b), report pushes and the outbox.
    assert 'migplan_owner_partitions{owner="vllm-llama-70b",profile="3g.71gb",state="total"} 2.0' in page
    pushes = r.controller.metrics.registry.get_sample_value("migplan_report_pushes_total", {"result": "committed"})
    assert (pushes or 0) >= 1
    assert "migplan_report_outbox_pending 0.0" in page
    assert get(r, "/healthz")[0] == 200
    assert get(r, "/readyz") == (200, "leader\n")
    api = core(r)
    events = api.list_namespaced_event("default").items
    reasons = {(e.involved_object.kind, e.involved_object.name, e.reason) for e in events}
    assert ("ClusterPolicy", "cluster-policy", "ApplyStarted") in reasons
    assert ("ClusterPolicy", "cluster-policy", "DriftDetected") in reasons  # strategy single vs mixed, stale config
    for e in events:
        assert e.source.component == "migplan-controller" and e.type in ("Normal", "Warning")
        assert e.reason[0].isupper() and "_" not in e.reason
    ann = api.read_node("gpu-h200-01").metadata.annotations
    assert ann[STATE_ANNOTATION] == "InSync" and "main@sha1:" in ann[REASON_ANNOTATION]


def test_signed_webhook_starts_a_cycle_and_forged_one_does_not(running: Running) -> None:
    r = running
    wait_for("a converged cycle", lambda: converged(r), timeout=90)
    body = json.dumps({"ref": "refs/heads/main"}).encode()

    def post(signature: str) -> int:
        req = urllib.request.Request(
            f"http://127.0.0.1:{r.port}/webhook",
            data=body,
            headers={"X-GitHub-Event": "push", "X-Hub-Signature-256": signature},
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    before = sum(1 for c in r.controller.runner.history if c.trigger.startswith("webhook"))
    assert post("sha256=" + "0" * 64) == 401
    time.sleep(0.3)
    assert sum(1 for c in r.controller.runner.history if c.trigger.startswith("webhook")) == before
    assert post("sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()) == 202
    wait_for(
        "a webhook cycle",
        lambda: sum(1 for c in r.controller.runner.history if c.trigger == "webhook:github") > before,
        timeout=15,
    )


def test_injected_drift_is_reported_on_the_node_and_repaired(running: Running) -> None:
    r = running
    wait_for("a converged cycle", lambda: converged(r), timeout=90)
    api = core(r)

    def mark(node: str) -> tuple[str, str]:
        ann = api.read_node(node).metadata.annotations or {}
        return ann.get(STATE_ANNOTATION, ""), ann.get(REASON_ANNOTATION, "")

    def events_about(node: str) -> set[str]:
        return {e.reason for e in api.list_namespaced_event("default").items if e.involved_object.name == node}

    # mig-manager failed on a node (label changed by hand, state failed): the node carries the failure and
    # its reason. The engine re-applies once no pod holds a GPU there (pods do on gpu-a100-01, so it may
    # hold); either way, once the drift is removed the node is back in sync.
    wait_for("gpu-a100-01 in sync", lambda: mark("gpu-a100-01")[0] == "InSync", timeout=60)
    r.twin.inject("mig-config-failed:gpu-a100-01")
    wait_for(
        "the failure on the node, with its reason",
        lambda: mark("gpu-a100-01")[0] in ("Failed", "Applying", "Held") and "gpu-a100-01" in mark("gpu-a100-01")[1],
        timeout=60,
    )
    assert events_about("gpu-a100-01") & {"ApplyFailed", "ApplyStarted", "ChangeHeld"}
    r.twin.heal("mig-config-failed:gpu-a100-01")
    wait_for("the node back in sync", lambda: mark("gpu-a100-01")[0] == "InSync", timeout=90)
    assert r.twin.store.get("nodes", "gpu-a100-01")["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"

    # The strategy changed by hand: reported on the ClusterPolicy and set back.
    r.twin.inject("wrong-strategy")
    wait_for(
        "the strategy set back",
        lambda: r.twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]["mig"]["strategy"] == "mixed",
        timeout=60,
    )

    # A GPU re-cut by hand (behind mig-manager's back): reported on the node, re-applied, back in sync.
    wait_for("gpu-h200-02 in sync", lambda: mark("gpu-h200-02")[0] == "InSync", timeout=60)
    r.twin.inject("gpu-recut:gpu-h200-02:1")
    marks: list[tuple[str, str]] = []

    def recut_repaired() -> bool:
        marks.append(mark("gpu-h200-02"))
        return len({m[0] for m in marks}) > 1 and marks[-1][0] == "InSync"

    wait_for("the re-cut node reported, then back in sync", recut_repaired, timeout=90)
    assert any(state in ("Applying", "Drifted") for state, _ in marks), marks
    assert events_about("gpu-h200-02") & {"ApplyStarted", "DriftDetected"}
    alloc = r.twin.store.get("nodes", "gpu-h200-02")["status"]["allocatable"]
    assert alloc["nvidia.com/mig-1g.18gb"] == "4" and alloc["nvidia.com/mig-3g.71gb"] == "2"


def test_once_cli_reports_in_sync(running: Running, tmp_path: Path) -> None:
    r = running
    wait_for("a converged cycle", lambda: converged(r), timeout=90)
    env: dict[str, Any] = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reconciler",
            "run",
            "--once",
            "--repo",
            str(r.bare),
            "--branch",
            "main",
            "--kubeconfig",
            str(r.twin.kubeconfig),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("success: main@sha1:")
