"""`migplan check-workloads PATH...|-`: the manifests that ask for partitions, against the plan, before merge.

    migplan check-workloads deploy/ [--inventory ROOT]           the plan of a directory (default: the inventory
                                                                 root the working directory is in, as `validate`)
    migplan check-workloads deploy/ --example                    the plan of the embedded example, by name
    migplan check-workloads - --repo R --rev REV [--path P]      the plan at a Git revision; manifests on stdin
        [--reports-from-git]                                     free partitions from the last committed report
        [--kubeconfig F]                                         free partitions, labels and taints from the cluster

`helm template ... | migplan check-workloads -` and `kubectl kustomize ... | migplan check-workloads -` work.
Exit codes as `validate`: 0 no error (warnings allowed), 1 findings of severity error, 2 usage or I/O error
(an unreadable path, an invalid inventory, a report or cluster that cannot be read). Output: text lines
`file:line: severity CODE: message`, `-o json` for scripts, and `-o github|codequality|sarif` for CI annotations
on the manifest's changed line (the same codes, messages, files and lines as `-o json`).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import orjson

from reconciler import __version__
from reconciler.catalog import load_catalog
from reconciler.commands.common import fail, output_option
from reconciler.logic.codecs import dpsharing
from reconciler.logic.inventory import deviceclasses
from reconciler.logic.inventory.reporttarget import normalize_root
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.review import ciannotations
from reconciler.logic.workloads import workloads
from reconciler.logic.workloads.manifests import Manifest, read_manifests
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.inventory import DesiredState
from reconciler.model.printable import escaped
from reconciler.model.revisions import WORKDIR, Revision

EXTENSIONS = (".yaml", ".yml", ".json")
MAX_FILES = 100_000
MAX_DIR_DEPTH = 64  # a chart or a kustomize tree is a few levels deep
ANNOTATIONS = ciannotations.FORMATS


class InputError(Exception):
    """A path cannot be read, or the plan, the report or the cluster cannot be had: exit 2."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _names_a_directory(entry: os.DirEntry[str]) -> bool:
    """A directory or a link to one; a link that cannot be followed (dangling, a loop) is a file that
    cannot be read, said as MP600 when it is read."""
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:
        return False


def _walk(root: Path) -> Iterator[Path]:
    """Manifest files below a directory, sorted, a directory's files before its subdirectories; hidden
    directories and symbolic links to directories skipped. Iterative (a tree thousands of directories
    deep is no RecursionError), at most MAX_DIR_DEPTH deep, and a directory that cannot be listed is an
    InputError (MP620), never a silently smaller set of manifests."""
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        directory, depth = stack.pop()
        if depth > MAX_DIR_DEPTH:
            raise InputError("MP620", f"{shown_path(directory)}: more than {MAX_DIR_DEPTH} nested directories")
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
            subdirs = [e for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
            files = [e for e in entries if e.name.endswith(EXTENSIONS) and not _names_a_directory(e)]
        except OSError as exc:
            raise InputError("MP620", f"{shown_path(directory)}: {exc.strerror or exc}") from exc
        for e in files:
            yield directory / e.name
        stack.extend((directory / e.name, depth + 1) for e in reversed(subdirs))


def shown_path(path: Path) -> str:
    """A path as the diagnostics name it: bytes that are not UTF-8 as \\xNN (orjson refuses the surrogates
    Python decodes them to) and characters that are not printable (a newline, a bidi override) escaped, so
    a file name can neither break a `file:line:` line or a CI annotation nor disguise itself."""
    return escaped(os.fsencode(path.as_posix()).decode("utf-8", "backslashreplace"))


def _read_file(path: Path, label: str) -> tuple[list[Manifest], list[Diagnostic]]:
    try:
        path.lstat()
    except OSError as exc:
        raise InputError("MP620", f"{label}: {exc.strerror or exc}") from exc
    try:
        # Non-blocking, then checked on the open descriptor: a FIFO named in place of a file (or swapped
        # in after a check) neither blocks the open nor the read; a dangling link or a link loop is an
        # unreadable file, not a crash.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return [], [Diagnostic("MP600", f"cannot be read: {exc.strerror or exc}", file=label)]
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return [], [Diagnostic("MP600", "not a regular file (FIFO, device or socket): not read", file=label)]
        if st.st_size > workloads_max_bytes():
            return [], [Diagnostic("MP600", f"file of {st.st_size} bytes is too large to be a manifest", file=label)]
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(workloads_max_bytes() + 1)
    except OSError as exc:
        return [], [Diagnostic("MP600", f"cannot be read: {exc.strerror or exc}", file=label)]
    finally:
        os.close(fd)
    return read_manifests(data, file=label)


def workloads_max_bytes() -> int:
    from reconciler.logic.workloads.manifests import MAX_FILE_BYTES

    return MAX_FILE_BYTES


def read_inputs(paths: tuple[str, ...]) -> tuple[list[Manifest], list[Diagnostic]]:
    manifests: list[Manifest] = []
    diags: list[Diagnostic] = []
    count = 0
    for p in paths:
        if p == "-":
            from reconciler.logic.workloads.manifests import MAX_FILE_BYTES

            data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
            ms, ds = read_manifests(data, file="<stdin>")
            manifests.extend(ms)
            diags.extend(ds)
            continue
        path = Path(p)
        if path.is_dir():
            files: Iterator[Path] = _walk(path)
        elif path.exists() or path.is_symlink():
            files = iter([path])
        else:
            raise InputError("MP620", f"{shown_path(path)}: no such file or directory")
        for f in files:
            count += 1
            if count > MAX_FILES:
                raise InputError("MP620", f"more than {MAX_FILES} manifest files under {shown_path(path)}")
            ms, ds = _read_file(f, shown_path(f))
            manifests.extend(ms)
            diags.extend(ds)
    return manifests, diags


def load_plan(
    inventory: Path | None, repo: str | None, rev: str | None, path: str, cache_dir: Path | None
) -> tuple[str, DesiredState]:
    """The plan checked against: `inventory` (a directory) or the root `path` of `repo` at `rev`."""
    from reconciler.commands.validate import GitLoadError, load_files, load_revision_files

    revision: Revision = WORKDIR
    blob_ids: Mapping[str, str] | None = None
    try:
        if repo is not None:
            label, files, blob_ids, revision, _branch = load_revision_files(
                repo, rev or "HEAD", path=path, cache_dir=cache_dir
            )
        else:
            assert inventory is not None, "the command resolves the inventory before loading it"
            label, files = load_files(inventory)
    except (OSError, GitLoadError, ValueError) as exc:
        raise InputError("MP621", f"the plan cannot be read: {exc}") from exc
    result = validate_inventory(
        files, catalog=load_catalog(), revision=revision, blob_ids=blob_ids, root=normalize_root(path)
    )
    if result.desired is None or not result.valid:
        first = "; ".join(str(d) for d in result.errors[:3])
        raise InputError(
            "MP621",
            f"the plan at {label} is invalid ({len(result.errors)} error(s): {first}); "
            "run `migplan validate` on it first",
        )
    return label, result.desired


def free_from_git(repo: str, desired: DesiredState, cache_dir: Path | None) -> tuple[str, dict[str, dict[str, int]]]:
    from reconciler.commands.validate import GitLoadError, load_revision_files

    reports = desired.cluster.reports
    try:
        _label, files, _blobs, revision, _b = load_revision_files(
            repo, reports.branch, path=reports.path, cache_dir=cache_dir
        )
    except GitLoadError as exc:
        raise InputError("MP622", f"the last report cannot be read from branch {reports.branch}: {exc}") from exc
    data = files.get("drift.yaml")
    if data is None:
        raise InputError("MP622", f"branch {reports.branch} has no {reports.path}/drift.yaml")
    try:
        computed_at, free = workloads.free_from_drift_report(data)
    except workloads.ReportUnreadable as exc:
        raise InputError("MP622", str(exc)) from exc
    return f"the report committed at {revision} (computed against {computed_at})", free


def live_facts(
    kubeconfig: str, context: str | None, desired: DesiredState, nodes: tuple[workloads.NodeFacts, ...]
) -> tuple[workloads.NodeFacts, ...]:
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.logic.observe.occupancy import node_occupancy
    from reconciler.model.errors import MigplanError

    try:
        cluster = KubeCluster.from_kubeconfig(kubeconfig, context=context)
        try:
            observed = cluster.observe(desired.cluster.gpu_operator)
        finally:
            cluster.close()
    except MigplanError as exc:
        raise InputError("MP623", f"the cluster cannot be read: {exc.code}: {exc.message}") from exc
    by_node = observed.pods_by_node()
    # Nodes whose device-plugin config shares their devices offer replicas under the plugin's names (an unreadable
    # config is judged on the plan's counts, as drift reports it: MP562).
    sharing = {
        n: s for n, s in dpsharing.sharing_by_node(observed, desired.nodes).items() if isinstance(s, dpsharing.Sharing)
    }
    free: dict[str, dict[str, int]] = {}
    for name, plan in desired.nodes.items():
        occ = node_occupancy(
            node=name,
            plan=plan,
            strategy=desired.cluster.mig_strategy,
            pods=by_node.get(name, ()),
            observed=observed.nodes.get(name),
            sharing=sharing.get(name),
        )
        free[name] = {_resource(o.profile): o.free for o in occ.entries}
    present = {n: o for n, o in observed.nodes.items() if n in desired.nodes}
    return workloads.with_cluster_facts(
        nodes,
        free={n: f for n, f in free.items() if n in present},
        labels={n: dict(o.labels) for n, o in present.items()},
        taints={n: tuple(workloads.Taint(*t) for t in o.taints) for n, o in present.items()},
        unschedulable=[n for n, o in present.items() if o.unschedulable],
        sharing={n: s for n, s in sharing.items() if n in present},
    )


def _resource(profile: str) -> str:
    """The extended resource of an occupancy entry's profile ("gpu", "1g.18gb", "1g.18gb.shared", "gpu.shared")."""
    from reconciler.logic.observe.occupancy import resource_of
    from reconciler.model.observed import GPU_RESOURCE

    base = profile.removesuffix(dpsharing.SHARED_SUFFIX)
    suffix = profile[len(base) :]
    return (GPU_RESOURCE if base == "gpu" else resource_of(base)) + suffix


def render_text(diags: list[Diagnostic], summaries: list[dict[str, Any]], *, plan: str, free: str | None) -> str:
    lines = [str(d) for d in diags]
    errors = sum(1 for d in diags if d.is_error)
    source = f"; free partitions per {free}" if free else ""
    lines.append(
        f"{len(summaries)} GPU workload(s) checked against the plan at {plan}{source}: "
        f"{errors} error(s), {len(diags) - errors} warning(s)"
    )
    return "\n".join(lines) + "\n"


@click.command("check-workloads")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--inventory",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The plan: an inventory root (default: the one the working directory is in).",
)
@click.option("--example", is_flag=True, help="The plan of the embedded example inventory (what `migplan demo` uses).")
@click.option("--repo", default=None, help="The plan at a Git revision of this repository (URL or local path).")
@click.option("--rev", default=None, help="Branch, tag or commit (with --repo; default HEAD).")
@click.option("--path", "path", default="", help="Inventory root inside the repository (with --repo).")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None, help="Cache for remote repositories.")
@click.option("--reports-from-git", is_flag=True, help="Free partitions from the last report on the reports branch.")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="Free partitions, node labels and taints from the cluster.",
)
@click.option("--context", default=None, help="kubeconfig context (with --kubeconfig).")
@output_option("text", "json", *ANNOTATIONS, help="Output format (github, codequality, sarif: CI annotations).")
def command(
    paths: tuple[str, ...],
    inventory: Path | None,
    repo: str | None,
    rev: str | None,
    path: str,
    cache_dir: Path | None,
    reports_from_git: bool,
    kubeconfig: str | None,
    context: str | None,
    example: bool,
    output: str,
) -> None:
    """Check Kubernetes manifests (files, directories, - for stdin) against the MIG plan.

    Exit status: 0 no error (warnings allowed), 1 findings of severity error, 2 usage or I/O error (MP413:
    no plan named and the working directory in no inventory)."""
    if repo is not None and inventory is not None:
        raise click.UsageError("give either --inventory or --repo, not both")
    if repo is None and (rev is not None or path or reports_from_git):
        raise click.UsageError("--rev, --path and --reports-from-git need --repo")
    if reports_from_git and kubeconfig is not None:
        raise click.UsageError("give either --reports-from-git or --kubeconfig, not both")
    if example and (inventory is not None or repo is not None):
        raise click.UsageError("give either --example, --inventory or --repo")
    if repo is None and inventory is None:
        from reconciler import resources
        from reconciler.commands.validate import standing

        inventory = (
            resources.inventory_dir()
            if example
            else standing("check-workloads", "PATH --inventory ROOT", "PATH --example")
        )
        if not (inventory / "cluster.yaml").exists():  # a repository of several roots (migplan-roots.yaml)
            click.echo(
                f"migplan check-workloads: error MP413: {inventory} holds several inventory roots; "
                "name the plan with --inventory ROOT",
                err=True,
            )
            sys.exit(2)
    try:
        label, desired = load_plan(inventory, repo, rev, path, cache_dir)
        manifests, read_diags = read_inputs(paths)
        catalog = load_catalog()
        nodes = workloads.plan_nodes(desired, catalog)
        free_source: str | None = None
        if reports_from_git:
            assert repo is not None
            free_source, free = free_from_git(repo, desired, cache_dir)
            nodes = workloads.with_cluster_facts(nodes, free=free)
        elif kubeconfig is not None:
            nodes = live_facts(kubeconfig, context, desired, nodes)
            free_source = "the cluster now"
    except InputError as exc:
        fail(f"migplan check-workloads: error {exc.code}: {exc.message}")
    diags, summaries = workloads.check_workloads(
        manifests,
        desired=desired,
        nodes=nodes,
        free_source=free_source,
        device_classes=deviceclasses.offline_objects(desired),  # what migplan renders: claims may name them
    )
    diags = read_diags + diags
    diags.sort(key=lambda d: (d.file or "", d.line or 0, d.code))
    if output == "json":
        doc = {
            "ok": not any(d.is_error for d in diags),
            "plan": label,
            "free": free_source,
            "errors": [d.to_json() for d in diags if d.is_error],
            "warnings": [d.to_json() for d in diags if not d.is_error],
            "workloads": summaries,
        }
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    elif output in ANNOTATIONS:
        sys.stdout.buffer.write(
            ciannotations.render(diags, output=output, version=__version__, registry=workloads.CODES)
        )
    else:
        click.echo(render_text(diags, summaries, plan=label, free=free_source), nl=False)
    sys.stdout.flush()
    sys.exit(1 if any(d.is_error for d in diags) else 0)
