"""What a merge would change: the partition-level difference between two desired states.

Pure: `diff_states(before, after) -> RevisionDiff`; no Git, no cluster. This is the merge-request
view of `migplan plan --from A --to B`: per node and GPU, which partitions would be created,
destroyed, moved to another placement, or handed to another owner.

What a change really destroys depends on what applies it (reconciler/logic/planning/disruption.py): migplan's
node agent (apply.mode agent) destroys only the partitions listed as destroyed or moved; the GPU
Operator's mig-manager (apply.mode gpu-operator) replaces every partition of a GPU whose counts change
and clears every MIG GPU of the node when a GPU's MIG mode changes. `disruptions()` says which, per
node and GPU, and which pods that takes.

Matching, per GPU (same node name and GPU index): a partition is identified by its profile and
placement (the start slice the solver or the author fixed). Pairs with the same profile and
placement are unchanged or have an owner change; left-overs with the same profile and owner are a
move (destroy + create on the node, shown as one line because that is how a reviewer thinks of
it); the rest are destroyed or created. A GPU whose model changed, or whose MIG mode is switched,
is rebuilt: everything on it is destroyed and created.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.logic.codecs import migparted
from reconciler.logic.observe import claimoccupancy, draclaims, hosteffects, observation, occupancy
from reconciler.logic.planning import disruption
from reconciler.model.inventory import DesiredState, GpuSpec, LayoutSpec, MigStrategy, NodeSpec, Placement
from reconciler.model.observed import GPU_RESOURCE, NodePods, ObservedPod, ObservedState, is_gpu_resource
from reconciler.model.revisions import Revision


class ChangeKind(enum.StrEnum):
    CREATE = "create"
    DESTROY = "destroy"
    MOVE = "move"
    OWNER = "owner"  # same partition, new owner


@dataclass(frozen=True, slots=True)
class PartitionChange:
    node: str
    gpu: int
    kind: ChangeKind
    profile: str
    before: Placement | None = None
    after: Placement | None = None
    owner_before: str | None = None
    owner_after: str | None = None
    # position of the partition in the base GpuSpec.partitions (None for a create); it is how
    # occupancy names a partition, so the pods holding it can be found
    position: int | None = None

    @property
    def disruptive(self) -> bool:
        """Destroying or moving a partition takes it from whoever holds it; a new owner does not."""
        return self.kind in (ChangeKind.DESTROY, ChangeKind.MOVE)


@dataclass(frozen=True, slots=True)
class GpuNote:
    node: str
    gpu: int
    message: str  # "model A100-40GB -> H100-80GB: rebuilt", "MIG enabled", "GPU added", ...


@dataclass(frozen=True, slots=True)
class LayoutChange:
    """A layouts/<name>.yaml whose content changed (or that appeared or went), and the nodes using it."""

    name: str
    nodes: tuple[str, ...]  # nodes with a GPU on this layout, in either revision
    gpus: int  # how many GPUs use it (in either revision)
    what: str  # "changed" | "added" | "removed"


@dataclass(frozen=True, slots=True)
class RevisionDiff:
    before: Revision
    after: Revision
    changes: tuple[PartitionChange, ...]  # sorted by node, GPU, kind order, placement
    notes: tuple[GpuNote, ...] = ()
    nodes_added: tuple[str, ...] = ()
    # Removed from the inventory: reconcile plans only the inventory's nodes, so migplan stops managing
    # them and destroys nothing there (the drift report then lists them as Undocumented, MP511).
    nodes_removed: tuple[str, ...] = ()
    cluster_notes: tuple[str, ...] = ()  # strategy or apply-mode changes
    # (old name, new name): a node file renamed with the same GPUs, partitions, placements and owners
    renamed: tuple[tuple[str, str], ...] = ()
    layouts: tuple[LayoutChange, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.changes
            or self.notes
            or self.nodes_added
            or self.nodes_removed
            or self.cluster_notes
            or self.renamed
            or self.layouts
        )

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for c in self.changes if c.kind is kind)

    @property
    def gpus_touched(self) -> int:
        return len({(c.node, c.gpu) for c in self.changes} | {(n.node, n.gpu) for n in self.notes})


# (profile, placement or None, owner, position in GpuSpec.partitions) for each partition of a GPU
_Item = tuple[str, Placement | None, str | None, int]


def _items(gpu: GpuSpec | None) -> list[_Item]:
    if gpu is None or not gpu.mig_enabled:
        return []
    placements: list[Placement | None] = list(gpu.placements) or [None] * len(gpu.partitions)
    if len(placements) != len(gpu.partitions):  # solver result missing: fall back to what was written
        placements = [None] * len(gpu.partitions)
    return [(p.profile, pl, p.owner, i) for i, (p, pl) in enumerate(zip(gpu.partitions, placements, strict=True))]


def _diff_gpu(
    node: str, index: int, old: GpuSpec | None, new: GpuSpec | None
) -> tuple[list[PartitionChange], list[GpuNote]]:
    notes: list[GpuNote] = []
    if old is None and new is not None:
        notes.append(GpuNote(node, index, f"GPU added ({new.model})"))
    elif new is None and old is not None:
        notes.append(GpuNote(node, index, f"GPU removed ({old.model})"))
    elif old is not None and new is not None:
        if old.model != new.model:
            notes.append(GpuNote(node, index, f"model {old.model} -> {new.model}: every partition is rebuilt"))
            return _rebuild(node, index, old, new), notes
        if old.mig_enabled != new.mig_enabled:
            notes.append(GpuNote(node, index, "MIG enabled" if new.mig_enabled else "MIG disabled"))
    before, after = _items(old), _items(new)
    changes: list[PartitionChange] = []
    # 1. same profile and placement: unchanged, or an owner change
    rest_after: list[_Item] = []
    for item in after:
        match = next((b for b in before if b[0] == item[0] and b[1] == item[1]), None)
        if match is None:
            rest_after.append(item)
            continue
        before.remove(match)
        if match[2] != item[2]:
            changes.append(
                PartitionChange(node, index, ChangeKind.OWNER, item[0], match[1], item[1], match[2], item[2], match[3])
            )
    # 2. same profile and owner elsewhere: a move
    created: list[_Item] = []
    for item in rest_after:
        match = next((b for b in before if b[0] == item[0] and b[2] == item[2]), None)
        if match is None:
            created.append(item)
            continue
        before.remove(match)
        changes.append(
            PartitionChange(node, index, ChangeKind.MOVE, item[0], match[1], item[1], match[2], item[2], match[3])
        )
    # 3. the rest
    changes += [PartitionChange(node, index, ChangeKind.DESTROY, b[0], b[1], None, b[2], None, b[3]) for b in before]
    changes += [PartitionChange(node, index, ChangeKind.CREATE, a[0], None, a[1], None, a[2]) for a in created]
    return changes, notes


def _rebuild(node: str, index: int, old: GpuSpec, new: GpuSpec) -> list[PartitionChange]:
    out = [PartitionChange(node, index, ChangeKind.DESTROY, p, pl, None, o, None, i) for p, pl, o, i in _items(old)]
    out += [PartitionChange(node, index, ChangeKind.CREATE, p, None, pl, None, o) for p, pl, o, _i in _items(new)]
    return out


_ORDER = {ChangeKind.DESTROY: 0, ChangeKind.MOVE: 1, ChangeKind.OWNER: 2, ChangeKind.CREATE: 3}


def _sort_key(c: PartitionChange) -> tuple[str, int, int, int, str]:
    where = c.after or c.before
    return (c.node, c.gpu, _ORDER[c.kind], where.start if where else -1, c.profile)


def _shape(node: NodeSpec) -> tuple[object, ...]:
    """What a node's GPUs are cut into, without its name or where it was written (to tell a rename)."""
    return tuple(
        (g.index, g.model, g.mig_enabled, tuple((p.profile, p.owner) for p in g.partitions), g.placements, g.layout)
        for g in sorted(node.gpus, key=lambda g: g.index)
    )


def renames(before: DesiredState, after: DesiredState) -> tuple[tuple[str, str], ...]:
    """Nodes removed and added with the very same GPUs and partitions, paired in name order: a rename."""
    removed = sorted(set(before.nodes) - set(after.nodes))
    added = sorted(set(after.nodes) - set(before.nodes))
    by_shape: dict[tuple[object, ...], list[str]] = {}
    for name in added:
        by_shape.setdefault(_shape(after.nodes[name]), []).append(name)
    out: list[tuple[str, str]] = []
    for name in removed:
        candidates = by_shape.get(_shape(before.nodes[name]))
        if candidates:
            out.append((name, candidates.pop(0)))
    return tuple(out)


def _layout_key(spec: LayoutSpec) -> tuple[object, ...]:
    return (spec.mig_enabled, spec.model, tuple((p.profile, p.placement, p.owner, p.purpose) for p in spec.partitions))


def layout_changes(before: DesiredState, after: DesiredState) -> tuple[LayoutChange, ...]:
    """Each layout whose content differs between the revisions, with the nodes that use it."""
    out: list[LayoutChange] = []
    for name in sorted(set(before.layouts) | set(after.layouts)):
        old, new = before.layouts.get(name), after.layouts.get(name)
        if old is not None and new is not None and _layout_key(old) == _layout_key(new):
            continue
        users = {
            (n.name, g.index)
            for state in (before, after)
            for n in state.nodes.values()
            for g in n.gpus
            if g.layout == name
        }
        what = "added" if old is None else "removed" if new is None else "changed"
        out.append(LayoutChange(name, tuple(sorted({n for n, _ in users})), len(users), what))
    return tuple(out)


def diff_states(before: DesiredState, after: DesiredState) -> RevisionDiff:
    """The partition-level difference. A node removed from the inventory changes nothing on the node
    (listed in nodes_removed only); a node renamed with the same cut is one rename, not a destroy and a
    create; a node added has its partitions created."""
    changes: list[PartitionChange] = []
    notes: list[GpuNote] = []
    renamed = renames(before, after)
    old_names, new_names = {a for a, _ in renamed}, {b for _, b in renamed}
    for name in sorted(set(before.nodes) | set(after.nodes)):
        if name in old_names or name in new_names or name not in after.nodes:
            continue
        old, new = before.nodes.get(name), after.nodes.get(name)
        indexes: Iterable[int] = sorted(
            {g.index for g in (old.gpus if old else ())} | {g.index for g in (new.gpus if new else ())}
        )
        for index in indexes:
            c, n = _diff_gpu(name, index, old.gpu(index) if old else None, new.gpu(index) if new else None)
            changes += c
            notes += n
    cluster_notes: list[str] = []
    if before.cluster.mig_strategy != after.cluster.mig_strategy:
        cluster_notes.append(
            f"migStrategy {before.cluster.mig_strategy.value} -> {after.cluster.mig_strategy.value}: "
            "the device plugin is restarted"
        )
    if before.cluster.apply.mode != after.cluster.apply.mode:
        cluster_notes.append(f"apply.mode {before.cluster.apply.mode.value} -> {after.cluster.apply.mode.value}")
    return RevisionDiff(
        before=before.revision,
        after=after.revision,
        changes=tuple(sorted(changes, key=_sort_key)),
        # a whole node added or removed is said once, not once per GPU
        notes=tuple(n for n in notes if n.node in before.nodes and n.node in after.nodes),
        nodes_added=tuple(sorted(set(after.nodes) - set(before.nodes) - new_names)),
        nodes_removed=tuple(sorted(set(before.nodes) - set(after.nodes) - old_names)),
        cluster_notes=tuple(cluster_notes),
        renamed=renamed,
        layouts=layout_changes(before, after),
    )


def _observed_join(
    name: str, plan: NodeSpec, observed: ObservedState | None, now: datetime | None
) -> observation.NodeJoin | None:
    """The node observer's report set against the base plan, when it is recent and names the holders."""
    node = observed.nodes.get(name) if observed is not None else None
    if node is None or node.observation is None or not observation.usable(node, now=now):
        return None
    if not node.observation.holders_known:
        return None
    return observation.join(name, plan, node.observation)


def disrupted_pods(
    diff: RevisionDiff, base: DesiredState, observed: ObservedState, now: datetime | None = None
) -> dict[int, tuple[str, ...]]:
    """For each disruptive change (index into diff.changes), the pods that hold that partition now (_holders)."""
    return _holders(diff, base, observed, now, lambda c: c.disruptive)


def owner_change_holders(
    diff: RevisionDiff, base: DesiredState, observed: ObservedState, now: datetime | None = None
) -> dict[int, tuple[str, ...]]:
    """For each owner change, the pods that hold that partition now: a new owner re-cuts nothing, so those pods
    keep the device until they end, and the new owner's pods cannot have it before (_holders)."""
    return _holders(diff, base, observed, now, lambda c: c.kind is ChangeKind.OWNER)


def _holders(
    diff: RevisionDiff,
    base: DesiredState,
    observed: ObservedState,
    now: datetime | None,
    wanted: Callable[[PartitionChange], bool],
) -> dict[int, tuple[str, ...]]:
    """For each wanted change (index into diff.changes), the pods that hold that partition now.

    Where the node's observer reports holders (reconciler.logic.observe.observation), they are the kubelet's: the
    pods allocated the real partition the plan's one was matched to (none when the GPU lacks it).

    Which pod holds which partition comes from occupancy's assignment over the *base* plan (the one
    the cluster is running): owners' pods first, then unowned partitions. Under a `single` (or
    `none`) strategy pods cannot be told apart, so every GPU pod on the node is named. Pure.
    """
    pods = observed.pods_by_node()
    mixed = base.cluster.mig_strategy is MigStrategy.MIXED
    assignments: dict[str, Mapping[tuple[int, int], str]] = {}
    out: dict[int, tuple[str, ...]] = {}
    for i, change in enumerate(diff.changes):
        node_spec = base.nodes.get(change.node)
        if not wanted(change) or change.position is None or node_spec is None:
            continue
        on_node = pods.get(change.node, ())
        joined = _observed_join(change.node, node_spec, observed, now)
        if joined is not None:
            gpu = joined.gpu(change.gpu)
            inst = gpu.holder_at(change.position) if gpu is not None else None
            if inst is not None and inst.holders:
                out[i] = inst.holders
            continue
        through_claim = _claim_assignment(node_spec, base.cluster.mig_strategy, observed).get(
            (change.gpu, change.position)
        )
        if through_claim is not None:  # a ResourceClaim allocated this very partition: the API server's word
            out[i] = (through_claim,)
            continue
        if not mixed:
            # Every MIG device is a plain nvidia.com/gpu: nothing says which pod has which partition.
            held = tuple(sorted(p.key for p in on_node if p.holds_devices and _holds_gpu(p)))
            if held:
                out[i] = held
            continue
        if change.node not in assignments:
            assignments[change.node] = occupancy.node_occupancy(
                node=change.node,
                plan=node_spec,
                strategy=base.cluster.mig_strategy,
                pods=on_node,
                observed=observed.nodes.get(change.node),
            ).assignment
        holder = assignments[change.node].get((change.gpu, change.position))
        if holder is not None:
            out[i] = (holder,)
    return out


def _holds_gpu(pod: ObservedPod) -> bool:
    return any(n > 0 and is_gpu_resource(r) for r, n in pod.requested().items())


@dataclass(frozen=True, slots=True)
class GpuDisruption:
    """A GPU whose partitions the change destroys under the mig-parted model (all of them), and why."""

    node: str
    gpu: int
    reason: str
    pods: tuple[str, ...] = ()  # pods holding a device of this GPU now (with a cluster to ask)


@dataclass(frozen=True, slots=True)
class HostEffect:
    """What mig-manager does to a node's host for a change that flips a MIG mode (reconciler/logic/planning/
    disruption.py host_effects): a possible reboot under WITH_REBOOT, the kubelet stopped under a host driver."""

    node: str
    reboot: NodePods | None = None  # WITH_REBOOT: the pods a reboot ends (None: the node does not reboot for it)
    not_ready: bool = False  # a host driver: the kubelet is stopped, the node NotReady for a window


@dataclass(frozen=True, slots=True)
class Disruptions:
    """What merging destroys under the disruption model of the target's apply mode."""

    model: disruption.Model
    by_change: Mapping[int, tuple[str, ...]]  # index into diff.changes -> pods holding that partition
    gpus: tuple[GpuDisruption, ...] = ()  # mig-parted: every GPU whose partitions are all replaced
    clients_paused: tuple[str, ...] = ()  # mig-parted: nodes whose GPU clients mig-manager stops
    # mig-parted: (node, GPU) whose partitions move but whose counts stay: mig-parted leaves them as they are
    not_applied: tuple[tuple[str, int], ...] = ()
    observed: bool = False  # pods were looked up in a cluster
    # owner changes (index into diff.changes) whose partition a pod holds now: it keeps it until it ends
    owner_held: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    # mig-parted: nodes whose change makes mig-manager reboot them (if the mode step fails) or stop their kubelet
    host: tuple[HostEffect, ...] = ()

    @property
    def pods(self) -> frozenset[str]:
        out = {p for pods in self.by_change.values() for p in pods}
        out |= {p for g in self.gpus for p in g.pods}
        return frozenset(out)


def _layouts(node: NodeSpec) -> dict[int, migparted.GpuLayout]:
    return dict(migparted.node_layout(node))


def disruptions(
    diff: RevisionDiff,
    base: DesiredState,
    target: DesiredState,
    observed: ObservedState | None,
    now: datetime | None = None,
) -> Disruptions:
    """The pods and GPUs the merge disrupts, by the model of the target's apply mode. Pure.

    nvml (agent): the partitions destroyed or moved, as `disrupted_pods`. mig-parted (gpu-operator,
    report-only): per node present in both revisions, the GPUs mig-parted rebuilds (the whole GPU when its
    counts change; every GPU of the node when any GPU's MIG mode changes), the pods on them, and the nodes
    whose GPU clients mig-manager stops. A move that keeps a GPU's counts is not applied by mig-parted at
    all (its v1 format has no placements), so it disrupts nobody there.
    """
    model = disruption.model_for(target.cluster.apply.mode)
    still_held = owner_change_holders(diff, base, observed, now) if observed is not None else {}
    if model is disruption.Model.NVML:
        finer = disrupted_pods(diff, base, observed, now) if observed is not None else {}
        return Disruptions(model=model, by_change=finer, observed=observed is not None, owner_held=still_held)
    pods = observed.pods_by_node() if observed is not None else {}
    mixed = base.cluster.mig_strategy is MigStrategy.MIXED
    host = hosteffects.mig_manager_host(observed, target.cluster.apply.mode) if observed is not None else None
    hosts: list[HostEffect] = []
    gpus: list[GpuDisruption] = []
    paused: list[str] = []
    by_change: dict[int, tuple[str, ...]] = {}
    rebuilt: dict[str, frozenset[int]] = {}
    assignments: dict[str, Mapping[tuple[int, int], str] | None] = {}
    for name in sorted(set(base.nodes) & set(target.nodes)):
        old_plan = base.nodes[name]
        what = disruption.mig_parted(_layouts(old_plan), _layouts(target.nodes[name]))
        if what.none:
            continue
        if what.clients_paused:
            paused.append(name)
        if observed is not None and host is not None and disruption.host_effects(what, **host.flags()):
            # A reboot ends the pods the cluster (or the report) counts for the node; the kubelet stop ends none.
            ends = observed.node_pods.get(name, NodePods()) if host.with_reboot else None
            hosts.append(HostEffect(name, ends, host.host_driver))
        rebuilt[name] = what.gpus
        on_node = pods.get(name, ())
        assignments[name] = _assignment(old_plan, on_node, observed) if mixed else None
        joined = _observed_join(name, old_plan, observed, now)
        if joined is not None:  # the kubelet's word: who holds a device of each GPU
            assignments[name] = {
                (g.index, inst.position): ", ".join(inst.holders)
                for g in joined.gpus
                for inst in g.instances
                if inst.position is not None and inst.holders
            }
            holders = {g.index: set(joined.holders_on([g.index])) for g in joined.gpus}
        else:
            holders = _holders_per_gpu(old_plan, on_node, assignments[name])
            for gpu_index, pod in _claim_holds(old_plan, observed):  # pods holding a device through a claim
                for g in old_plan.gpus if gpu_index is None else [g for g in old_plan.gpus if g.index == gpu_index]:
                    holders.setdefault(g.index, set()).add(pod)
        for index in sorted(what.gpus):
            gpus.append(GpuDisruption(name, index, what.describe(), tuple(sorted(holders.get(index, ())))))
    for i, change in enumerate(diff.changes):
        if change.position is None or change.gpu not in rebuilt.get(change.node, frozenset()):
            continue
        assignment = assignments[change.node]
        if assignment is None:  # not mixed: any GPU pod of the node may hold it
            held = tuple(sorted(p.key for p in pods.get(change.node, ()) if p.holds_devices and _holds_gpu(p)))
        else:
            holder = assignment.get((change.gpu, change.position))
            held = tuple(holder.split(", ")) if holder else ()
        if held:
            by_change[i] = held
    moved = {(c.node, c.gpu) for c in diff.changes if c.kind is ChangeKind.MOVE}
    kept = sorted(
        (n, g) for n, g in moved if n in base.nodes and n in target.nodes and g not in rebuilt.get(n, frozenset())
    )
    return Disruptions(
        model=model,
        by_change=by_change,
        gpus=tuple(gpus),
        clients_paused=tuple(paused),
        not_applied=tuple(kept),
        observed=observed is not None,
        owner_held=still_held,
        host=tuple(hosts),
    )


def _claimed(plan: NodeSpec, observed: ObservedState | None) -> tuple[list[tuple[str, str]], dict[int, int]]:
    """(device name, pod) of every claim allocated a device of NVIDIA's driver on the node, and the GPUs' minor
    numbers where its observer measured them (index -> minor)."""
    if observed is None or not observed.claims:
        return [], {}
    claimed = draclaims.by_node(observed.claims).get(plan.name, [])
    node = observed.nodes.get(plan.name)
    obs = node.observation if node is not None else None
    return claimed, ({g.index: g.minor for g in obs.gpus if g.minor is not None} if obs is not None else {})


def _claim_assignment(
    plan: NodeSpec, strategy: MigStrategy, observed: ObservedState | None
) -> Mapping[tuple[int, int], str]:
    """(GPU, partition position) -> the pod a ResourceClaim allocated that planned partition to (no observer)."""
    claimed, minors = _claimed(plan, observed)
    if not claimed:
        return {}
    empty = occupancy.NodeOccupancy(node=plan.name, entries=(), assignment={})
    return claimoccupancy.with_claims(empty, plan, strategy, claimed, minors).assignment


def _claim_holds(plan: NodeSpec, observed: ObservedState | None) -> list[draclaims.ClaimHold]:
    """(GPU index or None for every GPU, pod) of each device a claim allocates on the node (no observer)."""
    claimed, minors = _claimed(plan, observed)
    return draclaims.holds(claimed, minors)


def _assignment(
    plan: NodeSpec, on_node: tuple[ObservedPod, ...], observed: ObservedState | None
) -> Mapping[tuple[int, int], str]:
    """(GPU, partition position) -> pod, as the drift report's occupancy infers it under mixed."""
    return occupancy.node_occupancy(
        node=plan.name,
        plan=plan,
        strategy=MigStrategy.MIXED,
        pods=on_node,
        observed=observed.nodes.get(plan.name) if observed is not None else None,
    ).assignment


def _holders_per_gpu(
    plan: NodeSpec, on_node: tuple[ObservedPod, ...], assignment: Mapping[tuple[int, int], str] | None
) -> dict[int, set[str]]:
    """GPU index -> pods holding a device of it (assignment None: not mixed). Under single/none, or for
    whole GPUs under mixed, nothing says which GPU a pod has, so every candidate pod is named."""
    holding = [p for p in on_node if p.holds_devices and _holds_gpu(p)]
    out: dict[int, set[str]] = {}
    if assignment is None:
        for g in plan.gpus:
            out[g.index] = {p.key for p in holding}
        return out
    for (gpu, _pos), pod in assignment.items():
        out.setdefault(gpu, set()).add(pod)
    whole = {p.key for p in holding if p.requested().get(GPU_RESOURCE, 0) > 0}
    for g in plan.gpus:
        if not g.mig_enabled and whole:
            out.setdefault(g.index, set()).update(whole)
    return out
