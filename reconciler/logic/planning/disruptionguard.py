"""The disruption guard's questions, for both apply modes: what a node's change destroys, and which pods hold
it. Pure.

What mig-manager destroys is the mig-parted model (reconciler/logic/planning/disruption.py, from mig-parted's
ApplyMigMode / ApplyMigConfig), from the config the node's label names to its plan; the agent's model lives in
reconciler/logic/planning/agentdrain.py. Who holds it: the node observer's per-GPU holders where it reports them
(reconciler/logic/observe/observation.py), otherwise the pods whose requests name a destroyed resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from reconciler.logic.codecs import migparted
from reconciler.logic.drift import nodestate
from reconciler.logic.observe import observation
from reconciler.logic.observe.occupancy import expected_resources
from reconciler.logic.planning import disruption
from reconciler.model.inventory import MigStrategy, NodeSpec
from reconciler.model.nodeobservation import SOURCE_OK
from reconciler.model.observed import GPU_RESOURCE, ObservedNode, ObservedPod, ObservedState, is_gpu_resource

PreviousConfigs = Mapping[str, tuple[migparted.ConfigEntry, ...]]


def previous_configs(observed: ObservedState) -> PreviousConfigs | None:
    """The configs of the observed mig-parted ConfigMap (what a node's label names); None when absent or
    unreadable (then every node's previous layout is unknown)."""
    cm = observed.mig_config_map
    if cm is None or migparted.CONFIG_KEY not in cm.data:
        return None
    try:
        return migparted.parse_strict(cm.data[migparted.CONFIG_KEY])
    except migparted.MigPartedFormatError:
        return None


def node_disruption(
    node: ObservedNode,
    spec: NodeSpec,
    previous: PreviousConfigs | None,
    *,
    now: datetime | None = None,
    silent_after: timedelta = observation.SILENT_AFTER,
    label_only: bool = False,
) -> tuple[disruption.NodeDisruption, frozenset[str], Mapping[int, migparted.GpuLayout]] | None:
    """What mig-manager destroys when the node moves from the layout its GPUs hold to its plan, the
    resources that loses, and the previous per-GPU layout; None = unknown (assume everything).

    The mig-parted model (reconciler/logic/planning/disruption.py, from mig-parted's ApplyMigMode / ApplyMigConfig):
    a re-cut replaces every partition of that GPU; a MIG mode change on any GPU clears every MIG GPU of
    the node and may reset all of them. The previous layout is what the GPUs hold where the node's observer
    reports it (mig-parted compares `GetMigConfig`, the GPUs' state, with the config, not the previous label:
    `pkg/mig/reconfigure` `isConfigAlreadyApplied`, `assert`), so a half-applied or hand-made state is judged on
    what is there; elsewhere (or with `label_only`) the config the node's current label names, read from the
    observed ConfigMap.
    """
    indexes = [g.index for g in spec.gpus]
    old: Mapping[int, migparted.GpuLayout] | None = (
        None if label_only else observed_layouts(node, indexes, now=now, silent_after=silent_after)
    )
    if old is None:
        if previous is None or node.mig_config is None or node.mig_config not in previous:
            return None
        old = migparted.layouts_of(previous[node.mig_config], indexes)
    if old is None:
        return None
    what = disruption.mig_parted(old, dict(migparted.node_layout(spec)))
    return what, disruption.lost_resources(old, what), old


def observed_layouts(
    node: ObservedNode, indexes: list[int], *, now: datetime | None, silent_after: timedelta = observation.SILENT_AFTER
) -> dict[int, migparted.GpuLayout] | None:
    """The layout the node's observer measured on each of `indexes`, as mig-parted counts it (MIG mode and
    profile counts); None when the observation is not used (absent, silent, truncated, NVML unread), misses one of
    those GPUs, has a MIG mode change pending, or a profile migplan cannot name or a compute-instance split."""
    obs = node.observation
    if obs is None or obs.truncated or not observation.usable(node, now=now, silent_after=silent_after):
        return None
    if obs.sources.get("nvml", SOURCE_OK) != SOURCE_OK:
        return None
    by_index = {g.index: g for g in obs.gpus}
    out: dict[int, migparted.GpuLayout] = {}
    for i in indexes:
        g = by_index.get(i)
        if g is None or g.mig_current != g.mig_pending:
            return None
        if not g.mig_current:
            out[i] = migparted.GpuLayout(mig_enabled=False)
            continue
        counts: dict[str, int] = {}
        for inst in g.instances:
            if inst.profile.startswith("profile-id:") or len(inst.compute_uuids) > 1:
                return None
            counts[inst.profile] = counts.get(inst.profile, 0) + 1
        out[i] = migparted.GpuLayout(mig_enabled=True, devices=tuple(sorted(counts.items())))
    return out


def destroyed_resources(node: ObservedNode, spec: NodeSpec, previous: PreviousConfigs | None) -> frozenset[str] | None:
    """Resources whose partitions the node's change would destroy; None = unknown (assume all)."""
    found = node_disruption(node, spec, previous)
    return None if found is None else found[1]


def converged(spec: NodeSpec, node: ObservedNode, strategy: MigStrategy) -> bool:
    """The node advertises exactly what its plan gives under the strategy (counts only: they can hide another
    per-GPU split)."""
    return nodestate.advertises(node, expected_resources(spec, strategy))


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

    With the node's observer reporting its holders (reconciler.logic.observe.observation), it reasons per GPU: a pod
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
    """The running pods whose GPU requests name a resource in `destroyed` (None: unknown, every GPU resource;
    a whole-GPU request is in the way of any destruction)."""
    out = []
    for p in pods:
        if not p.holds_devices:
            continue
        held = {r for r, n in p.requested().items() if n > 0 and is_gpu_resource(r)}
        if held and (destroyed is None or held & destroyed or (GPU_RESOURCE in held and destroyed)):
            out.append(p.key)
    return tuple(sorted(out))
