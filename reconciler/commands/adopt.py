"""`migplan import`: adopt a running cluster (or a hand-written mig-parted file) as an inventory root.

    migplan import --kubeconfig F --out DIR [--cluster-name N] [--node N ...] [--force | --merge] [--deadline S]
                   [-o text|json]
    migplan import --from-mig-parted FILE --out DIR [--config NAME] [--model M] [--force | --merge]

From a cluster it writes cluster.yaml, nodes/<node>.yaml per GPU node and layouts/ for the cuts several GPUs
share (reconciler.logic.adoption.adopt says which source wins per GPU); from a mig-parted file, one layout per named
config and device group. An existing inventory in DIR is never overwritten without --force (which replaces
cluster.yaml, nodes/ and layouts/ files and nothing else); --merge adds the nodes (and layouts) DIR lacks
and touches no existing file. The written root is validated in memory and the verdict printed.

Exit codes: 0 written and valid with no problem; 1 written, with problems (nodes skipped, doubtful GPUs
with the problem in a comment that `migplan validate` reports); 2 nothing written (usage, unreachable
cluster MP580, existing inventory MP581, unreadable mig-parted file MP586/MP587, cannot write MP589).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections import Counter
from pathlib import Path

import click

from reconciler.adapters.fsinventory import InventoryReadError, read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.commands.common import fail, output_option
from reconciler.logic.adoption.adopt import Imported, import_cluster
from reconciler.logic.adoption.adoptfiles import AdoptError, layouts_from_mig_parted, render_inventory
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.model.errors import MigplanError

__all__ = ["command"]

EXIT_OK, EXIT_PROBLEMS, EXIT_ERROR = 0, 1, 2
MAX_MIG_PARTED_BYTES = 1 << 20
DEFAULT_DEADLINE = 300.0  # seconds for the whole cluster read (a 5,000-node twin takes a few)
_CLUSTER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INVENTORY_PARTS = ("cluster.yaml", "nodes", "layouts")


def _existing(out: Path) -> dict[str, str]:
    """The inventory files already in `out` (path -> text); {} when it does not exist yet."""
    if not out.exists():
        return {}
    if not out.is_dir():
        fail(f"--out {out} exists and is not a directory", code="MP589")
    try:
        files = read_inventory_dir(out)
    except InventoryReadError as exc:
        fail(str(exc), code="MP589")
    return {
        p: b.decode("utf-8", "replace")
        for p, b in files.items()
        if p == "cluster.yaml" or (p.startswith(("nodes/", "layouts/")) and p.endswith(".yaml"))
    }


def _refuse_links(out: Path, files: dict[str, str]) -> None:
    """Every file goes to a path inside `out` with no symbolic link on the way: a `nodes/` or `layouts/` that is a
    link (committed in a cloned repository, say) would send the files, or with --force the overwrites, outside
    --out. Checked for all files before anything is written or removed, so a refusal writes nothing."""
    for rel in sorted(files):
        here = out
        for part in rel.split("/"):
            here = here / part
            if here.is_symlink():
                raise OSError(f"{here} is a symbolic link: migplan import writes only inside {out}")


def _write(out: Path, files: dict[str, str], *, replace: bool) -> None:
    try:
        _refuse_links(out, files)
        if replace:
            for part in _INVENTORY_PARTS:
                target = out / part
                if target.is_file() and not target.is_symlink():
                    target.unlink()
                elif target.is_dir() and not target.is_symlink():
                    for f in target.glob("*.yaml"):
                        if f.is_file() and not f.is_symlink():
                            f.unlink()
        for rel, text in sorted(files.items()):
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                raise OSError(f"{path} is a symbolic link")
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}", code="MP589")


def _cluster_name(given: str | None, kubeconfig: str) -> str:
    if given is not None:
        if len(given) > 253 or not _CLUSTER_NAME.fullmatch(given):
            raise click.BadParameter(
                "a cluster name: lowercase letters, digits, '-' and '.'", param_hint="--cluster-name"
            )
        return given
    from reconciler.adapters.kube.importer import context_cluster_name

    raw = (context_cluster_name(kubeconfig) or "default").lower()
    name = re.sub(r"[^a-z0-9.-]+", "-", raw).strip("-.")[:253] or "default"
    return name if _CLUSTER_NAME.fullmatch(name) else "default"


def _verdict(all_files: dict[str, str]) -> tuple[bool, int, int]:
    result = validate_inventory({p: t.encode() for p, t in all_files.items()})
    warnings = sum(1 for d in result.diagnostics if not d.is_error)
    return result.valid, len(result.errors), warnings


@click.command(name="import")
@click.option("--kubeconfig", default=None, help="Read the cluster this kubeconfig points at.")
@click.option(
    "--from-mig-parted",
    "mig_parted",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Turn this mig-parted config file into layouts instead of reading a cluster.",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Inventory root to write.")
@click.option("--cluster-name", default=None, help="metadata.name of cluster.yaml (default: the context's cluster).")
@click.option("--node", "nodes", multiple=True, help="Import only this node (repeatable).")
@click.option("--force", is_flag=True, help="Replace an existing inventory's cluster.yaml, nodes/ and layouts/.")
@click.option("--merge", is_flag=True, help="Add the nodes and layouts DIR lacks; touch no existing file.")
@click.option("--config", "config_name", default=None, help="With --from-mig-parted: only this named config.")
@click.option("--model", default=None, help="With --from-mig-parted: the GPU model of entries without a device filter.")
@click.option(
    "--deadline",
    type=click.FloatRange(min=1),
    default=DEFAULT_DEADLINE,
    show_default=True,
    help="Seconds the whole cluster read may take (a server that never answers ends it with MP580/MP811).",
)
@output_option("text", "json", show_default=False)
def command(
    kubeconfig: str | None,
    mig_parted: Path | None,
    out: Path,
    cluster_name: str | None,
    nodes: tuple[str, ...],
    force: bool,
    merge: bool,
    config_name: str | None,
    model: str | None,
    deadline: float,
    output: str,
) -> None:
    """Write an inventory root from a running cluster (or layouts from a mig-parted file)."""
    if (kubeconfig is None) == (mig_parted is None):
        raise click.UsageError("give exactly one of --kubeconfig and --from-mig-parted")
    if force and merge:
        raise click.UsageError("--force and --merge exclude each other")
    if mig_parted is None and (config_name is not None or model is not None):
        raise click.UsageError("--config and --model go with --from-mig-parted")
    if mig_parted is not None and (nodes or cluster_name is not None):
        raise click.UsageError("--node and --cluster-name go with --kubeconfig")
    existing = _existing(out)
    if existing and not (force or merge):
        fail(
            f"{out} already holds an inventory ({len(existing)} file(s)): pass --force to replace it or --merge "
            "to add what it lacks",
            code="MP581",
        )
    keep = existing if merge else {}
    if mig_parted is not None:
        _from_file(mig_parted, out, keep, config_name=config_name, model=model, replace=force, output=output)
    else:
        assert kubeconfig is not None
        _from_cluster(
            kubeconfig,
            out,
            keep,
            cluster_name=cluster_name,
            nodes=nodes,
            replace=force,
            output=output,
            deadline=deadline,
        )


def _from_file(
    path: Path,
    out: Path,
    keep: dict[str, str],
    *,
    config_name: str | None,
    model: str | None,
    replace: bool,
    output: str,
) -> None:
    try:
        # Opened non-blocking and checked on the descriptor: a FIFO (or a device) would block the open or the
        # read forever; a mig-parted config is a regular file.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                fail(f"{path} is not a regular file (a FIFO, a device or a socket): not read", code="MP586")
            raw = fh.read(MAX_MIG_PARTED_BYTES + 1)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}", code="MP586")
    if len(raw) > MAX_MIG_PARTED_BYTES:
        fail(f"{path} is larger than {MAX_MIG_PARTED_BYTES} bytes", code="MP586")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        fail(f"{path} is not UTF-8", code="MP586")
    try:
        files = layouts_from_mig_parted(text, load_catalog(), config=config_name, model=model)
    except AdoptError as exc:
        fail(f"{path}: {exc}", code=exc.code)
    skipped = sorted(p for p in files if p in keep)
    files = {p: t for p, t in files.items() if p not in keep}
    _write(out, files, replace=replace)
    if output == "json":
        click.echo(json.dumps({"written": sorted(files), "kept": skipped}, indent=2))
    else:
        for p in sorted(files):
            click.echo(f"wrote {out / p}")
        for p in skipped:
            click.echo(f"kept {out / p} (already there)")
    sys.exit(EXIT_OK)


def _summary(imported: Imported) -> Counter[str]:
    return Counter(c.source for n in imported.nodes for c in n.gpus)


def _from_cluster(
    kubeconfig: str,
    out: Path,
    keep: dict[str, str],
    *,
    cluster_name: str | None,
    nodes: tuple[str, ...],
    replace: bool,
    output: str,
    deadline: float,
) -> None:
    from reconciler.adapters.deadline import cycle_deadline
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.adapters.kube.importer import read_cluster

    name = _cluster_name(cluster_name, kubeconfig)
    try:
        kube = KubeCluster.from_kubeconfig(kubeconfig)
        try:
            with cycle_deadline(deadline):
                read = read_cluster(kube, cluster_name=name, only=nodes)
        finally:
            kube.close()
    except MigplanError as exc:
        fail(f"cannot read the cluster ({exc.code}): {exc.message}", code="MP580")
    catalog = load_catalog()
    already = {p[len("nodes/") : -len(".yaml")] for p in keep if p.startswith("nodes/")}
    facts = [f for f in read.nodes if f.node.name not in already]
    imported = import_cluster(facts, read.configs, catalog)
    layouts = {p: t for p, t in keep.items() if p.startswith("layouts/")}
    files = render_inventory(
        imported, None if "cluster.yaml" in keep else read.cluster, existing_layouts=layouts, catalog=catalog
    )
    _write(out, files, replace=replace)
    valid, errors, warnings = _verdict({**keep, **files})
    problems = list(imported.problems)
    for missing in read.not_found:
        click.echo(f"warning: node {missing} (--node) is not in the cluster", err=True)
    by_source = _summary(imported)
    code = EXIT_OK if valid and not problems and not read.not_found else EXIT_PROBLEMS
    if output == "json":
        doc = {
            "out": str(out),
            "nodes": [n.name for n in imported.nodes],
            "skipped": sorted(already),
            "gpus_by_source": dict(sorted(by_source.items())),
            "files": sorted(files),
            "problems": [{"code": p.code, "node": p.node, "message": p.message} for p in problems],
            "valid": valid,
            "errors": errors,
            "warnings": warnings,
        }
        click.echo(json.dumps(doc, indent=2))
        sys.exit(code)
    for p in problems:
        click.echo(f"warning {p.code}: {p.message}", err=True)
    sources = ", ".join(f"{n} from {s}" for s, n in sorted(by_source.items())) or "none"
    click.echo(f"imported {len(imported.nodes)} node(s) into {out}: {len(files)} file(s) written; GPUs: {sources}")
    if already:
        click.echo(f"kept {len(already)} node file(s) already in {out} (--merge)")
    verdict = "valid" if valid else f"INVALID ({errors} error(s))"
    click.echo(f"migplan validate {out}: {verdict}, {warnings} warning(s)")
    sys.exit(code)
