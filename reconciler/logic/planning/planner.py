"""The planner: `plan(desired, observed) -> Plan`, the ordered writes that bring the cluster to the inventory.

Pure: values in, a Plan out; the clock is a parameter (it stamps restartedAt and the requested-at
annotation). Every Change carries the exact JSON patch the applier sends, so dry-run prints what a
real run would write. Order (stack-facts §1.6 last bullet, §3):

1. the mig-parted ConfigMap (so every config name exists before anything refers to it). Configs
   that nodes still carry are kept until they are relabelled, and a last ConfigMap write at the
   end of the plan drops them once the relabels are made;
2. the ClusterPolicy, in ONE JSON merge patch: spec.migManager.config.name -> our ConfigMap,
   spec.mig.strategy, and `spec.devicePlugin.config: null` when that config contradicts the
   strategy. Going *to* `single` is deferred until every node's layout has settled: the plugin
   crash-loops under `single` while a node still carries a mixed geometry (gpu-operator #460);
3. the device-plugin DaemonSet restarted like `kubectl rollout restart` (a strategic merge patch of
   the pod template's restartedAt annotation) when the strategy changed and the DaemonSet is not the
   GPU Operator's (the operator's own one, controlled by the ClusterPolicy, is rolled by the operator
   itself: applyMIGConfiguration puts the strategy in its env, and its whole-object update would drop
   migplan's marker); a marker annotation on the DaemonSet records the strategy it was restarted for,
   so a run killed between 2 and 3 still restarts it on the next run, and never twice;
4. per node, by name: with allowDisruption and pods in the way, the drain (reconciler/logic/planning/drain.py:
   cordon, evictions through the Eviction API, the relabel held until the pods are gone, a timeout),
   then the `nvidia.com/mig.config` label, and uncordon once mig-manager reports success. At most
   `maxUnavailableNodes` nodes are in flight; nodes whose change would destroy partitions running
   pods hold are skipped and name those pods (the disruption guard). What a change destroys is what
   mig-parted really does (reconciler/logic/planning/disruption.py): the whole GPU for a re-cut, every MIG GPU of
   the node (and a reset of all its GPUs) when any GPU's MIG mode changes. Two special cases:
   - relabel only: the node's current config has the same geometry under another name (adopting
     a cluster) and nothing suggests the GPUs differ: mig-manager's assert passes and nothing is
     paused (stack-facts §3.3 step 2), so it is not a disruption and not counted;
   - re-apply: the label is right and mig-manager says success, the strategy is right and the
     plugin is Ready, yet the counts differ (GPUs cut by hand, reconciler/logic/drift/nodestate.py, the
     classification drift's report shares): mig-manager only acts on a new
     label value, so the label points at `<config>-reapply`, an alias of the same layout, and
     goes back to the canonical name (relabel only) on a later cycle. Guarded like any change.

In `apply.mode: agent` 2. and 3. are planned (without migManager.config.name), and per node the
`migplan.io/mig-desired` annotation its NVML agent applies (reconciler/logic/planning/desiredcodec.py): written
only when the node's layout changed, so every entry point (`migplan run`, `reconcile --once` from a
directory or a repository, the demo) publishes the layouts the same way, dry-run first, through the
same applier and write fencing as every other change. The disruption guard and the drain hold that publication
(reconciler/logic/planning/agentdrain.py: the agent's model, holders from the node observer or inferred), and the node
is uncordoned once its agent reports success for the published layout (reconciler/logic/planning/agentchanges.py).

Only fields and labels migplan owns appear in a patch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from reconciler.logic.codecs import migparted
from reconciler.logic.drift import drastatic, drift, fieldfight
from reconciler.logic.drift.nodestate import RESTARTED_FOR_ANNOTATION, STRATEGY_SET_ANNOTATION
from reconciler.logic.observe import observation
from reconciler.logic.planning import deviceclasses, draplugin
from reconciler.logic.planning.agentchanges import agent_layout_changes
from reconciler.logic.planning.disruptionguard import blocking_pods, destroyed_resources, guard_holders, node_disruption
from reconciler.logic.planning.nodechanges import FAILED_RETRY_AFTER, node_changes
from reconciler.logic.planning.rollout import rfc3339
from reconciler.model.inventory import ApplyMode, DesiredState, MigStrategy
from reconciler.model.observed import (
    CONFIGS_ADDED_AT_ANNOTATION,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MIG_CONFIG_LABEL,
    RESTARTED_AT_ANNOTATION,
    ObservedState,
)
from reconciler.model.plans import Action, Change, Kind, Plan

# The planner's public names. The per-node rooms it delegates to (reconciler/logic/planning/nodechanges.py,
# agentchanges.py, disruptionguard.py, rollout.py) keep theirs importable from here, as before the split.
__all__ = [
    "FAILED_RETRY_AFTER",
    "MIG_CONFIG_LABEL",
    "blocking_pods",
    "desired_config_text",
    "destroyed_resources",
    "guard_holders",
    "node_disruption",
    "plan",
    "rfc3339",
]

# migplan's own annotations on objects it does not create (its only writes there besides the fields the plan
# names): STRATEGY_SET_ANNOTATION and RESTARTED_FOR_ANNOTATION, declared in reconciler.logic.drift.nodestate (which
# reads them to tell whether the strategy has settled).


def plan(
    desired: DesiredState,
    observed: ObservedState,
    *,
    now: datetime,
    rendered: migparted.MigPartedConfig | None = None,
    silent_after: timedelta = observation.SILENT_AFTER,
    unoffered: Mapping[str, str | None] | None = None,
) -> Plan:
    """The ordered changes for this cycle (see the module docstring for the order and the rules).
    `silent_after`: how old a node observer's report may be and still feed the disruption guard. `unoffered`:
    profilecheck.unoffered per node as the drift analysis of the same states found it (Analysis.unoffered);
    a node it lacks is checked here."""
    rendered = rendered or migparted.render(desired)
    stamp = rfc3339(now)
    agent = desired.cluster.apply.mode is ApplyMode.AGENT
    # DRA-static nodes (reconciler/logic/drift/drastatic.py): laid out through the node agent whatever apply.mode
    # says, since mig-manager does not lay out what NVIDIA's DRA driver allocates (and under a GPUCluster there is
    # none); their DRA kubelet plugin is restarted once the agent has built the layout (draplugin.py).
    static = drastatic.static_nodes(desired, observed)
    gpu_cluster = drastatic.gpu_cluster(observed)
    by_operator = desired if agent or not static else _only(desired, lambda n: n not in static)
    nodes = node_changes(by_operator, observed, rendered, now, silent_after, unoffered=unoffered)
    changes: list[Change] = []
    # The node agent applies layouts itself: no mig-parted ConfigMap, no mig-manager. Under a GPUCluster neither
    # exists (MIG Manager is a ClusterPolicy operand): every node migplan lays out there is a DRA-static one.
    if not agent and gpu_cluster is None:
        # The ConfigMap's stamp starts the configPropagationSeconds wait: a whole second, so rounded up (the
        # write goes out after `now`), never earlier than the write it dates, or the wait would end up to a
        # second early and mig-manager see a label before its mounted file holds the config.
        added_at = rfc3339(now if now.microsecond == 0 else now + timedelta(seconds=1))
        changes.append(_config_map_change(desired, observed, rendered, nodes.aliases, stamp=added_at))
    if gpu_cluster is not None:
        # "Do not use ClusterPolicy and GPUCluster as GPU resource management models in the same cluster" (GPU
        # Operator v26.7 docs): a ClusterPolicy there is not migplan's to write, ever.
        subject = f"clusterpolicy/{desired.cluster.gpu_operator.cluster_policy}"
        why = f"GPUCluster {gpu_cluster} runs the GPU stack: no ClusterPolicy is written"
        changes.append(Change(subject, Action.UNCHANGED, Kind.CLUSTER_POLICY, reason=why))  # nothing owed: not held
    else:
        changes.extend(_cluster_policy_changes(desired, observed, nodes_settled=nodes.settled, stamp=stamp))
    changes.extend(nodes.changes)
    if agent:
        changes.extend(agent_layout_changes(desired, observed, now))
    elif static:
        changes.extend(agent_layout_changes(_only(desired, lambda n: n in static), observed, now))
    if static:
        changes.extend(draplugin.plugin_changes(desired, observed, now, static, drift.unreadable_nodes(observed)))
    cleanup = None
    if not agent and gpu_cluster is None:
        cleanup = _config_map_cleanup(desired, observed, rendered, nodes.changes, nodes.aliases)
    if cleanup is not None:
        changes.append(cleanup)
    changes.extend(deviceclasses.changes(desired, observed))  # DRA: the classes the plan renders (issue 30)
    return Plan(changes=tuple(changes), revision=desired.revision, node_configs=dict(rendered.node_configs))


def _only(desired: DesiredState, keep: Callable[[str], bool]) -> DesiredState:
    """The desired state restricted to the nodes `keep` accepts (one apply path's share of the nodes)."""
    return dataclasses.replace(desired, nodes={n: spec for n, spec in desired.nodes.items() if keep(n)})


# --- 1. ConfigMap ---------------------------------------------------------------------------------


def _config_map_change(
    desired: DesiredState,
    observed: ObservedState,
    rendered: migparted.MigPartedConfig,
    aliases: frozenset[str] = frozenset(),
    *,
    stamp: str = "",
) -> Change:
    ops = desired.cluster.gpu_operator
    subject = f"configmap/{ops.namespace}/{ops.mig_config_map}"
    cm = observed.mig_config_map
    after = {migparted.CONFIG_KEY: desired_config_text(desired, observed, rendered, aliases)}
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    if cm is None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": ops.mig_config_map,
                "namespace": ops.namespace,
                "labels": labels,
                "annotations": {CONFIGS_ADDED_AT_ANNOTATION: stamp},
            },
            "data": after,
        }
        return Change(subject, Action.CREATE, Kind.MIG_CONFIG_MAP, None, after, "render the inventory", patch=body)
    if cm.data.get(migparted.CONFIG_KEY) == after[migparted.CONFIG_KEY] and cm.managed_by_migplan:
        return Change(subject, Action.UNCHANGED, Kind.MIG_CONFIG_MAP)
    before = {migparted.CONFIG_KEY: cm.data.get(migparted.CONFIG_KEY)}
    # The observed resourceVersion makes a concurrent edit a 409 instead of a silent overwrite.
    metadata: dict[str, Any] = {"labels": labels, "resourceVersion": cm.resource_version}
    if _adds_configs(cm.data.get(migparted.CONFIG_KEY), after[migparted.CONFIG_KEY]):
        # Nodes are relabelled to the new configs only once this content reached mig-manager (_propagation_hold).
        metadata["annotations"] = {CONFIGS_ADDED_AT_ANNOTATION: stamp}
    patch = {"metadata": metadata, "data": after}
    return Change(subject, Action.CONFIGURE, Kind.MIG_CONFIG_MAP, before, after, "render the inventory", patch=patch)


def _adds_configs(before: str | None, after: str) -> bool:
    """The new ConfigMap text holds a config name the old one lacked, or holds one with other entries."""
    try:
        old = migparted.parse_strict(before) if before else {}
    except migparted.MigPartedFormatError:
        return True
    new = migparted.parse_strict(after)
    return any(old.get(name) != entries for name, entries in new.items())


def desired_config_text(
    desired: DesiredState,
    observed: ObservedState,
    rendered: migparted.MigPartedConfig,
    aliases: frozenset[str] = frozenset(),
) -> str:
    """What the mig-parted ConfigMap should hold now (rendered + configs nodes still carry + aliases)."""
    cm = observed.mig_config_map
    referenced = {n.mig_config for n in observed.nodes.values() if n.mig_config}
    observed_text = cm.data.get(migparted.CONFIG_KEY) if cm is not None else None
    return migparted.config_map_text(
        rendered,
        observed_text=observed_text,
        referenced=referenced,
        aliases=aliases,
        foreign_text=observed.foreign_mig_config_text,
    )


def _config_map_cleanup(
    desired: DesiredState,
    observed: ObservedState,
    rendered: migparted.MigPartedConfig,
    node_changes: Sequence[Change],
    aliases: frozenset[str] = frozenset(),
) -> Change | None:
    """A last write dropping carried-over configs that no node names once this plan's relabels are done.

    Without it the next cycle would make that write instead, so a converged cluster would need two
    cycles to stop writing. If the cycle dies before this write, the next one makes it.
    """
    cm = observed.mig_config_map
    if cm is None:
        return None
    relabelled = {
        c.subject.removeprefix("node/"): str((c.after or {}).get(MIG_CONFIG_LABEL))
        for c in node_changes
        if c.kind is Kind.NODE_MIG_CONFIG and c.action is Action.CONFIGURE
    }
    if not relabelled:
        return None
    referenced: set[str] = set()
    for name, node in observed.nodes.items():
        value = relabelled.get(name) or node.mig_config
        if value:
            referenced.add(value)
    before = desired_config_text(desired, observed, rendered, aliases)
    # Every alias of this plan is kept: either a node is relabelled to it now, or one waits for it to propagate.
    after = migparted.config_map_text(rendered, observed_text=before, referenced=referenced, aliases=aliases)
    if after == before:
        return None
    ops = desired.cluster.gpu_operator
    return Change(
        f"configmap/{ops.namespace}/{ops.mig_config_map}",
        Action.CONFIGURE,
        Kind.MIG_CONFIG_MAP,
        {migparted.CONFIG_KEY: before},
        {migparted.CONFIG_KEY: after},
        "drop the configs no node carries after the relabels above",
        # No resourceVersion: this cycle's own first write changed it.
        patch={"data": {migparted.CONFIG_KEY: after}},
    )


# --- 2./3. ClusterPolicy and device plugin --------------------------------------------------------


def _cluster_policy_changes(
    desired: DesiredState, observed: ObservedState, *, nodes_settled: bool, stamp: str
) -> list[Change]:
    ops = desired.cluster.gpu_operator
    cp = observed.cluster_policy
    subject = f"clusterpolicy/{ops.cluster_policy}"
    if cp is None:
        return [Change(subject, Action.SKIP, Kind.CLUSTER_POLICY, reason="ClusterPolicy not found (MP517)")]
    want = desired.cluster.mig_strategy
    spec: dict[str, Any] = {}
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    out: list[Change] = []
    agent = desired.cluster.apply.mode is ApplyMode.AGENT
    fights: list[fieldfight.Fight] = []
    wrote: dict[str, str | None] = {}  # what this patch sets, for migplan's record (FIELDS_SET_ANNOTATION)

    def fought(field: str, want_value: str | None, live: str | None) -> bool:
        # Another manager put back a value migplan already set once: a finding (MP590), never a patch every cycle.
        found = fieldfight.fight(cp, field, want_value, live)
        if found is not None:
            fights.append(found)
        return found is not None

    config_name = ops.mig_config_map
    if (
        cp.mig_manager_config_name != config_name
        and not agent
        and not fought(fieldfight.MIG_MANAGER_CONFIG, config_name, cp.mig_manager_config_name)
    ):
        spec["migManager"] = {"config": {"name": config_name}}
        before["spec.migManager.config.name"] = cp.mig_manager_config_name
        after["spec.migManager.config.name"] = config_name
        wrote[fieldfight.MIG_MANAGER_CONFIG] = config_name
    if drift.device_plugin_config_conflict(desired, observed) is not None and not fought(
        fieldfight.DEVICE_PLUGIN_CONFIG, None, cp.device_plugin_config_name
    ):
        spec["devicePlugin"] = {"config": None}  # JSON merge patch: null removes the key
        before["spec.devicePlugin.config.name"] = cp.device_plugin_config_name
        after["spec.devicePlugin.config.name"] = None
        wrote[fieldfight.DEVICE_PLUGIN_CONFIG] = None
    strategy_changes = cp.mig_strategy != want.value and not fought(fieldfight.STRATEGY, want.value, cp.mig_strategy)
    deferred = strategy_changes and want is MigStrategy.SINGLE and not nodes_settled
    metadata: dict[str, Any] = {"resourceVersion": cp.resource_version}
    annotations: dict[str, str] = {}
    if strategy_changes and not deferred:
        spec["mig"] = {"strategy": want.value}
        before["spec.mig.strategy"] = cp.mig_strategy
        after["spec.mig.strategy"] = want.value
        annotations[STRATEGY_SET_ANNOTATION] = want.value
        wrote[fieldfight.STRATEGY] = want.value
    if spec:
        annotations[fieldfight.FIELDS_SET_ANNOTATION] = fieldfight.record_text(cp, wrote)
        metadata["annotations"] = annotations
        reason = ", ".join(f"{k}={'null' if v is None else v}" for k, v in after.items())
        patch = {"metadata": metadata, "spec": spec}
        out.append(Change(subject, Action.CONFIGURE, Kind.CLUSTER_POLICY, before, after, reason, patch=patch))
    else:
        out.append(Change(subject, Action.UNCHANGED, Kind.CLUSTER_POLICY))
    for f in fights:
        out.append(
            Change(
                f"{subject}/{f.field}",
                Action.SKIP,
                Kind.CLUSTER_POLICY,
                {f.field: f.observed},
                {f.field: f.desired},
                f"field manager {', '.join(f.managers[:3])} keeps its own value: not patched again (MP590)",
            )
        )
    if deferred:
        out.append(
            Change(
                f"{subject}/spec.mig.strategy",
                Action.SKIP,
                Kind.CLUSTER_POLICY,
                {"spec.mig.strategy": cp.mig_strategy},
                {"spec.mig.strategy": want.value},
                "waiting for every node's layout to converge before switching to single",
            )
        )
    out.append(_restart_change(desired, observed, strategy_now=not deferred and strategy_changes, stamp=stamp))
    return out


def _restart_change(desired: DesiredState, observed: ObservedState, *, strategy_now: bool, stamp: str) -> Change:
    ops = desired.cluster.gpu_operator
    subject = f"daemonset/{ops.namespace}/{ops.device_plugin_daemonset}"
    ds = observed.device_plugin
    cp = observed.cluster_policy
    want = desired.cluster.mig_strategy.value
    if ds is None:
        return Change(subject, Action.SKIP, Kind.RESTART_DEVICE_PLUGIN, reason="DaemonSet not found (MP518)")
    if ds.operator_owned:
        # The GPU Operator's own DaemonSet: its env carries spec.mig.strategy (object_controls.go
        # applyMIGConfiguration), so the operator's update of the DaemonSet on the ClusterPolicy change rolls the
        # pods, and that update replaces the object whole, dropping any marker migplan would leave on it. A restart
        # from migplan would be a second roll for the same change and, marker lost, owed again every cycle.
        return Change(subject, Action.UNCHANGED, Kind.RESTART_DEVICE_PLUGIN)
    # Not the operator's (a device plugin deployed on its own): nobody else restarts it. Restart when the strategy
    # changes in this plan, or when migplan changed it in an earlier run that did not get as far as the restart
    # (killed between the two writes); the marker on the DaemonSet says it was done for this strategy.
    pending_restart = (
        cp is not None
        and cp.mig_strategy == want
        and cp.annotations.get(STRATEGY_SET_ANNOTATION) == want
        and ds.annotations.get(RESTARTED_FOR_ANNOTATION) != want
    )
    if not (strategy_now or pending_restart):
        return Change(subject, Action.UNCHANGED, Kind.RESTART_DEVICE_PLUGIN)
    patch = {
        "metadata": {"annotations": {RESTARTED_FOR_ANNOTATION: want}},
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: stamp}}}},
    }
    return Change(
        subject,
        Action.CONFIGURE,
        Kind.RESTART_DEVICE_PLUGIN,
        {RESTARTED_AT_ANNOTATION: ds.restarted_at},
        {RESTARTED_AT_ANNOTATION: stamp},
        f"restart the device plugin for strategy {want}",
        patch=patch,
    )
