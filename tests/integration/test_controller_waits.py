"""A controller that says why it waits, against the twin's API server: no namespace for its Lease, then no reachable
repository. Each is one WARNING with the fix (not one line per 0.5 s retry), the `migplan_waiting{code}` metric, an
Event where the controller may write one, and /readyz false until it can do its job."""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from gitserver import make_bare, seed
from kubernetes import client

from reconciler.controller.loop import Controller, kube_configuration
from reconciler.gitops import GitCycle
from reconciler.resources import inventory_dir
from reconciler.settings import load_settings
from reconciler.twin.cluster import ClusterTwin


def _until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _waiting(controller: Controller, code: str) -> float | None:
    return controller.metrics.registry.get_sample_value("migplan_waiting", {"code": code})


def inventory_files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.yaml")}


def _settings(repo: str, twin: ClusterTwin, cache: Path) -> dict[str, object]:
    return {
        "repo": repo,
        "branch": "main",
        "cache_dir": str(cache),
        "kubeconfig": str(twin.kubeconfig),
        "namespace": "migplan",
        "identity": "ctl-waits",
        "listen": "127.0.0.1:0",
        "interval_seconds": 1.0,
        "jitter_seconds": 0.1,
        "lease_duration_seconds": 4,
        "renew_deadline_seconds": 3,
        "retry_period_seconds": 0.5,
        "shutdown_grace_seconds": 10,
        "backoff_base_seconds": 0.5,  # failed cycles come back quickly; the slow log cadence stays a minute
        "backoff_max_seconds": 60,
    }


@pytest.mark.timeout(120)
def test_missing_namespace_then_unreachable_repository(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    twin = ClusterTwin.from_inventory(inventory_dir())
    twin.start()
    repo = tmp_path / "srv" / "inventory.git"  # not there yet: the repository the controller cannot read
    settings = load_settings(env={}, flags=_settings(str(repo), twin, tmp_path / "c"))
    controller = Controller(settings, GitCycle(settings), kube_config=kube_configuration(str(twin.kubeconfig)))
    caplog.set_level(logging.INFO, logger="migplan")
    controller.start()
    try:
        port = controller.http.port
        _until(lambda: _waiting(controller, "MP980") == 1.0, "MP980 to be reported")
        time.sleep(2.0)  # four more lease rounds fail the same way
        code, body = _readyz(port)
        assert code == 503 and "MP980" in body and "kubectl create namespace migplan" in body
        said = [r for r in caplog.records if "MP980" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING, [r.getMessage() for r in said]
        assert controller.cycles_run == 0  # nothing reconciled while it waits

        twin.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "migplan"}})
        _until(lambda: _waiting(controller, "MP980") == 0.0, "MP980 to clear")
        # Now it leads, runs cycles, and meets the next reason: the repository cannot be read.
        _until(lambda: _waiting(controller, "MP982") == 1.0, "MP982 to be reported")
        code, body = _readyz(port)
        assert code == 503 and "MP982" in body and str(repo) in body
        _until(lambda: controller.cycles_run >= 3, "more cycles")
        assert not any("MP983" in r.getMessage() for r in caplog.records)  # it never lost what it held
        # each failed cycle is one line with its code, not a traceback: the failure is a value migplan foresaw
        failed = [r for r in caplog.records if r.getMessage().startswith("cycle failed")]
        assert failed and all(r.exc_info is None and "MP708" in r.getMessage() for r in failed)
        assert len([r for r in caplog.records if "MP982" in r.getMessage()]) == 1
        assert any("no longer waiting" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
        core = client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))
        events = [e for e in core.list_namespaced_event("default").items if e.reason == "Waiting"]
        assert len(events) == 1 and "MP982" in events[0].message and events[0].type == "Warning"
        assert events[0].involved_object.kind == "ClusterPolicy"

        # The repository appears: the controller reconciles, stops waiting and is ready.
        (tmp_path / "srv").mkdir()
        seed(make_bare(tmp_path / "srv", "inventory"), tmp_path / "work", inventory_files(inventory_dir()))
        _until(lambda: _waiting(controller, "MP982") == 0.0, "MP982 to clear")
        assert _readyz(port)[0] == 200
    finally:
        assert controller.shutdown()
        twin.stop()
