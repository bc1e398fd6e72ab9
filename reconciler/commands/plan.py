"""`migplan plan --repo R --from REV --to REV [--path ROOT] [-o markdown|json]`: the merge-request view.

Reads both revisions straight from Git (a local repository in place, or a remote through the
cache), validates them, and prints what merging would do to the partitions: per node and GPU,
partitions created, destroyed, moved and handed to a new owner, plus the validation status of the
target revision (its errors, if any, with file and line). Markdown is meant to be posted on the
merge request as is; `-o json` is for scripts.

Exit codes: 0 the target revision is valid (a plan is shown), 1 the target revision is invalid,
2 usage or I/O error (unknown revision, remote unreachable, root missing, cluster unreachable).
What a change destroys follows the target's apply mode (reconciler/logic/disruption.py), and the output
says which model applies (`disruption.model` in JSON): under `gpu-operator` the mig-parted model (a GPU
whose counts change loses every partition, a MIG mode change on one GPU clears every MIG GPU of the
node, mig-manager stops the node's GPU clients), under `agent` only the partitions destroyed or moved.
With `--kubeconfig`, each disrupted partition and GPU also names the pods holding it now (matched
to partitions by owner as the drift report's occupancy does, over the base revision's plan).
Credentials for a remote come from MIGPLAN_GIT_USERNAME, MIGPLAN_GIT_PASSWORD (password or token),
MIGPLAN_GIT_SSH_KEY and MIGPLAN_GIT_KNOWN_HOSTS, as for the controller.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import orjson
from tabulate import tabulate

from reconciler.adapters.gitsource import GitFailure
from reconciler.commands import gitopts
from reconciler.logic import disruption
from reconciler.logic import markdown as md
from reconciler.logic.revdiff import ChangeKind, Disruptions, PartitionChange, RevisionDiff, diff_states, disruptions
from reconciler.logic.validation import ParseCache
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.errors import MigplanError
from reconciler.model.observed import ObservedState
from reconciler.sourcing import LoadedRevision, load_revision

_VERBS = {
    ChangeKind.CREATE: "create",
    ChangeKind.DESTROY: "destroy",
    ChangeKind.MOVE: "move",
    ChangeKind.OWNER: "new owner",
}


def _placement(c: PartitionChange) -> str:
    if c.kind is ChangeKind.MOVE:
        return f"{c.before} → {c.after}"
    where = c.after or c.before
    return str(where) if where is not None else "solver"


def _owner(c: PartitionChange) -> str:
    if c.kind is ChangeKind.OWNER:
        return f"{c.owner_before or 'free'} → {c.owner_after or 'free'}"
    owner = c.owner_after if c.kind is not ChangeKind.DESTROY else c.owner_before
    return owner or "free"


def summary_line(diff: RevisionDiff) -> str:
    counts = [
        f"{diff.count(ChangeKind.CREATE)} created",
        f"{diff.count(ChangeKind.DESTROY)} destroyed",
        f"{diff.count(ChangeKind.MOVE)} moved",
        f"{diff.count(ChangeKind.OWNER)} owner change(s)",
    ]
    extra = ""
    if diff.nodes_added or diff.nodes_removed:
        extra = f"; nodes added: {len(diff.nodes_added)}, removed: {len(diff.nodes_removed)}"
    return f"{', '.join(counts)} on {diff.gpus_touched} GPU(s){extra}"


def _diag_rows(diags: tuple[Diagnostic, ...]) -> list[list[str]]:
    return [[md.text(d.location()), d.code, md.text(d.message)] for d in diags]


def _cells(row: list[Any]) -> list[Any]:
    # tabulate pads and aligns but escapes nothing: every string cell goes through markdown.text.
    return [c if isinstance(c, int) else md.text(c) for c in row]


def _disruption_lines(d: Disruptions) -> list[str]:
    out = ["", f"Disruption model: **{d.model.value}** — {disruption.describe_model(d.model)}."]
    if d.gpus:
        rows = [
            [g.node, g.gpu, g.reason, (", ".join(g.pods) or "—") if d.observed else "(no cluster asked)"]
            for g in d.gpus
        ]
        out += ["", "GPUs whose partitions are all destroyed and created again:", ""]
        out.append(tabulate(rows, headers=["Node", "GPU", "Why", "Pods disrupted"], tablefmt="github"))
    if d.clients_paused:
        out += ["", "GPU clients stopped while mig-manager applies: " + ", ".join(md.code(n) for n in d.clients_paused)]
    for node, gpu in d.not_applied:
        out.append(
            f"- {md.code(node)} GPU {gpu}: placement-only change; mig-parted's config has no placements, so mig-manager"
            " leaves this GPU as it is"
        )
    return out


def render_markdown(
    old: LoadedRevision,
    new: LoadedRevision,
    diff: RevisionDiff | None,
    disrupts: Disruptions | None = None,
) -> str:
    out = [f"### migplan plan: {md.code(old.revision)} → {md.code(new.revision)}", ""]
    target = new.validation
    if target.valid:
        warn = f" ({len(target.warnings)} warning(s))" if target.warnings else ""
        out.append(f"Target revision: **valid**{warn}.")
    else:
        out.append(f"Target revision: **invalid** — {len(target.errors)} error(s); it would not be applied.")
    if target.diagnostics:
        out += ["", tabulate(_diag_rows(target.diagnostics), headers=["Where", "Code", "Problem"], tablefmt="github")]
    if not old.validation.valid:
        out += ["", f"The base revision is invalid ({len(old.validation.errors)} error(s)): no partition diff."]
    if diff is not None:
        out += ["", f"**{summary_line(diff)}**"]
        for note in diff.cluster_notes:
            out.append(f"- cluster: {md.text(note)}")
        for name in diff.nodes_added:
            out.append(f"- node {md.code(name)} added")
        for name in diff.nodes_removed:
            out.append(f"- node {md.code(name)} removed: its partitions are no longer managed")
        for gn in diff.notes:
            out.append(f"- {md.code(gn.node)} GPU {gn.gpu}: {md.text(gn.message)}")
        if disrupts is not None:
            out += _disruption_lines(disrupts)
        if diff.changes:
            rows = [_cells([c.node, c.gpu, _VERBS[c.kind], c.profile, _placement(c), _owner(c)]) for c in diff.changes]
            headers = ["Node", "GPU", "Change", "Profile", "Placement (start:size)", "Owner"]
            if disrupts is not None and disrupts.observed:
                headers.append("Pods disrupted")
                for i, row in enumerate(rows):
                    row.append(md.text(", ".join(disrupts.by_change.get(i, ())) or "—"))
                held = len(disrupts.pods)
                out += [
                    "",
                    f"Pods disrupted by this change: **{held}**"
                    + (" (they hold a partition that is destroyed)" if held else ""),
                ]
            out += ["", tabulate(rows, headers=headers, tablefmt="github")]
        elif diff.empty:
            out += ["", "No partition changes."]
    return "\n".join(out) + "\n"


def render_json(
    old: LoadedRevision,
    new: LoadedRevision,
    diff: RevisionDiff | None,
    disrupts: Disruptions | None = None,
) -> bytes:
    def place(p: Any) -> dict[str, int] | None:
        return None if p is None else {"start": p.start, "size": p.size}

    doc: dict[str, Any] = {
        "from": str(old.revision),
        "to": str(new.revision),
        "valid": new.validation.valid,
        "errors": [d.to_json() for d in new.validation.errors],
        "warnings": [d.to_json() for d in new.validation.warnings],
        "base_valid": old.validation.valid,
    }
    if diff is not None:
        doc["summary"] = {k.value: diff.count(k) for k in ChangeKind} | {"gpus": diff.gpus_touched}
        doc["changes"] = [
            {
                "node": c.node,
                "gpu": c.gpu,
                "change": c.kind.value,
                "profile": c.profile,
                "before": place(c.before),
                "after": place(c.after),
                "owner_before": c.owner_before,
                "owner_after": c.owner_after,
            }
            | ({"disrupts": list(disrupts.by_change.get(i, ()))} if disrupts is not None and disrupts.observed else {})
            for i, c in enumerate(diff.changes)
        ]
        doc["notes"] = [{"node": n.node, "gpu": n.gpu, "message": n.message} for n in diff.notes]
        doc["nodes_added"] = list(diff.nodes_added)
        doc["nodes_removed"] = list(diff.nodes_removed)
        doc["cluster"] = list(diff.cluster_notes)
    if disrupts is not None:
        doc["disruption"] = {
            "model": disrupts.model.value,
            "description": disruption.describe_model(disrupts.model),
            "gpus": [
                {"node": g.node, "gpu": g.gpu, "reason": g.reason}
                | ({"disrupts": list(g.pods)} if disrupts.observed else {})
                for g in disrupts.gpus
            ],
            "clients_paused": list(disrupts.clients_paused),
            "not_applied": [{"node": n, "gpu": g} for n, g in disrupts.not_applied],
        }
        if disrupts.observed:
            doc["disruption"]["pods"] = sorted(disrupts.pods)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


def _observe(kubeconfig: str, context: str | None, base: LoadedRevision) -> ObservedState:
    # Imported here: the Kubernetes client is only paid for when a cluster is asked about.
    from reconciler.adapters.kube import KubeCluster

    desired = base.validation.desired
    assert desired is not None
    cluster = KubeCluster.from_kubeconfig(kubeconfig, context=context)
    try:
        return cluster.observe(desired.cluster.gpu_operator)
    finally:
        cluster.close()


def write_plan_maps(directory: Path, old: LoadedRevision, new: LoadedRevision, diff: RevisionDiff) -> str:
    """Write before/after SVG maps of the changed GPUs into `directory`; the Markdown section linking them
    (by `directory` as given, so a relative directory gives relative links)."""
    from urllib.parse import quote

    from reconciler.logic.drift import slice_maps
    from reconciler.logic.slicesvg import plan_maps

    def maps(loaded: LoadedRevision) -> dict[str, Any]:
        desired = loaded.validation.desired
        return {} if desired is None else {n: slice_maps(plan, None) for n, plan in desired.nodes.items()}

    changed = {(c.node, c.gpu) for c in diff.changes} | {(n.node, n.gpu) for n in diff.notes}
    if not changed:
        return ""
    rendered = plan_maps(
        maps(old), maps(new), changed, before_caption=f"before: {old.revision}", after_caption=f"after: {new.revision}"
    )
    directory.mkdir(parents=True, exist_ok=True)
    out = ["", "#### Slice maps of the changed GPUs", ""]
    for node, gpu, before, after, files in rendered:
        for name, data in files.items():
            (directory / name).write_bytes(data)
        pictures = [
            f"![{side} {node} GPU {gpu}]({quote((directory / name).as_posix())})" if name else f"({side}: none)"
            for side, name in (("before", before), ("after", after))
        ]
        out.append(f"`{node}` GPU {gpu}: {pictures[0]} → {pictures[1]}")
        out.append("")
    return "\n".join(out)


@click.command("plan")
@click.option("--repo", "repo", required=True, help="Repository: local path, https://, ssh:// or git:// URL.")
@click.option("--from", "from_rev", required=True, help="Base revision (branch, tag or commit), e.g. main.")
@click.option("--to", "to_rev", required=True, help="Target revision, e.g. the merge request's head.")
@click.option("--path", "root", default="", help="Inventory root inside the repository (default: top level).")
@click.option("-o", "--output", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None, help="Cache for remote repositories.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Also list the pods disrupted.")
@click.option("--context", default=None, help="kubeconfig context (with --kubeconfig).")
@click.option(
    "--maps-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Write before/after SVG slice maps of every changed GPU here, linked from the Markdown by this path.",
)
def command(
    repo: str,
    from_rev: str,
    to_rev: str,
    root: str,
    output: str,
    cache_dir: Path | None,
    kubeconfig: str | None,
    context: str | None,
    maps_dir: Path | None = None,
) -> None:
    """Show what merging --to into --from would do to the MIG partitions."""
    remote = gitopts.remote(repo, cache_dir)
    cache = ParseCache()  # shared: files equal in both revisions are parsed once
    old = load_revision(remote, from_rev, root=root, cache=cache)
    new = old if isinstance(old, GitFailure) else load_revision(remote, to_rev, root=root, cache=cache, fetch=False)
    for got in (old, new):
        if isinstance(got, GitFailure):
            click.echo(f"migplan plan: {got}", err=True)
            sys.exit(2)
    assert isinstance(old, LoadedRevision) and isinstance(new, LoadedRevision)
    diff = None
    if old.validation.desired is not None and new.validation.desired is not None:
        diff = diff_states(old.validation.desired, new.validation.desired)
    disrupts = None
    if diff is not None and old.validation.desired is not None and new.validation.desired is not None:
        observed = None
        if kubeconfig is not None:
            try:
                observed = _observe(kubeconfig, context, old)
            except MigplanError as exc:
                click.echo(f"migplan plan: cannot observe the cluster: {exc.code}: {exc.message}", err=True)
                sys.exit(2)
        disrupts = disruptions(diff, old.validation.desired, new.validation.desired, observed, datetime.now(UTC))
    maps_md = ""
    if maps_dir is not None and diff is not None:
        try:
            maps_md = write_plan_maps(maps_dir, old, new, diff)
        except OSError as exc:
            click.echo(f"migplan plan: cannot write the slice maps to {maps_dir}: {exc}", err=True)
            sys.exit(2)
    if output == "json":
        sys.stdout.buffer.write(render_json(old, new, diff, disrupts) + b"\n")
    else:
        click.echo(render_markdown(old, new, diff, disrupts) + maps_md, nl=False)
    sys.exit(0 if new.validation.valid else 1)
