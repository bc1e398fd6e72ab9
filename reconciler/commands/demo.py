"""`migplan demo`: the main job end to end on the embedded default, no cluster needed (reconciler.demo).

    migplan demo [--inventory DIR] [--workdir DIR] [--drift CASE ...] [--keep] [-o text|json]
    migplan demo --dra [--workdir DIR] [-o text|json]   (a re-cut on a DRA-static node: reconciler.drademo)

Exit code: 0 when the last cycle did not fail (remaining drift is the demo's expected outcome: reported,
not an error), else the failed cycle's own exit code (2, reconciler.model.cycles.CycleStatus); 2 when the demo
repository cannot be created or the --inventory cannot be read or does not validate (its errors printed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from reconciler.commands.common import fail, output_option


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
@click.option("--keep", is_flag=True, help="Keep the twin running for kubectl until Ctrl-C.")
@click.option(
    "--inventory",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="Run on this inventory root instead of the embedded example.",
)
@click.option(
    "--dra",
    is_flag=True,
    help="Instead: a re-cut on a node where NVIDIA's DRA driver allocates the MIG devices, from the merge to "
    "converged slices and a nvidia.com/mig-<profile> pod placed through the DeviceClass migplan renders.",
)
@output_option("text", "json")
def command(
    workdir: Path | None, drift: tuple[str, ...], keep: bool, inventory: Path | None, dra: bool, output: str
) -> None:
    """Run the main job end to end on the embedded example inventory (or --inventory) and a cluster twin."""
    say: Callable[[str], None] = (lambda msg: click.echo(msg, err=True)) if output == "json" else click.echo
    if dra:
        if drift or keep or inventory is not None:
            fail("error: --dra runs its own scenario: it takes no --drift, --keep or --inventory")
        from reconciler.drademo import run_dra_demo

        sys.exit(run_dra_demo(workdir, output=output, say=say, emit=click.echo))
    from reconciler.demo import DemoInventoryError, DemoRepositoryError, run_demo

    try:
        code = run_demo(workdir, drift, keep=keep, output=output, say=say, inventory=inventory)
    except DemoInventoryError as exc:
        fail(f"error: {exc}")
    except DemoRepositoryError as exc:
        fail(f"error: cannot create the demo repository: {exc}")
    sys.exit(code)
