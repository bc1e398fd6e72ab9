"""What one GitOps cycle is given and what it gives back: `CycleContext` in, `CycleOutcome` out.

`CycleOutcome` is the one outcome of a cycle for every entry point: the cycle of reconciler.gitops
(`migplan run`, `migplan reconcile --once --repo`, `migplan demo`) returns it, `reconcile --once
--inventory` wraps the engine's record in it (`of_engine`), and the controller loop
(reconciler.controller.loop) reads its metrics, logs, Events and backoff from it. Its `status` is a
reconciler.model.cycles.CycleStatus, judged once when the outcome is built (`of_cycle`, `of_engine`,
`aborted`); the exit code and the metrics label are read from that status and nowhere else.

This module sits between the engine/source and their callers (gitops, the controller, the commands)
and imports none of those callers, so the controller loop needs nothing of Git to read an outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.model.codes import IN_PROGRESS_CODES, Trait, with_trait
from reconciler.model.cycles import CycleStatus, judge
from reconciler.model.errors import MigplanError
from reconciler.settings import Settings

if TYPE_CHECKING:
    from reconciler.adapters.git.reports import ReportOutcome
    from reconciler.adapters.git.source import GitFailure
    from reconciler.engine import CycleResult
    from reconciler.model.drift import DriftReport
    from reconciler.model.plans import Change, Plan
    from reconciler.sourcing import SourceResult

# Source errors that describe the remote (down, refusing us, the branch gone): the cycle carries on
# with the cached revision and says "not in sync" (drift). Any other source error fails the cycle.
REMOTE_STATES = with_trait(Trait.REMOTE)  # MP701-MP704 (reconciler.model.codes)
NO_REVISION = "no valid inventory revision yet"
DEFAULT_CLUSTER_POLICY = "cluster-policy"


@dataclass(frozen=True, slots=True)
class CycleContext:
    """What the controller loop gives one cycle: why it runs, and the client and fence its writes go through."""

    trigger: str
    api_client: Any  # kubernetes ApiClient, fenced: writes only while this replica may write
    may_write: Callable[[], bool]
    settings: Settings


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    """How one cycle ended, and everything its callers show of it (exit code, `-o json`, text, metrics,
    logs, Events, node marks).

    `source` is None when the cycle read no Git source (`reconcile --once --inventory`, or a cycle that
    could not start: the cache directory was locked or unusable); `result` (the engine's record) is
    None when nothing was observed: no revision ever validated, or the cycle could not start."""

    status: CycleStatus
    source: SourceResult | None = None
    result: CycleResult | None = None
    report_files: Mapping[str, bytes] = field(default_factory=dict)
    report: ReportOutcome | None = None  # None with dry_run, without write permission, or nothing to report
    notes: tuple[str, ...] = ()  # what a person should know (source refused or down, report held or queued, ...)
    errors: tuple[str, ...] = ()  # steps of this cycle that failed outside the engine
    report_failure: GitFailure | None = None  # the repository could not be opened to commit the report

    @classmethod
    def of_cycle(
        cls,
        source: SourceResult,
        result: CycleResult | None,
        *,
        report_files: Mapping[str, bytes] | None = None,
        report: ReportOutcome | None = None,
        notes: tuple[str, ...] = (),
        errors: tuple[str, ...] = (),
        report_failure: GitFailure | None = None,
    ) -> CycleOutcome:
        """The outcome of a GitOps cycle, judged (reconciler.model.cycles.judge): no revision, a failed
        step (engine or report) or a source error that is not the remote's (a damaged cache, a state file
        that cannot be written, a request cut by the deadline: an I/O error a person must look at) fails
        it; acting on an older revision than the newest (refused, or the remote unreachable) is drift."""
        error = source.source_error
        cache_broken = error is not None and error.code not in REMOTE_STATES
        failed = result is None or bool(result.errors) or bool(errors) or cache_broken
        behind = source.refused is not None or error is not None
        status = judge(failed=failed, converged=result is not None and result.converged, behind=behind)
        return cls(
            status,
            source=source,
            result=result,
            report_files=report_files or {},
            report=report,
            notes=notes,
            errors=errors,
            report_failure=report_failure,
        )

    @classmethod
    def of_engine(cls, result: CycleResult) -> CycleOutcome:
        """`reconcile --once --inventory`: the engine alone, no Git source, no report commit."""
        return cls(result.status, result=result)

    @classmethod
    def aborted(cls, exc: MigplanError) -> CycleOutcome:
        """A cycle that could not run (the cache directory locked by another run, or unusable: nothing
        was read or written)."""
        return cls(CycleStatus.FAILED, errors=(f"{exc.code}: {exc.message}",))

    @property
    def exit_code(self) -> int:
        """The process exit code of a one-shot command (reconciler.model.cycles.CycleStatus.exit_code)."""
        return self.status.exit_code

    @property
    def revision(self) -> str:
        """The revision acted on ("" when none)."""
        if self.source is not None and self.source.revision is not None:
            return str(self.source.revision)
        return str(self.result.desired.revision) if self.result is not None else ""

    @property
    def drift_report(self) -> DriftReport | None:
        return self.result.report if self.result is not None else None

    @property
    def plan(self) -> Plan | None:
        return self.result.plan if self.result is not None else None

    @property
    def applied(self) -> tuple[Change, ...]:
        return self.result.applied if self.result is not None else ()

    @property
    def failures(self) -> tuple[str, ...]:
        """Every failure of the cycle, the engine's steps first; for a failed cycle never empty."""
        out = [str(e) for e in self.result.errors] if self.result is not None else []
        out += self.errors
        if not out and self.status is CycleStatus.FAILED:
            out = list(self.notes) or [NO_REVISION]
        return tuple(out)

    @property
    def message(self) -> str:
        return "; ".join(self.notes)

    @property
    def nodes_in_flight(self) -> int:
        """Nodes being reconfigured right now (a finding with the IN_PROGRESS trait)."""
        report = self.drift_report
        if report is None:
            return 0
        return sum(1 for n in report.nodes if any(f.code in IN_PROGRESS_CODES for f in n.findings))

    @property
    def cluster_policy(self) -> str:
        """The ClusterPolicy the cycle's Events go to."""
        if self.result is None:
            return DEFAULT_CLUSTER_POLICY
        return self.result.desired.cluster.gpu_operator.cluster_policy

    def to_json(self) -> dict[str, Any]:
        """The `-o json` document: the engine's alone without a Git source (as `reconcile --once
        --inventory` always printed it), else source, cycle, report, notes, errors and the exit code."""
        if self.source is None and self.result is not None:
            return self.result.to_json()
        out: dict[str, Any] = {"source": None if self.source is None else self.source.to_json()}
        if self.result is not None:
            out["cycle"] = self.result.to_json()
        out["report"] = None
        if self.report is not None:
            out["report"] = {
                "status": self.report.status,
                "commit": self.report.commit,
                "pending": self.report.pending,
                "failure": None if self.report.failure is None else str(self.report.failure),
                "heldUntil": None if self.report.held_until is None else self.report.held_until.isoformat(),
            }
        out["notes"] = list(self.notes)
        out["errors"] = list(self.errors)
        out["exitCode"] = self.exit_code
        return out
