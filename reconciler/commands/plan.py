"""`migplan plan --repo R --from REV --to REV [--path ROOT] [-o markdown|json]`: the merge-request view.

Reads both revisions straight from Git (a local repository in place, or a remote through the
cache), validates them, and prints what merging would do to the partitions: per node and GPU,
partitions created, destroyed, moved and handed to a new owner, plus the validation status of the
target revision (its errors, if any, with file and line). Markdown is meant to be posted on the
merge request as is; `-o json` is for scripts.

Exit codes: 0 the target revision is valid (a plan is shown), 1 the target revision is invalid,
2 usage or I/O error (unknown revision, remote unreachable, root missing, cluster unreachable).
What a change destroys follows the target's apply mode (reconciler/logic/planning/disruption.py), and the output
says which model applies (`disruption.model` in JSON): under `gpu-operator` the mig-parted model (a GPU
whose counts change loses every partition, a MIG mode change on one GPU clears every MIG GPU of the
node, mig-manager stops the node's GPU clients), under `agent` only the partitions destroyed or moved.
With `--kubeconfig`, each disrupted partition and GPU also names the pods holding it now (matched
to partitions by owner as the drift report's occupancy does, over the base revision's plan).
Without --kubeconfig, the pods come from the latest drift report committed on the reports branch
(`--reports-from-git`, the default when that branch exists; reconciler/adapters/git/reportbranch.py): the
output says which report commit, which inventory revision it was computed against and how old it is.
The same report gives the usage behind the capacity delta (reconciler/logic/review/capacity.py).
`-o comment` is the merge-request comment (reconciler/logic/review/mrcomment.py): a summary per node in a
reviewer's words, the capacity delta and the disruption, then per node in collapsed <details>, at most
--max-chars characters (default fits GitHub's 65,536 and GitLab's 1,000,000).
Without --path, a repository whose top level holds no cluster.yaml is searched for inventory roots
(reconciler/logic/inventory/inventoryroots.py): each is planned, one section per cluster, and the exit code is
the worst of them.
Credentials for a remote come from MIGPLAN_GIT_USERNAME, MIGPLAN_GIT_PASSWORD (password or token),
MIGPLAN_GIT_SSH_KEY and MIGPLAN_GIT_KNOWN_HOSTS, as for the controller.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import orjson
from tabulate import tabulate

from reconciler.adapters.git.reportbranch import CommittedReport
from reconciler.adapters.git.source import GitFailure, GitRemote
from reconciler.commands import gitopts
from reconciler.commands.common import fail, output_option
from reconciler.logic.inventory.validation import ParseCache, ValidationResult
from reconciler.logic.planning import disruption
from reconciler.logic.reports import markdown as md
from reconciler.logic.review.capacity import CapacityDelta, capacity_delta, usage_from_observed, usage_from_report
from reconciler.logic.review.dradevices import DraReview, dra_review
from reconciler.logic.review.mrcomment import (
    DEFAULT_MAX_CHARS,
    VERBS,
    PlanSection,
    capacity_lines,
    dra_lines,
    host_effect_words,
    layout_line,
    node_rows,
    owner,
    placement,
    render_comment,
    summary_line,
)
from reconciler.logic.review.reportoccupancy import observed_from_report
from reconciler.logic.review.revdiff import ChangeKind, Disruptions, RevisionDiff, diff_states, disruptions
from reconciler.logic.review.unplaced import placement_only_warnings
from reconciler.model.codes import Trait, with_trait
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import ObservedState
from reconciler.sourcing import LoadedRevision, load_revision

_VERBS = VERBS
_NO_ROOT = with_trait(Trait.NO_ROOT)  # the root is not at the base revision: a cluster the merge request adds
_placement = placement
_owner = owner


def _diag_rows(diags: tuple[Diagnostic, ...]) -> list[list[str]]:
    return [[md.text(d.location()), d.code, md.text(d.message)] for d in diags]


def _cells(row: list[Any]) -> list[Any]:
    # tabulate pads and aligns but escapes nothing: every string cell goes through markdown.text.
    return [c if isinstance(c, int) else md.text(c) for c in row]


def _disruption_lines(d: Disruptions, *, by_node: bool = False) -> list[str]:
    out = ["", f"Disruption model: **{d.model.value}** — {disruption.describe_model(d.model)}."]
    if d.gpus and not by_node:  # grouped by node, the per-node table says it once per node instead
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
    for h in d.host:  # WITH_REBOOT / a host driver: what mig-manager does to the node itself for a MIG mode change
        out.append(f"- {md.code(h.node)}: " + md.text("; ".join(host_effect_words(h))))
    return out


def render_markdown(
    old: LoadedRevision,
    new: LoadedRevision,
    diff: RevisionDiff | None,
    disrupts: Disruptions | None = None,
    *,
    capacity: CapacityDelta | None = None,
    pods_from: str | None = None,
    pods_problem: str | None = None,
    section: PlanSection | None = None,
    dra: DraReview | None = None,
) -> str:
    """The default text. With `section` (the command always gives it) the changes are grouped by node as the
    merge-request comment groups them: one row per node saying what happens and the pods disrupted, then each
    node's partition changes under it; without it, one flat table."""
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
            out.append(
                f"- node {md.code(name)} removed from the inventory: migplan stops managing it; nothing on it is "
                "destroyed (its partitions stay as they are; the drift report lists it as Undocumented, MP511)"
            )
        for old_name, new_name in diff.renamed:
            out.append(
                f"- node {md.code(old_name)} renamed {md.code(new_name)} (same GPUs, partitions and owners): migplan "
                f"manages {md.code(new_name)} and stops managing {md.code(old_name)}; nothing is re-cut"
            )
        for lc in diff.layouts:
            out.append(f"- {layout_line(lc.name, lc.what, lc.nodes, lc.gpus)}")
        for gn in diff.notes:
            out.append(f"- {md.code(gn.node)} GPU {gn.gpu}: {md.text(gn.message)}")
        if capacity is not None:
            out += capacity_lines(capacity)
        grouped = section is not None and bool(diff.changes or diff.nodes_removed or diff.renamed)
        if disrupts is not None:
            out += _disruption_lines(disrupts, by_node=grouped)
            if pods_from is not None:
                out += ["", f"Pods: {pods_from}."]
            elif pods_problem is not None:
                out += ["", f"Pods: not known: {md.text(pods_problem)}."]
        out += dra_lines(dra)
        if grouped and section is not None:
            out += _by_node(diff, disrupts, section)
        elif diff.changes:
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


def _by_node(diff: RevisionDiff, disrupts: Disruptions | None, section: PlanSection) -> list[str]:
    """One row per node (what happens, pods disrupted), then per node its partition changes."""
    show_pods = disrupts is not None and disrupts.observed
    if show_pods and disrupts is not None:
        lose = len(disrupts.pods)
        out = ["", f"Pods disrupted by this change: **{lose}**" + (" (they lose their device)" if lose else "")]
    else:
        out = []
    rows = [list(r) for r in node_rows(section)]
    out += ["", tabulate(rows, headers=["Node", "What happens", "Pods disrupted"], tablefmt="github")]
    by_node: dict[str, list[int]] = {}
    for i, c in enumerate(diff.changes):
        by_node.setdefault(c.node, []).append(i)
    for node, idx in sorted(by_node.items()):
        headers = ["GPU", "Change", "Profile", "Placement (start:size)", "Owner"]
        table = []
        for i in idx:
            c = diff.changes[i]
            row = _cells([c.gpu, _VERBS[c.kind], c.profile, _placement(c), _owner(c)])
            if show_pods and disrupts is not None:
                held = disrupts.owner_held.get(i, ())
                pods = ", ".join(disrupts.by_change.get(i, ())) or (
                    f"held by {', '.join(held)}: keeps it" if held else "—"
                )
                row.append(md.text(pods))
            table.append(row)
        if show_pods:
            headers.append("Pods")
        out += ["", f"{md.code(node)}: {len(idx)} partition change(s)", ""]
        out.append(tabulate(table, headers=headers, tablefmt="github"))
    return out


def json_doc(
    old: LoadedRevision,
    new: LoadedRevision,
    diff: RevisionDiff | None,
    disrupts: Disruptions | None = None,
    *,
    capacity: CapacityDelta | None = None,
    report: CommittedReport | None = None,
    pods_problem: str | None = None,
    dra: DraReview | None = None,
) -> dict[str, Any]:
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
            | ({"held_by": list(disrupts.owner_held[i])} if disrupts is not None and i in disrupts.owner_held else {})
            for i, c in enumerate(diff.changes)
        ]
        doc["notes"] = [{"node": n.node, "gpu": n.gpu, "message": n.message} for n in diff.notes]
        doc["nodes_added"] = list(diff.nodes_added)
        doc["nodes_removed"] = list(diff.nodes_removed)
        doc["cluster"] = list(diff.cluster_notes)
        doc["renamed"] = [{"from": a, "to": b} for a, b in diff.renamed]
        doc["layouts"] = [
            {"name": x.name, "what": x.what, "nodes": list(x.nodes), "gpus": x.gpus} for x in diff.layouts
        ]
    if capacity is not None:
        doc["capacity"] = {
            "usage_known": capacity.usage_known,
            "profiles": [
                {
                    "profile": p.profile,
                    "before": p.before,
                    "after": p.after,
                    "free_before": p.free_before,
                    "free_after": p.free_after,
                    "last_free_removed": p.last_free_removed,
                }
                for p in capacity.profiles
            ],
            "owners": [{"owner": o.owner, "before": dict(o.before), "after": dict(o.after)} for o in capacity.owners],
        }
    if report is not None:
        doc["pods_from"] = {"report_branch": report.branch, "report_commit": report.commit,
                            "committed_at": report.committed_at, "report_revision": report.revision}  # fmt: skip
    elif pods_problem is not None:
        doc["pods_problem"] = pods_problem
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
            "host": [
                {"node": h.node, "not_ready": h.not_ready}
                | ({"may_reboot": {"pods": h.reboot.count, "names": list(h.reboot.names)}} if h.reboot else {})
                for h in disrupts.host
            ],
        }
        if disrupts.observed:
            doc["disruption"]["pods"] = sorted(disrupts.pods)
    if dra is not None:
        doc["dra"] = dra_json(dra)
    return doc


def dra_json(dra: DraReview) -> dict[str, Any]:
    """The DRA device changes for scripts: every device (name null when it cannot be told), claims and pods."""
    return {
        "nodes": list(dra.nodes),
        "devices": [
            {
                "node": d.node,
                "gpu": d.gpu,
                "change": d.action,
                "device": d.device,
                "profile": d.profile,
                "start": d.start,
                "claims": list(d.claims),
                "pods": list(d.pods),
            }
            for d in dra.devices
        ],
        "claims": list(dra.claims),
        "pods": list(dra.pods),
        "warnings": [{"code": n.code, "node": n.node, "message": n.message} for n in dra.notes],
    }


def _observe(kubeconfig: str, context: str | None, base: LoadedRevision) -> ObservedState:
    # Imported here: the Kubernetes client is only paid for when a cluster is asked about.
    from reconciler.adapters.kube.cluster import KubeCluster

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

    from reconciler.logic.drift.drift import slice_maps
    from reconciler.logic.reports.slicesvg import plan_maps

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


def _age(seconds: float) -> str:
    s = max(int(seconds), 0)
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def _report_words(report: CommittedReport, base: LoadedRevision, now: float) -> str:
    """Where the pods come from, for a reviewer: which report, against which revision, how old."""
    out = (
        f"from the drift report committed on {md.code(report.branch)} at {md.code(report.commit[:12])}, "
        f"**{_age(now - report.committed_at)} old**, computed against {md.code(report.revision)}"
    )
    if base.revision.sha not in report.revision:
        out += f" (not the base {md.code(base.revision)}: pods may have changed since)"
    return out + "; `--kubeconfig` gives a live answer"


@dataclass
class _Planned:
    """One inventory root planned: what every output format needs."""

    root: str
    old: LoadedRevision
    new: LoadedRevision
    diff: RevisionDiff | None = None
    disrupts: Disruptions | None = None
    capacity: CapacityDelta | None = None
    report: CommittedReport | None = None
    pods_from: str | None = None
    pods_problem: str | None = None
    dra: DraReview | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.new.validation.valid else 1

    def section(self) -> PlanSection:
        desired = self.new.validation.desired or self.old.validation.desired
        return PlanSection(
            cluster=desired.cluster.name if desired is not None else (self.root or "inventory"),
            root=self.root,
            base=str(self.old.revision),
            target=str(self.new.revision),
            validation=self.new.validation,
            base_errors=len(self.old.validation.errors),
            diff=self.diff,
            disrupts=self.disrupts,
            capacity=self.capacity,
            pods_from=self.pods_from,
            pods_problem=self.pods_problem,
            new_root=self.old.snapshot.tree_id == _NEW_ROOT,
            dra=self.dra,
        )


class _Failed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _plan_root(
    remote: GitRemote,
    from_rev: str,
    to_rev: str,
    root: str,
    cache: ParseCache,
    *,
    kubeconfig: str | None,
    context: str | None,
    reports_from_git: bool | None,
    fetch: bool,
    discovered: bool = False,
) -> _Planned:
    old = load_revision(remote, from_rev, root=root, cache=cache, fetch=fetch)
    if discovered and isinstance(old, GitFailure) and old.code in _NO_ROOT:
        # A cluster the merge request adds: its base is an empty inventory, every node is added.
        old = _empty_base(remote, from_rev, root)
    new = old if isinstance(old, GitFailure) else load_revision(remote, to_rev, root=root, cache=cache, fetch=False)
    if isinstance(old, LoadedRevision) and isinstance(new, LoadedRevision) and old.snapshot.tree_id == _NEW_ROOT:
        old = _as_empty(old, new)
    for got in (old, new):
        if isinstance(got, GitFailure):
            raise _Failed(str(got))
    assert isinstance(old, LoadedRevision) and isinstance(new, LoadedRevision)
    planned = _Planned(root, old, new)
    base, target = old.validation.desired, new.validation.desired
    if base is None or target is None:
        return planned
    planned.diff = diff_states(base, target)
    observed: ObservedState | None = None
    usage = None
    if kubeconfig is not None:
        try:
            observed = _observe(kubeconfig, context, old)
        except MigplanError as exc:
            raise _Failed(f"cannot observe the cluster: {exc.code}: {exc.message}") from None
        planned.pods_from = f"asked live of the cluster ({md.code(context or 'current context')})"
        usage = usage_from_observed(base, observed)
    elif reports_from_git is not False:
        found = _committed_report(remote, base)
        if isinstance(found, GitFailure):
            planned.pods_problem = str(found)
        elif found is None:
            if reports_from_git:
                planned.pods_problem = f"no reports branch {base.cluster.reports.branch!r} in the repository"
        else:
            planned.report = found
            observed = observed_from_report(found.document)
            usage = usage_from_report(found.document)
            planned.pods_from = _report_words(found, old, time.time())
    planned.disrupts = disruptions(planned.diff, base, target, observed, datetime.now(UTC))
    unplaced = placement_only_warnings(planned.diff, planned.disrupts, target)
    if unplaced:  # shown with the target's own warnings, in every output format
        diagnostics = tuple(sorted(new.validation.diagnostics + unplaced, key=lambda d: (d.file or "", d.line or 0)))
        planned.new = LoadedRevision(new.snapshot, ValidationResult(new.validation.desired, diagnostics))
    planned.capacity = capacity_delta(base, target, usage)
    if kubeconfig is not None:  # the regime and the claims are the cluster's word: a report does not carry them
        from reconciler.catalog import load_catalog

        planned.dra = dra_review(planned.diff, base, target, observed, load_catalog())
    return planned


_NEW_ROOT = "(none: the root is new)"


def _empty_base(remote: GitRemote, rev: str, root: str) -> LoadedRevision | GitFailure:
    """The base of a root that does not exist there yet (filled in by _as_empty once the target is read)."""
    from reconciler.adapters.git.source import InventoryRepo, Snapshot
    from reconciler.model.inventory import InventoryFiles

    repo = InventoryRepo.open(remote)
    if isinstance(repo, GitFailure):
        return repo
    revision = repo.resolve(rev)
    if isinstance(revision, GitFailure):
        return revision
    return LoadedRevision(Snapshot(revision, root, InventoryFiles(), {}, _NEW_ROOT), ValidationResult(None, ()))


def _as_empty(old: LoadedRevision, new: LoadedRevision) -> LoadedRevision:
    """An empty inventory with the target's cluster settings, so every node of a new root reads as added."""
    target = new.validation.desired
    if target is None:
        return old
    empty = DesiredState(cluster=target.cluster, nodes={}, revision=old.revision)
    return LoadedRevision(old.snapshot, ValidationResult(empty, ()))


def _committed_report(remote: GitRemote, base: DesiredState) -> CommittedReport | GitFailure | None:
    from reconciler.adapters.git.reportbranch import latest_report, report_budget
    from reconciler.adapters.git.source import InventoryRepo

    repo = InventoryRepo.open(remote)
    if isinstance(repo, GitFailure):
        return repo
    budget = report_budget(len(base.nodes))  # a report far larger than the inventory's is not read whole
    return latest_report(repo, base.cluster.reports.branch, base.cluster.reports.path, max_nodes=budget)


def _roots(remote: GitRemote, to_rev: str, root: str | None) -> list[str]:
    """The inventory roots to plan: --path, or those found at the target revision (see the docstring)."""
    if root:
        return [root]
    from reconciler.adapters.git.rootdiscovery import repo_roots

    roots = repo_roots(remote, to_rev)
    if isinstance(roots, GitFailure):
        raise _Failed(str(roots))
    return roots


@click.command("plan")
@click.option("--repo", "repo", required=True, help="Repository: local path, https://, ssh:// or git:// URL.")
@click.option("--from", "from_rev", required=True, help="Base revision (branch, tag or commit), e.g. main.")
@click.option("--to", "to_rev", required=True, help="Target revision, e.g. the merge request's head.")
@click.option(
    "--path", "root", default="", help="Inventory root inside the repository (default: top level, or every root found)."
)
@output_option(
    "markdown", "json", "comment", default="markdown", help="comment: the merge-request comment, capped at --max-chars."
)
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None, help="Cache for remote repositories.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Also list the pods disrupted.")
@click.option("--context", default=None, help="kubeconfig context (with --kubeconfig).")
@click.option(
    "--reports-from-git/--no-reports-from-git",
    default=None,
    help="Pods and usage from the latest report on the reports branch (default: when that branch exists).",
)
@click.option(
    "--max-chars",
    type=click.IntRange(2_000, 1_000_000),
    default=DEFAULT_MAX_CHARS,
    show_default=True,
    help="-o comment: the most characters the comment may have.",
)
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
    reports_from_git: bool | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    maps_dir: Path | None = None,
) -> None:
    """Show what merging --to into --from would do to the MIG partitions."""
    remote = gitopts.remote(repo, cache_dir)
    cache = ParseCache()  # shared: files equal in both revisions are parsed once
    try:
        roots = _roots(remote, to_rev, root)
        planned = [
            _plan_root(
                remote, from_rev, to_rev, r, cache, kubeconfig=kubeconfig, context=context,
                reports_from_git=reports_from_git, fetch=i == 0 and bool(root), discovered=not root,
            )
            for i, r in enumerate(roots)
        ]  # fmt: skip
    except _Failed as exc:
        fail(f"migplan plan: {exc.message}")
    multi = len(planned) > 1
    maps_md: dict[str, str] = {}
    if maps_dir is not None:
        for p in planned:
            if p.diff is None:
                continue
            try:
                where = maps_dir / p.root if multi and p.root else maps_dir
                maps_md[p.root] = write_plan_maps(where, p.old, p.new, p.diff)
            except OSError as exc:
                fail(f"migplan plan: cannot write the slice maps to {maps_dir}: {exc}")
    if output == "json":
        docs = [
            json_doc(p.old, p.new, p.diff, p.disrupts, capacity=p.capacity, report=p.report,
                     pods_problem=p.pods_problem, dra=p.dra)
            for p in planned
        ]  # fmt: skip
        doc: dict[str, Any] = docs[0]
        if multi:
            doc = {
                "valid": all(d["valid"] for d in docs),
                "roots": [{"root": p.root} | d for p, d in zip(planned, docs, strict=True)],
            }
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    elif output == "comment":
        click.echo(render_comment([p.section() for p in planned], max_chars=max_chars), nl=False)
    else:
        texts = []
        for p in planned:
            head = f"## Inventory root {md.code(p.root or '/')}\n\n" if multi else ""
            body = render_markdown(
                p.old, p.new, p.diff, p.disrupts, capacity=p.capacity, pods_from=p.pods_from,
                pods_problem=p.pods_problem, section=p.section(), dra=p.dra,
            )  # fmt: skip
            texts.append(head + body + maps_md.get(p.root, ""))
        click.echo("\n".join(texts), nl=False)
    sys.exit(max(p.exit_code for p in planned))
