"""Occupancy: totals from the plan, usage from bound pods, holders matched to inventory owners."""

from __future__ import annotations

from reconciler.logic.observe.occupancy import expected_resources, node_occupancy, pod_identities
from reconciler.model.inventory import GpuSpec, MigStrategy, NodeSpec, Partition
from reconciler.model.observed import ContainerResources, ObservedPod, OwnerRef

PLAN = NodeSpec(
    name="n",
    gpus=(
        GpuSpec(
            index=0,
            model="H200-141GB",
            mig_enabled=True,
            partitions=(Partition("3g.71gb", 4, "vllm"), Partition("1g.18gb", 2, None), Partition("1g.18gb", 3, "rr")),
        ),
        GpuSpec(index=1, model="H200-141GB", mig_enabled=False),
    ),
)


def pod(
    name: str, resource: str, n: int = 1, *, node: str | None = "n", phase: str = "Running", **kw: object
) -> ObservedPod:
    return ObservedPod(
        namespace="ml",
        name=name,
        node=node,
        phase=phase,
        containers=(ContainerResources("c", limits={resource: n}),),
        **kw,  # type: ignore[arg-type]
    )


def test_expected_resources_per_strategy() -> None:
    assert expected_resources(PLAN, MigStrategy.MIXED) == {
        "nvidia.com/gpu": 1,
        "nvidia.com/mig-3g.71gb": 1,
        "nvidia.com/mig-1g.18gb": 2,
    }
    assert expected_resources(PLAN, MigStrategy.SINGLE) == {"nvidia.com/gpu": 4}
    assert expected_resources(PLAN, MigStrategy.NONE) == {"nvidia.com/gpu": 2}


def test_owner_matching_prefers_the_owners_partition_and_ignores_finished_pods() -> None:
    pods = (
        pod("rr-7f9c5d-abcde", "nvidia.com/mig-1g.18gb", owner=OwnerRef("ReplicaSet", "rr-7f9c5d")),
        pod("notebook", "nvidia.com/mig-1g.18gb"),
        pod("old", "nvidia.com/mig-3g.71gb", phase="Succeeded"),
        pod("waiting", "nvidia.com/mig-3g.71gb", node=None, phase="Pending"),
        pod("train", "nvidia.com/gpu"),
    )
    occ = node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.MIXED, pods=pods)
    by = {o.profile: o for o in occ.entries}
    assert (by["1g.18gb"].total, by["1g.18gb"].used, by["1g.18gb"].free) == (2, 2, 0)
    assert [(h.pod, h.owner) for h in by["1g.18gb"].holders] == [("ml/notebook", None), ("ml/rr-7f9c5d-abcde", "rr")]
    assert (by["3g.71gb"].used, by["3g.71gb"].free) == (0, 1)  # finished and unscheduled pods hold nothing
    assert (by["gpu"].total, by["gpu"].used) == (1, 1)
    # the owner's pod got the owner's partition (index 2), the other the unowned one (index 1)
    assert occ.assignment == {(0, 2): "ml/rr-7f9c5d-abcde", (0, 1): "ml/notebook"}


def test_pod_identities_strip_the_replicaset_hash() -> None:
    p = pod(
        "vllm-5d9f7c-x1", "nvidia.com/mig-3g.71gb", owner=OwnerRef("ReplicaSet", "vllm-5d9f7c"), labels={"app": "a"}
    )
    assert {"vllm", "vllm-5d9f7c", "a", "ml", "ml/vllm-5d9f7c-x1"} <= pod_identities(p)


def test_remembered_occupancy_follows_every_change_of_its_inputs() -> None:
    """node_occupancy remembers a planned node's result by its inputs' identity (a controller's unchanged
    NodeSpec and ObservedPods): the same inputs give the same value, any other input is computed afresh."""
    from reconciler.logic.observe.occupancy import _node_occupancy

    def fresh(plan: NodeSpec, pods: tuple[ObservedPod, ...], strategy: MigStrategy = MigStrategy.MIXED) -> object:
        return _node_occupancy(node="n", plan=plan, strategy=strategy, pods=pods)

    a = pod("a", "nvidia.com/mig-1g.18gb")
    first = node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.MIXED, pods=(a,))
    assert node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.MIXED, pods=(a,)) is first
    # the pod changed (now two devices): a new object, a new result
    a2 = pod("a", "nvidia.com/mig-1g.18gb", 2)
    changed = node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.MIXED, pods=(a2,))
    assert changed == fresh(PLAN, (a2,)) and changed != first
    # a pod more, a pod less, another strategy, another plan
    b = pod("b", "nvidia.com/mig-3g.71gb")
    assert node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.MIXED, pods=(a, b)) == fresh(PLAN, (a, b))
    assert node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.MIXED, pods=()) == fresh(PLAN, ())
    single = node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.SINGLE, pods=(a,))
    assert single == fresh(PLAN, (a,), MigStrategy.SINGLE) and single != first
    other = NodeSpec(name="n", gpus=(PLAN.gpus[1],))
    assert node_occupancy(node="n", plan=other, strategy=MigStrategy.MIXED, pods=(a,)) == fresh(other, (a,))


def test_remembered_slice_maps_follow_the_plan_and_the_occupancy() -> None:
    """slice_maps remembers a node's maps by the identity of (plan, occupancy): the same objects give the same
    maps; a new occupancy (a pod came) or another plan gives what a fresh computation gives."""
    from reconciler.logic.drift.drift import _slice_maps, slice_maps

    idle = node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.MIXED, pods=())
    first = slice_maps(PLAN, idle)
    assert slice_maps(PLAN, idle) is first
    busy = node_occupancy(node="n", plan=PLAN, strategy=MigStrategy.MIXED, pods=(pod("x", "nvidia.com/mig-3g.71gb"),))
    held = slice_maps(PLAN, busy)
    assert held == _slice_maps(PLAN, busy, None) and held != first
    assert [p.holder for p in held[0].partitions] == ["ml/x", None, None]
    other = NodeSpec(name="n", gpus=(PLAN.gpus[1],))
    assert slice_maps(other, idle) == _slice_maps(other, idle, None) and len(slice_maps(other, idle)) == 1
