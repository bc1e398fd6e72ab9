"""MP531: drift flags a node whose inventory lists fewer GPUs than GFD's nvidia.com/gpu.count (issue 11 item 7)."""

from __future__ import annotations

from pathlib import Path

from reconciler.commands.reconcile import load_desired
from reconciler.logic.drift import drift
from reconciler.model.observed import ClusterPolicyState, ObservedNode, ObservedState

INVENTORY = Path(__file__).parents[3] / "inventory"
NODE = "gpu-h200-01"  # two GPUs in the inventory


def _findings(labels: dict[str, str]) -> list[drift.Finding]:
    desired, diagnostics = load_desired(INVENTORY)
    assert desired is not None, diagnostics
    nodes = {name: ObservedNode(name=name, labels={"nvidia.com/gpu.present": "true"}) for name in desired.nodes}
    nodes[NODE] = ObservedNode(name=NODE, labels={"nvidia.com/gpu.present": "true", **labels})
    observed = ObservedState(nodes=nodes, cluster_policy=ClusterPolicyState("cluster-policy", "mixed", None, None))
    return [f for f in drift.analyze(desired, observed).findings if f.code == "MP531"]


def test_node_with_more_gpus_than_listed_is_flagged() -> None:
    [f] = _findings({"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H200"})
    assert f.node == NODE and (f.desired, f.observed) == (2, 8)
    assert f.severity is drift.FindingSeverity.WARNING
    assert "2..7" in f.message and f"nodes/{NODE}.yaml" in f.message


def test_equal_count_missing_label_single_mig_product_and_garbage_are_not_flagged() -> None:
    assert _findings({"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-H200"}) == []
    assert _findings({"nvidia.com/gpu.product": "NVIDIA-H200"}) == []
    # under `single` GFD counts MIG devices and names the product <model>-MIG-<profile>: not a GPU count
    assert _findings({"nvidia.com/gpu.count": "14", "nvidia.com/gpu.product": "NVIDIA-H200-MIG-1g.18gb"}) == []
    for bad in ("-1", "8.0", "1e3", "٣", "9" * 40, ""):
        assert _findings({"nvidia.com/gpu.count": bad}) == [], bad
