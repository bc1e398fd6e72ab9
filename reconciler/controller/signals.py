"""What a cycle tells the cluster: Kubernetes Events and the per-node status mark. Pure.

From the cycle's drift report, plan and applied changes this computes
- `EventIntent`s (core/v1 Events about a Node or the ClusterPolicy) with PascalCase reasons:
  `DriftDetected` (Warning), `ApplyStarted` (Normal), `ApplySucceeded` (Normal), `ApplyFailed` (Warning),
  `ChangeHeld` (Warning, the disruption guard holding a change, naming the pods), `Draining` (Normal, the pods
  a drain evicted) and `DrainBlocked` (Warning, the pods and PodDisruptionBudgets a drain waits for, MP537-MP539);
- one `NodeMark` per node: the migplan-owned annotations `migplan.io/reconcile.state`
  (InSync | Drifted | Applying | Held | Failed | Missing) and `migplan.io/reconcile.reason`, so the reason a
  node is not as planned is on the node itself (`kubectl describe node`), the thing NVIDIA declined to
  add to mig-manager.

The values themselves (`EventIntent`, `NodeMark`, `MarkState`, `Reason`, `ObjectRef`) are model values
(reconciler.model.signals), shared with the adapter that writes them.

Events are emitted on change only: `diff_events(previous, current)` returns the intents that were not
already raised by the previous cycle, so a drift that persists for a week is one Event, not ten
thousand, and a drift that goes away and comes back is raised again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.model.codes import IN_PROGRESS_CODES, Trait, with_trait
from reconciler.model.drift import DriftReport, FindingSeverity, NodeReport, NodeStatus
from reconciler.model.plans import Action, Change, Kind, Plan
from reconciler.model.signals import EventIntent, MarkState, NodeMark, ObjectRef, Reason

# Finding codes by what they mean to the controller, asked of the one registry (reconciler.model.codes).
FAILED_CODES = with_trait(Trait.FAILED)  # an apply failed (mig-manager failed or stuck, the plugin refuses the layout)
HELD_CODES = with_trait(Trait.HELD)  # a change is held (disruption guard)
REBOOT_CODES = with_trait(Trait.REBOOT)  # held for a possible reboot (WITH_REBOOT): every pod of the node counts
DRAIN_BLOCKED_CODES = with_trait(Trait.DRAIN_BLOCKED)  # a drain that cannot go on (names pods / PDBs)
IN_FLIGHT_CODES = IN_PROGRESS_CODES  # reconfiguring, cordoned for it, or draining


_MAX = 900  # Event messages are cut by the API at 1 KiB; keep ours whole


def _clip(text: str) -> str:
    return text if len(text) <= _MAX else text[: _MAX - 1] + "…"


def _node_of(change: Change) -> str | None:
    if change.subject.startswith("node/"):
        return change.subject.split("/", 1)[1]
    return None


def _codes(n: NodeReport) -> str:
    return ", ".join(sorted({f.code for f in n.findings}))


def build(
    *,
    report: DriftReport,
    plan: Plan | None,
    applied: Sequence[Change],
    errors: Sequence[str],
    cluster_policy: str,
    previously_applying: Iterable[str] = (),
) -> tuple[tuple[EventIntent, ...], tuple[NodeMark, ...]]:
    """Events and node marks for one cycle (see the module docstring)."""
    events: list[EventIntent] = []
    marks: list[NodeMark] = []
    policy = ObjectRef("ClusterPolicy", cluster_policy, "nvidia.com/v1")
    was_applying = set(previously_applying)

    applied_nodes: dict[str, list[Change]] = {}
    for c in applied:
        node = _node_of(c)
        if node is not None and c.kind is Kind.NODE_MIG_CONFIG:
            applied_nodes.setdefault(node, []).append(c)
        elif c.kind is Kind.CLUSTER_POLICY:
            events.append(EventIntent(policy, Reason.APPLY_STARTED, _clip(str(c)), False))
    held: dict[str, list[Change]] = {}
    for c in plan.skipped if plan is not None else ():
        node = _node_of(c)
        if node is not None and c.blocked_by and (not c.code or c.code in HELD_CODES):
            held.setdefault(node, []).append(c)
    evicted: dict[str, list[str]] = {}
    for c in applied:
        if c.kind is Kind.EVICT:
            evicted.setdefault(str((c.before or {}).get("spec.nodeName", "")), []).append(c.subject.split("/", 1)[1])
    error_text = {n.name: [e for e in errors if n.name in e] for n in report.nodes}

    for f in report.cluster_findings:
        if f.severity is not FindingSeverity.INFO:
            events.append(EventIntent(policy, Reason.DRIFT_DETECTED, _clip(f"{f.code}: {f.message}"), True))

    for n in report.nodes:
        if n.status is NodeStatus.UNDOCUMENTED or n.status is NodeStatus.MISSING:
            # Missing nodes cannot carry anything; undocumented ones are not ours to annotate.
            continue
        ref = ObjectRef("Node", n.name)
        codes = {f.code for f in n.findings}
        if n.name in evicted:
            why = f"evicted {', '.join(sorted(evicted[n.name]))} (Eviction API) to apply the node's change"
            events.append(EventIntent(ref, Reason.DRAINING, _clip(why), False))
        stuck = [f for f in n.findings if f.code in DRAIN_BLOCKED_CODES]
        if stuck:
            why = "; ".join(f"{f.code}: {f.message}" for f in stuck)
            events.append(EventIntent(ref, Reason.DRAIN_BLOCKED, _clip(why), True))
            marks.append(NodeMark(n.name, MarkState.HELD, _clip(why)))
            continue
        blocking = [f for f in n.findings if f.severity is not FindingSeverity.INFO]
        failed = [f for f in n.findings if f.code in FAILED_CODES] + [_Text(e) for e in error_text.get(n.name, ())]
        if n.name in held or codes & HELD_CODES:
            pods = sorted(
                {p for c in held.get(n.name, ()) for p in c.blocked_by}
                | {p for f in n.findings if f.code in HELD_CODES for p in f.pods}
            )
            why = f"change held by the disruption guard: partitions in use by {', '.join(pods) or 'running pods'}"
            rebooting = [f for f in n.findings if f.code in REBOOT_CODES]
            if rebooting:  # a possible reboot: the pods are not only GPU holders, the finding says how many end
                why = f"change held by the disruption guard: {rebooting[0].message}"
            events.append(EventIntent(ref, Reason.CHANGE_HELD, _clip(why), True))
            marks.append(NodeMark(n.name, MarkState.HELD, _clip(why)))
            continue
        if failed:
            why = "; ".join(str(getattr(f, "message", f)) for f in failed)
            events.append(EventIntent(ref, Reason.APPLY_FAILED, _clip(why), True))
            marks.append(NodeMark(n.name, MarkState.FAILED, _clip(why)))
            continue
        if n.name in applied_nodes:
            why = "; ".join(str(c) for c in applied_nodes[n.name])
            events.append(EventIntent(ref, Reason.APPLY_STARTED, _clip(why), False))
            marks.append(NodeMark(n.name, MarkState.APPLYING, _clip(why)))
            continue
        if codes & IN_FLIGHT_CODES and n.status is not NodeStatus.IN_SYNC:
            marks.append(NodeMark(n.name, MarkState.APPLYING, _clip(f"reconfiguring ({_codes(n)})")))
            continue
        if blocking:
            why = "; ".join(f"{f.code}: {f.message}" for f in blocking)
            events.append(EventIntent(ref, Reason.DRIFT_DETECTED, _clip(why), True))
            marks.append(NodeMark(n.name, MarkState.DRIFTED, _clip(why)))
            continue
        if n.name in was_applying:
            events.append(EventIntent(ref, Reason.APPLY_SUCCEEDED, f"in sync with {report.revision}", False))
        marks.append(NodeMark(n.name, MarkState.IN_SYNC, f"in sync with {report.revision}"))
    return tuple(events), tuple(marks)


@dataclass(frozen=True, slots=True)
class _Text:
    message: str


def diff_events(previous: Iterable[EventIntent], current: Iterable[EventIntent]) -> tuple[EventIntent, ...]:
    """The intents of this cycle that the previous cycle did not already raise."""
    seen = {e.key for e in previous}
    return tuple(e for e in current if e.key not in seen)


def changed_marks(previous: Mapping[str, NodeMark], current: Iterable[NodeMark]) -> tuple[NodeMark, ...]:
    return tuple(m for m in current if previous.get(m.node) != m)


def applying_nodes(marks: Iterable[NodeMark]) -> frozenset[str]:
    return frozenset(m.node for m in marks if m.state is MarkState.APPLYING)


def occupancy_rows(report: DriftReport) -> tuple[tuple[str, str, int, int], ...]:
    return tuple((o.node, o.profile, o.total, o.used) for n in report.nodes for o in n.occupancy)


def finding_counts(report: DriftReport) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[f.code] = counts.get(f.code, 0) + 1
    return counts


def applied_writes(applied: Iterable[Change]) -> int:
    return sum(1 for c in applied if c.action is not Action.UNCHANGED)


def applied_by_kind(applied: Iterable[Change]) -> dict[str, int]:
    """Writes made, by kind of change (unchanged ones are not writes)."""
    counts: dict[str, int] = {}
    for c in applied:
        if c.action is not Action.UNCHANGED:
            counts[c.kind.value] = counts.get(c.kind.value, 0) + 1
    return dict(sorted(counts.items()))


def node_finding_rows(report: DriftReport) -> tuple[tuple[str, str, str, int], ...]:
    """(node or "" for cluster-wide, code, severity, count), sorted."""
    counts: dict[tuple[str, str, str], int] = {}
    for f in report.findings:
        key = (f.node or "", f.code, f.severity.value)
        counts[key] = counts.get(key, 0) + 1
    return tuple((*key, n) for key, n in sorted(counts.items()))


def owner_rows(report: DriftReport) -> tuple[tuple[str, str, int, int], ...]:
    """(owner or "" for unowned, profile, total, used) over every planned MIG partition of the cluster;
    a partition is used when a pod holds it: observed (the kubelet's allocation) on the nodes whose observer
    reports holders, else as occupancy assigned it (inferred from pod requests). A partition the GPU has and
    the plan does not is no owner's; one the plan has and the GPU does not is reserved and free."""
    sums: dict[tuple[str, str], list[int]] = {}
    for gpus in report.slice_maps.values():
        for gpu in gpus:
            for p in gpu.partitions:
                if p.state == "unplanned":
                    continue
                row = sums.setdefault((p.owner or "", p.profile), [0, 0])
                row[0] += 1
                row[1] += 1 if p.holder and p.state != "missing" else 0
    return tuple((owner, profile, total, used) for (owner, profile), (total, used) in sorted(sums.items()))


def owner_holding_rows(report: DriftReport) -> tuple[tuple[str, str, int, int], ...]:
    """(owner, profile, partitions its pods hold, pods of other owners on its partitions) for every
    inventory owner (unowned partitions have no owner to hold them)."""
    return tuple((a.owner, a.profile, a.held_by_owner, len(a.foreign)) for a in report.owners if a.owner)


def observer_counts(report: DriftReport) -> dict[str, int]:
    """GPU nodes per state of their node observer (reporting, silent, malformed, absent)."""
    counts: dict[str, int] = {}
    for n in report.nodes:
        if n.observer is not None:
            counts[n.observer] = counts.get(n.observer, 0) + 1
    return counts
