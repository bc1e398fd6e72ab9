"""`migplan run`: the controller — periodic, leader-elected reconcile of a Git inventory.

One cycle (`GitCycle`): fetch the inventory branch and take its last known good revision
(reconciler.sourcing), run the engine's `reconcile_once` against the cluster through the controller's
write-fenced API client, publish the desired layouts for the node agents in `apply.mode: agent`, and
commit the drift/occupancy report to the reports branch — each write step only while this replica
still holds the Lease. The loop around it (schedule, election, HTTP, signals) is
reconciler.controller.loop.

Configuration: flags > `MIGPLAN_*` environment > `--config` YAML file > defaults (reconciler.settings).
Exit codes: 0 stopped cleanly (SIGTERM, or `--once` in sync), 1 `--once` found drift or the shutdown
abandoned a cycle, 2 bad configuration or a failed `--once` cycle.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from reconciler.controller.loop import CycleContext, CycleOutcome
from reconciler.model.codes import IN_PROGRESS_CODES
from reconciler.model.errors import MigplanError
from reconciler.settings import Settings, load_settings

log = logging.getLogger("migplan.run")


class GitCycle:
    """The production cycle: Git source → engine → agent-mode publish → report commit."""

    def __init__(self, settings: Settings, *, now: Callable[[], datetime] | None = None) -> None:
        """`now`: the cycles' clock (default the real one; a simulation passes its own)."""
        from reconciler.adapters.commitsigning import load_signer
        from reconciler.adapters.gitreports import BotIdentity
        from reconciler.adapters.gitsource import GitAuth, GitRemote
        from reconciler.sourcing import InventorySource

        secret = settings.git_password.reveal() or None
        auth = GitAuth(
            username=settings.git_username or None,
            password=secret,
            ssh_private_key=Path(settings.git_ssh_key) if settings.git_ssh_key else None,
            known_hosts=Path(settings.git_known_hosts) if settings.git_known_hosts else None,
        )
        self.settings = settings
        self.now = now
        self.bot = BotIdentity(settings.report_author_name, settings.report_author_email)
        # Loaded (and proven to sign) before the first cycle: a wrong key stops `migplan run` with MP730.
        self.signer = (
            load_signer(settings.report_signing_format, settings.report_signing_key)
            if settings.report_signing_format
            else None
        )
        self.remote = GitRemote(settings.repo, Path(settings.cache_dir), auth)
        self.source = InventorySource(self.remote, ref=settings.branch, root=settings.path)
        self._cluster: Any = None
        self._cluster_client: Any = None
        self.reports: list[Any] = []  # ReportOutcome per cycle (bounded), for tests and the soak

    def _kube(self, api_client: Any) -> Any:
        from reconciler.adapters.kube import KubeCluster

        if self._cluster is None or self._cluster_client is not api_client:
            self._cluster, self._cluster_client = KubeCluster(api_client), api_client
        return self._cluster

    def __call__(self, ctx: CycleContext) -> CycleOutcome:
        from reconciler.gitops import run_gitops_cycle

        try:
            cycle = run_gitops_cycle(
                source=self.source,
                cluster=self._kube(ctx.api_client),
                dry_run=self.settings.dry_run,
                may_write=ctx.may_write,
                lock_timeout=self.settings.cache_lock_timeout_seconds,
                bot=self.bot,
                signer=self.signer,
                now=self.now() if self.now is not None else None,
                silent_after=timedelta(
                    seconds=self.settings.observe_heartbeat_seconds * self.settings.observe_silent_heartbeats
                ),
            )
        except MigplanError as exc:  # the cache directory is held by another process, or unusable
            return CycleOutcome("failed", errors=(f"{exc.code}: {exc.message}",), message=exc.message)
        src = cycle.source
        for note in cycle.notes:
            log.warning(note, extra={"revision": str(src.latest or "")})
        if cycle.report is not None:
            self.reports = [*self.reports[-99:], cycle.report]
        result = cycle.result
        if result is None or src.desired is None:
            return CycleOutcome("failed", errors=cycle.notes or ("no valid inventory revision yet",))
        errors = [str(e) for e in result.errors] + list(cycle.errors)
        in_flight = 0
        if result.report is not None:
            in_flight = sum(1 for n in result.report.nodes if any(f.code in IN_PROGRESS_CODES for f in n.findings))
        status = "failed" if errors else ("success" if result.converged else "drift")
        return CycleOutcome(
            status,
            revision=str(src.revision),
            report=result.report,
            plan=result.plan,
            applied=result.applied,
            errors=tuple(errors),
            nodes_in_flight=in_flight,
            cluster_policy=src.desired.cluster.gpu_operator.cluster_policy,
            message="; ".join(cycle.notes),
            report_status=cycle.report.status if cycle.report is not None else "",
            report_pending=cycle.report.pending if cycle.report is not None else 0,
            report_held_until=(
                cycle.report.held_until.timestamp()
                if cycle.report is not None and cycle.report.held_until is not None
                else 0.0
            ),
        )


def _flags(**given: Any) -> dict[str, Any]:
    return {k: v for k, v in given.items() if v is not None and v != ()}


@click.command("run")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="YAML settings file (MIGPLAN_CONFIG).")
@click.option("--repo", help="Inventory repository URL or local path.")
@click.option("--branch", help="Branch (or ref) to follow.")
@click.option("--path", help="Inventory root inside the repository.")
@click.option("--kubeconfig", help="Kubeconfig file; in-cluster configuration when omitted.")
@click.option("--namespace", help="Namespace of the leader Lease.")
@click.option("--interval", "interval_seconds", type=float, help="Seconds between cycles.")
@click.option("--jitter", "jitter_seconds", type=float, help="Random delay added to each interval, in seconds.")
@click.option(
    "--cycle-deadline", "cycle_deadline_seconds", type=float, help="Seconds one cycle may take at most (default 30)."
)
@click.option("--listen", help="HOST:PORT of /metrics, /healthz, /readyz and /webhook.")
@click.option("--identity", help="This replica's name in the Lease (default: POD_NAME or the hostname).")
@click.option("--leader-election/--no-leader-election", default=None, help="Elect a leader through a Lease.")
@click.option("--lease-duration", "lease_duration_seconds", type=int, help="Lease duration in seconds.")
@click.option("--cache-dir", help="Where the Git cache and the report outbox live.")
@click.option("--log-format", type=click.Choice(["text", "json"]), help="Log format.")
@click.option("--log-level", help="Log level (DEBUG, INFO, …).")
@click.option("--dry-run", is_flag=True, default=None, help="Plan and report, write nothing.")
@click.option("--once", is_flag=True, help="Run one cycle (no election, no HTTP) and exit with its verdict.")
def command(config_file: str | None, once: bool, **given: Any) -> None:
    """Run the controller: reconcile the inventory every interval, on SIGHUP and on a push webhook."""
    from reconciler.controller.logs import setup_logging
    from reconciler.controller.loop import Controller, kube_configuration

    try:
        settings = load_settings(flags=_flags(**given), config_file=config_file)
    except MigplanError as exc:
        click.echo(f"error {exc.code}: {exc.message}", err=True)
        sys.exit(2)
    setup_logging(settings.log_format, settings.log_level)
    if not settings.repo:
        click.echo("error MP800: --repo (or MIGPLAN_REPO) is required", err=True)
        sys.exit(2)
    try:
        kube = kube_configuration(settings.kubeconfig)
    except MigplanError as exc:
        click.echo(f"error {exc.code}: cannot load the Kubernetes configuration: {exc.message}", err=True)
        sys.exit(2)
    try:
        cycle = GitCycle(settings)
    except MigplanError as exc:  # e.g. MP730: the report signing key cannot sign
        click.echo(f"error {exc.code}: {exc.message}", err=True)
        sys.exit(2)
    if once:
        from reconciler.adapters import deadline, kubeclient

        ctx = CycleContext("once", kubeclient.api_client(kube), lambda: not settings.dry_run, settings)
        with deadline.cycle_deadline(settings.cycle_deadline_seconds):
            outcome = cycle(ctx)
        click.echo(f"{outcome.result}: {outcome.revision} {outcome.message}".rstrip())
        for e in outcome.errors:
            click.echo(f"error: {e}", err=True)
        sys.exit({"success": 0, "drift": 1}.get(outcome.result, 2))
    controller = Controller(settings, cycle, kube_config=kube)
    sys.exit(controller.run_forever())
