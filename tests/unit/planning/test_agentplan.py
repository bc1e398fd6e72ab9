"""The agent planner (pure): which instances stay, what is destroyed and created, what is held."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.catalog import GpuModel, load_catalog
from reconciler.logic.inventory import placement as placements
from reconciler.logic.planning.agentplan import (
    STEP_ACTIONS,
    DesiredGpu,
    DesiredPartition,
    ObservedGpu,
    ObservedInstance,
    Step,
    desired_from_node_spec,
    plan_node,
)
from reconciler.model.inventory import GpuSpec, NodeSpec, Partition, Placement
from reconciler.model.plans import Action

CATALOG = load_catalog()
_H200 = CATALOG.get("H200-141GB")
assert _H200 is not None
H200: GpuModel = _H200


def possible(model: GpuModel) -> dict[str, tuple[Placement, ...]]:
    return {
        name: tuple(Placement(s, p.placements.size) for s in p.placements.starts)
        for name, p in model.profiles.items()
        if p.placements is not None
    }


def gpu(*instances: ObservedInstance, current: bool = True, pending: bool | None = None) -> ObservedGpu:
    return ObservedGpu(
        index=0,
        uuid="GPU-0",
        name="NVIDIA H200",
        mig_capable=True,
        mig_current=current,
        mig_pending=current if pending is None else pending,
        instances=instances,
        possible=possible(H200),
    )


def inst(gi: int, profile: str, start: int, size: int, *pids: int) -> ObservedInstance:
    return ObservedInstance(gi, profile, Placement(start, size), f"MIG-{gi}", tuple(pids))


ARTICLE = DesiredGpu(
    0,
    True,
    (
        DesiredPartition("3g.71gb", Placement(4, 4)),
        DesiredPartition("2g.35gb", Placement(0, 2)),
        DesiredPartition("1g.18gb", Placement(2, 1)),
        DesiredPartition("1g.18gb", Placement(3, 1)),
    ),
)


def test_empty_gpu_gets_every_partition_largest_first() -> None:
    plan = plan_node([ARTICLE], [gpu()])
    assert [str(s) for s in plan.steps] == [
        "gpu 0: create 3g.71gb@4:4",
        "gpu 0: create 2g.35gb@0:2",
        "gpu 0: create 1g.18gb@2:1",
        "gpu 0: create 1g.18gb@3:1",
    ]
    assert not plan.is_empty


def test_in_sync_gpu_plans_nothing_and_keeps_everything() -> None:
    observed = gpu(
        inst(1, "3g.71gb", 4, 4, 77), inst(2, "2g.35gb", 0, 2), inst(3, "1g.18gb", 2, 1), inst(4, "1g.18gb", 3, 1)
    )
    plan = plan_node([ARTICLE], [observed])
    assert plan.is_empty
    assert len(plan.unchanged) == 4


def test_only_what_differs_changes() -> None:
    # 2g at 0 is wanted and stays; the 1g at 0..1 positions differ: a 2g.35gb at 2 must go.
    observed = gpu(inst(1, "3g.71gb", 4, 4), inst(2, "2g.35gb", 0, 2), inst(5, "2g.35gb", 2, 2))
    plan = plan_node([ARTICLE], [observed])
    assert [s.action for s in plan.steps] == [Action.DELETE, Action.CREATE, Action.CREATE]
    assert plan.steps[0].gpu_instance_id == 5
    assert {u[1].gpu_instance_id for u in plan.unchanged} == {1, 2}
    # nothing that stays is touched
    touched = {s.gpu_instance_id for s in plan.steps if s.gpu_instance_id is not None}
    assert touched.isdisjoint({1, 2})


def test_same_profile_at_another_placement_is_another_partition() -> None:
    observed = gpu(inst(1, "3g.71gb", 0, 4))
    plan = plan_node([DesiredGpu(0, True, (DesiredPartition("3g.71gb", Placement(4, 4)),))], [observed])
    assert [str(s) for s in plan.steps] == ["gpu 0: destroy 3g.71gb@0:4 (gi 1)", "gpu 0: create 3g.71gb@4:4"]


def test_in_use_instance_is_never_destroyed_and_the_gpu_is_held() -> None:
    observed = gpu(inst(1, "3g.71gb", 0, 4, 4242, 4243), inst(2, "1g.18gb", 4, 1))
    plan = plan_node([ARTICLE], [observed])
    assert plan.steps == ()
    assert len(plan.held) == 1
    assert "4242" in plan.held[0].reason and "3g.71gb@0:4" in plan.held[0].reason
    assert not plan.is_empty


def test_held_gpu_does_not_stop_other_gpus() -> None:
    g0 = gpu(inst(1, "3g.71gb", 0, 4, 1))
    g1 = dataclasses.replace(gpu(), index=1, uuid="GPU-1")
    plan = plan_node([ARTICLE, dataclasses.replace(ARTICLE, index=1)], [g0, g1])
    assert {s.gpu for s in plan.steps} == {1}
    assert [h.gpu for h in plan.held] == [0]


def test_enable_mig_then_create() -> None:
    plan = plan_node([ARTICLE], [gpu(current=False)])
    assert plan.steps[0] == Step(Action.CONFIGURE, 0, enabled=True)
    assert [s.action for s in plan.steps[1:]] == [Action.CREATE] * 4


def test_pending_mode_waits_for_reset() -> None:
    plan = plan_node([ARTICLE], [gpu(current=False, pending=True)])
    assert plan.steps == () and plan.awaiting_reset == (0,)


def test_disable_destroys_then_sets_mode_and_holds_when_busy() -> None:
    off = DesiredGpu(0, False)
    plan = plan_node([off], [gpu(inst(1, "1g.18gb", 0, 1), inst(2, "1g.18gb", 1, 1))])
    assert [s.action for s in plan.steps] == [Action.DELETE, Action.DELETE, Action.CONFIGURE]
    busy = plan_node([off], [gpu(inst(1, "1g.18gb", 0, 1, 9))])
    assert busy.steps == () and busy.held
    assert plan_node([off], [gpu(current=False)]).is_empty


def test_impossible_or_overlapping_placement_is_an_error_and_applies_nothing() -> None:
    bad = DesiredGpu(0, True, (DesiredPartition("3g.71gb", Placement(2, 4)),))
    plan = plan_node([bad], [gpu()])
    assert plan.steps == () and "not possible" in str(plan.errors[0])
    overlap = DesiredGpu(
        0, True, (DesiredPartition("3g.71gb", Placement(4, 4)), DesiredPartition("1g.18gb", Placement(5, 1)))
    )
    plan = plan_node([overlap], [gpu()])
    assert plan.steps == () and "overlaps" in str(plan.errors[0])
    missing = plan_node([dataclasses.replace(ARTICLE, index=3)], [gpu()])
    assert missing.steps == () and "no such GPU" in str(missing.errors[0])


def test_a_step_speaks_the_planners_actions_and_only_those_an_nvml_call_can_take() -> None:
    # One vocabulary: CONFIGURE is the MIG mode, DELETE and CREATE are GPU instances (reconciler.model.plans).
    assert {Action.CONFIGURE, Action.DELETE, Action.CREATE} == STEP_ACTIONS
    assert str(Step(Action.CONFIGURE, 0, enabled=True)) == "gpu 0: set MIG mode enabled"
    assert str(Step(Action.CONFIGURE, 2, enabled=False)) == "gpu 2: set MIG mode disabled"
    assert str(Step(Action.DELETE, 1, "1g.18gb", Placement(3, 1), 7)) == "gpu 1: destroy 1g.18gb@3:1 (gi 7)"
    assert str(Step(Action.CREATE, 1, "3g.71gb", Placement(4, 4))) == "gpu 1: create 3g.71gb@4:4"
    for other in set(Action) - STEP_ACTIONS:
        with pytest.raises(ValueError, match="an agent step is"):
            Step(other, 0)


def test_desired_from_node_plan_solves_missing_placements() -> None:
    node = NodeSpec(
        "n1",
        (
            GpuSpec(
                0,
                "H200-141GB",
                True,
                (Partition("3g.71gb"), Partition("2g.35gb"), Partition("1g.18gb"), Partition("1g.18gb")),
            ),
            GpuSpec(1, "H200-141GB", False),
        ),
    )
    desired, problems = desired_from_node_spec(node, revision="main@sha1:" + "a" * 40, catalog=CATALOG)
    assert problems == ()
    assert desired.gpus[0].partitions[0] == DesiredPartition("3g.71gb", Placement(4, 4))
    assert desired.gpus[1] == DesiredGpu(1, False)


# --- property: applying the plan to a simulated GPU and planning again gives an empty plan -----------


def simulate(observed: ObservedGpu, steps: tuple[Step, ...]) -> ObservedGpu:
    """A tiny model of what each step does to the GPU (what the NVML twin checks for real)."""
    instances = list(observed.instances)
    current = observed.mig_current
    next_id = max((i.gpu_instance_id for i in instances), default=0) + 1
    for s in steps:
        if s.action is Action.CONFIGURE:
            assert not instances
            current = bool(s.enabled)
        elif s.action is Action.DELETE:
            victim = next(i for i in instances if i.gpu_instance_id == s.gpu_instance_id)
            assert not victim.in_use
            instances.remove(victim)
        else:
            assert current and s.placement is not None and s.profile is not None
            assert all(not s.placement.overlaps(i.placement) for i in instances)
            instances.append(ObservedInstance(next_id, s.profile, s.placement))
            next_id += 1
    return dataclasses.replace(observed, instances=tuple(instances), mig_current=current, mig_pending=current)


@st.composite
def layouts(draw: st.DrawFn, model: GpuModel) -> tuple[DesiredPartition, ...]:
    names = sorted(n for n, p in model.profiles.items() if p.placements is not None)
    requests = draw(st.lists(st.sampled_from(names), min_size=1, max_size=model.compute_slices))
    got = placements.solve(model, [placements.Request(r) for r in requests])
    if got is None:
        requests = requests[:1]
        got = placements.solve(model, [placements.Request(r) for r in requests])
    assert got is not None
    return tuple(DesiredPartition(r, p) for r, p in zip(requests, got, strict=True))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_round_trip_is_idempotent_from_any_valid_layout_to_any_other(data: st.DataObject) -> None:
    before = data.draw(layouts(H200))
    after = data.draw(layouts(H200))
    start = gpu(*(ObservedInstance(n + 1, p.profile, p.placement) for n, p in enumerate(before)))
    plan = plan_node([DesiredGpu(0, True, after)], [start])
    end = simulate(start, plan.steps)
    assert sorted((i.profile, i.placement.start) for i in end.instances) == sorted(
        (p.profile, p.placement.start) for p in after
    )
    assert plan_node([DesiredGpu(0, True, after)], [end]).is_empty
