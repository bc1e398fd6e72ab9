"""One GitOps cycle: inventory from Git (last known good) -> reconcile -> report committed back.

This is the cycle `migplan run` repeats (`GitCycle`, the controller's binding of it), `migplan
reconcile --once --repo` runs once and `migplan demo` shows (`run_gitops_cycle`); keeping it in one
place means the three cannot disagree about what a cycle does. Every one of them gets the same
reconciler.outcome.CycleOutcome back, and reads its exit code and metrics label from it.

Order and why:
1. The source decides what to act on: the newest revision if it validates (and is trusted), else
   the last known good one. A source that never validated means no cluster write at all.
2. The engine observes, plans and applies against that revision (or only observes with dry_run).
3. In `apply.mode: agent` the desired layouts for the node agents are changes of the engine's plan
   (the `migplan.io/mig-desired` annotation), applied through the cluster port like every other
   write: nothing here is specific to one entry point.
4. The report (drift + occupancy + what the source refused and why) is rendered without anything
   time-varying, so an unchanged cluster produces byte-identical files and no new commit. When it is
   written, a node's page is rendered only if its inputs changed since the last report (the memo of a
   long-lived process, else the page index on the reports branch: adapters/git/reportstore.py).
5. A report whose only change is occupancy (pods starting and stopping) is held back until
   `reports.minInterval` has passed since the last report commit; a status, finding, revision or
   source change commits at once (logic/reports/reportcadence.py). A held report is still this cycle's
   report: `-o json` and /metrics show it.
6. The report goes to the reports branch through the outbox, so a push race or a remote outage
   delays it but never drops it. With dry_run, or once this replica may no longer write (lost
   Lease, shutting down), nothing is committed.
All six hold the cache directory's lock (adapters/git/cachelock.py): two processes sharing a cache
directory run their cycles one after the other, or the second gives up cleanly (CacheLocked, MP830)
before it has read or written anything: a failed outcome, as every other failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.adapters.deadline import cycle_deadline
from reconciler.adapters.git.cachelock import cache_lock
from reconciler.adapters.git.commitsigning import CommitSigner
from reconciler.adapters.git.reports import (
    BotIdentity,
    InventoryTarget,
    ReportOutcome,
    commit_report,
    flush_outbox,
    last_report,
    report_message,
)
from reconciler.adapters.git.reportstore import store_report
from reconciler.adapters.git.source import GIT_FAILED, GitFailure, InventoryRepo
from reconciler.engine import ClusterPort, reconcile_once
from reconciler.logic.reports import reportcadence
from reconciler.logic.reports.reports import (
    RenderMemo,
    page_sources,
    render_reports,
    render_top_files,
    report_to_json,
)
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import ReportSettings
from reconciler.outcome import NO_REVISION, CycleContext, CycleOutcome
from reconciler.settings import DEFAULT_LOCK_TIMEOUT, Settings, verify_settings
from reconciler.sourcing import FileTrustStore, InventorySource, SourceResult, TrustStore

DEFAULT_BOT = BotIdentity()
log = logging.getLogger("migplan.run")


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
    memo: RenderMemo | None = None,
) -> CycleOutcome:
    """One cycle (see the module docstring); never raises migplan's own errors. A cache directory
    that cannot be had (CacheLocked / CacheUnusable, MP830 / MP831) is a failed outcome before
    anything is read or written. `deadline` (seconds) starts once the lock is held: waiting for
    another run is not this cycle's time."""
    try:
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
                memo=memo,
            )
    except MigplanError as exc:
        return CycleOutcome.aborted(exc)


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
    memo: RenderMemo | None = None,
) -> CycleOutcome:
    src = source.cycle()
    notes = _source_notes(src)
    if src.desired is None or src.revision is None:
        return CycleOutcome.of_cycle(src, None, notes=tuple(notes) or (NO_REVISION,))
    desired = src.desired
    result = reconcile_once(desired=desired, cluster=cluster, dry_run=dry_run, now=now, silent_after=silent_after)
    errors: list[str] = []
    writes = not dry_run and may_write()
    if result.report is None:
        return CycleOutcome.of_cycle(src, result, notes=tuple(notes))
    if not (writes and may_write()):
        files = render_reports(result.report, source=src.to_json(), memo=memo)
        return CycleOutcome.of_cycle(src, result, report_files=files, notes=tuple(notes))
    # Written to Git: the top files are rendered; a node page or map only when its inputs changed since the
    # report this process (memo) or the reports branch (its page index) holds, and straight into the object
    # database (adapters/git/reportstore.py). The outcome carries the top files; the pages are in Git.
    # drift.yaml's document, and what the report cadence digests: the largest value of a fleet's report cycle, so it
    # is digested and rendered first and not held while the pages are rendered and stored.
    report_json = report_to_json(result.report)
    status = reportcadence.status_digest(report_json, src.to_json())
    files = render_top_files(result.report, source=src.to_json(), doc=report_json)
    del report_json
    settings = desired.cluster.reports
    repo = InventoryRepo.open(source.remote)
    stored = (
        repo
        if isinstance(repo, GitFailure)
        else store_report(
            repo, branch=settings.branch, path=settings.path, top=files, pages=page_sources(result.report), memo=memo
        )
    )
    if isinstance(stored, GitFailure) or isinstance(repo, GitFailure):
        failure = stored if isinstance(stored, GitFailure) else GitFailure(GIT_FAILED, "no repository")
        errors.append(f"report: {failure.code}: {failure.message}")
        return CycleOutcome.of_cycle(
            src, result, report_files=files, notes=tuple(notes), errors=tuple(errors), report_failure=failure
        )
    counts = {k.lower(): v for k, v in result.report.counts().items() if k != "InSync"}
    if src.refused is not None:
        counts["refused revision"] = 1
    digests = reportcadence.ReportDigests(status=status, content=reportcadence.blobs_digest(stored.blobs))
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
            files={},
            blobs=stored.blobs,
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
    return CycleOutcome.of_cycle(
        src, result, report_files=files, report=outcome, notes=tuple(notes), errors=tuple(errors)
    )


def _cadence(
    repo: InventoryRepo, settings: ReportSettings, digests: reportcadence.ReportDigests, now: datetime | None
) -> reportcadence.Cadence:
    """Commit now or hold back (logic/reports/reportcadence.py), against the newest report commit for this
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


def _trust_store(settings: Settings) -> TrustStore | None:
    """Where the last verified revision is recorded: settings.trust_state_config_map (through the API),
    settings.trust_state_file (a volume), else None (the cache dir's state file)."""
    if settings.trust_state_config_map:
        from reconciler.adapters.kube.truststate import ConfigMapTrustStore

        return ConfigMapTrustStore(namespace=settings.namespace, name=settings.trust_state_config_map)
    if settings.trust_state_file:
        return FileTrustStore(Path(settings.trust_state_file), strict=True)
    return None


class GitCycle:
    """The cycle `migplan run` repeats (and runs once with `--once`), configured from Settings: the
    Git source, the report bot and signer, the lock timeout, the observers' silence threshold. Called
    by the controller loop with a CycleContext; the writes go through the loop's fenced client and
    stop when `ctx.may_write` turns false."""

    def __init__(
        self, settings: Settings, *, now: Callable[[], datetime] | None = None, watch_cluster: bool = False
    ) -> None:
        """`now`: the cycles' clock (default the real one; a simulation passes its own). `watch_cluster`: nodes
        and pods kept in watch-fed caches between cycles (`migplan run`; kube/informer.py), not listed each cycle."""
        from reconciler.adapters.git.commitsigning import load_signer
        from reconciler.adapters.git.source import GitAuth, GitRemote

        secret = settings.git_password.reveal() or None
        auth = GitAuth(
            username=settings.git_username or None,
            password=secret,
            ssh_private_key=Path(settings.git_ssh_key) if settings.git_ssh_key else None,
            known_hosts=Path(settings.git_known_hosts) if settings.git_known_hosts else None,
        )
        self.settings = settings
        self.now = now
        self.watch_cluster = watch_cluster
        self.bot = BotIdentity(settings.report_author_name, settings.report_author_email)
        # Loaded (and proven to sign) before the first cycle: a wrong key stops `migplan run` with MP730.
        self.signer = (
            load_signer(settings.report_signing_format, settings.report_signing_key)
            if settings.report_signing_format
            else None
        )
        self.remote = GitRemote(settings.repo, Path(settings.cache_dir), auth)
        # Trust is the operator's (settings, keys from mounted files), recorded outside the cache: a
        # restart, a failover or a force-push cannot roll the source back (reconciler/sourcing.py).
        self.trust_store = _trust_store(settings)
        self.source = InventorySource(
            self.remote,
            ref=settings.branch,
            root=settings.path,
            verify=verify_settings(settings),
            trust_store=self.trust_store,
            allow_rewind_to=settings.allow_rewind_to,
        )
        self._cluster: Any = None
        self._cluster_client: Any = None
        self.reports: list[ReportOutcome] = []  # per cycle (bounded), for tests and the soak
        # The last report's per-node files: a cycle renders again only the nodes whose values changed.
        self.render_memo = RenderMemo()

    def _kube(self, api_client: Any) -> ClusterPort:
        from reconciler.adapters.kube.cluster import KubeCluster

        if self._cluster is None or self._cluster_client is not api_client:
            if self._cluster is not None and self.watch_cluster:
                self._cluster.stop_watching()  # the caches of another client: their threads end
            self._cluster, self._cluster_client = KubeCluster(api_client, watch=self.watch_cluster), api_client
        return self._cluster  # type: ignore[no-any-return]

    def __call__(self, ctx: CycleContext) -> CycleOutcome:
        settings = self.settings
        bind = getattr(self.trust_store, "bind", None)
        if bind is not None:
            bind(ctx.api_client)  # the fenced client: a replica that lost the Lease cannot write the record
        outcome = run_gitops_cycle(
            source=self.source,
            cluster=self._kube(ctx.api_client),
            dry_run=settings.dry_run,
            may_write=ctx.may_write,
            lock_timeout=settings.cache_lock_timeout_seconds,
            bot=self.bot,
            signer=self.signer,
            now=self.now() if self.now is not None else None,
            silent_after=timedelta(seconds=settings.observe_heartbeat_seconds * settings.observe_silent_heartbeats),
            memo=self.render_memo,
        )
        latest = outcome.source.latest if outcome.source is not None else None
        for note in outcome.notes:
            log.warning(note, extra={"revision": str(latest or "")})
        if outcome.report is not None:
            self.reports = [*self.reports[-99:], outcome.report]
        return outcome


if TYPE_CHECKING:
    from reconciler.adapters.kube.truststate import ConfigMapTrustStore

    def _conforms(x: ConfigMapTrustStore) -> TrustStore:
        return x
