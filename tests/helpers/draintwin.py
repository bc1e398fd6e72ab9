"""The drain scenario on the cluster twin shared by tests/integration/test_drain_twin.py (gpu-operator mode) and
tests/integration/test_agent_drain_twin.py (agent mode): one node `n`, GPU 0 whole as 7g.141gb, GPU 1 cut
3g/2g/1g/1g and re-cut into 7 x 1g.18gb (which destroys the 2g.35gb), a ReplicaSet's pods and its
PodDisruptionBudget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.twin.cluster import ClusterTwin

NODE = "n"
GPU0 = {"index": 0, "model": "H200-141GB", "mig": {"enabled": True, "partitions": [{"profile": "7g.141gb"}]}}
GPU1_CUT = {
    "index": 1,
    "model": "H200-141GB",
    "mig": {"enabled": True, "partitions": [{"profile": p} for p in ("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb")]},
}
GPU1_RECUT = {
    "index": 1,
    "model": "H200-141GB",
    "mig": {"enabled": True, "partitions": [{"profile": "1g.18gb"} for _ in range(7)]},
}


def write_inventory(root: Path, gpus: list[dict[str, Any]], *, mode: str | None = None) -> Path:
    """An inventory of node `n` with allowDisruption and drainTimeoutSeconds 600 (apply.mode `mode` if given)."""
    (root / "nodes").mkdir(parents=True)
    # configPropagationSeconds 0: these cycles run on the real clock (test_config_propagation_twin shows the delay)
    apply: dict[str, Any] = {"allowDisruption": True, "drainTimeoutSeconds": 600, "configPropagationSeconds": 0}
    if mode is not None:
        apply["mode"] = mode
    spec = {"migStrategy": "mixed", "apply": apply}
    (root / "cluster.yaml").write_text(
        yaml.safe_dump({"apiVersion": "migplan/v1", "kind": "Cluster", "metadata": {"name": "t"}, "spec": spec})
    )
    node = {"apiVersion": "migplan/v1", "kind": "Node", "metadata": {"name": NODE}, "spec": {"gpus": gpus}}
    (root / "nodes" / f"{NODE}.yaml").write_text(yaml.safe_dump(node))
    return root


def replicaset_pod(twin: ClusterTwin, name: str, resources: dict[str, str]) -> None:
    """A ReplicaSet's pod on node n (the twin's kubelet admits it onto free devices and marks it Ready)."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "emb-5d", "uid": "rs-1", "controller": True}
    container: dict[str, Any] = {"name": "main", "image": "registry.example/emb:1"}
    if resources:
        container["resources"] = {"requests": resources, "limits": resources}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "emb"}, "ownerReferences": [owner]},
        "spec": {"nodeName": NODE, "containers": [container]},
    }
    twin.store.create("pods", pod, "default")


def pod_disruption_budget(twin: ClusterTwin, min_available: int) -> None:
    """PodDisruptionBudget `emb` over the ReplicaSet's pods (label app=emb)."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "emb"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "emb"}}},
    }
    twin.store.create("poddisruptionbudgets.policy", pdb, "default")
