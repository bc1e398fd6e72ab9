"""Occupancy: per node and profile, partitions total/used/free and which pods hold them.

Pure. Totals come from the plan (what the node should advertise under the cluster's strategy),
usage from the pods bound to the node that have not finished. The device plugin does not say which
partition a pod got, so holders are matched to the inventory's partition *owners* by name: a pod
whose namespace, name, `app.kubernetes.io/name|instance`, `app` label or controlling owner
(ReplicaSet hash stripped) equals a partition's owner is that owner's pod. Unmatched pods fill
unowned partitions first, then any left. The result is the article's "monitor occupancy, and by
what", and the slice map of the report shows it per placement.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.logic.codecs import dpsharing
from reconciler.model.drift import Holder, Occupancy
from reconciler.model.inventory import MigStrategy, NodeSpec
from reconciler.model.observed import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    ObservedNode,
    ObservedPod,
    is_gpu_resource,
    requested_by,
)

if TYPE_CHECKING:
    from reconciler.logic.observe.observation import NodeJoin

_RS_HASH = re.compile(r"-[a-z0-9]{5,10}\Z")  # \Z, not $: never before a trailing newline


@functools.lru_cache(maxsize=4096)
def resource_of(profile: str) -> str:
    """The mixed-strategy extended resource of a profile ('+' becomes '.', stack-facts §1.3)."""
    return MIG_RESOURCE_PREFIX + profile.replace("+", ".")


# expected_resources is asked three times per node and cycle (occupancy, advertised findings, the
# planner's convergence check), on the same NodeSpec every cycle of a controller. Remembered by the
# identity of the node's GPU tuple, which the entry keeps alive (so its id cannot be reused while it
# is remembered): a new DesiredState simply misses. Bounded; cleared when full.
_EXPECTED: dict[tuple[int, MigStrategy], tuple[tuple[Any, ...], dict[str, int]]] = {}
_EXPECTED_LIMIT = 1 << 16


def expected_resources(node: NodeSpec, strategy: MigStrategy) -> dict[str, int]:
    """What the device plugin should advertise for this plan (stack-facts §1.3).

    none: every GPU is a whole nvidia.com/gpu. single: every MIG device is an nvidia.com/gpu (the
    plugin refuses a mixed layout; validation rejects that plan). mixed: one resource per profile,
    non-MIG GPUs stay nvidia.com/gpu, and nvidia.com/gpu is advertised as 0 when all GPUs use MIG.
    """
    key = (id(node.gpus), strategy)
    hit = _EXPECTED.get(key)
    if hit is not None and hit[0] is node.gpus:
        return dict(hit[1])
    out = _expected_resources(node, strategy)
    if len(_EXPECTED) >= _EXPECTED_LIMIT:
        _EXPECTED.clear()
    _EXPECTED[key] = (node.gpus, out)
    return dict(out)


def _expected_resources(node: NodeSpec, strategy: MigStrategy) -> dict[str, int]:
    if strategy is MigStrategy.NONE:
        return {GPU_RESOURCE: len(node.gpus)}
    whole = sum(1 for g in node.gpus if not g.mig_enabled)
    if strategy is MigStrategy.SINGLE:
        return {GPU_RESOURCE: whole + sum(len(g.partitions) for g in node.gpus if g.mig_enabled)}
    out: dict[str, int] = {GPU_RESOURCE: whole}
    for g in node.gpus:
        if g.mig_enabled:
            for p in g.partitions:
                r = resource_of(p.profile)
                out[r] = out.get(r, 0) + 1
    return out


def profile_label(resource: str, node: NodeSpec | None = None) -> str:
    """The profile name for a resource ('gpu' for whole GPUs), using the plan's spelling if it has one."""
    if resource == GPU_RESOURCE:
        return "gpu"
    if node is not None:
        for g in node.gpus:
            for p in g.partitions:
                if resource_of(p.profile) == resource:
                    return p.profile
    return resource.removeprefix(MIG_RESOURCE_PREFIX)


def _label(resource: str, plan: NodeSpec | None) -> str:
    """profile_label, keeping the `.shared` of a resource the device plugin renamed for sharing (`1g.18gb.shared`)."""
    base = dpsharing.profile_of(resource)
    return profile_label(base, plan) + resource[len(base) :]


_IDENTITY_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app")


def pod_identities(pod: ObservedPod) -> frozenset[str]:
    ids = {pod.namespace, pod.name, pod.key}
    for key in _IDENTITY_LABELS:
        if key in pod.labels:
            ids.add(pod.labels[key])
    if pod.owner is not None:
        ids.update(_owner_identities(pod.owner.kind, pod.owner.name))
    return frozenset(ids)


def _is_identity(pod: ObservedPod, name: str) -> bool:
    """`name in pod_identities(pod)`, without building the set: asked once per owner of a resource on the node."""
    if name == pod.namespace or name == pod.name or name == pod.key:
        return True
    labels = pod.labels
    for key in _IDENTITY_LABELS:
        if key in labels and labels[key] == name:
            return True
    return pod.owner is not None and name in _owner_identities(pod.owner.kind, pod.owner.name)


@functools.lru_cache(maxsize=1 << 12)
def _owner_identities(kind: str, name: str) -> tuple[str, ...]:
    """The owner's name, and a ReplicaSet's Deployment name (its pod-template-hash suffix cut): the same few
    owners come back for every pod of a fleet, so the cut is made once per owner (bounded cache)."""
    return (name, _RS_HASH.sub("", name)) if kind == "ReplicaSet" else (name,)


@dataclass(frozen=True, slots=True)
class NodeOccupancy:
    node: str
    entries: tuple[Occupancy, ...]
    # (gpu index, partition position in GpuSpec.partitions) -> pod namespace/name holding it
    assignment: Mapping[tuple[int, int], str]


# A controller's in-sync cycle sees the same NodeSpec (its DesiredState is kept until Git changes) and, through
# the kube adapter's parse memo (kubeobserve.ParseMemo), the same ObservedPod objects for pods that did not
# change: a planned node's occupancy is then remembered by the identity of those frozen inputs, one entry per
# NodeSpec (the last one computed). Each entry keeps its inputs alive, so an id is never reused while remembered;
# any changed pod, pod set, strategy or plan computes afresh. Bounded: cleared when it holds _MEMO_LIMIT entries
# (NodeSpecs of older revisions); a fleet larger than that only loses the memo, never correctness.
_MEMO: dict[int, tuple[NodeSpec, str, MigStrategy, tuple[ObservedPod, ...], NodeOccupancy]] = {}
_MEMO_LIMIT = 1 << 14


def node_occupancy(
    *,
    node: str,
    plan: NodeSpec | None,
    strategy: MigStrategy,
    pods: tuple[ObservedPod, ...],
    observed: ObservedNode | None = None,
    sharing: dpsharing.Sharing | None = None,
) -> NodeOccupancy:
    """Occupancy of one node. Without a plan (undocumented node) totals are what it advertises. With `sharing` (its
    device-plugin config shares its devices) totals are the plan's folded through it: replicas, under the names the
    plugin advertises (reconciler.logic.codecs.dpsharing). Pure: a planned node's result without sharing is
    remembered by its inputs' identity (see _MEMO)."""
    if plan is None or sharing is not None:
        return _node_occupancy(node=node, plan=plan, strategy=strategy, pods=pods, observed=observed, sharing=sharing)
    hit = _MEMO.get(id(plan))
    if (
        hit is not None
        and hit[0] is plan
        and hit[1] == node
        and hit[2] is strategy
        and len(hit[3]) == len(pods)
        and all(a is b for a, b in zip(hit[3], pods, strict=True))
    ):
        return hit[4]
    out = _node_occupancy(node=node, plan=plan, strategy=strategy, pods=pods, observed=observed)
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[id(plan)] = (plan, node, strategy, pods, out)
    return out


def _node_occupancy(
    *,
    node: str,
    plan: NodeSpec | None,
    strategy: MigStrategy,
    pods: tuple[ObservedPod, ...],
    observed: ObservedNode | None = None,
    sharing: dpsharing.Sharing | None = None,
) -> NodeOccupancy:
    if plan is not None:
        totals = expected_resources(plan, strategy)
        if sharing is not None:
            totals = dpsharing.fold(totals, sharing)
    elif observed is not None:
        totals = {k: v for k, v in observed.advertised_resources.items() if is_gpu_resource(k)}
    else:
        totals = {}
    holders: dict[str, list[tuple[ObservedPod, int]]] = {}
    for pod in sorted(pods, key=_KEY):
        if pod.node is None or pod.phase in _FINISHED:  # not pod.holds_devices, without two property calls a pod
            continue
        for res, n in requested_by(pod.containers).items():
            if n > 0 and is_gpu_resource(res):
                holders.setdefault(res, []).append((pod, n))
    assignment: dict[tuple[int, int], str] = {}
    owner_of: dict[tuple[str, str], str | None] = {}
    if plan is not None and strategy is MigStrategy.MIXED and holders:
        by_resource = _slots_by_resource(plan)
        for res, pod_list in holders.items():
            assignment.update(_assign(plan, res, pod_list, owner_of, by_resource.get(res, [])))
    entries = []
    for res in sorted(set(totals) | set(holders)):
        used = sum(n for _, n in holders.get(res, []))
        total = totals.get(res, 0)
        if total == 0 and used == 0:
            continue  # e.g. nvidia.com/gpu: 0 on an all-MIG node: nothing to show
        hs = tuple(Holder(pod=p.key, count=n, owner=owner_of.get((res, p.key))) for p, n in holders.get(res, []))
        entries.append(Occupancy(node=node, profile=_label(res, plan), total=total, used=used, holders=hs))
    return NodeOccupancy(node=node, entries=tuple(entries), assignment=assignment)


_KEY = operator.attrgetter("key")
_FINISHED = frozenset({"Succeeded", "Failed"})  # ObservedPod.active's phases, as a set


# The (gpu index, partition position) keys of an assignment: a fleet's nodes repeat the same few (8 GPUs x at most 7
# partitions) and a controller keeps every node's last occupancy (_MEMO), so each is one tuple for all the nodes, not
# one per held partition (some 140,000 at 5,000 nodes). Bounded: only small numbers are kept (a catalog GPU's).
_SLOTS: dict[tuple[int, int], tuple[int, int]] = {}
_SLOT_LIMIT = 64


def _slot(gpu: int, position: int) -> tuple[int, int]:
    key = (gpu, position)
    if type(gpu) is int and type(position) is int and 0 <= gpu < _SLOT_LIMIT and 0 <= position < _SLOT_LIMIT:
        return _SLOTS.setdefault(key, key)
    return key


def _slots_by_resource(plan: NodeSpec) -> dict[str, list[tuple[int, int, str | None]]]:
    """The partitions of each resource on the node's MIG GPUs, (gpu index, position, owner), in slot order (GPUs by
    index, partitions in plan order): one pass over the plan for all the resources its pods hold."""
    out: dict[str, list[tuple[int, int, str | None]]] = {}
    for g in sorted(plan.gpus, key=lambda g: g.index):
        if g.mig_enabled:
            for i, p in enumerate(g.partitions):
                out.setdefault(resource_of(p.profile), []).append((g.index, i, p.owner))
    return out


def _assign(
    plan: NodeSpec,
    resource: str,
    pods: list[tuple[ObservedPod, int]],
    owner_of: dict[tuple[str, str], str | None],
    slots: list[tuple[int, int, str | None]] | None = None,
) -> dict[tuple[int, int], str]:
    """Give each holding pod concrete partitions of `resource`: its owner's first, then unowned ones. `slots`: the
    plan's partitions of `resource` (_slots_by_resource), when the caller has them already."""
    if slots is None:
        slots = _slots_by_resource(plan).get(resource, [])
    taken: dict[tuple[int, int], str] = {}
    remaining: list[tuple[ObservedPod, int]] = []
    # The owned slots per owner, in slot order: a pod is matched against the few owners of this resource on the
    # node, not against every slot (a pod's identities usually name one owner, or none).
    by_owner: dict[str, list[tuple[int, int, str | None]]] = {}
    for s in slots:
        if s[2] is not None:
            by_owner.setdefault(s[2], []).append(s)
    # Per owner, how many of its first slots are taken (a slot once taken stays taken): a pod of that owner looks
    # from there on, not over every slot of the owner again.
    skip: dict[str, int] = {}
    for pod, n in pods:
        mine: list[tuple[int, int, str | None]] = []
        if by_owner:
            owners = [o for o in by_owner if _is_identity(pod, o)]
            if len(owners) == 1:
                own = by_owner[owners[0]]
                at = skip.get(owners[0], 0)
                while at < len(own) and (own[at][0], own[at][1]) in taken:
                    at += 1
                skip[owners[0]] = at
                for s in own[at:]:
                    if (s[0], s[1]) not in taken:
                        mine.append(s)
                        if len(mine) == n:
                            break
            elif owners:  # several owners' slots, interleaved in slot order
                mine = [s for s in slots if s[2] is not None and s[2] in owners and (s[0], s[1]) not in taken]
        for s in mine[:n]:
            taken[_slot(s[0], s[1])] = pod.key
            owner_of[(resource, pod.key)] = s[2]
        if len(mine) < n:
            remaining.append((pod, n - len(mine)))
    # The rest take free slots, unowned partitions first, each in slot order. Only this loop takes slots from here
    # on, in that very order, so the free ones are always after the last slot it took: one pass over the slots.
    order = [s for s in slots if s[2] is None] + [s for s in slots if s[2] is not None]
    at = 0
    for pod, n in remaining:
        got = 0
        while got < n and at < len(order):
            s = order[at]
            at += 1
            if (s[0], s[1]) not in taken:
                taken[_slot(s[0], s[1])] = pod.key
                got += 1
    return taken


def observed_occupancy(
    *,
    node: str,
    plan: NodeSpec | None,
    strategy: MigStrategy,
    joined: NodeJoin,
    pods: Mapping[str, ObservedPod] | None = None,
) -> NodeOccupancy:
    """Occupancy of a node whose observer reports its holders (reconciler.logic.observe.observation): totals are
    the partitions the GPUs really have, used are those the kubelet allocated to a pod, per extended
    resource as the device plugin names them under the strategy. Nothing is inferred; the entries say
    `observed`. The assignment maps each planned partition matched to a real one to its holder(s). A
    holder's owner is the owner of a partition it holds when it is that owner's pod (matched as the
    inference matches, on `pods`, the node's listed pods by namespace/name), else none: a pod holding
    another owner's partition is not that owner's."""
    listed = pods or {}

    def belongs(pod: str, owner: str) -> bool:
        found = listed.get(pod)
        ids = pod_identities(found) if found is not None else frozenset({pod, *pod.split("/", 1)})
        return owner in ids

    totals: dict[str, int] = {}
    used: dict[str, int] = {}
    held: dict[str, dict[str, int]] = {}  # resource -> pod -> partitions (or whole GPUs) it holds
    owner_of: dict[tuple[str, str], str] = {}
    assignment: dict[tuple[int, int], str] = {}

    def count(res: str, pods: tuple[str, ...], owner: str | None) -> None:
        totals[res] = totals.get(res, 0) + 1
        used[res] = used.get(res, 0) + (1 if pods else 0)
        per = held.setdefault(res, {})
        for pod in pods:
            per[pod] = per.get(pod, 0) + 1
            if owner is not None and belongs(pod, owner):
                owner_of.setdefault((res, pod), owner)

    for g in joined.gpus:
        if g.observed is None:
            continue
        if not g.observed.mig_current:
            count(GPU_RESOURCE, g.whole_holders, None)
            continue
        for i in g.instances:
            count(resource_of(i.profile) if strategy is MigStrategy.MIXED else GPU_RESOURCE, i.holders, i.owner)
            if i.holders and i.position is not None:
                assignment[_slot(g.index, i.position)] = ", ".join(i.holders)
    entries = []
    for res in sorted(totals):
        hs = tuple(Holder(pod=p, count=n, owner=owner_of.get((res, p))) for p, n in sorted(held.get(res, {}).items()))
        entries.append(
            Occupancy(
                node=node,
                profile=profile_label(res, plan),
                total=totals[res],
                used=used.get(res, 0),
                holders=hs,
                source="observed",
            )
        )
    return NodeOccupancy(node=node, entries=tuple(entries), assignment=assignment)
