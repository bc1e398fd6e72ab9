"""Owner accounting: the article's "nommer les partitions dans les manifestes, pas les cartes".

Pure. Two things:

- `workload_issues(pod, plans, strategy)`: the rules a workload breaks when it names a card instead of a
  partition — it asks for whole GPUs (`nvidia.com/gpu`) on a node whose plan cuts GPUs into MIG partitions
  (MP549), or it pins a node or a GPU (a `kubernetes.io/hostname` node selector, a selector on a GPU or MIG
  UUID) instead of asking for a profile (MP548). One function over one pod, so manifest checks (a pod
  template read from a manifest through reconciler.adapters.kube.observe.gpu_pod_from_json) reuse it.
  A bare `spec.nodeName` cannot be told apart on a running pod (the scheduler's binding writes the same
  field); a manifest check sees it, `pod.node_selector` is what a running pod still says.
- `accounts(maps, ...)`: per owner and profile over the cluster, the partitions the plan reserves, how
  many of them are held, how many partitions of the profile the owner's pods hold, and the pods of other
  owners holding its partitions — from the report's slice maps, so observed nodes count what the kubelet
  allocated and the others what occupancy inferred (the account says which: observed, inferred, mixed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.logic.observe import podrules
from reconciler.logic.observe.occupancy import resource_of
from reconciler.model.drift import GpuSliceMap, OwnerAccount
from reconciler.model.inventory import MigStrategy, NodeSpec
from reconciler.model.observed import GPU_RESOURCE, ObservedPod

HOSTNAME_LABEL = "kubernetes.io/hostname"
# Selector keys that name one GPU: GFD/DCGM-style UUID labels some clusters add, and any value that is a
# GPU or MIG device UUID as NVML prints it.


@dataclass(frozen=True, slots=True)
class WorkloadIssue:
    code: str  # MP548 | MP549 (reconciler.logic.drift.drift.FINDING_CODES)
    message: str  # what is wrong and the fix, one line


def _profiles(plan: NodeSpec) -> list[str]:
    return sorted({p.profile for g in plan.gpus if g.mig_enabled for p in g.partitions})


def workload_issues(
    pod: ObservedPod, plans: Mapping[str, NodeSpec], strategy: MigStrategy
) -> tuple[WorkloadIssue, ...]:
    """What the pod does that names a card rather than a partition, each with its fix (see module doc)."""
    out: list[WorkloadIssue] = []
    requested = pod.requested()
    # Each rule's cheap condition first (most pods ask for a MIG profile and pin nothing): the node's plan is looked
    # at only for a pod asking for whole GPUs under the mixed strategy, the selector only when there is one.
    if requested.get(GPU_RESOURCE, 0) > 0 and strategy is MigStrategy.MIXED:
        target = pod.node or pod.node_selector.get(HOSTNAME_LABEL)
        plan = plans.get(target) if target is not None else None
        if plan is not None and any(g.mig_enabled for g in plan.gpus):
            offer = ", ".join(resource_of(p) for p in _profiles(plan)[:3]) or "nvidia.com/mig-<profile>"
            out.append(
                WorkloadIssue(
                    "MP549",
                    f"pod {pod.key} asks for nvidia.com/gpu on {target}, whose plan cuts its GPUs into MIG partitions: "
                    f"ask for a partition of a profile instead ({offer})",
                )
            )
    if not pod.node_selector:
        return tuple(out)
    pins = [f"nodeSelector {k}={v}" for k, v in podrules.selector_pins(pod.node_selector)]
    if pins and any(n > 0 for n in requested.values()):
        out.append(
            WorkloadIssue(
                "MP548",
                f"pod {pod.key} pins a node or GPU ({'; '.join(pins)}) instead of a profile: drop the selector and "
                "ask for nvidia.com/mig-<profile>, the scheduler then finds a node with a free partition",
            )
        )
    return tuple(out)


def accounts(
    maps: Mapping[str, tuple[GpuSliceMap, ...]],
    holder_owner: Mapping[str, str | None],
    foreign: Iterable[tuple[str, str, str]] = (),
) -> tuple[OwnerAccount, ...]:
    """Owner accounting from the slice maps.

    `holder_owner`: pod -> the inventory owner it belongs to (None: none), as occupancy matches owners.
    `foreign`: (owner, profile, pod) of pods holding that owner's partitions beyond what the device plugin's
    free choice explains (observation.foreign_holders, observed nodes); on inferred maps a holder whose own
    owner differs from the partition's is foreign.
    """
    reserved: dict[tuple[str, str], int] = {}
    held: dict[tuple[str, str], int] = {}
    by_owner: dict[tuple[str, str], int] = {}
    pods_of: dict[tuple[str, str], set[str]] = {}
    sources: dict[tuple[str, str], set[str]] = {}
    for owner, profile, pod in foreign:
        pods_of.setdefault((owner, profile), set()).add(pod)
    for gpus in maps.values():
        for gpu in gpus:
            src = "observed" if gpu.holders_source == "observed" else "inferred"
            for p in gpu.partitions:
                key = (p.owner or "", p.profile)
                if p.state != "unplanned":
                    reserved[key] = reserved.get(key, 0) + 1
                    _add(sources, key, src)
                if p.state == "missing" or not p.holder:
                    continue
                if p.state != "unplanned":
                    held[key] = held.get(key, 0) + 1
                for pod in p.holder.split(", "):
                    own = holder_owner.get(pod)
                    if own is not None:
                        k = (own, p.profile)
                        by_owner[k] = by_owner.get(k, 0) + 1
                        _add(sources, k, src)
                    if src == "inferred" and p.owner and own != p.owner:
                        pods_of.setdefault(key, set()).add(pod)
    out = []
    for key in sorted(set(reserved) | set(by_owner)):
        srcs = sources.get(key, {"inferred"})
        out.append(
            OwnerAccount(
                owner=key[0],
                profile=key[1],
                reserved=reserved.get(key, 0),
                held=held.get(key, 0),
                held_by_owner=by_owner.get(key, 0),
                foreign=tuple(sorted(pods_of.get(key, ()))),
                source=srcs.pop() if len(srcs) == 1 else "mixed",
            )
        )
    return tuple(out)


def _add(sets: dict[tuple[str, str], set[str]], key: tuple[str, str], value: str) -> None:
    """sets.setdefault(key, set()).add(value), without a new empty set for every call (280,000 at 5,000 nodes)."""
    found = sets.get(key)
    if found is None:
        sets[key] = {value}
    else:
        found.add(value)
