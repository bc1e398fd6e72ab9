"""The whole chain on a DRA-static node (issue 30 items 1, 2 and 5): merge, plan, guard, agent re-cut, DRA kubelet
plugin restart, slices equal to the plan, and a pod written for the device plugin (`nvidia.com/mig-4g.71gb: 1`)
scheduled through the DeviceClass migplan rendered from the plan, on the new partition.

Node `n` (tests/helpers/drastatictwin.py): a GPUCluster cluster without DynamicMIG, NVIDIA's DRA driver publishing
its static MIG devices, no device plugin on the node (GPUCluster runs none; the twin's is switched off by its deploy
label). GPU 1 is cut 3g/2g/1g/1g; the merge re-cuts it into 4g.71gb + 3g.71gb: the 4g.71gb is a profile the node
never had, so the pod can only run on the partition the re-cut creates.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.drastatictwin import GPU0, NODE, DraStaticTwin, dra_static_twin

from reconciler.engine import CycleResult
from reconciler.logic.planning.agentplan import MigState
from reconciler.model.drift import NodeStatus
from reconciler.model.plans import Action, Kind

GPU1_NEW = {
    "index": 1,
    "model": "H200-141GB",
    "mig": {"enabled": True, "partitions": [{"profile": "4g.71gb"}, {"profile": "3g.71gb"}]},
}
RESOURCE = "nvidia.com/mig-4g.71gb"


@pytest.fixture
def dra(tmp_path: Path) -> Iterator[DraStaticTwin]:
    with dra_static_twin(tmp_path) as scenario:
        scenario.twin.store.patch(
            "nodes", NODE, {"metadata": {"labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}}}
        )
        scenario.twin.settle()
        yield scenario


def _writes(result: CycleResult, kind: Kind) -> list[tuple[str, Action]]:
    assert not result.errors, result.errors
    return [(c.subject, c.action) for c in result.applied if c.kind is kind]


def _pod(dra: DraStaticTwin, name: str) -> dict[str, Any]:
    return dra.twin.store.get("pods", name, "default")


def test_a_recut_on_a_dra_node_from_merge_to_a_pod_on_the_new_partition(dra: DraStaticTwin) -> None:
    store = dra.twin.store
    assert int((store.get("nodes", NODE)["status"].get("allocatable") or {}).get(RESOURCE, 0)) == 0
    dra.observe()
    desired = dra.desired("after", [GPU0, GPU1_NEW])
    before = dra.published()
    assert not [d for d in before if "-mig-4g71gb-" in d]

    # The merge's first cycle: the layout published for the node agent, and the classes of the plan's profiles.
    first = dra.cycle(desired, 0)
    assert [s for s, _ in _writes(first, Kind.AGENT_LAYOUT)] == [f"node/{NODE}"]
    assert ("deviceclass/migplan-mig-4g.71gb", Action.CREATE) in _writes(first, Kind.DEVICE_CLASS)
    assert store.get("deviceclasses.resource.k8s.io", "migplan-mig-4g.71gb")["spec"]["extendedResourceName"] == RESOURCE

    # A pod written for the device plugin: its class exists, no device of that profile is published yet.
    store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "llm-0"},
            "spec": {
                "containers": [
                    {"name": "main", "image": "registry.example/llm:1", "resources": {"limits": {RESOURCE: "1"}}}
                ]
            },
        },
        "default",
    )
    dra.twin.settle()
    assert not _pod(dra, "llm-0")["spec"].get("nodeName")

    # The agent re-cuts through NVML; the controller restarts the DRA kubelet plugin; the slices republish.
    assert dra.agent() is MigState.SUCCESS
    restart = dra.cycle(desired, 1)
    assert [k for k in (c.kind for c in restart.applied) if k is not Kind.DEVICE_CLASS] == [
        Kind.DRA_PLUGIN_RECORD,
        Kind.RESTART_DRA_PLUGIN,
    ]
    dra.twin.settle()
    assert dra.published() == dra.nvml_devices() != before
    (new,) = [d for d in dra.published() if "-mig-4g71gb-" in d]

    # The pod is placed through the rendered class, on the partition the re-cut created.
    pod = _pod(dra, "llm-0")
    assert pod["spec"]["nodeName"] == NODE and pod["status"]["phase"] == "Running"
    claim_name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    claim = store.get("resourceclaims.resource.k8s.io", claim_name, "default")
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "migplan-mig-4g.71gb"
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["device"] == new and new not in before

    # Converged: slices equal the plan, the holder is seen, nothing more is written.
    dra.observe()
    done = dra.cycle(desired, 5)
    assert not done.errors and not done.applied, done.applied
    assert done.report is not None
    (node,) = [n for n in done.report.nodes if n.name == NODE]
    assert node.status is NodeStatus.IN_SYNC, [(f.code, f.message) for f in done.report.findings]
    assert dra.cluster_policy_writes == []
