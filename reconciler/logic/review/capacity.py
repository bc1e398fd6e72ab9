"""What a merge does to the cluster's capacity: partitions per profile and reservations per owner.

Pure: two desired states (and optionally the last report's usage per node and profile) in, the delta
out. A reviewer reads it as "this merge removes the last free 3g.71gb": per profile, the partitions
before -> after and, with usage, how many would be free after; per owner, what is reserved before ->
after. A GPU with MIG disabled counts as one `gpu` (what the device plugin advertises for it).

Free is counted per node, as pods are placed: on each node, max(partitions of the profile - pods
using them now, 0), summed. The usage is the last drift report's occupancy (`used` per node and
profile), so it is as old as that report, or with --kubeconfig the live cluster's pods counted the same
way; nodes the usage does not know count as unused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.logic.observe.occupancy import node_occupancy
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import ObservedState

WHOLE_GPU = "gpu"

# node -> profile -> partitions in use (the drift report's occupancy `used`)
Usage = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True, slots=True)
class ProfileDelta:
    profile: str
    before: int
    after: int
    free_before: int | None = None  # None: no usage known
    free_after: int | None = None

    @property
    def last_free_removed(self) -> bool:
        """The merge takes the last free partition(s) of this profile away."""
        return bool(self.free_before) and self.free_after == 0


@dataclass(frozen=True, slots=True)
class OwnerDelta:
    owner: str
    before: Mapping[str, int]  # profile -> partitions reserved
    after: Mapping[str, int]

    @property
    def total_before(self) -> int:
        return sum(self.before.values())

    @property
    def total_after(self) -> int:
        return sum(self.after.values())


@dataclass(frozen=True, slots=True)
class CapacityDelta:
    profiles: tuple[ProfileDelta, ...]  # only profiles whose count or free count changes, by name
    owners: tuple[OwnerDelta, ...]  # only owners whose reservation changes, by name
    usage_known: bool

    @property
    def empty(self) -> bool:
        return not (self.profiles or self.owners)


def per_node(state: DesiredState) -> dict[str, Counter[str]]:
    """node -> profile -> partitions planned (a MIG-disabled GPU is one `gpu`)."""
    out: dict[str, Counter[str]] = {}
    for name, node in state.nodes.items():
        counts: Counter[str] = Counter()
        for g in node.gpus:
            if g.mig_enabled:
                counts.update(p.profile for p in g.partitions)
            else:
                counts[WHOLE_GPU] += 1
        out[name] = counts
    return out


def reservations(state: DesiredState) -> dict[str, Counter[str]]:
    """owner -> profile -> partitions reserved for it."""
    out: dict[str, Counter[str]] = {}
    for node in state.nodes.values():
        for g in node.gpus:
            if g.mig_enabled:
                for p in g.partitions:
                    if p.owner:
                        out.setdefault(p.owner, Counter())[p.profile] += 1
    return out


def _free(counts: Mapping[str, Counter[str]], usage: Usage, profile: str) -> int:
    return sum(max(c.get(profile, 0) - usage.get(n, {}).get(profile, 0), 0) for n, c in counts.items())


def capacity_delta(before: DesiredState, after: DesiredState, usage: Usage | None = None) -> CapacityDelta:
    old, new = per_node(before), per_node(after)
    total_old: Counter[str] = sum(old.values(), Counter())
    total_new: Counter[str] = sum(new.values(), Counter())
    profiles: list[ProfileDelta] = []
    for profile in sorted(set(total_old) | set(total_new)):
        b, a = total_old.get(profile, 0), total_new.get(profile, 0)
        if usage is None:
            if a != b:
                profiles.append(ProfileDelta(profile, b, a))
            continue
        fb, fa = _free(old, usage, profile), _free(new, usage, profile)
        if a != b or fa != fb:
            profiles.append(ProfileDelta(profile, b, a, fb, fa))
    res_old, res_new = reservations(before), reservations(after)
    owners = [
        OwnerDelta(o, dict(sorted(res_old.get(o, Counter()).items())), dict(sorted(res_new.get(o, Counter()).items())))
        for o in sorted(set(res_old) | set(res_new))
        if res_old.get(o) != res_new.get(o)
    ]
    return CapacityDelta(tuple(profiles), tuple(owners), usage is not None)


def usage_from_report(report: Mapping[str, object]) -> dict[str, dict[str, int]]:
    """node -> profile -> used, from a drift report document (drift.yaml as data). Values that are not
    what migplan writes (a name that is not a string, a count that is not a small non-negative int) are
    skipped, never trusted."""
    out: dict[str, dict[str, int]] = {}
    nodes = report.get("nodes")
    if not isinstance(nodes, list):
        return out
    for node in nodes:
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            continue
        occupancy = node.get("occupancy")
        for o in occupancy if isinstance(occupancy, list) else ():
            if not isinstance(o, dict):
                continue
            profile, used = o.get("profile"), o.get("used")
            if isinstance(profile, str) and isinstance(used, int) and not isinstance(used, bool) and 0 <= used < 2**20:
                out.setdefault(node["name"], {})[profile] = used
    return out


def usage_from_observed(base: DesiredState, observed: ObservedState) -> dict[str, dict[str, int]]:
    """node -> profile -> used, from a live cluster, counted as the drift report's occupancy counts it
    (over the base plan, the one the cluster runs), so live and committed answers read the same."""
    out: dict[str, dict[str, int]] = {}
    for node, pods in observed.pods_by_node().items():
        occ = node_occupancy(
            node=node,
            plan=base.nodes.get(node),
            strategy=base.cluster.mig_strategy,
            pods=pods,
            observed=observed.nodes.get(node),
        )
        used = {e.profile: e.used for e in occ.entries if e.used}
        if used:
            out[node] = used
    return out
