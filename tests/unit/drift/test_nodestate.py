"""One classification of a node's GPUs against a config (reconciler.logic.drift.nodestate), and drift and the
planner agreeing on it: the report says "changed by hand" exactly where the plan re-applies."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers import planning as fixtures

from reconciler.logic.codecs import migparted
from reconciler.logic.drift import drift, nodestate
from reconciler.logic.drift.nodestate import Geometry, Readiness
from reconciler.logic.observe import occupancy
from reconciler.logic.planning import planner
from reconciler.model.observed import MIG_CONFIG_LABEL, DevicePluginPod, ObservedNode
from reconciler.model.plans import Kind

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
PLAN = {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.18gb": 4, "nvidia.com/mig-3g.71gb": 1}


def node(counts: dict[str, int]) -> ObservedNode:
    return ObservedNode(name="n1", capacity=counts, allocatable=counts)


SETTLED = Readiness(strategy_settled=True, plugin_ready={"n1": True})


def test_a_node_advertising_exactly_the_config_is_as_configured_whatever_else_is_unsettled() -> None:
    n = node({"nvidia.com/mig-1g.18gb": 4, "nvidia.com/mig-3g.71gb": 1})
    for ready in (SETTLED, Readiness(False, {"n1": True}), Readiness(True, {}), Readiness(False)):
        assert nodestate.classify(n, PLAN, ready) is Geometry.AS_CONFIGURED
    # A resource the config gives 0 of (nvidia.com/gpu in PLAN) is the same as one the node does not advertise.
    zero = node({"nvidia.com/gpu": 0, "nvidia.com/mig-1g.18gb": 4, "nvidia.com/mig-3g.71gb": 1})
    assert nodestate.classify(zero, PLAN, SETTLED) is Geometry.AS_CONFIGURED


def test_other_counts_with_the_strategy_settled_and_the_plugin_ready_are_a_change_by_hand() -> None:
    recut = node({"nvidia.com/mig-1g.18gb": 7})
    assert nodestate.classify(recut, PLAN, SETTLED) is Geometry.CHANGED_BY_HAND
    # One resource more than the config gives is as much a difference as one fewer.
    extra = node({"nvidia.com/gpu": 1, "nvidia.com/mig-1g.18gb": 4, "nvidia.com/mig-3g.71gb": 1})
    assert nodestate.classify(extra, PLAN, SETTLED) is Geometry.CHANGED_BY_HAND


@pytest.mark.parametrize(
    "ready",
    [
        Readiness(strategy_settled=False, plugin_ready={"n1": True}),  # strategy not (yet) the inventory's
        Readiness(strategy_settled=True, plugin_ready={"n1": False}),  # the node's plugin pod not Ready
        Readiness(strategy_settled=True, plugin_ready={"other": True}),  # no plugin pod on the node
    ],
)
def test_other_counts_that_the_strategy_or_the_plugin_explain_are_unsettled(ready: Readiness) -> None:
    assert nodestate.classify(node({"nvidia.com/mig-1g.18gb": 7}), PLAN, ready) is Geometry.UNSETTLED


def test_a_plugin_pod_settles_plugin_settle_after_it_turned_ready() -> None:
    since = NOW - nodestate.PLUGIN_SETTLE
    assert nodestate.plugin_settled(DevicePluginPod("dp", "n1", True, ready_since=since), NOW)
    early = since + timedelta(seconds=19)
    assert not nodestate.plugin_settled(DevicePluginPod("dp", "n1", True, ready_since=since), early)
    assert not nodestate.plugin_settled(DevicePluginPod("dp", "n1", False, ready_since=since), NOW)
    # An unknown transition time, or no clock at all, leaves Ready as the only test (as before the time was read).
    assert nodestate.plugin_settled(DevicePluginPod("dp", "n1", True), NOW)
    assert nodestate.plugin_settled(DevicePluginPod("dp", "n1", True, ready_since=NOW), None)


# --- readiness from the observed cluster, and drift and the planner agreeing ---------------------------

CASE = "reapply-recut"  # GPU 1 of gpu-h200-01 cut into 7 x 1g.18gb by hand, mig-manager says success


def _variant(change: dict[str, Any]) -> tuple[Any, Any]:
    desired = fixtures.desired_state(fixtures.read(CASE, "desired.yaml"))
    raw = copy.deepcopy(fixtures.read(CASE, "observed.yaml"))
    raw.update(change)
    return desired, fixtures.observed_state(raw, desired)


VARIANTS: dict[str, tuple[dict[str, Any], Geometry]] = {
    "settled": ({}, Geometry.CHANGED_BY_HAND),
    "plugin-not-ready": (
        {"devicePlugin": {"pods": [{"name": "dp-1", "node": "gpu-h200-01", "ready": False}]}},
        Geometry.UNSETTLED,
    ),
    "plugin-just-ready": (
        {"devicePlugin": {"pods": [{"name": "dp-1", "node": "gpu-h200-01", "readySince": "2026-12-02T09:59:55Z"}]}},
        Geometry.UNSETTLED,
    ),
    "plugin-ready-long-enough": (
        {"devicePlugin": {"pods": [{"name": "dp-1", "node": "gpu-h200-01", "readySince": "2026-12-02T09:59:39Z"}]}},
        Geometry.CHANGED_BY_HAND,
    ),
    "no-plugin-pod": ({"devicePlugin": {"pods": []}}, Geometry.UNSETTLED),
    "no-daemonset": ({"devicePlugin": None}, Geometry.UNSETTLED),
    "strategy-other": ({"clusterPolicy": {"strategy": "single"}}, Geometry.UNSETTLED),
    "restart-owed": (
        {
            "clusterPolicy": {"strategy": "mixed", "annotations": {nodestate.STRATEGY_SET_ANNOTATION: "mixed"}},
            "devicePlugin": {
                "pods": [{"name": "dp-1", "node": "gpu-h200-01", "ready": True}],
                "annotations": {nodestate.RESTARTED_FOR_ANNOTATION: "single"},
            },
        },
        Geometry.UNSETTLED,
    ),
    "restart-done": (
        {
            "clusterPolicy": {"strategy": "mixed", "annotations": {nodestate.STRATEGY_SET_ANNOTATION: "mixed"}},
            "devicePlugin": {
                "pods": [{"name": "dp-1", "node": "gpu-h200-01", "ready": True}],
                "annotations": {nodestate.RESTARTED_FOR_ANNOTATION: "mixed"},
            },
        },
        Geometry.CHANGED_BY_HAND,
    ),
    "operator-not-rendered": (
        {
            "devicePlugin": {
                "pods": [{"name": "dp-1", "node": "gpu-h200-01", "ready": True}],
                "controllerKind": "ClusterPolicy",
                "templateStrategy": "single",
            }
        },
        Geometry.UNSETTLED,
    ),
    "operator-rendered": (
        {
            "devicePlugin": {
                "pods": [{"name": "dp-1", "node": "gpu-h200-01", "ready": True}],
                "controllerKind": "ClusterPolicy",
                "templateStrategy": "mixed",
            }
        },
        Geometry.CHANGED_BY_HAND,
    ),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_drift_says_changed_by_hand_exactly_where_the_planner_reapplies(variant: str) -> None:
    change, geometry = VARIANTS[variant]
    desired, observed = _variant(change)
    name = "gpu-h200-01"
    the_node = observed.nodes[name]
    expected = occupancy.expected_resources(desired.nodes[name], desired.cluster.mig_strategy)
    assert nodestate.classify(the_node, expected, nodestate.readiness(desired, observed, now=NOW)) is geometry

    analysis = drift.analyze(desired, observed, now=NOW)
    mp501 = [f.message for f in analysis.findings if f.code == "MP501" and f.node == name]
    assert mp501, "the re-cut GPU's counts differ from the plan in every variant"
    hinted = {"mig-manager reports its config applied" in m for m in mp501}
    assert hinted == {geometry is Geometry.CHANGED_BY_HAND}

    the_plan = planner.plan(desired, observed, now=NOW, rendered=analysis.rendered)
    relabels = [c for c in the_plan.writes if c.kind is Kind.NODE_MIG_CONFIG and c.subject == f"node/{name}"]
    reapplied = [c for c in relabels if str((c.after or {})[MIG_CONFIG_LABEL]).endswith(migparted.ALIAS_SUFFIX)]
    assert bool(reapplied) is (geometry is Geometry.CHANGED_BY_HAND)
