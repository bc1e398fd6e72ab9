"""`migplan reconcile --once`: one observe -> drift -> plan -> apply -> report cycle against a cluster.

    migplan reconcile --once --kubeconfig F [--inventory DIR] [--context C] [--dry-run] [-o text|json]

Exit codes: 0 the cluster is in sync with the inventory and nothing was left to do; 1 drift was
found (changes were made or held back, or the cluster has not converged yet: run again later);
2 error (invalid inventory, unreadable kubeconfig, an API request that failed). An invalid
inventory is refused before the cluster is contacted, with every diagnostic.

With `--repo` it runs the one GitOps cycle (reconciler.gitops.run_gitops_cycle, as `migplan run` and
the demo do); from a directory, the engine alone. Either way the verdict is a CycleOutcome
(reconciler.outcome) and the exit code is its status's (reconciler.model.cycles). Text output: the
plan, the findings and the occupancy tables; `-o json` prints the cycle's document (plan, applied,
errors, report) for scripts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import orjson
from tabulate import tabulate

from reconciler.adapters.fsinventory import InventoryReadError, read_inventory_dir
from reconciler.commands.common import fail, failing, output_option
from reconciler.commands.texttable import simple_table
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.cycles import EXIT_ERROR
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action
from reconciler.model.redaction import redact, redact_value
from reconciler.outcome import CycleOutcome
from reconciler.settings import DEFAULT_CYCLE_DEADLINE, DEFAULT_LOCK_TIMEOUT

MAX_NODE_ROWS = 50  # text output lists per-node occupancy up to this many nodes, then totals per profile


def load_desired(inventory: Path) -> tuple[DesiredState | None, tuple[Diagnostic, ...]]:
    """The validated desired state of an inventory directory, or None with the diagnostics why not."""
    from reconciler.commands import gcpause
    from reconciler.logic.inventory.validation import validate_inventory

    with gcpause.paused():
        result = validate_inventory(read_inventory_dir(inventory))
    return result.desired, tuple(result.diagnostics)


def render_text(result: CycleResult, outcome: CycleOutcome | None = None) -> str:
    """The cycle in text; the verdict line is the outcome's (default: the engine's alone)."""
    out: list[str] = []
    d = result.desired
    head = (
        f"migplan reconcile: {d.cluster.name} at {d.revision} (mode {result.mode}, strategy {d.cluster.mig_strategy})"
    )
    out.append(head + ("  [dry run: nothing written]" if result.dry_run else ""))
    if result.plan is not None:
        plan_rows: list[list[Any]] = [
            [c.action.value, c.subject, c.reason + (f" (blocked by {', '.join(c.blocked_by)})" if c.blocked_by else "")]
            for c in result.plan.changes
            if c.action is not Action.UNCHANGED
        ]
        out += ["", f"Plan: {len(result.plan.writes)} write(s), {len(result.plan.skipped)} held back"]
        if plan_rows:
            out.append(simple_table(plan_rows, ["action", "subject", "reason"]))
        if result.applied:
            out.append(f"Applied {len(result.applied)} write(s).")
        if result.not_applied:
            why = "dry run" if result.dry_run else f"mode {result.mode}" if not result.errors else "stopped by an error"
            out.append(f"Not applied ({why}): {len(result.not_applied)} write(s).")
    report = result.report
    if report is not None:
        findings = report.findings
        out += ["", f"Findings: {len(findings)}"]
        if findings:
            finding_rows: list[list[Any]] = [
                [f.node or "(cluster)", f.code, f.severity.value, f.message] for f in findings
            ]
            out.append(simple_table(finding_rows, ["node", "code", "severity", "message"]))
        occ_nodes = [n for n in report.nodes if n.occupancy]
        out += ["", "Occupancy:"]
        if len(occ_nodes) <= MAX_NODE_ROWS:
            occ_rows: list[list[Any]] = [
                [
                    n.name,
                    o.profile,
                    o.total,
                    o.used,
                    o.free,
                    ", ".join(h.pod + (f" ({h.owner})" if h.owner else "") for h in o.holders),
                ]
                for n in occ_nodes
                for o in n.occupancy
            ]
            out.append(
                tabulate(occ_rows, headers=["node", "profile", "total", "used", "free", "held by"], tablefmt="simple")
            )
        else:
            totals: dict[str, list[int]] = {}
            for n in occ_nodes:
                for o in n.occupancy:
                    t = totals.setdefault(o.profile, [0, 0])
                    t[0] += o.total
                    t[1] += o.used
            total_rows: list[list[Any]] = [[p, t, u, max(t - u, 0)] for p, (t, u) in sorted(totals.items())]
            out.append(f"({len(occ_nodes)} nodes: totals per profile; -o json has every node)")
            out.append(tabulate(total_rows, headers=["profile", "total", "used", "free"], tablefmt="simple"))
        out += ["", report.summary()]
    for e in result.errors:
        out.append(f"error {e.code} in {e.step}: {e.message}")
    code = (outcome or CycleOutcome.of_engine(result)).exit_code
    verdict = {0: "in sync", 1: "not converged (drift found or changes pending)", 2: "error"}[code]
    out.append(f"Result: {verdict} (exit {code})")
    return "\n".join(out)


def _refuse(diagnostics: Sequence[Diagnostic], output: str, inventory: Path) -> None:
    errors = [d for d in diagnostics if d.is_error]
    if output == "json":
        doc = {"refused": True, "inventory": str(inventory), "errors": [d.to_json() for d in errors]}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        for d in diagnostics:
            click.echo(str(d), err=True)
        click.echo(f"refusing to reconcile: the inventory {inventory} has {len(errors)} error(s)", err=True)
    sys.exit(EXIT_ERROR)


def _connect(kubeconfig: Path | None, context: str | None) -> Any:
    from reconciler.adapters.kube.cluster import KubeCluster

    with failing():
        # One cycle, one observation: a parse memo would never be read again (ParseMemo's `keep`).
        return KubeCluster.from_kubeconfig(
            str(kubeconfig) if kubeconfig else None, context=context, remember_parses=False
        )


def _emit_json(doc: dict[str, Any]) -> None:
    # Messages quote Git and the API server; a credential inside a URL never reaches a script.
    sys.stdout.buffer.write(orjson.dumps(redact_value(doc), option=orjson.OPT_INDENT_2) + b"\n")


def _from_repo(
    *,
    repo: str,
    branch: str,
    path: str,
    cache_dir: Path | None,
    cluster: Any,
    dry_run: bool,
    output: str,
    lock_timeout: float,
    deadline: float,
) -> int:
    """One GitOps cycle (reconciler.gitops): the inventory from Git, the report committed back.

    The cycle collector is paused for the whole cycle, as `migplan run` pauses it per cycle
    (reconciler/controller/gcpolicy.py): the cycle keeps the observed fleet alive while it decodes ten times
    as many short-lived JSON objects, and each full collection walks that whole heap for nothing to free
    (measured at 1,000 nodes: 3.4 s of a 7.8 s in-sync process; see docs/explanation/scale.md). The process
    ends right after, so the pause has no collection after it."""
    from reconciler.commands import gcpause, gitopts
    from reconciler.gitops import run_gitops_cycle
    from reconciler.sourcing import InventorySource

    source = InventorySource(gitopts.remote(repo, cache_dir), ref=branch, root=path)
    with gcpause.paused():
        cycle = run_gitops_cycle(
            source=source, cluster=cluster, dry_run=dry_run, lock_timeout=lock_timeout, deadline=deadline
        )
    src = cycle.source
    if src is None:  # the cache directory is locked by another run, or unusable: nothing done
        for e in cycle.errors:
            click.echo(f"error {e}", err=True)
        return cycle.exit_code
    if output == "json":
        _emit_json(cycle.to_json())
        return cycle.exit_code
    lines = [f"Source: {redact(repo)} {branch}{'/' + path if path else ''}: applying {src.revision or 'nothing'}"]
    if src.refused is not None:
        lines.append(f"  {src.refused.revision} is NOT applied: {src.refused.code} {src.refused.reason}")
        lines.extend(f"    {d}" for d in src.refused.diagnostics if d.is_error)
    if src.source_error is not None:
        lines.append(f"  source error: {src.source_error}")
    if cycle.result is not None:
        lines.append(render_text(cycle.result, cycle))
    if cycle.report is not None:
        lines.append(f"Report: {cycle.report.status}" + (f" ({cycle.report.commit})" if cycle.report.commit else ""))
    elif cycle.report_failure is not None:
        lines.append(f"Report not committed: {cycle.report_failure}")
    lines.extend(f"note: {n}" for n in cycle.notes)
    lines.extend(f"error: {e}" for e in cycle.errors)
    click.echo(redact("\n".join(lines)))
    return cycle.exit_code


@click.command(
    "reconcile",
    epilog="Exit codes: 0 in sync (nothing to do), 1 drift found or not converged yet (or a newer revision "
    "refused), 2 error (invalid inventory, Git source, kubeconfig, API).",
)
@click.option("--once", is_flag=True, required=True, help="Run one cycle and exit (the loop is `migplan run`).")
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), help="kubeconfig file (default: $KUBECONFIG)."
)
@click.option("--context", help="kubeconfig context.")
@click.option(
    "--inventory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Inventory root directory (cluster.yaml, nodes/, layouts/), when not reading from --repo.",
)
@click.option("--repo", help="Git repository (URL or local path) holding the inventory; the report is committed back.")
@click.option("--branch", default="main", show_default=True, help="Branch of --repo to apply.")
@click.option("--path", "root", default="", help="Inventory root inside --repo.")
@click.option(
    "--cache-dir", type=click.Path(file_okay=False, path_type=Path), help="Git cache (default ~/.cache/migplan)."
)
@click.option("--dry-run", is_flag=True, help="Plan and validate every write server-side (dryRun=All); write nothing.")
@click.option(
    "--deadline",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_CYCLE_DEADLINE,
    show_default=True,
    help="Seconds the cycle may take at most: no request outlives it (a server that never answers: exit 2).",
)
@click.option(
    "--lock-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_LOCK_TIMEOUT,
    show_default=True,
    help="Seconds to wait for another run holding the same --cache-dir (then exit 2, nothing done).",
)
@output_option("text", "json")
def command(
    once: bool,
    kubeconfig: Path | None,
    context: str | None,
    inventory: Path,
    repo: str | None,
    branch: str,
    root: str,
    cache_dir: Path | None,
    dry_run: bool,
    deadline: float,
    lock_timeout: float,
    output: str,
) -> None:
    """Observe the cluster, report drift and occupancy, and apply the inventory through the GPU Operator."""
    from reconciler.adapters.deadline import cycle_deadline

    if repo is not None:
        cluster = _connect(kubeconfig, context)
        try:
            code = _from_repo(
                repo=repo,
                branch=branch,
                path=root,
                cache_dir=cache_dir,
                cluster=cluster,
                dry_run=dry_run,
                output=output,
                lock_timeout=lock_timeout,
                deadline=deadline,
            )
        finally:
            cluster.close()
        sys.exit(code)
    try:
        desired, diagnostics = load_desired(inventory)
    except InventoryReadError as exc:
        fail(f"error: cannot read inventory {inventory}: {exc}")
    if desired is None:
        _refuse(diagnostics, output, inventory)
        return
    from reconciler.commands import gcpause

    cluster = _connect(kubeconfig, context)
    try:
        # The collector paused for the cycle, as for a --repo cycle (_from_repo says why).
        with cycle_deadline(deadline), gcpause.paused():
            result = reconcile_once(desired=desired, cluster=cluster, dry_run=dry_run)
    finally:
        cluster.close()
    outcome = CycleOutcome.of_engine(result)
    if output == "json":
        _emit_json(outcome.to_json())
    else:
        click.echo(render_text(result, outcome))
    sys.exit(outcome.exit_code)
