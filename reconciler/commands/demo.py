"""`migplan demo`: the main job end to end on the embedded default, no cluster needed.

    migplan demo [--workdir DIR] [--drift CASE ...] [-o text|json]

1. makes a local Git repository from the example inventory (`inventory/`);
2. starts a cluster twin built from that inventory (a Kubernetes API server on loopback with the
   GPU Operator's behaviour and NVML twins), with drift injected: the ClusterPolicy on `single` (the
   default that refuses a mixed cut), a stale device-plugin config naming its own strategy, an H100
   cut by hand, a GPU node nobody documented, and a pod still asking for `nvidia.com/gpu`;
3. runs reconcile cycles with the repository as the source, through the official Kubernetes client,
   exactly as `migplan run` does (the first finds the drift and repairs what it may; the next ones
   follow the GPU Operator until the cluster settles), committing the drift and occupancy report to the
   `migplan-reports` branch after each cycle (a new commit only when the report changed);
4. prints where to look.
Exit code: 0 when the last cycle ran without error (remaining drift is reported, not an error), 2 otherwise.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click
import orjson

DEFAULT_DRIFT = (
    "wrong-strategy:single",
    "stale-device-plugin-config",
    "gpu-recut:gpu-h100-01",
    "undocumented-node",
    "pod-wants-gpu:gpu-h200-01",
)
MAX_CYCLES = 4


@click.command("demo")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where to create the demo repository (default: a new temporary directory).",
)
@click.option(
    "--drift",
    "drift",
    multiple=True,
    help="Drift case to inject into the twin (repeatable; default: a representative set).",
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(workdir: Path | None, drift: tuple[str, ...], output: str) -> None:
    """Run the main job end to end on the embedded example inventory and a cluster twin."""
    from reconciler.adapters.fsinventory import read_inventory_dir
    from reconciler.adapters.gitseed import seed_repository
    from reconciler.adapters.gitsource import GitRemote
    from reconciler.adapters.kube import KubeCluster
    from reconciler.gitops import run_gitops_cycle
    from reconciler.resources import inventory_dir
    from reconciler.sourcing import InventorySource
    from reconciler.twin.cluster import ClusterTwin

    say = (lambda msg: click.echo(msg, err=True)) if output == "json" else click.echo
    base = workdir or Path(tempfile.mkdtemp(prefix="migplan-demo-"))
    repo_path = base / "inventory-repo"
    try:
        revision = seed_repository(repo_path, read_inventory_dir(inventory_dir()))
    except (OSError, FileExistsError) as exc:
        click.echo(f"error: cannot create the demo repository: {exc}", err=True)
        sys.exit(2)
    say(f"1. inventory repository: {repo_path} (main@{revision.short})")

    cases = drift or DEFAULT_DRIFT
    cycles = []
    with ClusterTwin.from_inventory(repo_path, drift=cases) as twin:
        say(f"2. cluster twin at {twin.url} (for the demo's duration); drift injected: {', '.join(cases)}")
        source = InventorySource(GitRemote(str(repo_path), cache_dir=base / "cache"), ref="main")
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
        try:
            for n in range(1, MAX_CYCLES + 1):
                cycle = run_gitops_cycle(source=source, cluster=cluster)
                cycles.append(cycle)
                twin.settle()
                say(_cycle_line(n, cycle))
                # Stop once migplan has nothing left to write: what remains is drift only people can
                # fix (an undocumented node, a pod asking for a resource that no longer exists).
                if cycle.result is None or cycle.result.errors or not cycle.result.applied:
                    break
        finally:
            cluster.close()

    last = cycles[-1]
    if output == "json":
        doc = {
            "workdir": str(base),
            "repository": str(repo_path),
            "reportsBranch": "migplan-reports",
            "cycles": [c.to_json() for c in cycles],
        }
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        readme = last.report_files.get("README.md", b"").decode("utf-8")
        say("")
        say("Report (reports/README.md on branch migplan-reports), first lines:")
        say("\n".join("    " + line for line in readme.splitlines()[:25]))
        say("")
        say("Where to look:")
        say(f"    git -C {repo_path} log --oneline --all")
        say(f"    git -C {repo_path} show migplan-reports:reports/README.md")
        say(f"    git -C {repo_path} show migplan-reports:reports/drift.yaml")
        say("To explore a twin with kubectl: migplan twin --inventory DIR --kubeconfig-out FILE")
    sys.exit(0 if last.result is not None and not last.result.errors else 2)


def _cycle_line(n: int, cycle: object) -> str:
    from reconciler.gitops import GitopsCycle

    assert isinstance(cycle, GitopsCycle)
    if cycle.result is None:
        return f"3.{n} cycle {n}: no valid inventory revision; nothing applied"
    r = cycle.result
    counts = r.report.counts() if r.report else {}
    status = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    findings = len(r.report.findings) if r.report else 0
    held = len(r.plan.skipped) if r.plan else 0
    report = cycle.report.status if cycle.report else "not committed"
    commit = f" {cycle.report.commit[:12]}" if cycle.report and cycle.report.commit else ""
    errors = f"; errors: {'; '.join(str(e) for e in r.errors)}" if r.errors else ""
    return (
        f"3.{n} cycle {n} at {r.desired.revision}: nodes {status or 'none'}; {findings} finding(s); "
        f"{len(r.applied)} write(s) applied, {held} held back; report {report}{commit}{errors}"
    )
