"""One reconcile cycle: observe -> drift -> plan -> apply -> report, as an ordered list of small steps.

`reconcile_once` is what `migplan reconcile --once` runs and what the controller calls in its loop.
Each step reads and writes one `Cycle` context; the first step that fails stops the cycle and its
error is recorded (never raised past this function for migplan's own errors), so a cycle always
ends with a CycleResult that says what was observed, planned, written and what went wrong, and the
engine's verdict (`CycleResult.status`). The outcome of a whole cycle — with its Git source and report,
its exit code and metrics label — is reconciler.outcome.CycleOutcome.

Apply discipline: nothing is written in `apply.mode: report-only`, with `dry_run`, or from an
empty plan (in agent mode the plan holds only the ClusterPolicy and device-plugin changes).

Otherwise the plan is first sent with dryRun=All (the API server validates every write, nothing
persists), all of it concurrently (nothing persists, so order cannot matter); if any is refused,
no real write is made. `dry_run` stops after that pass. In a real run one kind of write is left out
of that pass: a Node write whose patch holds only metadata labels and annotations (the
`nvidia.com/mig.config` relabel, the requested-at stamp, forgetting migplan's cordon), but for one
per distinct label set. Why it may be:
the Node strategy (kubernetes pkg/registry/core/node/strategy.go: PrepareForUpdate keeps status,
ValidateUpdate = ValidateNode + ValidateNodeUpdate) reads nothing a dry run would see differently,
a JSON merge patch has no resourceVersion to conflict on, and NodeRestriction only restricts node
identities; so a refusal of that write (a malformed label value, an admission webhook or policy)
comes back from the real write with the same status and message. A dry run can only *add* a
refusal there (a webhook whose sideEffects are not None refuses every dryRun request), and each
node's relabel is independent of every other write, so a refused one leaves the others correct;
the next cycle re-plans it. So one such write per distinct label set is dry-run for all of them
(`dry_run_selection`): it carries the same authorization (a missing `patch nodes` verb still stops
the plan before any real write), the same value validation and the same admission answer as the
others, short of a webhook or RBAC rule that singles out node names. That halves the requests of an
adoption (one relabel per node, a handful of distinct configs). Cordon and uncordon
(spec.unschedulable) and every non-Node write still go through the dry run, each one.

The real pass goes out in the stages of reconciler/logic/planning/writeorder.py: the ConfigMap, then the
ClusterPolicy, then the DaemonSet, each alone and in plan order; then the Node writes, one ordered
group per node (cordon -> label -> uncordon, never overlapping), the groups in parallel on a pool
of at most `apply.writeConcurrency` threads; then the ConfigMap clean-up. Stop at the first failure
means, precisely: a failed write ends its own group (that node's later writes are not made); no
group that has not started yet starts; groups already started run to their end (so no node is left
between its cordon and its label because *another* node failed); no later stage starts. Every
write made is in `applied` (plan order), every write of the plan not made is in `not_applied`
(plan order), and the error names the first failed write in plan order, how many other groups
failed, and how many writes were made: a half-applied plan is always reported exactly, and the
next cycle re-observes and continues from there (every change is idempotent).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from reconciler.logic.drift import drift
from reconciler.logic.observe import observation
from reconciler.logic.planning import planner, writeorder
from reconciler.logic.reports.reports import report_to_json
from reconciler.model.cycles import CycleStatus, judge
from reconciler.model.drift import DriftReport
from reconciler.model.errors import EvictionRefused, MigplanError
from reconciler.model.inventory import ApplyMode, DesiredState, GpuOperatorSettings
from reconciler.model.observed import ObservedState
from reconciler.model.plans import Change, Plan


class ClusterPort(Protocol):
    """What the engine needs from a cluster; reconciler.adapters.kube.cluster.KubeCluster implements it."""

    def observe(self, ops: GpuOperatorSettings) -> ObservedState: ...

    def apply(self, change: Change, *, dry_run: bool = False) -> None:
        """One write; called from several threads at once (one ordered group of writes per thread)."""
        ...


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
    def status(self) -> CycleStatus:
        """The engine's verdict on its own steps (reconciler.model.cycles.judge)."""
        return judge(failed=bool(self.errors), converged=self.converged)

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": str(self.desired.revision),
            "mode": self.mode,
            "dryRun": self.dry_run,
            "converged": self.converged,
            "exitCode": self.status.exit_code,
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
    c.plan = planner.plan(
        c.desired,
        c.observed,
        now=c.now,
        rendered=c.analysis.rendered,
        silent_after=c.silent_after,
        unoffered=c.analysis.unoffered,
    )


def apply_plan(c: Cycle) -> None:
    """Dry run, then the real writes in stages (see the module docstring for the exact discipline).

    An eviction a PodDisruptionBudget refuses (EvictionRefused) is not a failure: the drain waits for the
    budget and asks again next cycle, never forcing; the dry run lets it pass and the real pass records it."""
    assert c.plan is not None
    writes = c.plan.writes
    if not writes:
        return  # an empty plan touches nothing
    if not c.sends_requests:
        c.not_applied.extend(writes)
        return
    workers = c.desired.cluster.apply.write_concurrency
    # Server-side dry run first, all at once: if any write would be refused, none is made. (Later
    # writes are validated against the state before earlier ones, which is what makes it a dry run;
    # a conflict that only appears between them shows up in the real pass and is reported.)
    # `--dry-run` stops after this pass: the API server has checked every write, nothing persisted.
    checked = writes if c.dry_run else dry_run_selection(writes)
    outcomes = _run_stage(c.cluster, tuple((w,) for w in checked), dry_run=True, workers=workers)
    for outcome in outcomes:
        if outcome.error is not None and outcome.failed is not None:
            c.not_applied.extend(writes)
            exc = outcome.error
            raise _StepFailed(f"dry run refused {outcome.failed.subject}: {exc.message}", exc.code) from exc
    if c.dry_run:
        c.not_applied.extend(writes)
        return
    failures: list[tuple[Change, MigplanError]] = []
    for stage in writeorder.stages(writes):
        outcomes = _run_stage(c.cluster, stage.groups, dry_run=False, workers=workers)
        for outcome in outcomes:
            c.applied.extend(outcome.applied)
            for change, refused in outcome.refused:
                node = str((change.before or {}).get("spec.nodeName", ""))
                c.refused_evictions.append((node, refused.pod, refused.message))
            if outcome.error is not None and outcome.failed is not None:
                failures.append((outcome.failed, outcome.error))
        if failures:
            break
    made = {id(w) for w in c.applied}
    c.not_applied.extend(w for w in writes if id(w) not in made)
    if not failures:
        return
    change, exc = failures[0]
    done = f"{len(c.applied)} of {len(writes)} write(s) made" if c.applied else "no write made"
    if len(failures) > 1:
        done += f", {len(failures) - 1} other node group(s) failed as well"
    raise _StepFailed(f"{change.subject}: {exc.message} ({done}; the next cycle resumes)", exc.code) from exc


def dry_run_selection(writes: tuple[Change, ...]) -> tuple[Change, ...]:
    """The writes a real run dry-runs first: all but label-only node writes, of which one per distinct
    label set stands for the rest (same verb, resource and labels: the same authorization, the same
    validation of the value, the same admission answer), so a missing RBAC verb or a refused value
    still stops the plan before any real write."""
    seen: set[tuple[tuple[tuple[str, str], ...], frozenset[str]]] = set()
    out = []
    for w in writes:
        if relabel_only(w):
            meta = (w.patch or {})["metadata"]
            labels = meta.get("labels") or {}
            key = (
                tuple(sorted((str(k), repr(v)) for k, v in labels.items())),
                frozenset(meta.get("annotations") or ()),
            )
            if key in seen:
                continue
            seen.add(key)
        out.append(w)
    return tuple(out)


def relabel_only(change: Change) -> bool:
    """A Node write whose patch holds only metadata labels/annotations: left out of the real run's dry-run pass."""
    patch = change.patch
    if patch is None or not change.subject.startswith(writeorder.NODE_PREFIX) or set(patch) != {"metadata"}:
        return False
    meta = patch["metadata"]
    return isinstance(meta, Mapping) and set(meta) <= {"labels", "annotations"}


@dataclass(frozen=True, slots=True)
class _GroupOutcome:
    applied: tuple[Change, ...] = ()  # the writes made, in order
    refused: tuple[tuple[Change, EvictionRefused], ...] = ()  # evictions a PodDisruptionBudget refused (skipped)
    failed: Change | None = None  # the write that failed and ended the group (None: all made, or never started)
    error: MigplanError | None = None


def _run_group(cluster: ClusterPort, group: tuple[Change, ...], dry_run: bool, stop: threading.Event) -> _GroupOutcome:
    """One ordered group: its writes one after the other, ending at its first failure (which stops the stage).
    A refused eviction does not end it: the drain's other evictions are still asked."""
    if stop.is_set():
        return _GroupOutcome()  # another group failed before this one started: it does not start
    applied: list[Change] = []
    refused: list[tuple[Change, EvictionRefused]] = []
    for change in group:
        try:
            cluster.apply(change, dry_run=dry_run)
        except EvictionRefused as exc:
            if not dry_run:
                refused.append((change, exc))
            continue
        except MigplanError as exc:
            stop.set()
            return _GroupOutcome(tuple(applied), tuple(refused), change, exc)
        except BaseException:
            stop.set()
            raise
        applied.append(change)
    return _GroupOutcome(tuple(applied), tuple(refused))


def _run_stage(
    cluster: ClusterPort, groups: tuple[tuple[Change, ...], ...], *, dry_run: bool, workers: int
) -> list[_GroupOutcome]:
    """Every group of a stage, in parallel on at most `workers` threads; the outcomes in the groups' order.

    Each thread runs in a copy of the caller's context, so the cycle deadline (a context variable,
    adapters/deadline.py) cuts the pool's requests exactly as it cuts the caller's.
    """
    stop = threading.Event()
    if len(groups) <= 1 or workers <= 1:
        return [_run_group(cluster, g, dry_run, stop) for g in groups]
    # Each thread takes the next group itself until none is left, rather than one submitted task per group: a
    # task per group cost a Future, a queue round trip and a wake-up of this (waiting) thread per write, all of
    # it under the GIL the writers need (issue 29, adoptcpu). Groups still start in plan order.
    caller = contextvars.copy_context()
    outcomes: list[_GroupOutcome] = [_GroupOutcome()] * len(groups)
    pending = iter(range(len(groups)))
    taking = threading.Lock()

    def writer() -> None:
        while True:
            with taking:
                i = next(pending, None)
            if i is None:
                return
            outcomes[i] = caller.copy().run(_run_group, cluster, groups[i], dry_run, stop)

    threads = min(workers, len(groups))
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="migplan-write") as pool:
        for running in [pool.submit(writer) for _ in range(threads)]:
            running.result()
    return outcomes


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
