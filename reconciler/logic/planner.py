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
4. per node, by name: with allowDisruption and pods in the way, the drain (reconciler/logic/drain.py:
   cordon, evictions through the Eviction API, the relabel held until the pods are gone, a timeout),
   then the `nvidia.com/mig.config` label, and uncordon once mig-manager reports success. At most
   `maxUnavailableNodes` nodes are in flight; nodes whose change would destroy partitions running
   pods hold are skipped and name those pods (the disruption guard). What a change destroys is what
   mig-parted really does (reconciler/logic/disruption.py): the whole GPU for a re-cut, every MIG GPU of
   the node (and a reset of all its GPUs) when any GPU's MIG mode changes. Two special cases:
   - relabel only: the node's current config has the same geometry under another name (adopting
     a cluster) and nothing suggests the GPUs differ: mig-manager's assert passes and nothing is
     paused (stack-facts §3.3 step 2), so it is not a disruption and not counted;
   - re-apply: the label is right and mig-manager says success, the strategy is right and the
     plugin is Ready, yet the counts differ (GPUs cut by hand, reconciler/logic/nodestate.py, the
     classification drift's report shares): mig-manager only acts on a new
     label value, so the label points at `<config>-reapply`, an alias of the same layout, and
     goes back to the canonical name (relabel only) on a later cycle. Guarded like any change.

In `apply.mode: agent` 2. and 3. are planned (without migManager.config.name), and per node the
`migplan.io/mig-desired` annotation its NVML agent applies (reconciler/logic/desiredcodec.py): written
only when the node's layout changed, so every entry point (`migplan run`, `reconcile --once` from a
directory or a repository, the demo) publishes the layouts the same way, dry-run first, through the
same applier and write fencing as every other change. The disruption guard and the drain hold that publication
(reconciler/logic/agentdrain.py: the agent's model, holders from the node observer or inferred), and the node
is uncordoned once its agent reports success for the published layout (`_agent_layout_changes`).

Only fields and labels migplan owns appear in a patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from reconciler.catalog import load_catalog
from reconciler.logic import agentdrain, desiredcodec, disruption, drain, drift, migparted, nodestate, observation
from reconciler.logic.agentplan import DesiredNode, desired_from_node_spec
from reconciler.logic.nodestate import RESTARTED_FOR_ANNOTATION, STRATEGY_SET_ANNOTATION, Geometry
from reconciler.logic.occupancy import expected_resources
from reconciler.model.inventory import ApplyMode, DesiredState, MigStrategy, NodeSpec
from reconciler.model.observed import (
    CONFIGS_ADDED_AT_ANNOTATION,
    CORDONED_ANNOTATION,
    DRAIN_STARTED_ANNOTATION,
    GPU_RESOURCE,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MIG_CONFIG_LABEL,
    REQUESTED_AT_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
    MigConfigState,
    ObservedNode,
    ObservedPod,
    ObservedState,
    is_gpu_resource,
)
from reconciler.model.plans import Action, Change, Kind, Plan
from reconciler.model.strict import StrictValueError, parse_timestamp

# migplan's own annotations on objects it does not create (its only writes there besides the fields the plan
# names): STRATEGY_SET_ANNOTATION and RESTARTED_FOR_ANNOTATION, declared in reconciler.logic.nodestate (which
# reads them to tell whether the strategy has settled).

FAILED_RETRY_AFTER = timedelta(minutes=10)


def rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def plan(
    desired: DesiredState,
    observed: ObservedState,
    *,
    now: datetime,
    rendered: migparted.MigPartedConfig | None = None,
    silent_after: timedelta = observation.SILENT_AFTER,
) -> Plan:
    """The ordered changes for this cycle (see the module docstring for the order and the rules).
    `silent_after`: how old a node observer's report may be and still feed the disruption guard."""
    rendered = rendered or migparted.render(desired)
    stamp = rfc3339(now)
    node_changes, nodes_settled, aliases = _node_changes(desired, observed, rendered, now, silent_after)
    agent = desired.cluster.apply.mode is ApplyMode.AGENT
    changes: list[Change] = []
    if not agent:  # the node agent applies layouts itself: no mig-parted ConfigMap, no mig-manager
        changes.append(_config_map_change(desired, observed, rendered, aliases, stamp=stamp))
    changes.extend(_cluster_policy_changes(desired, observed, nodes_settled=nodes_settled, stamp=stamp))
    changes.extend(node_changes)
    if agent:
        changes.extend(_agent_layout_changes(desired, observed, now))
    cleanup = None if agent else _config_map_cleanup(desired, observed, rendered, node_changes, aliases)
    if cleanup is not None:
        changes.append(cleanup)
    return Plan(changes=tuple(changes), revision=desired.revision, node_configs=dict(rendered.node_configs))


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


def _propagation_hold(
    desired: DesiredState, observed: ObservedState, config: str, previous: Mapping[str, Any] | None, now: datetime
) -> str | None:
    """Why a relabel to `config` must wait for mig-manager to see the config, or None when it may go now.

    mig-manager reads the config from the ConfigMap mounted in its pod (`-f`, mig-parted
    cmd/nvidia-mig-manager/main.go), a file the kubelet refreshes on its periodic pod sync from a cached copy
    (up to sync period + cache TTL, kubernetes.io "Mounted ConfigMaps are updated automatically";
    pkg/kubelet/configmap/configmap_manager.go). A label naming a config the file does not hold yet fails
    (`selected mig-config not present`) and, since mig-manager acts once per label value, stays failed. So the
    label only names a config the observed ConfigMap already holds, and only once that content is
    configPropagationSeconds old (annotation written with it; a ConfigMap without it is taken as old)."""
    seconds = desired.cluster.apply.config_propagation_seconds
    if previous is None or config not in previous:
        if seconds == 0:
            return None  # the user accepts the race: the write earlier in this plan is deemed visible
        return f"waiting: {config} is written to the ConfigMap this cycle; mig-manager reads its mounted copy"
    cm = observed.mig_config_map
    added = _parse_stamp((cm.annotations if cm is not None else {}).get(CONFIGS_ADDED_AT_ANNOTATION))
    if added is None:
        return None
    left = timedelta(seconds=seconds) - (now - added)
    if left <= timedelta(0):
        return None
    return (
        f"waiting: the ConfigMap reaches mig-manager's mounted file within configPropagationSeconds={seconds} "
        f"({int(left.total_seconds()) + 1}s left)"
    )


def _parse_stamp(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


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
    return migparted.config_map_text(rendered, observed_text=observed_text, referenced=referenced, aliases=aliases)


def _config_map_cleanup(
    desired: DesiredState,
    observed: ObservedState,
    rendered: migparted.MigPartedConfig,
    node_changes: list[Change],
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
    if cp.mig_manager_config_name != ops.mig_config_map and not agent:
        spec["migManager"] = {"config": {"name": ops.mig_config_map}}
        before["spec.migManager.config.name"] = cp.mig_manager_config_name
        after["spec.migManager.config.name"] = ops.mig_config_map
    if drift.device_plugin_config_conflict(desired, observed) is not None:
        spec["devicePlugin"] = {"config": None}  # JSON merge patch: null removes the key
        before["spec.devicePlugin.config.name"] = cp.device_plugin_config_name
        after["spec.devicePlugin.config.name"] = None
    strategy_changes = cp.mig_strategy != want.value
    deferred = strategy_changes and want is MigStrategy.SINGLE and not nodes_settled
    metadata: dict[str, Any] = {"resourceVersion": cp.resource_version}
    if strategy_changes and not deferred:
        spec["mig"] = {"strategy": want.value}
        before["spec.mig.strategy"] = cp.mig_strategy
        after["spec.mig.strategy"] = want.value
        metadata["annotations"] = {STRATEGY_SET_ANNOTATION: want.value}
    if spec:
        reason = ", ".join(f"{k}={'null' if v is None else v}" for k, v in after.items())
        patch = {"metadata": metadata, "spec": spec}
        out.append(Change(subject, Action.CONFIGURE, Kind.CLUSTER_POLICY, before, after, reason, patch=patch))
    else:
        out.append(Change(subject, Action.UNCHANGED, Kind.CLUSTER_POLICY))
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


# --- 4. nodes ---------------------------------------------------------------------------------------


def _in_flight(node: ObservedNode, config: str) -> bool:
    """Reconfiguring right now: labelled with its config and mig-manager not done with it."""
    if node.mig_config != config:
        return False
    state = node.mig_config_state
    if state is None:
        # Labelled by migplan and not yet picked up by mig-manager; a label someone else set on a
        # cluster without mig-manager must not hold a maxUnavailableNodes slot forever.
        return REQUESTED_AT_ANNOTATION in node.annotations
    return state in (MigConfigState.PENDING, MigConfigState.REBOOTING)


def node_disruption(
    node: ObservedNode, plan_: NodeSpec, previous: Mapping[str, tuple[migparted.ConfigEntry, ...]] | None
) -> tuple[disruption.NodeDisruption, frozenset[str], Mapping[int, migparted.GpuLayout]] | None:
    """What mig-manager destroys when the node moves from the config its label names to its plan, the
    resources that loses, and the previous per-GPU layout; None = unknown (assume everything).

    The mig-parted model (reconciler/logic/disruption.py, from mig-parted's ApplyMigMode / ApplyMigConfig):
    a re-cut replaces every partition of that GPU; a MIG mode change on any GPU clears every MIG GPU of
    the node and may reset all of them. The previous layout is the config the node's current label
    names, read from the observed ConfigMap.
    """
    if previous is None or node.mig_config is None or node.mig_config not in previous:
        return None
    indexes = [g.index for g in plan_.gpus]
    old = migparted.layouts_of(previous[node.mig_config], indexes)
    if old is None:
        return None
    what = disruption.mig_parted(old, dict(migparted.node_layout(plan_)))
    return what, disruption.lost_resources(old, what), old


def destroyed_resources(
    node: ObservedNode, plan_: NodeSpec, previous: Mapping[str, tuple[migparted.ConfigEntry, ...]] | None
) -> frozenset[str] | None:
    """Resources whose partitions the node's change would destroy; None = unknown (assume all)."""
    found = node_disruption(node, plan_, previous)
    return None if found is None else found[1]


def guard_holders(
    node: ObservedNode,
    pods: tuple[ObservedPod, ...],
    destroyed: frozenset[str] | None,
    gpus: frozenset[int] | None,
    *,
    now: datetime | None,
    silent_after: timedelta = observation.SILENT_AFTER,
) -> tuple[str, ...]:
    """The pods the disruption guard names for a node change that destroys the partitions of `gpus`
    (None: unknown, every GPU) and the extended resources `destroyed`.

    With the node's observer reporting its holders (reconciler.logic.observation), it reasons per GPU: a pod
    the kubelet allocated a device of another GPU to is not in the way. Pods the observation does not name
    (bound after the observer's last pass) are still judged by their requests, as without an observer. An
    observer of another migplan version (MP544) is not trusted to narrow the guard: the pods it names are
    added to those the requests name."""
    if gpus is None or node.observation is None or not observation.usable(node, now=now, silent_after=silent_after):
        return blocking_pods(pods, destroyed)
    if not node.observation.holders_known:
        return blocking_pods(pods, destroyed)
    joined = observation.join(node.name, None, node.observation)
    seen = {p for g in joined.gpus for p in (*g.whole_holders, *(h for i in g.instances for h in i.holders))}
    judged = (
        pods
        if node.observation.observer != observation.CONTROLLER_OBSERVER
        else (tuple(p for p in pods if p.key not in seen))
    )
    return tuple(sorted(set(joined.holders_on(gpus)) | set(blocking_pods(judged, destroyed))))


def blocking_pods(pods: tuple[ObservedPod, ...], destroyed: frozenset[str] | None) -> tuple[str, ...]:
    out = []
    for p in pods:
        if not p.holds_devices:
            continue
        held = {r for r, n in p.requested().items() if n > 0 and is_gpu_resource(r)}
        if held and (destroyed is None or held & destroyed or (GPU_RESOURCE in held and destroyed)):
            out.append(p.key)
    return tuple(sorted(out))


def _previous_configs(observed: ObservedState) -> Mapping[str, tuple[migparted.ConfigEntry, ...]] | None:
    cm = observed.mig_config_map
    if cm is None or migparted.CONFIG_KEY not in cm.data:
        return None
    try:
        return migparted.parse_strict(cm.data[migparted.CONFIG_KEY])
    except migparted.MigPartedFormatError:
        return None


def _converged(plan_: NodeSpec, node: ObservedNode, strategy: MigStrategy) -> bool:
    return nodestate.advertises(node, expected_resources(plan_, strategy))


def _failed_recently(node: ObservedNode, config: str, now: datetime) -> bool:
    """mig-manager failed on a change migplan requested less than FAILED_RETRY_AFTER ago (backoff).
    A failure on a label someone else set is not migplan's attempt and is not backed off."""
    if node.mig_config_state != MigConfigState.FAILED:
        return False
    if node.mig_config not in (config, migparted.alias_name(config)):
        return False
    text = node.annotations.get(REQUESTED_AT_ANNOTATION)
    if not text:
        return False
    try:
        since = parse_timestamp(text)
    except StrictValueError:
        return True  # unreadable: never treated as "long ago" (the node is held anyway, MP530)
    return now - since < FAILED_RETRY_AFTER


def _node_changes(
    desired: DesiredState,
    observed: ObservedState,
    rendered: migparted.MigPartedConfig,
    now: datetime,
    silent_after: timedelta = observation.SILENT_AFTER,
) -> tuple[list[Change], bool, frozenset[str]]:
    """Per-node changes, whether every node has settled (no change wanted, none in flight), and the
    re-apply aliases the ConfigMap must carry for them."""
    stamp = rfc3339(now)
    settings = desired.cluster.apply
    budget = max(settings.max_unavailable_nodes, 0)
    previous = _previous_configs(observed)
    pods_by_node = observed.pods_by_node()
    ready = nodestate.readiness(desired, observed, now=now)
    wanted: list[tuple[str, NodeSpec, ObservedNode, str]] = []
    changes: list[Change] = []
    aliases: set[str] = set()
    in_flight = 0
    settled = True
    draining: set[str] = set()
    unreadable = drift.unreadable_nodes(observed)
    # First pass: count what is already in flight and queue uncordons (they free capacity).
    for name in sorted(desired.nodes):
        node = observed.nodes.get(name)
        if node is None:
            continue
        config = rendered.node_configs[name]
        if name in unreadable:
            # A value migplan acts on is malformed (MP530): whatever it would write would be a
            # guess, so the node is neither relabelled, cordoned, uncordoned nor re-applied. It does
            # not take a maxUnavailableNodes slot (the other nodes go on as usual), but it is not
            # settled either: a switch to `single` waits until its layout can be read.
            settled = False
            changes.append(
                _held(
                    f"node/{name}",
                    node.mig_config,
                    config,
                    "held: a value migplan reads on the node is malformed (MP530, MP547)",
                )
            )
            continue
        cordoned = node.annotations.get(CORDONED_ANNOTATION) == "true"
        if node.mig_config == config:
            if _in_flight(node, config):
                in_flight += 1
                settled = False
            elif node.mig_config_state == MigConfigState.SUCCESS and cordoned:
                changes.append(_after_success(node))
            elif node.mig_config_state == MigConfigState.FAILED:
                settled = False
                # Retry (through the alias: mig-manager only acts on a new value) once no pod holds
                # a GPU device on the node any more, e.g. after a drain; at most every
                # FAILED_RETRY_AFTER so a config that cannot apply is not hammered.
                idle = not blocking_pods(pods_by_node.get(name, ()), None)
                if idle and not _failed_recently(node, config, now):
                    wanted.append((name, desired.nodes[name], node, migparted.alias_name(config)))
                elif cordoned:
                    in_flight += 1  # still unavailable: it stays cordoned until it succeeds
            elif (
                nodestate.classify(node, expected_resources(desired.nodes[name], desired.cluster.mig_strategy), ready)
                is Geometry.CHANGED_BY_HAND
            ):
                # mig-manager believes the config applied but the GPUs differ (cut by hand, reset) while the
                # strategy is settled and the plugin Ready (reconciler.logic.nodestate): point the label at an
                # alias of the same layout so mig-manager applies it again.
                settled = False
                wanted.append((name, desired.nodes[name], node, migparted.alias_name(config)))
            # A node whose label is right but whose advertised resources are not because of the
            # strategy (the plugin refusing the layout under `single`) is not "unsettled": the
            # strategy change is what fixes it, so it must not hold the strategy change back.
            continue
        settled = False
        if settings.allow_disruption and drain.draining_for(node) == config and node.unschedulable:
            in_flight += 1  # drained for this change since an earlier cycle: it holds its slot already
            draining.add(name)
        wanted.append((name, desired.nodes[name], node, config))
    for name, plan_, node, config in wanted:
        subject = f"node/{name}"
        hold = _propagation_hold(desired, observed, config, previous, now)
        reapply = config.endswith(migparted.ALIAS_SUFFIX) and node.mig_config == rendered.node_configs[name]
        # What the GPUs really hold is unknown when they differ from the config they carry: for a node
        # relabelled to another config, when it advertises other counts than that config gives while nothing
        # else explains it (reconciler.logic.nodestate: changed behind mig-manager's back).
        found = None if reapply else node_disruption(node, plan_, previous)
        suspect = found is not None and (
            nodestate.classify(node, disruption.advertised(found[2], desired.cluster.mig_strategy.value), ready)
            is Geometry.CHANGED_BY_HAND
        )
        if suspect:
            found = None
        destroyed = None if found is None else found[1]
        # Said in the change's reason: what mig-manager really does to the node (whole GPUs, resets,
        # GPU clients stopped), not only the partitions that differ.
        effect = found[0].describe() if found is not None else "unknown previous layout: every GPU of the node"
        if destroyed is None and not (reapply or suspect) and _converged(plan_, node, desired.cluster.mig_strategy):
            # The config the label names is unknown (set by hand, or not in our ConfigMap), but the
            # node advertises exactly its plan: mig-manager's assert will pass and nothing is
            # destroyed. (Counts can hide a different per-GPU split; NVML still refuses to destroy
            # an instance a process uses, stack-facts §6.)
            destroyed = frozenset()
        if destroyed is not None and not destroyed and node.mig_config_state == MigConfigState.SUCCESS:
            # Same geometry under another config name (e.g. adopting a cluster whose ConfigMap
            # used other names): mig-manager's assert passes and it sets success without pausing
            # anything (stack-facts §3.3 step 2), so the relabel is not a disruption and does not
            # count against maxUnavailableNodes.
            if hold is not None:
                changes.append(_held(subject, node.mig_config, config, hold))
                continue
            changes.append(
                Change(
                    subject,
                    Action.CONFIGURE,
                    Kind.NODE_MIG_CONFIG,
                    {MIG_CONFIG_LABEL: node.mig_config},
                    {MIG_CONFIG_LABEL: config},
                    "relabel only: the node already carries this layout",
                    patch=_label_patch(config, stamp),
                )
            )
            continue
        if _failed_recently(node, rendered.node_configs[name], now):
            changes.append(
                _held(
                    subject,
                    node.mig_config,
                    config,
                    f"waiting: mig-manager failed less than {int(FAILED_RETRY_AFTER.total_seconds() // 60)} min ago",
                )
            )
            continue
        blockers = guard_holders(
            node,
            pods_by_node.get(name, ()),
            destroyed,
            found[0].gpus if found is not None else None,
            now=now,
            silent_after=silent_after,
        )
        if blockers and not settings.allow_disruption:
            changes.append(
                _held(
                    subject,
                    node.mig_config,
                    config,
                    f"disruption guard: running pods hold partitions this change destroys ({effect})",
                    blocked_by=blockers,
                    code="MP519",
                )
            )
            continue
        if hold is not None:
            if reapply:
                aliases.add(config)  # written now, so that it reaches mig-manager's file before the label names it
            changes.append(_held(subject, node.mig_config, config, hold))
            continue
        if name not in draining:
            if in_flight >= budget:
                changes.append(
                    _held(
                        subject,
                        node.mig_config,
                        config,
                        f"waiting: maxUnavailableNodes={settings.max_unavailable_nodes} node(s) already reconfiguring",
                    )
                )
                continue
            in_flight += 1
        if blockers:
            # allowDisruption: drain first; the relabel waits until no pod holds what it destroys.
            changes.extend(
                _drain(desired, observed, node, config, pods_by_node.get(name, ()), blockers, effect, now=now)
            )
            continue
        if reapply:
            aliases.add(config)  # the ConfigMap must hold the alias before the label names it
        patch = _label_patch(config, stamp)
        patch["metadata"]["annotations"].update(drain.end_marks(node))  # the drain (if any) is over
        changes.append(
            Change(
                subject,
                Action.CONFIGURE,
                Kind.NODE_MIG_CONFIG,
                {MIG_CONFIG_LABEL: node.mig_config},
                {MIG_CONFIG_LABEL: config},
                "re-apply the node's layout (its GPUs differ from the config mig-manager applied)"
                if reapply
                else f"apply the node's layout through mig-manager: {effect}",
                patch=patch,
            )
        )
    # Deterministic order: by node, then cordon -> evict -> label -> uncordon (kinds in enum order).
    kind_order = {k: i for i, k in enumerate(Kind)}
    changes.sort(key=lambda c: (drain.node_of(c), kind_order[c.kind], c.subject))
    if desired.cluster.apply.mode is ApplyMode.AGENT:
        # The NVML agent applies layouts itself (the controller publishes them as node annotations);
        # here the controller only keeps the ClusterPolicy coherent.
        return [], settled, frozenset()
    return changes, settled, frozenset(aliases)


def _agent_layout_changes(desired: DesiredState, observed: ObservedState, now: datetime) -> list[Change]:
    """apply.mode agent: publish each node's layout (exact placements) where the node does not hold it yet.

    Nodes not in the cluster get nothing (MP510 says so). A GPU whose partitions cannot be placed is left
    out of the published layout and named in the reason: publishing a guess would be worse.

    The disruption guard and the drain, as in gpu-operator mode but with the agent's model (only the instances
    that change are destroyed, reconciler/logic/agentdrain.py): a layout whose publication destroys instances
    running pods hold is held back and names them (MP519) unless allowDisruption, then the node is drained
    (cordon, evictions, the publication held until the pods are gone, drainTimeoutSeconds) and uncordoned once
    its agent reports `success` for the published layout's revision. Nodes migplan has cordoned count against
    maxUnavailableNodes; a publication that destroys nothing in use makes no node unavailable and is not
    counted. Holding the publication (rather than publishing and letting the agent hold the GPU) keeps every
    GPU of the node on one layout and names the pods at plan time, in the merge request as in the report; the
    agent's own refusal to destroy an instance in use stays the last guard (a pod that arrives between the
    controller's observation and the agent's pass)."""
    catalog = load_catalog()
    settings = desired.cluster.apply
    budget = max(settings.max_unavailable_nodes, 0)
    pods_by_node = observed.pods_by_node()
    unreadable = drift.unreadable_nodes(observed)
    out: list[Change] = []
    # (node, layout, problems, already published): a published layout the agent has not built yet may still
    # need a drain (a pod took a destroyed instance after the publication, or it was published before this
    # controller held publications); the agent holds it meanwhile.
    todo: list[tuple[ObservedNode, DesiredNode, str | None, bool]] = []
    slots: set[str] = set()  # nodes holding a maxUnavailableNodes slot (cordoned by migplan, or draining)
    for name in sorted(desired.nodes):
        node = observed.nodes.get(name)
        if node is None:
            continue
        layout, problems = desired_from_node_spec(desired.nodes[name], revision=str(desired.revision), catalog=catalog)
        current = node.annotations.get(desiredcodec.ANNOTATION)
        ours = node.annotations.get(CORDONED_ANNOTATION) == "true"
        if not desiredcodec.needs_publishing(current, layout):
            published = agentdrain.published_layout(node)
            done = published is not None and agentdrain.agent_reported_success(node, published)
            if ours and name not in unreadable:
                if done:
                    out.append(_after_success(node))  # frees its slot
                    continue
                slots.add(name)  # the agent has not applied it yet: still unavailable
            if published is not None and not done:
                todo.append((node, published, None, True))
            continue
        if (ours or drain.draining_for(node) == agentdrain.layout_key(layout)) and node.unschedulable:
            slots.add(name)
        todo.append((node, layout, "; ".join(problems) or None, False))
    in_flight = len(slots)
    for node, layout, note, already in todo:
        subject = f"node/{node.name}"
        found = agentdrain.layout_disruption(node, layout)
        if already and not found.measured:
            continue  # only measured holders: the agent reports what holds it (pending) by itself
        pods = pods_by_node.get(node.name, ())
        vanished: tuple[str, ...] = ()
        source = found.source
        if found.measured:
            on_node = {p.key for p in pods}
            blockers = tuple(k for k in found.holders if k in on_node)
            # A holder the API no longer lists on this node is gone (a StatefulSet's replacement takes its name
            # elsewhere): waited for until the observer's next pass shows the device freed, never evicted.
            vanished = tuple(k for k in found.holders if k not in on_node)
        else:
            resources = found.resources
            if resources is None and _converged(desired.nodes[node.name], node, desired.cluster.mig_strategy):
                # Nothing says what the GPUs hold, but the node advertises exactly its plan's counts (as in
                # gpu-operator mode): taken as built. Counts can hide other placements; the agent still refuses
                # to destroy an instance in use and holds that GPU.
                resources = frozenset()
                source += "; the node advertises exactly its plan's counts: taken as built"
            blockers = blocking_pods(pods, resources)
        current = node.annotations.get(desiredcodec.ANNOTATION)
        text = desiredcodec.encode(layout)

        def hold(
            reason: str,
            *,
            blocked_by: tuple[str, ...] = (),
            code: str = "",
            pdbs: tuple[str, ...] = (),
            subject: str = subject,
            current: str | None = current,
            layout: DesiredNode = layout,
        ) -> Change:
            return Change(
                subject,
                Action.SKIP,
                Kind.AGENT_LAYOUT,
                None if current is None else {desiredcodec.ANNOTATION: "(previous layout)"},
                {desiredcodec.ANNOTATION: f"{len(layout.gpus)} GPU(s) at {layout.revision}"},
                reason,
                blocked_by=blocked_by,
                code=code,
                pdbs=pdbs,
            )

        if node.name in unreadable:
            # A value migplan cannot read on the node (MP530, a malformed observation MP547): left alone in agent
            # mode too, no layout published, cordoned or lifted on a guess (its findings say why).
            if not already:
                out.append(
                    hold("held: a value migplan reads on the node is malformed (MP530/MP547): nothing is written")
                )
            continue
        in_use = f"{found.effect}; {source}" + ("; published, the agent holds it" if already else "")
        if found.outside:
            out.append(
                hold(
                    f"cannot drain: processes outside Kubernetes use what the layout destroys "
                    f"({'; '.join(found.outside)}); the agent would hold the GPU ({in_use})",
                    blocked_by=tuple(sorted(set(blockers) | set(vanished))) + found.outside,
                    code=drain.UNDRAINABLE if settings.allow_disruption else "MP519",
                )
            )
            continue
        if blockers or vanished:
            if not settings.allow_disruption:
                out.append(
                    hold(
                        f"disruption guard: running pods hold partitions this layout destroys ({in_use})",
                        blocked_by=tuple(sorted(set(blockers) | set(vanished))),
                        code="MP519",
                    )
                )
                continue
            if node.name in unreadable:
                out.append(hold("held: a value migplan reads on the node is malformed (MP530)"))
                continue
            if node.name not in slots:
                if in_flight >= budget:
                    out.append(
                        hold(
                            f"waiting: maxUnavailableNodes={settings.max_unavailable_nodes} node(s) "
                            "already reconfiguring"
                        )
                    )
                    continue
                in_flight += 1
            key = agentdrain.layout_key(layout)
            out.extend(
                _drain(desired, observed, node, key, pods, blockers, in_use, now=now, hold=hold, vanished=vanished)
            )
            continue
        if already:
            continue  # nothing in use in the way: the agent builds it on its next pass
        why = "publish the node's layout for its migplan agent" + (f" ({note})" if note else "")
        if node.annotations.get(CORDONED_ANNOTATION) == "true":
            why += "; drained, uncordoned once the agent reports success"
        out.append(
            Change(
                subject,
                Action.CREATE if current is None else Action.CONFIGURE,
                Kind.AGENT_LAYOUT,
                None if current is None else {desiredcodec.ANNOTATION: "(previous layout)"},
                {desiredcodec.ANNOTATION: f"{len(layout.gpus)} GPU(s) at {desired.revision}"},
                why,
                patch={"metadata": {"annotations": {desiredcodec.ANNOTATION: text, **drain.end_marks(node)}}},
            )
        )
    kind_order = {k: i for i, k in enumerate(Kind)}
    out.sort(key=lambda c: (drain.node_of(c), kind_order[c.kind], c.subject))
    return out


class _Hold(Protocol):
    """Builds the held change of a node (its relabel, or its layout's publication in agent mode)."""

    def __call__(
        self, reason: str, *, blocked_by: tuple[str, ...] = (), code: str = "", pdbs: tuple[str, ...] = ()
    ) -> Change: ...


def _drain(
    desired: DesiredState,
    observed: ObservedState,
    node: ObservedNode,
    config: str,
    pods: tuple[ObservedPod, ...],
    blockers: tuple[str, ...],
    effect: str,
    *,
    now: datetime,
    hold: _Hold | None = None,
    vanished: tuple[str, ...] = (),
) -> list[Change]:
    """The drain of a node whose change destroys what running pods hold (reconciler/logic/drain.py): cordon,
    evict, and the change (the relabel, or in agent mode the layout's publication: `hold`) held until the pods
    are gone; held with the reason when drain cannot proceed. `config` names what the drain is for (the drain
    marks). `vanished`: pods the node observer still sees holding a device that the API no longer lists (gone
    since): waited for, not evicted."""
    subject = f"node/{node.name}"
    if hold is None:

        def hold(
            reason: str, *, blocked_by: tuple[str, ...] = (), code: str = "", pdbs: tuple[str, ...] = ()
        ) -> Change:
            return _held(subject, node.mig_config, config, reason, blocked_by=blocked_by, code=code, pdbs=pdbs)

    held = {p.key: p for p in pods if p.key in blockers}
    verdict = drain.classify(held.values())
    if verdict.refused:
        why = "; ".join(f"{k}: {reason}" for k, reason in verdict.refused)
        return [
            hold(
                f"cannot drain: {why}; the change destroys what they hold ({effect})",
                blocked_by=tuple(k for k, _ in verdict.refused),
                code=drain.UNDRAINABLE,
            )
        ]
    pdbs = drain.blocking_pdbs(held.values(), observed.pdbs)
    pdb_text = (
        f"; PodDisruptionBudgets allowing no disruption: {drain.describe_pdbs(pdbs, observed.pdbs)}" if pdbs else ""
    )
    pods_left = tuple(sorted(set(verdict.pods) | set(vanished)))
    timeout = desired.cluster.apply.drain_timeout_seconds
    clock = drain.drain_clock(node, config, now)
    if clock.unreadable is not None or clock.elapsed(now) > timedelta(seconds=timeout):
        why = clock.unreadable or f"the drain started at {rfc3339(clock.started or now)}"
        return [
            hold(
                f"drain timed out (drainTimeoutSeconds={timeout}; {why}): {', '.join(pods_left)} still hold what "
                f"the change destroys{pdb_text}; nothing is deleted by force (remove the "
                f"{DRAIN_STARTED_ANNOTATION} annotation to drain again)",
                blocked_by=pods_left,
                code=drain.TIMED_OUT,
                pdbs=pdbs,
            )
        ]
    out: list[Change] = []
    if clock.started is None or not node.unschedulable:
        # Cordoned again if someone lifted the cordon mid-drain; the drain keeps its start (and its timeout).
        out.append(drain.start_change(node, config, rfc3339(clock.started or now), pods_left))
    for p in verdict.evict:
        out.append(drain.eviction(p, node.name, f"drain {subject}: it holds what the change destroys ({effect})"))
    gone_text = (
        f"; {', '.join(vanished)} no longer in the API, waiting for the node observer to see the devices freed"
        if vanished
        else ""
    )
    out.append(
        hold(
            f"draining: waiting for {', '.join(pods_left)} to go (evicted through the Eviction API){pdb_text}"
            f"{gone_text}",
            blocked_by=pods_left,
            code=drain.PDB_BLOCKS if pdbs else drain.DRAINING,
            pdbs=pdbs,
        )
    )
    return out


def _label_patch(config: str, stamp: str) -> dict[str, Any]:
    return {"metadata": {"labels": {MIG_CONFIG_LABEL: config}, "annotations": {REQUESTED_AT_ANNOTATION: stamp}}}


def _after_success(node: ObservedNode) -> Change:
    """The reconfiguration of a node migplan cordoned succeeded: lift migplan's cordon, and only migplan's.

    - still unschedulable and spec.unschedulable still migplan's field (or ownership unknown: the server
      sent no managedFields) -> uncordon;
    - no longer unschedulable -> someone uncordoned it: forget the annotation;
    - unschedulable but the field is no longer migplan's alone (an uncordon and a re-cordon by someone else
      between two cycles: the uncordon removed the field from migplan's set, the cordon gave it to its author;
      or someone else claims the same value) -> that cordon is theirs too: forget the annotation, never
      uncordon."""
    if not node.unschedulable:
        return _forget_cordon(node, "reconfiguration succeeded and the node was already uncordoned by someone else")
    if node.unschedulable_owned_by_migplan is False:
        return _forget_cordon(
            node,
            "reconfiguration succeeded but the node was cordoned again by someone else "
            "(spec.unschedulable is no longer migplan's field)",
        )
    return _uncordon(node)


def _forget_cordon(node: ObservedNode, why: str) -> Change:
    """migplan's cordon was already lifted by someone else: drop only migplan's annotation.

    migplan undoes only what it did. Once a person has uncordoned the node, a later cordon is
    theirs, so migplan forgets its own at once and never writes spec.unschedulable here."""
    return Change(
        f"node/{node.name}",
        Action.CONFIGURE,
        Kind.UNCORDON,
        {CORDONED_ANNOTATION: "true"},
        {CORDONED_ANNOTATION: None},
        f"{why}: only forget migplan's cordon",
        patch={"metadata": {"annotations": {CORDONED_ANNOTATION: None, **drain.end_marks(node)}}},
    )


def _uncordon(node: ObservedNode) -> Change:
    return Change(
        f"node/{node.name}",
        Action.CONFIGURE,
        Kind.UNCORDON,
        {"spec.unschedulable": True},
        {"spec.unschedulable": False},
        "reconfiguration succeeded: uncordon",
        patch={
            "metadata": {"annotations": {CORDONED_ANNOTATION: None, **drain.end_marks(node)}},
            "spec": {"unschedulable": False},
        },
    )


def _held(
    subject: str,
    current: str | None,
    config: str,
    reason: str,
    *,
    blocked_by: tuple[str, ...] = (),
    code: str = "",
    pdbs: tuple[str, ...] = (),
) -> Change:
    """A node relabel the plan holds back this cycle, with the reason the report shows."""
    return Change(
        subject,
        Action.SKIP,
        Kind.NODE_MIG_CONFIG,
        {MIG_CONFIG_LABEL: current},
        {MIG_CONFIG_LABEL: config},
        reason,
        blocked_by=blocked_by,
        code=code,
        pdbs=pdbs,
    )
