"""`migplan run`: the controller — periodic, leader-elected reconcile of a Git inventory.

Each cycle is reconciler.gitops.GitCycle — the one GitOps cycle `reconcile --once --repo` and the demo
run too: fetch the inventory branch and take its last known good revision, reconcile it against the
cluster through the controller's write-fenced API client (in `apply.mode: agent` the nodes' layouts
are changes of that plan), and commit the drift/occupancy report to the reports branch — each write
step only while this replica still holds the Lease. The loop around it (schedule, election, HTTP,
signals) is reconciler.controller.loop.

Configuration: flags > `MIGPLAN_*` environment > `--config` YAML file > defaults (reconciler.settings).
Exit codes: 0 stopped cleanly (SIGTERM); 1 the shutdown abandoned a cycle; 2 bad configuration. With
`--once`, the cycle's own exit code (reconciler.model.cycles.CycleStatus, as `reconcile --once --repo`):
0 in sync, 1 drift / not converged / newer revision refused, 2 a failed cycle.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from reconciler.commands.common import fail, failing
from reconciler.settings import load_settings


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
    from reconciler.controller.loop import Controller, kube_configuration, run_once
    from reconciler.gitops import GitCycle

    with failing():
        settings = load_settings(flags=_flags(**given), config_file=config_file)
    setup_logging(settings.log_format, settings.log_level)
    if not settings.repo:
        fail("--repo (or MIGPLAN_REPO) is required", code="MP800")
    with failing("cannot load the Kubernetes configuration: "):
        kube = kube_configuration(settings.kubeconfig)
    with failing():  # e.g. MP730: the report signing key cannot sign
        # A long-lived controller keeps nodes and pods in watch-fed caches; one cycle (--once) only lists.
        cycle = GitCycle(settings, watch_cluster=not once)
    if once:
        outcome = run_once(settings, cycle, kube)
        click.echo(f"{outcome.status.value}: {outcome.revision} {outcome.message}".rstrip())
        for e in outcome.failures:
            click.echo(f"error: {e}", err=True)
        sys.exit(outcome.exit_code)
    with failing():  # e.g. MP800: `listen` is in use or not an address of this host
        controller = Controller(settings, cycle, kube_config=kube)
    sys.exit(controller.run_forever())
