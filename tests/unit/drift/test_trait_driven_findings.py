"""Behaviour that depends on what a code means asks the registry's traits (reconciler/model/codes.py), never a code
string: the drain's findings name the pods evicted this cycle (DRAINING), a blocked drain that goes on is reported
draining as well (DRAIN_GOES_ON), a held change says which pods hold it (HELD)."""

from __future__ import annotations

from reconciler.logic.drift import drift
from reconciler.model.plans import Action, Change, Kind, Plan


def _evict(pod: str, node: str) -> Change:
    return Change(f"pod/{pod}", Action.DELETE, Kind.EVICT, before={"spec.nodeName": node}, patch={"evict": True})


def _held(node: str, code: str, pods: tuple[str, ...]) -> Change:
    return Change(f"node/{node}", Action.SKIP, Kind.NODE_MIG_CONFIG, reason="draining", blocked_by=pods, code=code)


def test_a_draining_node_names_the_pods_evicted_this_cycle() -> None:
    plan = Plan((_evict("ml/a", "gpu-1"), _held("gpu-1", "MP536", ("ml/a",))))
    [f] = drift.blocked_findings(plan)
    assert f.code == "MP536" and f.node == "gpu-1"
    assert f.message.endswith("; evicted this cycle: ml/a")


def test_a_drain_a_budget_blocks_is_reported_draining_as_well() -> None:
    plan = Plan((_evict("ml/b", "gpu-1"), _held("gpu-1", "MP537", ("ml/a",))))
    found = drift.blocked_findings(plan)
    assert [f.code for f in found] == ["MP537", "MP536"]
    assert found[1].message == "node/gpu-1: draining, waiting for ml/a to go; evicted this cycle: ml/b"


def test_a_held_change_names_the_pods_that_hold_it_and_other_codes_keep_their_reason() -> None:
    [held] = drift.blocked_findings(Plan((_held("gpu-1", "", ("ml/a",)),)))
    assert held.code == "MP519" and "running pods hold partitions it would destroy (ml/a)" in held.message
    [timed_out] = drift.blocked_findings(Plan((_held("gpu-1", "MP538", ("ml/a",)),)))
    assert timed_out.code == "MP538" and timed_out.message == "node/gpu-1: draining"
