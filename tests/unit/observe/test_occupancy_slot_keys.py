"""The assignment of a fleet's nodes shares its (gpu, position) keys: one tuple each for all nodes (issue 29, memory).

A controller keeps every node's last occupancy between cycles; at 5,000 nodes a fresh key per held partition was
some 140,000 tuples. Values are unchanged: only who holds the equal keys.
"""

from __future__ import annotations

import dataclasses

from reconciler.logic.observe.occupancy import node_occupancy
from reconciler.model.inventory import GpuSpec, MigStrategy, NodeSpec, Partition
from reconciler.model.observed import ContainerResources, ObservedPod

MIG = "nvidia.com/mig-1g.18gb"
PLAN = NodeSpec(
    name="gpu-1",
    gpus=tuple(
        GpuSpec(
            index=i,
            model="H200-141GB",
            mig_enabled=True,
            partitions=(Partition("1g.18gb", 0, "vllm"), Partition("1g.18gb", 1, None), Partition("1g.18gb", 2, None)),
        )
        for i in range(2)
    ),
)


def _pods(node: str) -> tuple[ObservedPod, ...]:
    def pod(name: str, app: str) -> ObservedPod:
        containers = (ContainerResources("c", limits={MIG: 1}),)
        return ObservedPod(
            namespace="ml", name=name, node=node, phase="Running", containers=containers, labels={"app": app}
        )

    # owned (the owner's partitions, _assign's first pass) and unowned (the free ones, its second pass)
    return (pod("vllm-a", "vllm"), pod("notebook-a", "notebook"), pod("notebook-b", "notebook"))


def test_two_nodes_assignments_hold_the_same_key_objects() -> None:
    one = node_occupancy(node="gpu-1", plan=PLAN, strategy=MigStrategy.MIXED, pods=_pods("gpu-1"))
    two = node_occupancy(
        node="gpu-2", plan=dataclasses.replace(PLAN, name="gpu-2"), strategy=MigStrategy.MIXED, pods=_pods("gpu-2")
    )
    assert dict(one.assignment) == {(0, 0): "ml/vllm-a", (0, 1): "ml/notebook-a", (0, 2): "ml/notebook-b"}
    assert dict(two.assignment) == dict(one.assignment)
    mine = {k: k for k in one.assignment}
    assert all(k is mine[k] for k in two.assignment)  # equal keys are the very same tuple
