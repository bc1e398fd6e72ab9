"""Adopting a cluster whose ClusterPolicy names another mig-parted ConfigMap (issue 26 item 3): every config a node's
label names there is carried into migplan's ConfigMap, written before the ClusterPolicy is pointed at it, so the
mig-manager pods the operator re-renders (each runs its node's current label once more) find it: no fleet-wide
`failed`. Once no node names a carried config, it is dropped."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from helpers import planning as fixtures

from reconciler.logic.codecs import migparted
from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.model.inventory import ApplyMode, DesiredState
from reconciler.model.observed import ClusterPolicyState, ConfigMapState, ObservedState
from reconciler.model.plans import Action, Kind, Plan

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
DEFAULT_CM = "default-mig-parted-config"
DEFAULT_TEXT = (
    "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n"
    "  all-1g.18gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {1g.18gb: 7}\n"
)


def _states() -> tuple[DesiredState, ObservedState]:
    desired = fixtures.desired_state(fixtures.read("in-sync", "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read("in-sync", "observed.yaml") or {}, desired)
    node = observed.nodes["gpu-h200-01"]
    labels = {**node.labels, "nvidia.com/mig.config": "all-1g.18gb"}
    nodes = {**observed.nodes, "gpu-h200-01": replace(node, labels=labels)}
    cp = ClusterPolicyState("cluster-policy", "mixed", DEFAULT_CM, None)
    observed = replace(
        observed,
        nodes=nodes,
        cluster_policy=cp,
        mig_config_map=None,
        mig_manager_config_map=ConfigMapState("gpu-operator", DEFAULT_CM, {"config.yaml": DEFAULT_TEXT}),
    )
    return desired, observed


def test_the_configs_nodes_name_in_the_clusters_configmap_are_carried_before_the_switch() -> None:
    desired, observed = _states()
    rendered = migparted.render(desired)
    text = planner.desired_config_text(desired, observed, rendered)
    configs = migparted.parse_strict(text)
    assert "all-1g.18gb" in configs  # the node's current label resolves in migplan's ConfigMap
    the_plan = planner.plan(desired, observed, now=NOW)
    kinds = [c.kind for c in the_plan.changes if c.writes]
    assert Kind.MIG_CONFIG_MAP in kinds and Kind.CLUSTER_POLICY in kinds
    assert kinds.index(Kind.MIG_CONFIG_MAP) < kinds.index(Kind.CLUSTER_POLICY)
    (cm,) = [c for c in the_plan.changes if c.kind is Kind.MIG_CONFIG_MAP and c.writes][:1]
    assert "all-1g.18gb" in str(cm.after)


def test_a_config_no_node_names_is_not_carried() -> None:
    desired, observed = _states()
    node = observed.nodes["gpu-h200-01"]
    relabelled = replace(node, labels={**node.labels, "nvidia.com/mig.config": "something-else"})
    observed = replace(observed, nodes={**observed.nodes, "gpu-h200-01": relabelled})
    rendered = migparted.render(desired)
    configs = migparted.parse_strict(planner.desired_config_text(desired, observed, rendered))
    assert "all-1g.18gb" not in configs


def test_without_the_clusters_configmap_the_label_is_not_carried() -> None:
    desired, observed = _states()
    observed = replace(observed, mig_manager_config_map=None)
    rendered = migparted.render(desired)
    configs = migparted.parse_strict(planner.desired_config_text(desired, observed, rendered))
    assert "all-1g.18gb" not in configs


def _relabels(the_plan: Plan, node: str) -> list[tuple[Action, str]]:
    return [
        (c.action, c.code) for c in the_plan.changes if c.kind is Kind.NODE_MIG_CONFIG and c.subject == f"node/{node}"
    ]


def test_a_node_whose_mig_manager_still_reads_the_old_configmap_keeps_its_label() -> None:
    """The mig-manager DaemonSet rolls one node at a time after the switch: until a node has a new pod, its
    mig-manager looks a new label up in the old file and turns the node `failed`. migplan waits (MP567)."""
    desired, observed = _states()
    ops = desired.cluster.gpu_operator
    # zero propagation: only the rollout can hold the relabel
    apply = replace(desired.cluster.apply, config_propagation_seconds=0)
    desired = replace(desired, cluster=replace(desired.cluster, apply=apply))
    free = planner.plan(desired, observed, now=NOW)
    assert _relabels(free, "gpu-h200-01") == [(Action.CONFIGURE, "")]  # no pod observed: nothing says it is stale
    stale = replace(observed, mig_manager_sources={"gpu-h200-01": DEFAULT_CM})
    held = planner.plan(desired, stale, now=NOW)
    assert _relabels(held, "gpu-h200-01") == [(Action.SKIP, "MP567")]
    (change,) = [c for c in held.changes if c.subject == "node/gpu-h200-01" and c.kind is Kind.NODE_MIG_CONFIG]
    assert DEFAULT_CM in change.reason and ops.mig_config_map in change.reason
    generated = planner.plan(desired, replace(observed, mig_manager_sources={"gpu-h200-01": ""}), now=NOW)
    assert _relabels(generated, "gpu-h200-01") == [(Action.SKIP, "MP567")]  # configs from the hardware: stale too
    rolled = replace(observed, mig_manager_sources={"gpu-h200-01": ops.mig_config_map})
    assert _relabels(planner.plan(desired, rolled, now=NOW), "gpu-h200-01") == [(Action.CONFIGURE, "")]


def test_the_wait_for_the_rollout_is_reported_and_agent_mode_does_not_wait() -> None:
    desired, observed = _states()
    stale = replace(observed, mig_manager_sources={"gpu-h200-01": DEFAULT_CM})
    findings = [f for f in drift.analyze(desired, stale, now=NOW).findings if f.code == "MP567"]
    assert [f.node for f in findings] == ["gpu-h200-01"]
    agent = replace(
        desired, cluster=replace(desired.cluster, apply=replace(desired.cluster.apply, mode=ApplyMode.AGENT))
    )
    assert not [f for f in drift.analyze(agent, stale, now=NOW).findings if f.code == "MP567"]
    assert all(c.code != "MP567" for c in planner.plan(agent, stale, now=NOW).changes)
