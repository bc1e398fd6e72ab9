"""`migplan validate [ROOT] [-o text|json|github|codequality|sarif]`: check an inventory root before it is merged.

    migplan validate [ROOT]                          a directory (default: the inventory root the working
                                                     directory is in, found as git finds its repository)
    migplan validate --example                       the embedded example inventory, asked for by name
    migplan validate --repo R --rev REV [--path P]   a Git revision (URL or local repository), read from
                                                     the object database without a work tree
    migplan validate --repo R --rev REV --base BASE  also compare with BASE: a placement-only change under
                                                     apply.mode gpu-operator is warning MP414 (as in `plan`)

Exit codes: 0 valid (warnings allowed), 1 invalid, 2 usage or I/O error (missing root; no ROOT given and the
working directory in no inventory: MP413, reconciler/adapters/standroot.py; never the example's green instead).
Text output: one line per diagnostic, `file:line: error CODE: message`, where the solver put the
partitions written without `placement:`, then a summary line. JSON output (DESIGN.md):
`{"valid", "errors": [{"code", "message", "file", "line", ...}], "warnings": [...]}` plus
`placements` (solver choices) and `notes` (derived placement tables) for scripts that want them.

`-o github|codequality|sarif` print the same diagnostics as annotations CI systems show on the
changed line (reconciler/logic/review/ciannotations.py); their paths are relative to the repository (`--path`
in front) or, for a directory, to the working directory, which is where CI resolves them.

Getting the files is one call (`load_files`), so another source (a Git revision) can be added
without touching the rest.

Several clusters in one repository: without --path (or for a ROOT directory that holds no
cluster.yaml), every inventory root is found (reconciler/logic/inventory/inventoryroots.py: a repository-level
`migplan-roots.yaml`, else each directory with a `cluster.yaml`) and validated; text and JSON have
one section per root (`{"valid", "roots": [...]}`), annotations carry each root's path, and the exit
code is the worst of them. With one root (or none found) the output is exactly the single-root one.
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
from reconciler.commands import gcpause, quickexit
from reconciler.commands.common import fail, output_option
from reconciler.logic.inventory.reporttarget import normalize_root
from reconciler.logic.inventory.validation import ValidationResult, solver_choices, validate_inventory
from reconciler.logic.review import ciannotations
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.inventory import DesiredState
from reconciler.model.revisions import WORKDIR, Revision

MAX_TEXT_PLACEMENTS = 20  # beyond this the text output says how many more; -o json has them all


def load_files(root: Path) -> tuple[str, Mapping[str, bytes]]:
    """The inventory to validate: (a label for messages, path -> bytes). Raises InventoryReadError."""
    return str(root), read_inventory_dir(root)


def load_revision_files(
    repo: str, rev: str, *, path: str, cache_dir: Path | None, fetch: bool = True
) -> tuple[str, Mapping[str, bytes], Mapping[str, str], Revision, str | None]:
    """The inventory root `path` at `rev` of `repo`: (label, files, blob ids, revision, the branch
    `rev` names or None). Raises GitLoadError."""
    from reconciler.adapters.git.source import ROOT_NOT_FOUND, GitFailure, InventoryRepo
    from reconciler.commands import gitopts

    remote = gitopts.remote(repo, cache_dir)
    opened = InventoryRepo.open(remote)
    if isinstance(opened, GitFailure):
        raise GitLoadError(str(opened))
    if fetch and not remote.is_local and (failure := opened.fetch()) is not None:
        raise GitLoadError(str(failure))
    revision = opened.resolve(rev)
    if isinstance(revision, GitFailure):
        raise GitLoadError(str(revision))
    snap = opened.read(revision, path)
    if isinstance(snap, GitFailure):
        if snap.code == ROOT_NOT_FOUND:
            raise RootNotAtRevision(str(snap))
        raise GitLoadError(str(snap))
    label = f"{revision}" + (f":{path}" if path else "")
    return label, snap.files, snap.blob_ids, revision, opened.branch_named(rev)


class GitLoadError(Exception):
    """The revision could not be read (remote down, credentials refused, unknown revision, no such root)."""


class RootNotAtRevision(GitLoadError):
    """The inventory root is not a directory at that revision (MP705): for --base, a root the change adds."""


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
    # OPT_APPEND_NEWLINE, not + b"\n": the document is 25 MB at 5,000 nodes, and the + would copy it.
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


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


ANNOTATIONS = ciannotations.FORMATS


def path_prefix(root: Path | None, repo_path: str | None) -> str:
    """How CI names the inventory root: its path in the repository, or relative to the working directory."""
    if repo_path is not None:
        return repo_path.strip("/")
    where = root if root is not None else Path(".")
    return Path(os.path.relpath(where.resolve(), Path.cwd())).as_posix()


def render_annotations(result: ValidationResult, *, output: str, prefix: str) -> bytes:
    return ciannotations.render(result.diagnostics, output=output, prefix=prefix, version=__version__)


@click.command("validate")
@click.argument("root", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option("--repo", default=None, help="Validate a Git revision of this repository (URL or local path).")
@click.option("--rev", default=None, help="Branch, tag or commit to validate (with --repo; default HEAD).")
@click.option(
    "--path", "path", default="", help="Inventory root inside the repository (with --repo; default: every root found)."
)
@click.option(
    "--base",
    default=None,
    help="With --repo: compare with this revision too; a placement-only change under apply.mode gpu-operator "
    "is warning MP414, as in `migplan plan`.",
)
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None, help="Cache for remote repositories.")
@click.option("--example", is_flag=True, help="Validate the embedded example inventory (what `migplan demo` uses).")
@output_option("text", "json", *ANNOTATIONS, help="Output format (github, codequality, sarif: CI annotations).")
def command(
    root: Path | None,
    repo: str | None,
    rev: str | None,
    path: str,
    base: str | None,
    cache_dir: Path | None,
    example: bool,
    output: str,
) -> None:
    """Validate an inventory root (default: the one the working directory is in) or a Git revision.

    Exit status: 0 valid (warnings allowed), 1 invalid, 2 usage or I/O error (MP413: no ROOT given and the
    working directory is in no inventory)."""
    if repo is not None and root is not None:
        raise click.UsageError("give either ROOT or --repo, not both")
    if example and (root is not None or repo is not None):
        raise click.UsageError("give either --example, ROOT or --repo")
    if repo is None and (rev is not None or path or base is not None):
        raise click.UsageError("--rev, --path and --base need --repo")
    if repo is None and root is None:
        root = resources.inventory_dir() if example else standing("validate", "ROOT", "--example")
    catalog = load_catalog()
    checked: list[tuple[str, str, ValidationResult]] = []  # (root in repository or directory, label, result)
    try:
        for where in _roots(root, repo, rev or "HEAD", path, cache_dir):
            revision: Revision = WORKDIR
            blob_ids: Mapping[str, str] | None = None
            branch: str | None = None  # unknown for a directory: MP412 then assumes the reports branch is followed
            if repo is not None:
                label, files, blob_ids, revision, branch = load_revision_files(
                    repo, rev or "HEAD", path=where, cache_dir=cache_dir, fetch=bool(path)
                )
            else:
                label, files = load_files(_under(root, where))
            with gcpause.paused():
                result = validate_inventory(
                    files, catalog=catalog, revision=revision, blob_ids=blob_ids, followed_branch=branch,
                    root=normalize_root(where if repo is not None else ""),
                )  # fmt: skip
            if repo is not None and base is not None and result.desired is not None:
                result = _with_base(result, repo, base, where, cache_dir, catalog)
            checked.append((where, label, result))
    except (InventoryReadError, FileNotFoundError, GitLoadError) as exc:
        fail(f"migplan validate: {exc}")
    multi = len(checked) > 1
    # The collector stays paused through the output too: rendering 100,000 solver placements
    # allocates as many objects on top of the whole DesiredState, and each collection walks it all.
    with gcpause.paused():
        if output == "json":
            if multi:
                # DESIGN.md's contract stays true at the top (valid, errors, warnings: every root's, each file
                # named from the repository or directory), with each root's own document under `roots`.
                docs = [orjson.loads(render_json(r, root=label, catalog=catalog)) for _w, label, r in checked]
                doc = {
                    "valid": all(d["valid"] for d in docs),
                    "errors": [_from_top(w, d) for w, _l, r in checked for d in r.errors],
                    "warnings": [_from_top(w, d) for w, _l, r in checked for d in r.warnings],
                    "roots": docs,
                }
                sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
            else:
                sys.stdout.buffer.write(render_json(checked[0][2], root=checked[0][1], catalog=catalog))
            sys.stdout.flush()
        elif output in ANNOTATIONS:
            rendered = [
                render_annotations(
                    r, output=output, prefix=path_prefix(_under(root, w), w if repo is not None else None)
                )
                for w, _label, r in checked
            ]
            sys.stdout.buffer.write(rendered[0] if not multi else merge_annotations(output, rendered))
            sys.stdout.flush()
        else:
            texts = [
                (f"# inventory root {w or '/'}\n" if multi else "") + render_text(r, root=label, catalog=catalog)
                for w, label, r in checked
            ]
            if multi:
                bad = sum(1 for _w, _l, r in checked if not r.valid)
                texts.append(f"{len(checked)} inventory roots: {len(checked) - bad} valid, {bad} invalid\n")
            click.echo("".join(texts), nl=False)
    quickexit.request()  # nothing to clean up: no child process, temporary file or thread
    sys.exit(0 if all(r.valid for _w, _l, r in checked) else 1)


def _with_base(
    result: ValidationResult, repo: str, base: str, where: str, cache_dir: Path | None, catalog: Catalog
) -> ValidationResult:
    """`result` with the MP414 warnings of the change from `base` (reconciler/logic/review/unplaced.py). A root
    that `base` does not have is new: nothing of it moves. A base that does not validate is not compared (its own
    errors are its merge request's business). An unreadable base is an error (GitLoadError: exit 2)."""
    # On first use: the revision diff reads mig-parted configs (PyYAML), which `validate DIR` never loads.
    from reconciler.logic.review.unplaced import placement_only_between

    assert result.desired is not None
    try:
        _label, files, blob_ids, revision, branch = load_revision_files(
            repo, base, path=where, cache_dir=cache_dir, fetch=False
        )
    except RootNotAtRevision:
        return result
    with gcpause.paused():
        before = validate_inventory(
            files, catalog=catalog, revision=revision, blob_ids=blob_ids, followed_branch=branch,
            root=normalize_root(where),
        )  # fmt: skip
    if before.desired is None:
        return result
    extra = placement_only_between(before.desired, result.desired)
    if not extra:
        return result
    diagnostics = tuple(sorted(result.diagnostics + extra, key=lambda d: (d.file or "", d.line or 0)))
    return ValidationResult(result.desired, diagnostics)


def standing(command: str, named: str, example: str) -> Path:
    """The inventory root the working directory is in, or exit 2 saying where it looked (MP413) and how
    to name one: `migplan {command} {named}` or `migplan {command} {example}`."""
    from reconciler.adapters.standroot import NotInInventory, standing_root

    try:
        found = standing_root()
    except OSError as exc:
        click.echo(f"migplan {command}: the working directory cannot be read: {exc.strerror or exc}", err=True)
        sys.exit(2)
    if isinstance(found, NotInInventory):
        message = found.message(f"migplan {command} {named}", f"migplan {command} {example}")
        click.echo(f"migplan {command}: {message}", err=True)
        sys.exit(2)
    return found


def _from_top(where: str, diag: Diagnostic) -> dict[str, Any]:
    out = diag.to_json()
    if where and out.get("file"):
        out["file"] = f"{where}/{out['file']}"
    return out


def _under(root: Path | None, where: str) -> Path:
    base = root if root is not None else Path(".")
    return base / where if where else base


def _roots(root: Path | None, repo: str | None, rev: str, path: str, cache_dir: Path | None) -> list[str]:
    """The inventory roots to validate: --path, or those found (see the module docstring)."""
    if repo is None:
        if root is None or not root.is_dir():
            return [""]  # load_files words the problem
        from reconciler.adapters.dirroots import dir_roots

        found = dir_roots(root)
        if isinstance(found, str):
            raise GitLoadError(f"error MP747: {found}")
        return found
    if path:
        return [path]
    from reconciler.adapters.git.rootdiscovery import repo_roots
    from reconciler.adapters.git.source import GitFailure
    from reconciler.commands import gitopts

    roots = repo_roots(gitopts.remote(repo, cache_dir), rev)
    if isinstance(roots, GitFailure):
        raise GitLoadError(str(roots))
    return roots


def merge_annotations(output: str, rendered: list[bytes]) -> bytes:
    """Several roots' annotations as one document: workflow commands one after the other, Code Quality
    issues in one list, SARIF results in one run."""
    if output == "github":
        return b"".join(rendered)
    docs = [orjson.loads(r) for r in rendered]
    if output == "codequality":
        merged: Any = [issue for d in docs for issue in d]
    else:
        merged = docs[0]
        for d in docs[1:]:
            merged["runs"][0]["results"].extend(d["runs"][0]["results"])
    return orjson.dumps(merged, option=orjson.OPT_INDENT_2) + b"\n"
