"""A node's occupancy with the pods that hold its GPUs through ResourceClaims, where no node observer reports. Pure.

A pod holding a MIG device through a claim requests no `nvidia.com/mig-*` resource, so the occupancy inferred from
requests (reconciler.logic.observe.occupancy.node_occupancy) does not see it. Its claim does: the allocated device's
name (reconciler.logic.codecs.dradevices) says the GPU (minor number), the profile and the placement, and
`status.reservedFor` the pod. Each such pod is added to the entry of its partition's profile, counted once per
device, and an entry whose holders all come from claims is marked `observed` (the API server's record of the
allocation, not a match on requests), exactly like the holders a node observer reports. The pod is placed on the
planned partition at that placement (the assignment the MR comment and the report use).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from reconciler.logic.codecs import dradevices
from reconciler.logic.observe.occupancy import NodeOccupancy, profile_label, resource_of
from reconciler.model.drift import Holder, Occupancy
from reconciler.model.inventory import MigStrategy, NodeSpec
from reconciler.model.observed import GPU_RESOURCE


def _partition(plan: NodeSpec, index: int, token: str, start: int) -> tuple[int, str] | None:
    """(position, profile) of the planned partition of GPU `index` at `start` with that profile, or None."""
    for g in plan.gpus:
        if g.index != index or not g.mig_enabled:
            continue
        for pos, (part, placement) in enumerate(zip(g.partitions, g.placements, strict=False)):
            if placement.start == start and dradevices.profile_token(part.profile) == token:
                return pos, part.profile
    return None


def with_claims(
    occ: NodeOccupancy,
    plan: NodeSpec,
    strategy: MigStrategy,
    claimed: Iterable[tuple[str, str]],
    minors: Mapping[int, int],
) -> NodeOccupancy:
    """`occ` with every (device name, pod) a claim allocates on the node added as a holder. `minors`: index ->
    minor number where measured (the index is taken for the minor elsewhere). A device that is not a planned
    partition (unknown name, another placement) adds nothing here: the guard still counts it (draclaims), and
    drift names what the plan and the node disagree on."""
    index_of = {minor: index for index, minor in minors.items()}
    held: dict[str, dict[str, int]] = {}  # label -> pod -> devices
    assignment = dict(occ.assignment)
    seen: set[tuple[str, str]] = set()
    for device, pod in claimed:
        if (device, pod) in seen:
            continue  # two claims cannot share a device, but a listed claim twice must not count twice
        seen.add((device, pod))
        parsed = dradevices.parse(device)
        if parsed is None:
            continue
        index = index_of.get(parsed.minor, parsed.minor)
        if isinstance(parsed, dradevices.DraGpu):
            label = profile_label(GPU_RESOURCE, plan)
        else:
            found = _partition(plan, index, parsed.profile_token, parsed.start)
            if found is None:
                continue
            pos, profile = found
            res = resource_of(profile) if strategy is MigStrategy.MIXED else GPU_RESOURCE
            label = profile_label(res, plan)
            assignment[(index, pos)] = pod
        per = held.setdefault(label, {})
        per[pod] = per.get(pod, 0) + 1
    if not held:
        return occ
    entries: list[Occupancy] = []
    for e in occ.entries:
        extra = held.pop(e.profile, None)
        if extra is None:
            entries.append(e)
            continue
        holders = (*e.holders, *(Holder(pod=p, count=n) for p, n in sorted(extra.items())))
        source = "observed" if not e.holders else e.source
        entries.append(replace(e, used=e.used + sum(extra.values()), holders=holders, source=source))
    for label, extra in sorted(held.items()):  # a profile the plan does not have: nothing free, all held
        hs = tuple(Holder(pod=p, count=n) for p, n in sorted(extra.items()))
        entries.append(Occupancy(node=occ.node, profile=label, total=0, used=sum(extra.values()), holders=hs,
                                 source="observed"))  # fmt: skip
    return NodeOccupancy(node=occ.node, entries=tuple(entries), assignment=assignment)
