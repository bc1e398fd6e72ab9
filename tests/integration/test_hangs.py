"""Nothing hangs: a Kubernetes API server or a Git remote that accepts connections and never answers
ends `migplan reconcile --once` with a clear error (exit 2, a code) well within two minutes, over
http and https alike; a request of a cycle never outlives the cycle's deadline.

The servers are real sockets on loopback (tests/integration/silentserver.py). The subprocess timeout
is the hang guard: a run that does not end in time fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from silentserver import SilentServer

from reconciler.adapters import deadline
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import GpuOperatorSettings
from reconciler.twin.apiserver import certs
from reconciler.twin.apiserver.kubeconfig import write_kubeconfig

INVENTORY = Path(__file__).parents[2] / "inventory"
WELL_UNDER_TWO_MINUTES = 100  # seconds: the hang guard of every run below


def _migplan(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cwd / "xdg")}
    env.pop("KUBECONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=WELL_UNDER_TWO_MINUTES,
        check=False,
    )


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> certs.TlsFiles:
    return certs.generate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(params=["http", "https"])
def silent_api(request: pytest.FixtureRequest, tls: certs.TlsFiles, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig pointing at an API server that accepts connections and never answers."""
    https = request.param == "https"
    server = SilentServer(tls_cert=tls.server_cert, tls_key=tls.server_key) if https else SilentServer()
    with server:
        url = f"{request.param}://127.0.0.1:{server.port}"
        request.node.silent_server = server
        yield write_kubeconfig(tmp_path / "kubeconfig", url, "token", ca_pem=tls.ca_pem() if https else None)


def _assert_clean(proc: subprocess.CompletedProcess[str], code: str) -> None:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert proc.returncode == 2, out
    assert code in out, out


def test_reconcile_once_ends_with_the_default_deadline_when_the_api_server_never_answers(
    silent_api: Path, tmp_path: Path
) -> None:
    proc = _migplan("reconcile", "--once", "--kubeconfig", str(silent_api), "--inventory", str(INVENTORY), cwd=tmp_path)
    _assert_clean(proc, "MP811")


@pytest.mark.parametrize("scheme", ["git", "http", "https"])
def test_reconcile_once_ends_when_the_git_remote_never_answers(scheme: str, tmp_path: Path) -> None:
    # The API server would answer nothing either, but the Git source comes first: with no revision
    # ever fetched there is nothing to act on, and the cluster is never contacted.
    with SilentServer() as git_remote, SilentServer() as api:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{api.port}", "token")
        url = f"{scheme}://127.0.0.1:{git_remote.port}/inventory.git"
        proc = _migplan(
            "reconcile", "--once", "--kubeconfig", str(kubeconfig), "--repo", url,
            "--cache-dir", str(tmp_path / "cache"), "--deadline", "8", cwd=tmp_path,
        )  # fmt: skip
        assert git_remote.accepted >= 1 and api.accepted == 0
    _assert_clean(proc, "MP701")


def test_no_request_outlives_the_deadline_and_urllib3_does_not_retry_behind_our_back(
    silent_api: Path, request: pytest.FixtureRequest
) -> None:
    server: SilentServer = request.node.silent_server
    cluster = KubeCluster.from_kubeconfig(str(silent_api))
    try:
        with deadline.cycle_deadline(1.5), pytest.raises(MigplanError) as err:
            cluster.observe(GpuOperatorSettings())
    finally:
        cluster.close()
    # One attempt, its read timeout cut to the deadline; then our retry loop stopped there (MP811).
    # urllib3's own retries would have opened three more connections within that one attempt.
    assert err.value.code == deadline.CODE
    assert server.accepted == 1


def test_a_request_after_the_deadline_is_not_sent(silent_api: Path, request: pytest.FixtureRequest) -> None:
    server: SilentServer = request.node.silent_server
    cluster = KubeCluster.from_kubeconfig(str(silent_api))
    try:
        with deadline.cycle_deadline(0.001):
            time.sleep(0.01)
            with pytest.raises(deadline.DeadlineExceeded):
                cluster.observe(GpuOperatorSettings())
    finally:
        cluster.close()
    assert server.accepted == 0


def test_import_ends_within_its_deadline_when_the_api_server_never_answers(silent_api: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    proc = _migplan("import", "--kubeconfig", str(silent_api), "--out", str(tmp_path / "inv"), "--deadline", "6",
                    cwd=tmp_path)  # fmt: skip
    took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "MP580" in proc.stderr and "Traceback" not in proc.stderr
    assert took < 40, took
    assert not (tmp_path / "inv").exists()  # nothing written
