"""One reconcile cycle: observe -> drift -> plan -> apply -> report, as an ordered list of small steps.

`reconcile_once` is what `migplan reconcile --once` runs and what the controller calls in its loop.
Each step reads and writes one `Cycle` context; the first step that fails stops the cycle and its
error is recorded (never raised past this function for migplan's own errors), so a cycle always
ends with a CycleResult that says what was observed, planned, written and what went wrong.

Apply discipline: nothing is written in `apply.mode: report-only`, with `dry_run`, or from an
empty plan (in agent mode the plan holds only the ClusterPolicy and device-plugin changes). Otherwise the whole plan is
first sent with dryRun=All (the API server validates every write, nothing persists; `dry_run`
stops here); only if all of them pass is it sent for real, in plan order, stopping at the first
failure. Errors name the change that failed and list the writes that were not made, so a
half-applied plan is always reported; the next cycle re-observes and continues from there (every
change is idempotent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from reconciler.logic import drift, observation, planner
from reconciler.logic.reports import report_to_json
from reconciler.model.drift import DriftReport
from reconciler.model.errors import EvictionRefused, MigplanError
from reconciler.model.inventory import ApplyMode, DesiredState, GpuOperatorSettings
from reconciler.model.observed import ObservedState
from reconciler.model.plans import Change, Plan

EXIT_IN_SYNC = 0  # nothing to do: the cluster matches the inventory
EXIT_DRIFT = 1  # drift found, changes made or held back: not converged yet
EXIT_ERROR = 2  # a step failed (API error, unreadable cluster state)


class ClusterPort(Protocol):
    """What the engine needs from a cluster; reconciler.adapters.kube.KubeCluster implements it."""

    def observe(self, ops: GpuOperatorSettings) -> ObservedState: ...

    def apply(self, change: Change, *, dry_run: bool = False) -> None: ...


@dataclass(frozen=True, slots=True)
class CycleError:
    step: str
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.step}: {self.code}: {self.message}"


@dataclass(frozen=True, slots=True)
class CycleResult:
    desired: DesiredState
    plan: Plan | None
    report: DriftReport | None
    applied: tuple[Change, ...]  # writes the API server accepted (for real), in order
    not_applied: tuple[Change, ...]  # writes of the plan that were not made (error, dry-run, report-only)
    errors: tuple[CycleError, ...]
    dry_run: bool
    mode: str
    refused_evictions: tuple[tuple[str, str, str], ...] = ()  # (node, pod, API message): retried next cycle

    @property
    def converged(self) -> bool:
        """In sync and nothing left to do."""
        return (
            not self.errors
            and self.report is not None
            and self.report.in_sync
            and self.plan is not None
            and self.plan.is_empty()
        )

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_ERROR
        return EXIT_IN_SYNC if self.converged else EXIT_DRIFT

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": str(self.desired.revision),
            "mode": self.mode,
            "dryRun": self.dry_run,
            "converged": self.converged,
            "exitCode": self.exit_code,
            "plan": self.plan.to_json() if self.plan else None,
            "applied": [c.to_json() for c in self.applied],
            "notApplied": [c.to_json() for c in self.not_applied],
            "errors": [{"step": e.step, "code": e.code, "message": e.message} for e in self.errors],
            "refusedEvictions": [{"node": n, "pod": p, "message": m} for n, p, m in self.refused_evictions],
            "report": report_to_json(self.report) if self.report else None,
        }


@dataclass
class Cycle:
    """The mutable context one cycle's steps share."""

    desired: DesiredState
    cluster: ClusterPort
    now: datetime
    dry_run: bool
    # how old a node observer's report may be before it is silent (MP543) and its facts are not used
    silent_after: timedelta = observation.SILENT_AFTER
    observed: ObservedState | None = None
    analysis: drift.Analysis | None = None
    plan: Plan | None = None
    report: DriftReport | None = None
    applied: list[Change] = field(default_factory=list)
    not_applied: list[Change] = field(default_factory=list)
    errors: list[CycleError] = field(default_factory=list)
    # (node, pod, the API server's words) of the evictions refused this cycle (PodDisruptionBudgets).
    refused_evictions: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def sends_requests(self) -> bool:
        """report-only sends no write request at all (not even a dry run)."""
        return self.desired.cluster.apply.mode is not ApplyMode.REPORT_ONLY


def observe(c: Cycle) -> None:
    c.observed = c.cluster.observe(c.desired.cluster.gpu_operator)


def detect_drift(c: Cycle) -> None:
    assert c.observed is not None
    c.analysis = drift.analyze(c.desired, c.observed, now=c.now, silent_after=c.silent_after)


def make_plan(c: Cycle) -> None:
    assert c.observed is not None and c.analysis is not None
    c.plan = planner.plan(c.desired, c.observed, now=c.now, rendered=c.analysis.rendered, silent_after=c.silent_after)


def apply_plan(c: Cycle) -> None:
    assert c.plan is not None
    writes = c.plan.writes
    if not writes:
        return  # an empty plan touches nothing
    if not c.sends_requests:
        c.not_applied.extend(writes)
        return
    # Server-side dry run of the whole plan first: if any write would be refused, none is made.
    # (Later writes are validated against the state before earlier ones, which is what makes it a
    # dry run; a conflict that only appears between them shows up in the real pass and is reported.)
    # `--dry-run` stops after this pass: the API server has checked every write, nothing persisted.
    for change in writes:
        try:
            c.cluster.apply(change, dry_run=True)
        except EvictionRefused:
            continue  # a PodDisruptionBudget says no for now: the real pass asks again and records it
        except MigplanError as exc:
            c.not_applied.extend(writes)
            raise _StepFailed(f"dry run refused {change.subject}: {exc.message}", exc.code) from exc
    if c.dry_run:
        c.not_applied.extend(writes)
        return
    for i, change in enumerate(writes):
        try:
            c.cluster.apply(change)
        except EvictionRefused as exc:
            # The drain waits for the budget (next cycle), it never forces: the relabel is held in this plan.
            c.refused_evictions.append((str((change.before or {}).get("spec.nodeName", "")), exc.pod, exc.message))
            c.not_applied.append(change)
            continue
        except MigplanError as exc:
            c.not_applied.extend(writes[i:])
            done = f"{i} of {len(writes)} write(s) made before it" if i else "no write made"
            raise _StepFailed(f"{change.subject}: {exc.message} ({done}; the next cycle resumes)", exc.code) from exc
        c.applied.append(change)


def write_report(c: Cycle) -> None:
    assert c.observed is not None and c.analysis is not None
    c.report = drift.build_report(c.desired, c.observed, c.analysis, c.plan, c.refused_evictions)


class _StepFailed(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


Step = Callable[[Cycle], None]
STEPS: tuple[Step, ...] = (observe, detect_drift, make_plan, apply_plan, write_report)


def reconcile_once(
    *,
    desired: DesiredState,
    cluster: ClusterPort,
    dry_run: bool = False,
    now: datetime | None = None,
    silent_after: timedelta | None = None,
) -> CycleResult:
    """Run one cycle against a validated DesiredState; never raises migplan's own errors. `silent_after`:
    how old a node observer's report may be before it counts as silent (default: 3 heartbeats of 300 s)."""
    c = Cycle(
        desired=desired,
        cluster=cluster,
        now=now or datetime.now(UTC),
        dry_run=dry_run,
        silent_after=silent_after or observation.SILENT_AFTER,
    )
    for step in STEPS:
        try:
            step(c)
        except _StepFailed as exc:
            c.errors.append(CycleError(step=step.__name__, code=exc.code, message=exc.message))
            if step is apply_plan:
                continue  # still write the report: it says what the cluster looked like
            break
        except MigplanError as exc:
            c.errors.append(CycleError(step=step.__name__, code=exc.code, message=exc.message))
            break
    return CycleResult(
        desired=desired,
        plan=c.plan,
        report=c.report,
        applied=tuple(c.applied),
        not_applied=tuple(c.not_applied),
        errors=tuple(c.errors),
        dry_run=dry_run,
        mode=desired.cluster.apply.mode.value,
        refused_evictions=tuple(c.refused_evictions),
    )
