"""One GitOps cycle: inventory from Git (last known good) -> reconcile -> report committed back.

This is the cycle `migplan run` repeats, `migplan reconcile --once --repo` runs once and `migplan
demo` shows; keeping it in one place means the three cannot disagree about what a cycle does.

Order and why:
1. The source decides what to act on: the newest revision if it validates (and is trusted), else
   the last known good one. A source that never validated means no cluster write at all.
2. The engine observes, plans and applies against that revision (or only observes with dry_run).
3. The report (drift + occupancy + what the source refused and why) is rendered without anything
   time-varying, so an unchanged cluster produces byte-identical files and no new commit.
4. The report goes to the reports branch through the outbox, so a push race or a remote outage
   delays it but never drops it. With dry_run nothing is committed either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.adapters.gitreports import BotIdentity, ReportOutcome, commit_report, report_message
from reconciler.adapters.gitsource import GitFailure, InventoryRepo
from reconciler.engine import EXIT_DRIFT, EXIT_ERROR, ClusterPort, CycleResult, reconcile_once
from reconciler.logic.reports import render_reports
from reconciler.sourcing import InventorySource, SourceResult

DEFAULT_BOT = BotIdentity()


@dataclass(frozen=True, slots=True)
class GitopsCycle:
    source: SourceResult
    result: CycleResult | None  # None when no revision ever validated: nothing was observed or applied
    report_files: Mapping[str, bytes] = field(default_factory=dict)
    report: ReportOutcome | None = None  # None with dry_run or when there was nothing to report
    report_failure: GitFailure | None = None

    @property
    def exit_code(self) -> int:
        if self.result is None:
            return EXIT_ERROR
        if self.source.refused is not None or self.source.source_error is not None:
            # Acting on an older revision is not "in sync" with what the team merged.
            return max(self.result.exit_code, EXIT_DRIFT)
        return self.result.exit_code

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source.to_json()}
        if self.result is not None:
            out["cycle"] = self.result.to_json()
        if self.report is not None:
            out["report"] = {
                "status": self.report.status,
                "commit": self.report.commit,
                "pending": self.report.pending,
                "failure": None if self.report.failure is None else str(self.report.failure),
            }
        out["exit_code"] = self.exit_code
        return out


def run_gitops_cycle(
    *,
    source: InventorySource,
    cluster: ClusterPort,
    dry_run: bool = False,
    bot: BotIdentity = DEFAULT_BOT,
    now: datetime | None = None,
) -> GitopsCycle:
    src = source.cycle()
    if src.desired is None:
        return GitopsCycle(source=src, result=None)
    result = reconcile_once(desired=src.desired, cluster=cluster, dry_run=dry_run, now=now)
    if result.report is None:
        return GitopsCycle(source=src, result=result)
    files = render_reports(result.report)
    if dry_run:
        return GitopsCycle(source=src, result=result, report_files=files)
    repo = InventoryRepo.open(source.remote)
    if isinstance(repo, GitFailure):
        return GitopsCycle(source=src, result=result, report_files=files, report_failure=repo)
    counts = {k.lower(): v for k, v in result.report.counts().items() if k != "InSync"}
    if src.refused is not None:
        counts["refused revision"] = 1
    outcome = commit_report(
        repo,
        settings=src.desired.cluster.reports,
        files=files,
        message=report_message(result.report.revision, counts),
        bot=bot,
    )
    return GitopsCycle(source=src, result=result, report_files=files, report=outcome)
