"""Adopting a cluster whose ClusterPolicy names another mig-parted ConfigMap (issue 26 item 3): every config a node's
label names there is carried into migplan's ConfigMap, written before the ClusterPolicy is pointed at it, so the
mig-manager pods the operator re-renders (each runs its node's current label once more) find it: no fleet-wide
`failed`. Once no node names a carried config, it is dropped."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from helpers import planning as fixtures

from reconciler.logic.codecs import migparted
from reconciler.logic.planning import planner
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import ClusterPolicyState, ConfigMapState, ObservedState
from reconciler.model.plans import Kind

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
