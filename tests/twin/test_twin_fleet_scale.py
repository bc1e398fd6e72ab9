"""`migplan twin` at fleet size (issue 29, item 4): bounded threads, the kubeconfig written only once it answers.

A fleet larger than KUBELETS_BY_DEFAULT serves no kubelet unless named with --kubelet (one gRPC server per node
of a 5,000-node fleet was more than 5,000 threads); an unknown --kubelet node is a usage error that writes
nothing; the kubeconfig appears whole, once the server answers, before the ready line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.commands.twin import KUBELETS_BY_DEFAULT, answers, kubelet_nodes, publish_kubeconfig

REPO = Path(__file__).resolve().parents[2]
NODES = KUBELETS_BY_DEFAULT + 8


def _inventory(root: Path, nodes: int) -> Path:
    (root / "nodes").mkdir(parents=True)
    (root / "cluster.yaml").write_text(
        "apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: t}\nspec:\n  migStrategy: mixed\n"
    )
    for i in range(nodes):
        (root / "nodes" / f"n{i:03d}.yaml").write_text(
            f"apiVersion: migplan/v1\nkind: Node\nmetadata: {{name: n{i:03d}}}\nspec:\n  gpus:\n"
            "    - index: 0\n      model: H200-141GB\n      mig:\n        enabled: true\n        partitions:\n"
            "          - {profile: 3g.71gb}\n"
        )
    return root


def _start(inventory: Path, kubeconfig: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "reconciler", "twin"),
            *("--inventory", str(inventory), "--kubeconfig-out", str(kubeconfig), *extra),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def _serve(tmp_path: Path, *extra: str) -> tuple[list[str], int]:
    """(the lines printed up to the serving loop, the process's thread count then); stops it with SIGTERM."""
    inventory = _inventory(tmp_path / "inv", NODES)
    kubeconfig = tmp_path / "kc" / "kubeconfig"
    proc = _start(inventory, kubeconfig, *extra)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        assert lines[0].startswith("cluster twin ready: https://127.0.0.1:"), lines[0] + (
            proc.stderr.read() if proc.stderr else ""
        )
        assert kubeconfig.is_file()  # written before the ready line
        assert not list(kubeconfig.parent.glob(".*.tmp"))
        while not lines[-1].startswith(("kubelets of", "cluster twin stopped")) and len(lines) < NODES + 3:
            lines.append(proc.stdout.readline())
        threads = _threads(proc.pid)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert proc.returncode == 0
        return lines, threads
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_fleet_beyond_the_default_serves_only_the_kubelets_named(tmp_path: Path) -> None:
    lines, threads = _serve(tmp_path / "none")
    assert not [ln for ln in lines if ln.startswith("kubelet n")]
    assert lines[-1].startswith(f"kubelets of {NODES} other node(s) not served")
    named, named_threads = _serve(tmp_path / "one", "--kubelet", "n007")
    served = [ln for ln in named if ln.startswith("kubelet n")]
    assert len(served) == 1 and served[0].startswith("kubelet n007: --pod-resources-socket ")
    assert named[-1].startswith(f"kubelets of {NODES - 1} other node(s)")
    # One gRPC server per node would add at least one thread per node; the fleet's size must not show.
    assert threads < NODES and named_threads < NODES, (threads, named_threads)


def test_an_unknown_kubelet_node_is_a_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path / "inv", 2)
    kubeconfig = tmp_path / "kubeconfig"
    proc = _start(inventory, kubeconfig, "--kubelet", "n001", "--kubelet", "../../etc/passwd")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "no such node" in err and "../../etc/passwd" in err and "Traceback" not in err
    assert not kubeconfig.exists()


def test_kubelet_nodes_defaults_to_every_present_node_of_a_small_fleet() -> None:
    small = [f"n{i}" for i in range(KUBELETS_BY_DEFAULT)]
    assert kubelet_nodes(small, {"n1"}, ()) == [n for n in small if n != "n1"]
    large = [f"n{i}" for i in range(KUBELETS_BY_DEFAULT + 1)]
    assert kubelet_nodes(large, set(), ()) == []
    assert kubelet_nodes(large, {"n2"}, ("n3", "n2", "n3")) == ["n3"]


class _Api:
    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def write_kubeconfig(self, path: Path) -> Path:
        path.write_text("apiVersion: v1\nkind: Config\n# half")
        if self.fail:
            raise OSError("disk full")
        path.write_text("apiVersion: v1\nkind: Config\n")
        return path


class _Twin:
    def __init__(self, fail: bool) -> None:
        self.api = _Api(fail)


@pytest.mark.parametrize("existing", [None, "old kubeconfig\n"])
def test_the_kubeconfig_appears_whole_or_not_at_all(tmp_path: Path, existing: str | None) -> None:
    target = tmp_path / "kubeconfig"
    if existing is not None:
        target.write_text(existing)
    with pytest.raises(OSError, match="disk full"):
        publish_kubeconfig(_Twin(fail=True), target)
    assert (target.read_text() if target.exists() else None) == existing  # a half-written file never shows
    assert not list(tmp_path.glob(".*.tmp"))
    publish_kubeconfig(_Twin(fail=False), target)
    assert target.read_text() == "apiVersion: v1\nkind: Config\n"


def test_a_server_that_never_answers_is_an_error_not_a_kubeconfig() -> None:
    # answers() polls /version; a closed port is an OSError it retries until its deadline, then raises.
    with pytest.raises(OSError):
        answers("http://127.0.0.1:9", None, timeout=0.3)
