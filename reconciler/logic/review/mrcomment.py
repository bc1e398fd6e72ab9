"""The merge-request comment: what a merge does, in a reviewer's words, within a forge's size limit.

Pure: one PlanSection per inventory root (cluster) in, Markdown out. Layout, so the comment stays
readable for a one-node change and postable for a 5,000-node one:
1. per cluster, a head: the revisions, the target's validation (errors with file and line, at most
   MAX_DIAGNOSTICS rows), a one-line count, a summary table with one row per node in words
   ("re-cut GPU 0: every partition replaced", "removed from the inventory: no longer managed,
   nothing destroyed", "renamed"), at most MAX_SUMMARY_ROWS rows, then the capacity delta (per
   profile before -> after and free after; per owner reserved before -> after), then the disruption
   (which model, where the pod occupancy comes from and how old it is, the pods, what moves and owner
   changes mean);
2. then, per node, the partition table in a collapsed `<details>`, for as long as the budget
   (`max_chars`) lasts; the rest is counted in one line. The heads come first for every cluster, so
   the verdict of each is never cut.
Every string that comes from the inventory, Git or the cluster goes through reconciler.logic.reports.markdown
(table cells, node names, pods, messages); `<details>`/`<summary>` are migplan's own HTML around them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from reconciler.logic.inventory.validation import ValidationResult
from reconciler.logic.planning import disruption
from reconciler.logic.reports import markdown as md
from reconciler.logic.review.capacity import CapacityDelta
from reconciler.logic.review.dradevices import DESTROY, DraReview
from reconciler.logic.review.revdiff import ChangeKind, Disruptions, HostEffect, PartitionChange, RevisionDiff

# Fits GitHub's 65,536-character comment body (GitLab takes 1,000,000) with room for the marker line.
DEFAULT_MAX_CHARS = 60_000
MAX_DIAGNOSTICS = 50
MAX_SUMMARY_ROWS = 100
MAX_PODS_IN_CELL = 5

VERBS = {
    ChangeKind.CREATE: "create",
    ChangeKind.DESTROY: "destroy",
    ChangeKind.MOVE: "move",
    ChangeKind.OWNER: "new owner",
}


def placement(c: PartitionChange) -> str:
    if c.kind is ChangeKind.MOVE:
        return f"{c.before} → {c.after}"
    where = c.after or c.before
    return str(where) if where is not None else "solver"


def owner(c: PartitionChange) -> str:
    if c.kind is ChangeKind.OWNER:
        return f"{c.owner_before or 'free'} → {c.owner_after or 'free'}"
    who = c.owner_after if c.kind is not ChangeKind.DESTROY else c.owner_before
    return who or "free"


@dataclass(frozen=True, slots=True)
class PlanSection:
    """Everything the comment says about one inventory root."""

    cluster: str
    root: str  # the inventory root in the repository ("" for the top level)
    base: str  # the base revision, as text
    target: str
    validation: ValidationResult  # of the target revision
    base_errors: int = 0  # errors of the base revision (no diff when > 0)
    diff: RevisionDiff | None = None
    disrupts: Disruptions | None = None
    capacity: CapacityDelta | None = None
    # Where the pods come from, in words ("the drift report committed on ..."), None when unknown.
    pods_from: str | None = None
    pods_problem: str | None = None  # why the pods are unknown (a report that cannot be used), if said
    new_root: bool = False  # the root does not exist at the base revision: a cluster the merge adds
    dra: DraReview | None = None  # device changes on DRA-static nodes, by the driver's names (with a cluster)


def _pods(pods: Sequence[str]) -> str:
    if not pods:
        return "—"
    shown = ", ".join(sorted(pods)[:MAX_PODS_IN_CELL])
    more = len(pods) - MAX_PODS_IN_CELL
    return f"{len(pods)}: {shown}" + (f" and {more} more" if more > 0 else "")


def summary_line(diff: RevisionDiff) -> str:
    counts = [
        f"{diff.count(ChangeKind.CREATE)} created",
        f"{diff.count(ChangeKind.DESTROY)} destroyed",
        f"{diff.count(ChangeKind.MOVE)} moved",
        f"{diff.count(ChangeKind.OWNER)} owner change(s)",
    ]
    extra = []
    if diff.nodes_added:
        extra.append(f"{len(diff.nodes_added)} node(s) added")
    if diff.nodes_removed:
        extra.append(f"{len(diff.nodes_removed)} node(s) no longer managed")
    if diff.renamed:
        extra.append(f"{len(diff.renamed)} renamed")
    return f"{', '.join(counts)} on {diff.gpus_touched} GPU(s)" + (f"; {', '.join(extra)}" if extra else "")


def layout_line(name: str, what: str, nodes: Sequence[str], gpus: int) -> str:
    shown = ", ".join(md.code(n) for n in nodes[:10]) + (f" and {len(nodes) - 10} more" if len(nodes) > 10 else "")
    return f"layout {md.code(name)} {what}: it affects {gpus} GPU(s) on {len(nodes)} node(s)" + (
        f" ({shown})" if nodes else ""
    )


def node_rows(s: PlanSection) -> list[tuple[str, str, str]]:
    """(node cell, what happens, pods disrupted) per node, in node order (also `migplan plan`'s default text)."""
    diff, d = s.diff, s.disrupts
    assert diff is not None
    by_node: dict[str, list[int]] = {}
    for i, c in enumerate(diff.changes):
        by_node.setdefault(c.node, []).append(i)
    recut: dict[str, list[str]] = {}
    gpu_pods: dict[str, set[str]] = {}
    if d is not None:
        for g in d.gpus:
            recut.setdefault(g.node, []).append(g.reason)
            gpu_pods.setdefault(g.node, set()).update(g.pods)
    host_words: dict[str, list[str]] = {}
    for h in d.host if d is not None else ():
        host_words[h.node] = host_effect_words(h)
    notes: dict[str, list[str]] = {}
    for n in diff.notes:
        notes.setdefault(n.node, []).append(f"GPU {n.gpu}: {n.message}")
    rows: list[tuple[str, str, str]] = []
    added = set(diff.nodes_added)
    for node in sorted(set(by_node) | set(recut) | set(notes) | set(host_words)):
        idx = by_node.get(node, [])
        kinds = {k: sum(1 for i in idx if diff.changes[i].kind is k) for k in ChangeKind}
        words: list[str] = []
        if node in added:
            words.append(f"added to the inventory: {kinds[ChangeKind.CREATE]} partition(s) created")
        elif node in recut:
            words.extend(dict.fromkeys(recut[node]))  # one reason per node (the same for each GPU)
        parts = [f"{kinds[k]} {VERBS[k]}" for k in (ChangeKind.DESTROY, ChangeKind.MOVE, ChangeKind.CREATE) if kinds[k]]
        if parts and node not in added:
            words.append("partitions: " + ", ".join(parts))
        if kinds[ChangeKind.OWNER]:
            words.append(f"{kinds[ChangeKind.OWNER]} owner change(s), nothing re-cut for them")
            held = sorted({p for i in idx if d is not None for p in d.owner_held.get(i, ())})
            if held:  # the old owner's pods keep the device: the new owner's cannot use it before they end
                words.append(
                    f"owner change of a partition still held by {_pods(held)}: it keeps the device until it ends, "
                    "the new owner's pods get it only then"
                )
        if d is not None and node in {n for n, _ in d.not_applied}:
            words.append("placement-only moves: mig-parted leaves the GPU as it is")
        words.extend(notes.get(node, []))
        words.extend(host_words.get(node, []))
        pods = set(gpu_pods.get(node, set()))
        on_dra = s.dra.on(node) if s.dra is not None else ()
        if on_dra:  # said by the driver's device names in the DRA devices table
            gone = [d for d in on_dra if d.action == DESTROY]
            words.append(f"DRA static: {len(gone)} device(s) destroyed, {len(on_dra) - len(gone)} created")
            pods.update(p for d in gone for p in d.pods)
        if d is not None:
            for i in idx:
                pods.update(d.by_change.get(i, ()))
        rows.append(
            (md.code(node), md.text("; ".join(words)), md.text(_pods(sorted(pods)) if d and d.observed else "?"))
        )
    for name in diff.nodes_removed:
        rows.append(
            (md.code(name), "removed from the inventory: migplan stops managing it; nothing on it is destroyed", "—")
        )
    for old, new in diff.renamed:
        rows.append(
            (f"{md.code(old)} → {md.code(new)}", "renamed (same GPUs, partitions and owners): nothing re-cut", "—")
        )
    return sorted(rows, key=lambda r: r[0])


def host_effect_words(h: HostEffect) -> list[str]:
    """What mig-manager does to the node's host for the change, in the node's row: 'may reboot: N pods end (...)'
    and the kubelet's NotReady window."""
    out = []
    if h.reboot is not None:
        out.append(f"may reboot (WITH_REBOOT, if the MIG mode change fails): {h.reboot.describe()}")
    if h.not_ready:
        out.append("NotReady window: mig-manager stops the kubelet for the MIG mode change (host driver)")
    return out


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A table whose cells are already escaped (built with md.text / md.code)."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out.extend("| " + " | ".join(r) + " |" for r in rows)
    return out


def capacity_lines(c: CapacityDelta) -> list[str]:
    if c.empty:
        return []
    out = ["", "**Capacity**" + ("" if c.usage_known else " (no usage known: free counts need the drift report)"), ""]
    if c.profiles:
        rows = []
        for p in c.profiles:
            free = "?"
            if p.free_after is not None:
                free = f"{p.free_after} (was {p.free_before})"
                if p.last_free_removed:
                    free += f": **this merge removes the last free {md.text(p.profile)}**"
            rows.append([md.code(p.profile), f"{p.before} → {p.after}", free])
        out += _table(["Profile", "Partitions before → after", "Free after (by the report's usage)"], rows)
    if c.owners:

        def kinds(x: Mapping[str, int]) -> str:
            return ", ".join(f"{n} x {md.text(p)}" for p, n in x.items()) or "none"

        rows = [
            [md.text(o.owner), f"{o.total_before} → {o.total_after}", f"{kinds(o.before)} → {kinds(o.after)}"]
            for o in c.owners[:MAX_SUMMARY_ROWS]
        ]
        out += ["", *_table(["Owner", "Reserved before → after", "Partitions"], rows)]
        if len(c.owners) > MAX_SUMMARY_ROWS:
            out.append(f"\n… and {len(c.owners) - MAX_SUMMARY_ROWS} more owner(s)")
    return out


def _disruption(s: PlanSection) -> list[str]:
    d, diff = s.disrupts, s.diff
    if d is None or diff is None:
        return []
    out = ["", f"**Disruption** (model **{d.model.value}**: {md.text(disruption.describe_model(d.model))})", ""]
    if s.pods_from is not None:
        out.append(f"Pods: {s.pods_from}. **{len(d.pods)}** pod(s) would lose their devices.")
    else:
        out.append(
            "Pods: not known (no drift report on the reports branch and no --kubeconfig)"
            + (f": {md.text(s.pods_problem)}" if s.pods_problem else "")
            + "."
        )
    if diff.count(ChangeKind.OWNER):
        out.append(
            "- A **new owner** only changes who may use a partition: nothing is re-cut, a running pod keeps its "
            "device; only new pods follow the new owner."
        )
    if diff.count(ChangeKind.MOVE):
        if d.model is disruption.Model.NVML:
            out.append(
                "- A **move** destroys the partition and creates it at its new place: the pod holding it loses it."
            )
        else:
            if d.gpus:
                out.append(
                    "- A **move** on a GPU mig-parted re-cuts happens with the re-cut: every partition of that GPU "
                    "is replaced, moved or not, and every pod on it loses its device."
                )
            if d.not_applied:
                out.append(
                    f"- On {len(d.not_applied)} GPU(s) the only change is a **move**: mig-parted's config has no "
                    "placements, so mig-manager leaves those GPUs as they are (nothing disrupted, nothing moved)."
                )
    if d.clients_paused:
        out.append(
            f"- On {len(d.clients_paused)} node(s) mig-manager stops the GPU clients (device plugin, GPU feature "
            "discovery, DCGM exporter, ...) while it applies."
        )
    reboots = [h for h in d.host if h.reboot is not None]
    if reboots:
        ended = sum(h.reboot.count for h in reboots if h.reboot is not None)
        out.append(
            f"- On {len(reboots)} node(s) the MIG mode changes and mig-manager runs with WITH_REBOOT: if the mode "
            f"change fails it **reboots the node**, and **{ended}** pod(s) end there, GPU or not (DaemonSet and "
            "static pods come back by themselves). migplan holds such a change unless allowDisruption, and then "
            "drains every one of them first."
        )
    stopped = [h.node for h in d.host if h.not_ready]
    if stopped:
        out.append(f"- On {len(stopped)} node(s): {md.text(disruption.NOT_READY_WINDOW)}.")
    return out


def dra_lines(review: DraReview | None) -> list[str]:
    """The devices the merge destroys and creates on DRA-static nodes, by the names NVIDIA's DRA driver publishes,
    with the claims allocated a destroyed device and the pods reserving them (also `migplan plan`'s text)."""
    if review is None or not review.devices:
        return []
    gone = sum(1 for d in review.devices if d.action == DESTROY)
    out = [
        "",
        f"**DRA devices** on {len(review.nodes)} node(s) where NVIDIA's DRA driver publishes static MIG devices: "
        f"{gone} destroyed, {len(review.devices) - gone} created; {len(review.claims)} claim(s) allocated a "
        f"destroyed device, {len(review.pods)} pod(s) reserving them. migplan's agent applies there (only what is "
        "destroyed goes) and the driver's kubelet plugin republishes the devices.",
        "",
    ]
    rows = [
        [md.code(d.node), str(d.gpu), d.action, md.code(d.shown), md.text(_pods(d.claims)), md.text(_pods(d.pods))]
        for d in review.devices[:MAX_SUMMARY_ROWS]
    ]
    out += _table(["Node", "GPU", "Change", "Device", "Claims", "Pods"], rows)
    if len(review.devices) > MAX_SUMMARY_ROWS:
        out.append(f"\n… and {len(review.devices) - MAX_SUMMARY_ROWS} more device change(s) (`-o json` has them all)")
    if review.notes:
        out.append("")
        out.extend(f"- {md.code(n.node)}: {n.code} {md.text(n.message)}" for n in review.notes)
    return out


def _head(s: PlanSection, multi: bool) -> list[str]:
    where = f" — cluster {md.code(s.cluster)}" + (f" ({md.code(s.root)})" if s.root else "") if multi else ""
    out = [f"### migplan plan{where}: {md.code(s.base)} → {md.code(s.target)}", ""]
    v = s.validation
    if s.new_root:
        out += ["A **new inventory root**: it does not exist at the base revision, every node is added.", ""]
    if v.valid:
        out.append("Target revision: **valid**" + (f" ({len(v.warnings)} warning(s))." if v.warnings else "."))
    else:
        out.append(f"Target revision: **invalid** — {len(v.errors)} error(s); it would not be applied.")
    if v.diagnostics:
        rows = [[md.text(x.location()), x.code, md.text(x.message)] for x in v.diagnostics[:MAX_DIAGNOSTICS]]
        out += ["", *_table(["Where", "Code", "Problem"], rows)]
        if len(v.diagnostics) > MAX_DIAGNOSTICS:
            out.append(f"\n… and {len(v.diagnostics) - MAX_DIAGNOSTICS} more (see `migplan validate` in the job log)")
    if s.base_errors:
        out += ["", f"The base revision is invalid ({s.base_errors} error(s)): no partition diff."]
    diff = s.diff
    if diff is None:
        return out
    out += ["", f"**{summary_line(diff)}**"]
    if diff.empty:
        out += ["", "No partition changes."]
        return out
    for note in diff.cluster_notes:
        out.append(f"- cluster: {md.text(note)}")
    for lc in diff.layouts:
        out.append(f"- {layout_line(lc.name, lc.what, lc.nodes, lc.gpus)}")
    nodes = node_rows(s)
    if nodes:
        out += ["", *_table(["Node", "What happens", "Pods disrupted"], [list(r) for r in nodes[:MAX_SUMMARY_ROWS]])]
        if len(nodes) > MAX_SUMMARY_ROWS:
            out.append(f"\n… and {len(nodes) - MAX_SUMMARY_ROWS} more node(s) (details below, as room allows)")
    if s.capacity is not None:
        out += capacity_lines(s.capacity)
    out += _disruption(s)
    out += dra_lines(s.dra)
    return out


def _changes_by_node(s: PlanSection) -> dict[str, list[int]]:
    by_node: dict[str, list[int]] = {}
    for i, c in enumerate(s.diff.changes if s.diff is not None else ()):
        by_node.setdefault(c.node, []).append(i)
    return by_node


def _details(s: PlanSection, by_node: Mapping[str, list[int]]) -> Iterator[str]:
    """A collapsed block per node with partition changes, built only as far as they are consumed."""
    diff, d = s.diff, s.disrupts
    if diff is None:
        return
    for node, idx in sorted(by_node.items()):
        headers = ["GPU", "Change", "Profile", "Placement (start:size)", "Owner"]
        show_pods = d is not None and d.observed
        if show_pods:
            headers.append("Pods")
        rows = []
        for i in idx:
            c = diff.changes[i]
            row = [str(c.gpu), VERBS[c.kind], md.text(c.profile), placement(c), md.text(owner(c))]
            if show_pods and d is not None:
                row.append(md.text(_pods(d.by_change.get(i, ()))))
            rows.append(row)
        block = [
            f"<details><summary><code>{md.text(node)}</code>: {len(idx)} partition change(s)</summary>",
            "",
            *_table(headers, rows),
            "",
            "</details>",
        ]
        yield "\n".join(block)


def render_comment(sections: Sequence[PlanSection], *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The whole comment, at most `max_chars` characters when the heads fit (see the module docstring)."""
    multi = len(sections) > 1
    heads = ["\n".join(_head(s, multi)) for s in sections]
    text = "\n\n".join(heads)
    grouped = [_changes_by_node(s) for s in sections]
    total = sum(len(g) for g in grouped)
    footer_room = 200
    parts = [text]
    used = len(text)
    shown = 0
    for block in (b for s, g in zip(sections, grouped, strict=True) for b in _details(s, g)):
        if used + len(block) + 2 + footer_room > max_chars:
            break
        parts.append(block)
        used += len(block) + 2
        shown += 1
    if total:
        parts.insert(1, "**Per node** (click to expand):")
    if shown < total:
        parts.append(
            f"*… {total - shown} more node(s) not shown to keep this comment under {max_chars:,} characters: "
            "the job log has the whole plan (`migplan plan -o markdown`).*"
        )
    return "\n\n".join(parts) + "\n"
