"""`migplan validate [ROOT] [-o text|json|github|codequality|sarif]`: check an inventory root before it is merged.

    migplan validate [ROOT]                          a directory (default: the embedded example)
    migplan validate --repo R --rev REV [--path P]   a Git revision (URL or local repository), read from
                                                     the object database without a work tree

Exit codes: 0 valid (warnings allowed), 1 invalid, 2 usage or I/O error (missing root).
Text output: one line per diagnostic, `file:line: error CODE: message`, where the solver put the
partitions written without `placement:`, then a summary line. JSON output (DESIGN.md):
`{"valid", "errors": [{"code", "message", "file", "line", ...}], "warnings": [...]}` plus
`placements` (solver choices) and `notes` (derived placement tables) for scripts that want them.

`-o github|codequality|sarif` print the same diagnostics as annotations CI systems show on the
changed line (reconciler/logic/ciannotations.py); their paths are relative to the repository (`--path`
in front) or, for a directory, to the working directory, which is where CI resolves them.

Getting the files is one call (`load_files`), so another source (a Git revision) can be added
without touching the rest.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import orjson

from reconciler import __version__, resources
from reconciler.adapters.fsinventory import InventoryReadError, read_inventory_dir
from reconciler.catalog import Catalog, load_catalog
from reconciler.commands import gcpause
from reconciler.logic import ciannotations
from reconciler.logic.reporttarget import normalize_root
from reconciler.logic.validation import ValidationResult, solver_choices, validate_inventory
from reconciler.model.inventory import DesiredState
from reconciler.model.revisions import WORKDIR, Revision

MAX_TEXT_PLACEMENTS = 20  # beyond this the text output says how many more; -o json has them all


def load_files(root: Path | None) -> tuple[str, Mapping[str, bytes]]:
    """The inventory to validate: (a label for messages, path -> bytes). Raises InventoryReadError."""
    where = root if root is not None else resources.inventory_dir()
    return str(where), read_inventory_dir(where)


def load_revision_files(
    repo: str, rev: str, *, path: str, cache_dir: Path | None
) -> tuple[str, Mapping[str, bytes], Mapping[str, str], Revision, str | None]:
    """The inventory root `path` at `rev` of `repo`: (label, files, blob ids, revision, the branch
    `rev` names or None). Raises GitLoadError."""
    from reconciler.adapters.gitsource import GitFailure, InventoryRepo
    from reconciler.commands import gitopts

    remote = gitopts.remote(repo, cache_dir)
    opened = InventoryRepo.open(remote)
    if isinstance(opened, GitFailure):
        raise GitLoadError(str(opened))
    if not remote.is_local and (failure := opened.fetch()) is not None:
        raise GitLoadError(str(failure))
    revision = opened.resolve(rev)
    if isinstance(revision, GitFailure):
        raise GitLoadError(str(revision))
    snap = opened.read(revision, path)
    if isinstance(snap, GitFailure):
        raise GitLoadError(str(snap))
    label = f"{revision}" + (f":{path}" if path else "")
    return label, snap.files, snap.blob_ids, revision, opened.branch_named(rev)


class GitLoadError(Exception):
    """The revision could not be read (remote down, credentials refused, unknown revision, no such root)."""


def derived_notes(desired: DesiredState, catalog: Catalog) -> list[dict[str, Any]]:
    """Models in use whose placement table is borrowed from another model (H200 <- H100-80GB)."""
    used = sorted({g.model for n in desired.nodes.values() for g in n.gpus if g.mig_enabled})
    notes = []
    for key in used:
        model = catalog.get(key)
        if model is not None and model.placements_derived_from:
            notes.append(
                {
                    "model": key,
                    "placement_source": f"derived:{model.placements_derived_from}",
                    "message": f"{key} placements are derived from {model.placements_derived_from} (same die and "
                    "slice fractions; NVIDIA publishes them only as a diagram): NVML on the node is the final word",
                }
            )
    return notes


def _placements(desired: DesiredState) -> list[dict[str, Any]]:
    """Every solver choice as the JSON output lists it (the same walk as solver_choices, without
    an intermediate object per partition: a 5,000-node inventory has ~100,000 of them)."""
    out = []
    for node in desired.nodes.values():
        name = node.name
        for g in node.gpus:
            for p, pl in zip(g.partitions, g.placements, strict=False):
                if p.placement is None:
                    src = p.source
                    out.append(
                        {
                            "node": name,
                            "gpu": g.index,
                            "profile": p.profile,
                            "start": pl.start,
                            "size": pl.size,
                            "file": src.file if src else None,
                            "line": src.line if src else None,
                            "layout": g.layout,
                            "chosen_by": "solver",
                        }
                    )
    return out


def render_json(result: ValidationResult, *, root: str, catalog: Catalog) -> bytes:
    doc: dict[str, Any] = {
        "valid": result.valid,
        "errors": [d.to_json() for d in result.errors],
        "warnings": [d.to_json() for d in result.warnings],
        "root": root,
    }
    if result.desired is not None:
        doc["placements"] = _placements(result.desired)
        doc["notes"] = derived_notes(result.desired, catalog)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"


def render_text(result: ValidationResult, *, root: str, catalog: Catalog) -> str:
    lines = [str(d) for d in result.diagnostics]
    desired = result.desired
    if desired is not None:
        # One line per written partition: a layout used by many GPUs is placed once per model.
        grouped: dict[tuple[str, int, str, int], list[str]] = {}
        for c in solver_choices(desired):
            loc = c.source.file if c.source and c.source.file else "?"
            key = (loc, c.source.line or 0 if c.source else 0, c.profile, c.placement.start)
            grouped.setdefault(key, []).append(f"{c.node}/{c.gpu}")
        if grouped:
            lines.append("placements chosen by the solver:")
            for (file, line, profile, start), users in sorted(grouped.items())[:MAX_TEXT_PLACEMENTS]:
                who = users[0] if len(users) == 1 else f"{len(users)} GPUs"
                lines.append(f"  {file}:{line}: {profile} placed at {start} ({who})")
            if len(grouped) > MAX_TEXT_PLACEMENTS:
                lines.append(f"  ... and {len(grouped) - MAX_TEXT_PLACEMENTS} more (see -o json)")
        lines.extend(f"note: {n['message']}" for n in derived_notes(desired, catalog))
        all_gpus = [g for n in desired.nodes.values() for g in n.gpus]
        parts = sum(len(g.partitions) for g in all_gpus)
        size = f"{len(desired.nodes)} node(s), {len(all_gpus)} GPU(s), {parts} partition(s); "
    else:
        size = ""
    verdict = "valid" if result.valid else "INVALID"
    lines.append(f"{root}: {verdict}: {size}{len(result.errors)} error(s), {len(result.warnings)} warning(s)")
    return "\n".join(lines) + "\n"


ANNOTATIONS = ("github", "codequality", "sarif")


def path_prefix(root: Path | None, repo_path: str | None) -> str:
    """How CI names the inventory root: its path in the repository, or relative to the working directory."""
    if repo_path is not None:
        return repo_path.strip("/")
    where = root if root is not None else resources.inventory_dir()
    return Path(os.path.relpath(where.resolve(), Path.cwd())).as_posix()


def render_annotations(result: ValidationResult, *, output: str, prefix: str) -> bytes:
    diags = result.diagnostics
    if output == "github":
        return ciannotations.github_commands(diags, prefix=prefix).encode("utf-8")
    doc: Any
    if output == "codequality":
        doc = ciannotations.codequality(diags, prefix=prefix)
    else:
        doc = ciannotations.sarif(diags, prefix=prefix, version=__version__)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"


@click.command("validate")
@click.argument("root", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option("--repo", default=None, help="Validate a Git revision of this repository (URL or local path).")
@click.option("--rev", default=None, help="Branch, tag or commit to validate (with --repo; default HEAD).")
@click.option("--path", "path", default="", help="Inventory root inside the repository (with --repo).")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None, help="Cache for remote repositories.")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json", *ANNOTATIONS]),
    default="text",
    show_default=True,
    help="Output format (github, codequality, sarif: CI annotations).",
)
def command(
    root: Path | None, repo: str | None, rev: str | None, path: str, cache_dir: Path | None, output: str
) -> None:
    """Validate an inventory root (default: the embedded example inventory) or a Git revision.

    Exit status: 0 valid (warnings allowed), 1 invalid, 2 usage or I/O error."""
    if repo is not None and root is not None:
        raise click.UsageError("give either ROOT or --repo, not both")
    if repo is None and (rev is not None or path):
        raise click.UsageError("--rev and --path need --repo")
    revision: Revision = WORKDIR
    blob_ids: Mapping[str, str] | None = None
    branch: str | None = None  # unknown for a directory: MP412 then assumes the reports branch is followed
    try:
        if repo is not None:
            label, files, blob_ids, revision, branch = load_revision_files(
                repo, rev or "HEAD", path=path, cache_dir=cache_dir
            )
        else:
            label, files = load_files(root)
    except (InventoryReadError, FileNotFoundError, GitLoadError) as exc:
        click.echo(f"migplan validate: {exc}", err=True)
        sys.exit(2)
    catalog = load_catalog()
    # The collector stays paused through the output too: rendering 100,000 solver placements
    # allocates as many objects on top of the whole DesiredState, and each collection walks it all.
    with gcpause.paused():
        result = validate_inventory(
            files,
            catalog=catalog,
            revision=revision,
            blob_ids=blob_ids,
            followed_branch=branch,
            root=normalize_root(path),
        )
        if output == "json":
            sys.stdout.buffer.write(render_json(result, root=label, catalog=catalog))
            sys.stdout.flush()
        elif output in ANNOTATIONS:
            prefix = path_prefix(root, path if repo is not None else None)
            sys.stdout.buffer.write(render_annotations(result, output=output, prefix=prefix))
            sys.stdout.flush()
        else:
            click.echo(render_text(result, root=label, catalog=catalog), nl=False)
    sys.exit(0 if result.valid else 1)
