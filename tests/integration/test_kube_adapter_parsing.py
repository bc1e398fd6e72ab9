"""Parsing of raw API objects into observed values (no server needed)."""

from __future__ import annotations

from reconciler.adapters import kubeobserve
from reconciler.model.observed import LAYOUT_REFUSALS


def test_gpu_pods_only_with_effective_requests() -> None:
    cpu = {"metadata": {"name": "a", "namespace": "x"}, "spec": {"containers": [{"name": "c", "resources": {}}]}}
    assert kubeobserve.gpu_pod_from_json(cpu) is None
    gpu = {
        "metadata": {
            "name": "b",
            "namespace": "x",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "b-1", "controller": True}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.18gb": "2", "cpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }
    p = kubeobserve.gpu_pod_from_json(gpu)
    assert p is not None and p.node == "n1" and p.requested() == {"nvidia.com/mig-1g.18gb": 2}
    assert p.owner is not None and p.owner.name == "b-1"


def test_log_quotes() -> None:
    log = "I starting\nE boom: more than one MIG device type present on node\nI retrying in 5s\n"
    assert kubeobserve.quote_log(log, LAYOUT_REFUSALS) == "E boom: more than one MIG device type present on node"
    assert kubeobserve.quote_log("a\nlast words\n\n", LAYOUT_REFUSALS) == "last words"
    assert kubeobserve.quote_log("", LAYOUT_REFUSALS) is None
    mm = (
        "Updating to MIG config: x\n"
        "Error clearing MigConfig: error destroying Compute instance for profile '(0, 0)': In use by another client\n"
        "Changing the 'nvidia.com/mig.config.state' node label to 'failed'\n"
    )
    assert kubeobserve.mig_manager_error(
        mm
    ) is not None and "In use by another client" in kubeobserve.mig_manager_error(mm)  # type: ignore[operator]
