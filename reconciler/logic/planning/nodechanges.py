"""gpu-operator mode, per node: the `nvidia.com/mig.config` relabels (and the drains and uncordons around them)
that bring each node to its mig-parted config through mig-manager. Pure.

Two passes over the nodes, in name order (the rules are the planner's, reconciler/logic/planning/planner.py step 4):

1. `standing`: where each node stands — settled; settled with migplan's cordon to lift; in flight (mig-manager
   at work, or a failed node kept cordoned: it holds a maxUnavailableNodes slot); failed and waiting for its
   retry; held because a value migplan reads on it is malformed; or wanting a relabel (to its config, or to the
   `-reapply` alias of that config when mig-manager failed or the GPUs were changed by hand). Counting every
   slot already held before any node is decided is what keeps the budget honest.
2. `wanted_changes`: for each node wanting a relabel, in this order — relabel only (the same geometry under
   another name: not a disruption) → mig-manager's failure backoff → the disruption guard → the ConfigMap's
   propagation hold → the maxUnavailableNodes budget → the drain → the relabel.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.catalog import load_catalog
from reconciler.logic.codecs import migparted
from reconciler.logic.drift import drift, nodestate, thirdparty
from reconciler.logic.drift.nodestate import Geometry
from reconciler.logic.observe import draclaims, hosteffects, observation, profilecheck
from reconciler.logic.observe.occupancy import expected_resources
from reconciler.logic.planning import disruption, drain
from reconciler.logic.planning.disruptionguard import (
    PreviousConfigs,
    blocking_pods,
    converged,
    guard_holders,
    node_disruption,
    observed_layouts,
    previous_configs,
)
from reconciler.logic.planning.rollout import Budget, Hold, after_success, by_node, drain_changes, rfc3339
from reconciler.model.inventory import ApplyMode, DesiredState
from reconciler.model.observed import (
    CONFIGS_ADDED_AT_ANNOTATION,
    CORDONED_ANNOTATION,
    MIG_CONFIG_LABEL,
    REQUESTED_AT_ANNOTATION,
    MigConfigState,
    NodePods,
    ObservedNode,
    ObservedPod,
    ObservedState,
)
from reconciler.model.plans import Action, Change, Kind
from reconciler.model.strict import StrictValueError, parse_timestamp

FAILED_RETRY_AFTER = timedelta(minutes=10)
_UNKNOWN_EFFECT = "unknown previous layout: every GPU of the node"


class Standing(enum.StrEnum):
    """Where a node stands before any node is decided (pass 1)."""

    SETTLED = "settled"  # its label names its config and nothing says its GPUs differ: nothing owed
    SUCCEEDED = "succeeded"  # settled, and the cordon migplan set for it is lifted now
    IN_FLIGHT = "in flight"  # mig-manager at work, or failed and kept cordoned: holds a slot, nothing written
    FAILED_WAITING = "failed, waiting"  # mig-manager failed; the retry waits for the pods or FAILED_RETRY_AFTER
    WANTED = "wanted"  # a relabel is wanted: to its config, or to the alias that re-applies it
    UNREADABLE = "unreadable"  # a value migplan reads on it is malformed (MP530, MP547): held, nothing written
    OTHER_WRITER = "other writer"  # another component writes its MIG layout (MP570): held, nothing written, ever


@dataclass(frozen=True, slots=True)
class NodeStanding:
    standing: Standing
    config: str  # the label value the node should carry (WANTED: the one its relabel writes)
    holds_slot: bool = False  # counts against maxUnavailableNodes already (in flight, or drained for this change)

    @property
    def settled(self) -> bool:
        """No change wanted and none in flight: a switch to `single` need not wait for this node."""
        # A node another component lays out never converges to migplan's plan; it must not hold back the
        # cluster-wide changes (a strategy switch) that wait for every node to settle.
        return self.standing in (Standing.SETTLED, Standing.SUCCEEDED, Standing.OTHER_WRITER)


@dataclass(frozen=True, slots=True)
class NodeChanges:
    """The per-node part of the plan (by node, in write order), whether every node has settled, and the
    re-apply aliases the ConfigMap must carry for it."""

    changes: tuple[Change, ...]
    settled: bool
    aliases: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What every node's decision reads, computed once per plan."""

    desired: DesiredState
    observed: ObservedState
    rendered: migparted.MigPartedConfig
    now: datetime
    silent_after: timedelta
    previous: PreviousConfigs | None  # the observed ConfigMap's configs (what a node's label names)
    pods_by_node: Mapping[str, tuple[ObservedPod, ...]]
    ready: nodestate.Readiness  # whether a node's advertised counts can be believed
    claimed: Mapping[str, list[tuple[str, str]]]  # node -> [(DRA device, pod)] from ResourceClaims (draclaims)
    unoffered: Mapping[str, str | None]  # profilecheck.unoffered per node, where the drift analysis found it

    def pods(self, name: str) -> tuple[ObservedPod, ...]:
        return self.pods_by_node.get(name, ())


def node_changes(
    desired: DesiredState,
    observed: ObservedState,
    rendered: migparted.MigPartedConfig,
    now: datetime,
    silent_after: timedelta = observation.SILENT_AFTER,
    *,
    unoffered: Mapping[str, str | None] | None = None,
) -> NodeChanges:
    """Per-node changes, whether every node has settled (no change wanted, none in flight), and the
    re-apply aliases the ConfigMap must carry for them. In apply.mode agent only `settled` is used (the NVML
    agent applies the layouts; reconciler/logic/planning/agentchanges.py publishes them): no change is planned."""
    inputs = _Inputs(
        desired,
        observed,
        rendered,
        now,
        silent_after,
        previous_configs(observed),
        observed.pods_by_node(),
        nodestate.readiness(desired, observed, now=now),
        draclaims.by_node(observed.claims),
        unoffered or {},
    )
    unreadable = drift.unreadable_nodes(observed)
    writers = drift.other_writers(desired, observed)  # found writing a node given to migplan: held, said (MP570)
    declared = drift.declared_writers(desired)  # the inventory gives the node to another writer: left out, silently
    nodes = {name: node for name in sorted(desired.nodes) if (node := observed.nodes.get(name)) is not None}
    standings = {
        name: NodeStanding(Standing.OTHER_WRITER, inputs.rendered.node_configs[name])
        if name in writers or name in declared
        else standing(inputs, node, unreadable)
        for name, node in nodes.items()
    }
    settled = all(s.settled for s in standings.values())
    if desired.cluster.apply.mode is ApplyMode.AGENT:
        return NodeChanges((), settled, frozenset())
    changes = [
        c for name, s in standings.items() if (c := _standing_change(nodes[name], s, writers.get(name))) is not None
    ]
    budget = Budget(desired.cluster.apply.max_unavailable_nodes, sum(s.holds_slot for s in standings.values()))
    aliases: set[str] = set()
    for name, s in standings.items():
        if s.standing is Standing.WANTED:
            found, alias = wanted_changes(inputs, nodes[name], s, budget)
            changes.extend(found)
            aliases.update(alias)
    return NodeChanges(tuple(by_node(changes)), settled, frozenset(aliases))


# --- pass 1: where each node stands ---------------------------------------------------------------


def standing(inputs: _Inputs, node: ObservedNode, unreadable: frozenset[str]) -> NodeStanding:
    """Where the node stands against the config the inventory renders for it."""
    config = inputs.rendered.node_configs[node.name]
    if node.name in unreadable:
        # A value migplan acts on is malformed (MP530): whatever it would write would be a guess, so the node
        # is neither relabelled, cordoned, uncordoned nor re-applied. It does not take a maxUnavailableNodes
        # slot (the other nodes go on as usual), but it is not settled either: a switch to `single` waits
        # until its layout can be read.
        return NodeStanding(Standing.UNREADABLE, config)
    if node.mig_config == config:
        return _labelled(inputs, node, config)
    # Drained for this change since an earlier cycle: it holds its slot already.
    draining = (
        inputs.desired.cluster.apply.allow_disruption and drain.draining_for(node) == config and node.unschedulable
    )
    return NodeStanding(Standing.WANTED, config, holds_slot=bool(draining))


def _labelled(inputs: _Inputs, node: ObservedNode, config: str) -> NodeStanding:
    """A node whose label already names its config: in flight, done, failed, or changed by hand since.

    A node whose label is right but whose advertised resources are not because of the strategy (the plugin
    refusing the layout under `single`) is settled: the strategy change is what fixes it, so it must not hold
    the strategy change back (nodestate says UNSETTLED, not CHANGED_BY_HAND)."""
    if _in_flight(node, config):
        return NodeStanding(Standing.IN_FLIGHT, config, holds_slot=True)
    cordoned = node.annotations.get(CORDONED_ANNOTATION) == "true"
    if node.mig_config_state == MigConfigState.SUCCESS and cordoned:
        return NodeStanding(Standing.SUCCEEDED, config)
    if node.mig_config_state == MigConfigState.FAILED:
        # Retry (through the alias: mig-manager only acts on a new value) once no pod holds a GPU device on
        # the node any more, e.g. after a drain; at most every FAILED_RETRY_AFTER so a config that cannot
        # apply is not hammered.
        idle = not blocking_pods(inputs.pods(node.name), None)
        if idle and not _failed_recently(node, config, inputs.now):
            return NodeStanding(Standing.WANTED, migparted.alias_name(config))
        if cordoned:
            return NodeStanding(Standing.IN_FLIGHT, config, holds_slot=True)  # cordoned until it succeeds
        return NodeStanding(Standing.FAILED_WAITING, config)
    expected = expected_resources(inputs.desired.nodes[node.name], inputs.desired.cluster.mig_strategy)
    if nodestate.classify(node, expected, inputs.ready) is Geometry.CHANGED_BY_HAND:
        # mig-manager believes the config applied but the GPUs differ (cut by hand, reset) while the strategy
        # is settled and the plugin Ready (reconciler.logic.drift.nodestate): point the label at an alias of the
        # same layout so mig-manager applies it again.
        return NodeStanding(Standing.WANTED, migparted.alias_name(config))
    return NodeStanding(Standing.SETTLED, config)


def _standing_change(node: ObservedNode, s: NodeStanding, writer: str | None = None) -> Change | None:
    """What a node's standing alone writes or reports: migplan's cordon lifted, or the malformed node held."""
    if s.standing is Standing.OTHER_WRITER:
        if writer is None:
            return None  # declared another writer's in the inventory: nothing to write, nothing held
        code = thirdparty.conflict_code(writer)
        return _relabel_hold(node, s.config)(
            f"held: {writer} writes this node's MIG layout; migplan writes nothing there ({code})", code=code
        )
    if s.standing is Standing.SUCCEEDED:
        return after_success(node)
    if s.standing is Standing.UNREADABLE:
        return _relabel_hold(node, s.config)("held: a value migplan reads on the node is malformed (MP530, MP547)")
    return None


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


# --- pass 2: a wanted node's relabel ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Impact:
    """What the relabel of a node destroys, as far as this plan can tell."""

    reapply: bool  # the label goes to the alias of the config it names: mig-manager applies the same layout again
    destroyed: frozenset[str] | None  # resources whose partitions are lost; None = unknown (all)
    gpus: frozenset[int] | None  # GPUs whose partitions are lost; None = unknown (all)
    # What mig-manager really does to the node (whole GPUs, resets, GPU clients stopped), not only the
    # partitions that differ: said in the change's reason.
    effect: str = _UNKNOWN_EFFECT
    # mig-manager may reboot the node for it (WITH_REBOOT and a mode step that may run and fail): every pod a
    # reboot ends (ObservedState.node_pods) is disrupted, GPU or not.
    reboot: bool = False

    @property
    def destroys_nothing(self) -> bool:
        return self.destroyed is not None and not self.destroyed


def wanted_changes(
    inputs: _Inputs, node: ObservedNode, want: NodeStanding, budget: Budget
) -> tuple[list[Change], tuple[str, ...]]:
    """The changes for a node that wants a relabel to `want.config`, and the re-apply alias the ConfigMap must
    carry for them (none, or that config). Takes a maxUnavailableNodes slot from `budget` when it starts a
    disruption the node does not hold a slot for yet."""
    config, settings = want.config, inputs.desired.cluster.apply
    held = _relabel_hold(node, config)
    unoffered = (
        inputs.unoffered[node.name]
        if node.name in inputs.unoffered
        else profilecheck.unoffered(inputs.desired.nodes[node.name], node.labels, load_catalog())
    )
    if unoffered is not None:
        # mig-parted would empty the GPUs it cannot cut and report success (MP564 says why): never label for it.
        return [held(f"held: {unoffered}", code="MP564")], ()
    stale = _stale_mig_manager(inputs, node)
    if stale is not None:
        # Its mig-manager would look `config` up in the other file and turn the node `failed` (MP567 says why).
        return [held(stale, code="MP567")], ()
    impact = _impact(inputs, node, config)
    propagating = _propagation_hold(inputs.desired, inputs.observed, config, inputs.previous, inputs.now)
    if impact.destroys_nothing and node.mig_config_state == MigConfigState.SUCCESS:
        # Same geometry under another config name (e.g. adopting a cluster whose ConfigMap used other names):
        # mig-manager's assert passes and it sets success without pausing anything (stack-facts §3.3 step 2),
        # so the relabel is not a disruption and does not count against maxUnavailableNodes.
        if propagating is not None:
            return [held(propagating)], ()
        reason = "relabel only: the node already carries this layout"
        return [_relabel(node, config, reason, inputs.now, ends_drain=False)], ()
    if _failed_recently(node, inputs.rendered.node_configs[node.name], inputs.now):
        minutes = int(FAILED_RETRY_AFTER.total_seconds() // 60)
        return [held(f"waiting: mig-manager failed less than {minutes} min ago")], ()
    pods = inputs.pods(node.name)
    now, silent_after = inputs.now, inputs.silent_after
    blockers = guard_holders(node, pods, impact.destroyed, impact.gpus, now=now, silent_after=silent_after)
    claimed = inputs.claimed.get(node.name)
    if claimed:
        # Pods holding a GPU of the change through a ResourceClaim request nothing the counts can see; the
        # claims name them even without a node observer (those the API still lists: the others are gone).
        obs = node.observation
        minors = {g.index: g.minor for g in obs.gpus if g.minor is not None} if obs is not None else {}
        listed = {p.key for p in pods}
        through_claims = draclaims.holders_on(draclaims.holds(claimed, minors), impact.gpus)
        blockers = tuple(sorted(set(blockers) | {k for k in through_claims if k in listed}))
    ends = inputs.observed.node_pods.get(node.name) if impact.reboot else None
    if ends is not None and ends.count:
        # A reboot ends every such pod, not only GPU holders: they are in the way too, and a drain evicts them.
        pods = _with_reboot_pods(pods, ends)
        blockers = tuple(sorted({*blockers, *ends.names, *ends.unreplicated_names}))
    if blockers and not settings.allow_disruption:
        if ends is not None and ends.count:
            reason = f"disruption guard: mig-manager may reboot the node: {ends.describe()} ({impact.effect})"
            return [held(reason, blocked_by=blockers, code="MP568")], ()
        reason = f"disruption guard: running pods hold partitions this change destroys ({impact.effect})"
        return [held(reason, blocked_by=blockers, code="MP519")], ()
    # A re-apply's alias is written to the ConfigMap now: it must reach mig-manager's file before a label names it.
    alias = (config,) if impact.reapply else ()
    if propagating is not None:
        return [held(propagating)], alias
    if not want.holds_slot and not budget.take():
        return [held(budget.full_reason)], ()
    if blockers:
        # allowDisruption: drain first; the relabel waits until no pod holds what it destroys (and, before a possible
        # reboot, until no pod a reboot ends is left: past the named ones, the next are named once these are gone).
        effect, note = impact.effect, ""
        if ends is not None and ends.count:
            effect, note = f"{effect}; may reboot: {ends.describe()}", f"; the node may reboot: {ends.describe()}"
        return drain_changes(
            inputs.desired, inputs.observed, node, config, pods, blockers, effect, now=inputs.now, hold=held, note=note
        ), ()
    reason = (
        "re-apply the node's layout (its GPUs differ from the config mig-manager applied)"
        if impact.reapply
        else f"apply the node's layout through mig-manager: {impact.effect}"
    )
    return [_relabel(node, config, reason, inputs.now)], alias


def _stale_mig_manager(inputs: _Inputs, node: ObservedNode) -> str | None:
    """Why the node's label must not change yet, or None: its mig-manager pod still reads another ConfigMap than
    migplan's (or generates its configs), as it does until the rolling update of the mig-manager DaemonSet that
    pointing spec.migManager.config.name at migplan's ConfigMap starts (gpu-operator `TransformMIGManager`; the
    DaemonSet rolls `maxUnavailable` nodes at a time, 1 by default) has reached the node. A label naming a config
    that file lacks fails (`assert --valid-config`) and, mig-manager acting once per value, stays failed. The new
    pod runs the node's current label, which migplan's ConfigMap carries. Agent mode labels no node for mig-manager."""
    if inputs.desired.cluster.apply.mode is ApplyMode.AGENT:
        return None
    source = inputs.observed.mig_manager_sources.get(node.name)
    want = inputs.desired.cluster.gpu_operator.mig_config_map
    if source is None or source == want:
        return None
    reads = f"ConfigMap {source}" if source else "configs generated from the hardware"
    return (
        f"waiting: this node's mig-manager pod still reads {reads}, not {want}; "
        "the mig-manager DaemonSet's rollout has not reached it yet (MP567)"
    )


def _impact(inputs: _Inputs, node: ObservedNode, config: str) -> _Impact:
    """What relabelling the node to `config` destroys.

    What the GPUs really hold is unknown when they differ from the config they carry: for a node relabelled to
    another config, when it advertises other counts than that config gives while nothing else explains it
    (reconciler.logic.drift.nodestate: changed behind mig-manager's back). For a re-apply it is unknown by
    definition."""
    spec = inputs.desired.nodes[node.name]
    reapply = config.endswith(migparted.ALIAS_SUFFIX) and node.mig_config == inputs.rendered.node_configs[node.name]
    # Where the observer reports, the GPUs' own layout is the previous one (item 6 of issue 26), re-apply or not.
    measured = observed_layouts(node, [g.index for g in spec.gpus], now=inputs.now, silent_after=inputs.silent_after)
    if measured is not None:
        found = node_disruption(node, spec, inputs.previous, now=inputs.now, silent_after=inputs.silent_after)
        if found is not None:
            what, lost, _ = found
            return _with_host_effects(inputs, _Impact(reapply, lost, what.gpus, what.describe()), what)
    found = None if reapply else node_disruption(node, spec, inputs.previous, label_only=True)
    if found is not None:
        what, lost, old = found
        advertised = disruption.advertised(old, inputs.desired.cluster.mig_strategy.value)
        if nodestate.classify(node, advertised, inputs.ready) is Geometry.CHANGED_BY_HAND:
            # The label's config is not what the GPUs hold: unknown, a mode flip included.
            return _with_host_effects(inputs, _Impact(reapply, None, None), None)
        return _with_host_effects(inputs, _Impact(reapply, lost, what.gpus, what.describe()), what)
    if not reapply and converged(spec, node, inputs.desired.cluster.mig_strategy):
        # The config the label names is unknown (set by hand, or not in our ConfigMap), but the node advertises
        # exactly its plan: mig-manager's assert will pass and nothing is destroyed. (Counts can hide a
        # different per-GPU split; NVML still refuses to destroy an instance a process uses, stack-facts §6.)
        return _Impact(reapply, frozenset(), None)
    return _with_host_effects(inputs, _Impact(reapply, None, None), None)


def _with_host_effects(inputs: _Inputs, impact: _Impact, what: disruption.NodeDisruption | None) -> _Impact:
    """The impact with what mig-manager does to the host around a MIG mode change (disruption.host_effects): a
    possible reboot counts every GPU of the node as lost (the guard then names every pod holding one) and every
    pod a reboot ends. `what` None: the previous layout is unknown, so a mode flip cannot be ruled out."""
    host = hosteffects.mig_manager_host(inputs.observed, inputs.desired.cluster.apply.mode)
    effects = disruption.host_effects(what, **host.flags()) if host is not None else ()
    if not effects or host is None:
        return impact
    effect = "; ".join((impact.effect, *effects))
    if host.with_reboot:
        return _Impact(impact.reapply, None, None, effect, reboot=True)
    return _Impact(impact.reapply, impact.destroyed, impact.gpus, effect)


def _with_reboot_pods(pods: tuple[ObservedPod, ...], ends: NodePods) -> tuple[ObservedPod, ...]:
    """The node's GPU pods and the pods a reboot ends, once each (a GPU pod keeps its full observation)."""
    known = {p.key for p in pods}
    extra = {p.key: p for p in (*ends.pods, *ends.unreplicated) if p.key not in known}
    return (*pods, *(extra[k] for k in sorted(extra)))


def _propagation_hold(
    desired: DesiredState, observed: ObservedState, config: str, previous: PreviousConfigs | None, now: datetime
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


# --- the changes ------------------------------------------------------------------------------------


def _label_patch(config: str, stamp: str) -> dict[str, Any]:
    return {"metadata": {"labels": {MIG_CONFIG_LABEL: config}, "annotations": {REQUESTED_AT_ANNOTATION: stamp}}}


def _relabel(node: ObservedNode, config: str, reason: str, now: datetime, *, ends_drain: bool = True) -> Change:
    """The relabel that makes mig-manager apply the node's layout (or re-apply it, through the alias).
    `ends_drain`: the drain marks go with it (the drain, if any, is over); a relabel only changes no GPU and
    leaves them as they are."""
    patch = _label_patch(config, rfc3339(now))
    if ends_drain:
        patch["metadata"]["annotations"].update(drain.end_marks(node))
    return Change(
        f"node/{node.name}",
        Action.CONFIGURE,
        Kind.NODE_MIG_CONFIG,
        {MIG_CONFIG_LABEL: node.mig_config},
        {MIG_CONFIG_LABEL: config},
        reason,
        patch=patch,
    )


def _relabel_hold(node: ObservedNode, config: str) -> Hold:
    """The node's relabel to `config`, held back this cycle with the reason the report shows."""

    def held(reason: str, *, blocked_by: tuple[str, ...] = (), code: str = "", pdbs: tuple[str, ...] = ()) -> Change:
        return Change(
            f"node/{node.name}",
            Action.SKIP,
            Kind.NODE_MIG_CONFIG,
            {MIG_CONFIG_LABEL: node.mig_config},
            {MIG_CONFIG_LABEL: config},
            reason,
            blocked_by=blocked_by,
            code=code,
            pdbs=pdbs,
        )

    return held
