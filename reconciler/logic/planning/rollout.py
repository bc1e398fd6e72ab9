"""The rollout of node changes, shared by both apply modes: the maxUnavailableNodes budget, the drain a change
waits for, and migplan's cordon lifted once the node reports success. Pure.

A node's change is the relabel to its mig-parted config (gpu-operator mode, reconciler/logic/planning/nodechanges.py) or
the publication of its layout for its NVML agent (agent mode, reconciler/logic/planning/agentchanges.py). Both modes
roll their nodes out the same way: at most `maxUnavailableNodes` nodes are unavailable at once (`Budget`); with
allowDisruption and pods in the way, the node is drained first (`drain_changes`: cordon, evictions, the change
held until the pods are gone, reconciler/logic/planning/drain.py); and the cordon migplan set is lifted once the change
succeeded (`after_success`). What is held, and how it reads in the report, is the mode's own (`Hold`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from reconciler.logic.planning import drain
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import (
    CORDONED_ANNOTATION,
    DRAIN_STARTED_ANNOTATION,
    ObservedNode,
    ObservedPod,
    ObservedState,
)
from reconciler.model.plans import Action, Change, Kind


def rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Budget:
    """apply.maxUnavailableNodes for one plan: how many nodes may be unavailable (reconfiguring, cordoned by
    migplan, draining) at once, and how many are. Mutable on purpose: the nodes are decided one after the other
    in name order, and each one that starts takes a slot from the ones after it."""

    setting: int  # the inventory's maxUnavailableNodes, as the reason quotes it
    in_flight: int = 0  # nodes holding a slot already (counted before any node is decided)

    @property
    def limit(self) -> int:
        return max(self.setting, 0)

    def take(self) -> bool:
        """A slot for one more node: False (nothing taken) when every slot is held."""
        if self.in_flight >= self.limit:
            return False
        self.in_flight += 1
        return True

    @property
    def full_reason(self) -> str:
        return f"waiting: maxUnavailableNodes={self.setting} node(s) already reconfiguring"


class Hold(Protocol):
    """Builds the held change of a node (its relabel, or its layout's publication in agent mode)."""

    def __call__(
        self, reason: str, *, blocked_by: tuple[str, ...] = (), code: str = "", pdbs: tuple[str, ...] = ()
    ) -> Change: ...


def drain_changes(
    desired: DesiredState,
    observed: ObservedState,
    node: ObservedNode,
    config: str,
    pods: tuple[ObservedPod, ...],
    blockers: tuple[str, ...],
    effect: str,
    *,
    now: datetime,
    hold: Hold,
    vanished: tuple[str, ...] = (),
    note: str = "",
) -> list[Change]:
    """The drain of a node whose change destroys what running pods hold (reconciler/logic/planning/drain.py): cordon,
    evict, and the change (`hold`: the relabel, or in agent mode the layout's publication) held until the pods
    are gone; held with the reason when drain cannot proceed. `config` names what the drain is for (the drain
    marks). `vanished`: pods the node observer still sees holding a device that the API no longer lists (gone
    since): waited for, not evicted. `note`: said at the end of the waiting reason (what else the drain is for)."""
    subject = f"node/{node.name}"
    held = {p.key: p for p in pods if p.key in blockers}
    verdict = drain.classify(held.values())
    if verdict.refused:
        return [_refused(verdict, effect, hold)]
    pdbs = drain.blocking_pdbs(held.values(), observed.pdbs)
    pdb_text = (
        f"; PodDisruptionBudgets allowing no disruption: {drain.describe_pdbs(pdbs, observed.pdbs)}" if pdbs else ""
    )
    pods_left = tuple(sorted(set(verdict.pods) | set(vanished)))
    timeout = desired.cluster.apply.drain_timeout_seconds
    clock = drain.drain_clock(node, config, now)
    if clock.unreadable is not None or clock.elapsed(now) > timedelta(seconds=timeout):
        return [_timed_out(clock, timeout, pods_left, pdbs, pdb_text, now=now, hold=hold)]
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
            f"{gone_text}{note}",
            blocked_by=pods_left,
            code=drain.PDB_BLOCKS if pdbs else drain.DRAINING,
            pdbs=pdbs,
        )
    )
    return out


def _refused(verdict: drain.Verdict, effect: str, hold: Hold) -> Change:
    """Pods drain cannot remove (kubectl's filters) hold what the change destroys: the change is held (MP539)."""
    why = "; ".join(f"{k}: {reason}" for k, reason in verdict.refused)
    return hold(
        f"cannot drain: {why}; the change destroys what they hold ({effect})",
        blocked_by=tuple(k for k, _ in verdict.refused),
        code=drain.UNDRAINABLE,
    )


def _timed_out(
    clock: drain.DrainClock,
    timeout: int,
    pods_left: tuple[str, ...],
    pdbs: tuple[str, ...],
    pdb_text: str,
    *,
    now: datetime,
    hold: Hold,
) -> Change:
    """Past drainTimeoutSeconds (or a drain start migplan cannot believe): held, nothing forced (MP538)."""
    why = clock.unreadable or f"the drain started at {rfc3339(clock.started or now)}"
    return hold(
        f"drain timed out (drainTimeoutSeconds={timeout}; {why}): {', '.join(pods_left)} still hold what "
        f"the change destroys{pdb_text}; nothing is deleted by force (remove the "
        f"{DRAIN_STARTED_ANNOTATION} annotation to drain again)",
        blocked_by=pods_left,
        code=drain.TIMED_OUT,
        pdbs=pdbs,
    )


def after_success(node: ObservedNode) -> Change:
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


def by_node(changes: Iterable[Change]) -> list[Change]:
    """The per-node changes in their deterministic order: by node, then cordon -> evict -> the change ->
    uncordon (kinds in enum order). Stable: changes that tie keep the order they were made in."""
    kind_order = {k: i for i, k in enumerate(Kind)}
    return sorted(changes, key=lambda c: (drain.node_of(c), kind_order[c.kind], c.subject))
