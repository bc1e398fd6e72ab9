"""One GitOps cycle: inventory from Git (last known good) -> reconcile -> report committed back.

This is the cycle `migplan run` repeats, `migplan reconcile --once --repo` runs once and `migplan
demo` shows; keeping it in one place means the three cannot disagree about what a cycle does.

Order and why:
1. The source decides what to act on: the newest revision if it validates (and is trusted), else
   the last known good one. A source that never validated means no cluster write at all.
2. The engine observes, plans and applies against that revision (or only observes with dry_run).
3. In `apply.mode: agent` the desired layouts for the node agents are changes of the engine's plan
   (the `migplan.io/mig-desired` annotation), applied like every other write: nothing here is
   specific to one entry point.
4. The report (drift + occupancy + what the source refused and why) is rendered without anything
   time-varying, so an unchanged cluster produces byte-identical files and no new commit.
5. A report whose only change is occupancy (pods starting and stopping) is held back until
   `reports.minInterval` has passed since the last report commit; a status, finding, revision or
   source change commits at once (logic/reportcadence.py). A held report is still this cycle's
   report: `-o json` and /metrics show it.
6. The report goes to the reports branch through the outbox, so a push race or a remote outage
   delays it but never drops it. With dry_run, or once this replica may no longer write (lost
   Lease, shutting down), nothing is committed.
All six hold the cache directory's lock (adapters/cachelock.py): two processes sharing a cache
directory run their cycles one after the other, or the second gives up cleanly (CacheLocked, MP830)
before it has read or written anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.adapters.cachelock import cache_lock
from reconciler.adapters.commitsigning import CommitSigner
from reconciler.adapters.deadline import cycle_deadline
from reconciler.adapters.gitreports import (
    BotIdentity,
    InventoryTarget,
    ReportOutcome,
    commit_report,
    flush_outbox,
    last_report,
    report_message,
)
from reconciler.adapters.gitsource import GitFailure, InventoryRepo
from reconciler.engine import EXIT_DRIFT, EXIT_ERROR, ClusterPort, CycleResult, reconcile_once
from reconciler.logic import reportcadence
from reconciler.logic.reports import render_reports, report_to_json
from reconciler.model.codes import Trait, with_trait
from reconciler.model.inventory import ReportSettings
from reconciler.settings import DEFAULT_LOCK_TIMEOUT
from reconciler.sourcing import InventorySource, SourceResult

DEFAULT_BOT = BotIdentity()
# Source errors that describe the remote (down, refusing us, the branch gone): the cycle carries on
# with the cached revision and says "not in sync" (1). Any other source error is an error (2).
REMOTE_STATES = with_trait(Trait.REMOTE)  # MP701-MP704 (reconciler.model.codes)


@dataclass(frozen=True, slots=True)
class GitopsCycle:
    source: SourceResult
    result: CycleResult | None  # None when no revision ever validated: nothing was observed or applied
    report_files: Mapping[str, bytes] = field(default_factory=dict)
    report: ReportOutcome | None = None  # None with dry_run, without write permission, or nothing to report
    notes: tuple[str, ...] = ()  # what a person should know (source refused or down, report queued, ...)
    errors: tuple[str, ...] = ()  # steps of this cycle that failed outside the engine
    report_failure: GitFailure | None = None  # the repository could not be opened to commit the report

    @property
    def exit_code(self) -> int:
        if self.result is None or self.errors:
            return EXIT_ERROR
        if self.source.source_error is not None and self.source.source_error.code not in REMOTE_STATES:
            # A damaged cache, a state file that cannot be written, a request cut by the deadline: an
            # I/O error a person must look at (2), even though the cycle carried on with the cache.
            return EXIT_ERROR
        if self.source.refused is not None or self.source.source_error is not None:
            # Acting on an older revision is not "in sync" with what the team merged.
            return max(self.result.exit_code, EXIT_DRIFT)
        return self.result.exit_code

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source.to_json()}
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


def _source_notes(src: SourceResult) -> list[str]:
    notes = []
    if src.source_error is not None:
        notes.append(f"{src.source_error.code}: {src.source_error.message} (using the cached revision)")
    if src.refused is not None:
        notes.append(str(src.refused))
    return notes


def run_gitops_cycle(
    *,
    source: InventorySource,
    cluster: ClusterPort,
    dry_run: bool = False,
    may_write: Callable[[], bool] = lambda: True,
    bot: BotIdentity = DEFAULT_BOT,
    signer: CommitSigner | None = None,
    now: datetime | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    deadline: float | None = None,
    silent_after: timedelta | None = None,
) -> GitopsCycle:
    """One cycle (see the module docstring); raises CacheLocked / CacheUnusable (MP830 / MP831)
    when the cache directory cannot be had, before anything is read or written. `deadline`
    (seconds) starts once the lock is held: waiting for another run is not this cycle's time."""
    with cache_lock(source.remote.cache_dir, timeout=lock_timeout), cycle_deadline(deadline):
        return _locked_cycle(
            source=source,
            cluster=cluster,
            dry_run=dry_run,
            may_write=may_write,
            bot=bot,
            signer=signer,
            now=now,
            silent_after=silent_after,
        )


def _locked_cycle(
    *,
    source: InventorySource,
    cluster: ClusterPort,
    dry_run: bool,
    may_write: Callable[[], bool],
    bot: BotIdentity,
    signer: CommitSigner | None,
    now: datetime | None,
    silent_after: timedelta | None = None,
) -> GitopsCycle:
    src = source.cycle()
    notes = _source_notes(src)
    if src.desired is None or src.revision is None:
        return GitopsCycle(source=src, result=None, notes=tuple(notes) or ("no valid inventory revision yet",))
    desired = src.desired
    result = reconcile_once(desired=desired, cluster=cluster, dry_run=dry_run, now=now, silent_after=silent_after)
    errors: list[str] = []
    writes = not dry_run and may_write()
    if result.report is None:
        return GitopsCycle(source=src, result=result, notes=tuple(notes), errors=tuple(errors))
    files = render_reports(result.report, source=src.to_json())
    if not (writes and may_write()):
        return GitopsCycle(source=src, result=result, report_files=files, notes=tuple(notes), errors=tuple(errors))
    repo = InventoryRepo.open(source.remote)
    if isinstance(repo, GitFailure):
        errors.append(f"report: {repo.code}: {repo.message}")
        return GitopsCycle(
            source=src, result=result, report_files=files, notes=tuple(notes), errors=tuple(errors), report_failure=repo
        )
    counts = {k.lower(): v for k, v in result.report.counts().items() if k != "InSync"}
    if src.refused is not None:
        counts["refused revision"] = 1
    settings = desired.cluster.reports
    digests = reportcadence.digests(report_to_json(result.report), files, src.to_json())
    cadence = _cadence(repo, settings, digests, now)
    if cadence.held_until is not None:
        # Occupancy only, inside reports.minInterval: nothing new is queued (older queued reports are
        # still pushed). The next cycle past the interval, or any status change, commits it.
        flushed = flush_outbox(repo, signer=signer)
        outcome = ReportOutcome(
            status="held",
            pushed=flushed.pushed,
            pending=flushed.pending,
            failure=flushed.failure,
            attempts=flushed.attempts,
            held_until=cadence.held_until,
        )
        notes.append(f"report held back until {cadence.held_until.isoformat()}: {cadence.reason} (reports.minInterval)")
    else:
        outcome = commit_report(
            repo,
            settings=settings,
            files=files,
            message=f"{report_message(src.revision, counts)}\n\n{digests.trailers(settings.path)}\n",
            bot=bot,
            signer=signer,
            inventory=InventoryTarget(branch=source.ref.removeprefix("refs/heads/"), root=source.root),
        )
    if outcome.status in ("queued", "refused", "failed", "held") and outcome.failure is not None:
        # (held: an older queued report could not be pushed either)
        notes.append(f"report {outcome.status}: {outcome.failure.code}: {outcome.failure.message}")
    if outcome.status == "failed" and outcome.failure is not None:
        # Not even queued (the outbox cannot be written): the report is lost, which is an I/O error.
        errors.append(f"report: {outcome.failure.code}: {outcome.failure.message}")
    return GitopsCycle(
        source=src, result=result, report_files=files, report=outcome, notes=tuple(notes), errors=tuple(errors)
    )


def _cadence(
    repo: InventoryRepo, settings: ReportSettings, digests: reportcadence.ReportDigests, now: datetime | None
) -> reportcadence.Cadence:
    """Commit now or hold back (logic/reportcadence.py), against the newest report commit for this
    reports.path on the reports branch: its commit time and the digests its message carries. The
    branch is the record because it survives restarts, a fresh cache directory and a failover to
    another replica; the outbox does not."""
    tip = last_report(repo, settings.branch, lambda message: reportcadence.report_path(message) == settings.path)
    return reportcadence.decide(
        new=digests,
        last=None if tip is None else reportcadence.parse_trailers(tip.message, settings.path),
        last_commit_at=None if tip is None else tip.committed_at,
        now=now if now is not None else datetime.now(UTC),
        min_interval=timedelta(seconds=settings.min_interval_seconds),
    )
