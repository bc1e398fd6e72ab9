"""An inventory served by `git daemon` on loopback and a cluster twin built from the same files, with the official
client pointed at the twin: where the whole-cycle report tests start (test_report_cadence.py, test_report_store.py,
test_report_cycle_memory.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from gitserver import GitDaemon, make_bare, seed

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.twin.cluster import ClusterTwin


def h200_fleet(name: str, nodes: int, partition: str, count: int, *, min_interval: str = "0s") -> dict[str, str]:
    """Cluster `name` (mixed strategy, configPropagationSeconds 0: the cycles run on the real clock) and nodes
    n0..n{nodes-1}, each one H200 cut into `count` x `partition` (a flow mapping such as `{profile: 1g.18gb}`)."""
    files = {
        "cluster.yaml": f"apiVersion: migplan/v1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
        f"spec:\n  migStrategy: mixed\n  apply: {{configPropagationSeconds: 0}}\n"
        f"  reports: {{minInterval: {min_interval}}}\n",
    }
    for i in range(nodes):
        files[f"nodes/n{i}.yaml"] = (
            f"apiVersion: migplan/v1\nkind: Node\nmetadata: {{name: n{i}}}\nspec:\n  gpus:\n"
            "    - index: 0\n      model: H200-141GB\n      mig:\n        enabled: true\n        partitions:\n"
            + f"          - {partition}\n"
            * count
        )
    return files


@contextlib.contextmanager
def served(tmp_path: Path, files: dict[str, str]) -> Iterator[tuple[GitDaemon, KubeCluster, ClusterTwin, Path]]:
    """(daemon, cluster, twin, bare): `files` committed to `main` of the bare repository `inv` under tmp_path/srv,
    served by the daemon, and the twin built from the same files; all stopped on exit."""
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "work", files, message="inventory")
    inv = tmp_path / "inv"
    for rel, text in files.items():
        (inv / rel).parent.mkdir(parents=True, exist_ok=True)
        (inv / rel).write_text(text)
    daemon = GitDaemon(srv).start()
    twin = ClusterTwin.from_inventory(inv).start()
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        yield daemon, cluster, twin, bare
    finally:
        cluster.close()
        twin.stop()
        daemon.stop()
