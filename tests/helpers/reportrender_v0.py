"""The report pages and maps as migplan rendered them before issue 29's rendering work (main at a9a8467): the
slice map SVG, the node page's text slice maps, its fenced block and the page itself, unmemoized and written as
they were, so tests can hold the faster renderers to the very bytes of the plain ones. Change this file only
with an intended change of the output (and say so in the commit).

Shared with production on purpose: the Markdown escape (markdown.text/code/table), the findings table and the
legend of codes, which issue 29's rendering work left as they were."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote

from reconciler.logic.reports import markdown as md
from reconciler.logic.reports.nodepages import cut_caption, findings_table, legend
from reconciler.logic.reports.slicesvg import gpu_map_name
from reconciler.model.drift import GpuSliceMap, NodeReport, SlicePartition

_MARGIN = 16
_WIDTH = 720
_BAR_Y = 78
_BAR_H = 84
_ROW_GAP = 14
_FONT = 'font-family="DejaVu Sans, Verdana, Arial, sans-serif"'
_CHAR_W = 7.2  # average advance of the 12px font, to shorten labels that would overflow their box

HELD = ("#2f5f9e", "#ffffff", "#1d3f6e")  # fill, text, stroke
FREE = ("#dcefd5", "#1b3a12", "#4f8a3c")
PLANNED = ("#e6e9f2", "#1f2a44", "#5b6b8f")  # occupancy not shown (migplan plan's before/after)
UNALLOCATED = "#eeeeee"
# An observed partition set against the plan: its outline says where it stands (dashed, in its colour).
OFF_PLAN = {"moved": ("#b9770e", "placed by the driver, not as planned"), "unplanned": ("#c0392b", "not in the plan")}

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def xml(text: object) -> str:
    """Text or attribute value safe in XML 1.0: markup escaped, characters XML forbids dropped."""
    s = _CONTROL.sub("", str(text))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _fit(text: str, width: float) -> str:
    room = max(int((width - 10) / _CHAR_W), 1)
    return text if len(text) <= room else text[: max(room - 1, 1)] + "…"


def partition_title(
    p: SlicePartition, memory_slices: int, *, occupancy: bool = True, observed_holders: bool = False
) -> str:
    if p.start is None:
        where = f"{p.size} memory slice(s), placement chosen by the driver"
    else:
        last = p.start + p.size - 1
        where = f"memory slices {p.start}-{last} of {memory_slices}" if p.size > 1 else f"memory slice {p.start}"
    owner = f"owner {p.owner}" if p.owner else "no owner"
    if not occupancy:
        return f"{p.profile}: {where}; {owner}"
    if p.state == "missing":
        at = f" at memory slice {p.planned_start}" if p.planned_start is not None else ""
        return f"{p.profile}: planned{at}, missing on the GPU; {owner}"
    how = "observed: the kubelet's allocation" if observed_holders else "inferred from pod requests"
    held = f"held by {p.holder} ({how})" if p.holder else "free"
    state = {"moved": f"; placed by the driver, planned at {p.planned_start}", "unplanned": "; not in the plan"}
    return f"{p.profile}: {where}; {owner}; {held}{state.get(p.state, '')}"


def _partition(
    p: SlicePartition,
    x: int,
    y: int,
    w: int,
    h: int,
    memory_slices: int,
    dashed: bool,
    title: str | None = None,
    occupancy: bool = True,
    observed_holders: bool = False,
) -> tuple[str, ...]:
    seen = observed_holders
    fill, ink, stroke = (HELD if p.holder else FREE) if occupancy else PLANNED
    dash = ' stroke-width="2" stroke-dasharray="6 4"' if dashed else ' stroke-width="2"'
    if p.state in OFF_PLAN:
        stroke, dash = OFF_PLAN[p.state][0], ' stroke-width="3" stroke-dasharray="8 3"'
    holder = p.holder or "free"
    if len(holder) * _CHAR_W > w - 10 and "/" in holder:
        holder = holder.split("/", 1)[1]  # the pod's name says more than its namespace (both in the title)
    lines = [(p.profile, "bold", 13), (p.owner or "unowned", "normal", 12)]
    if occupancy:
        lines.append((holder, "normal", 12))
    title = title or partition_title(p, memory_slices, occupancy=occupancy, observed_holders=seen)
    out = [
        f"<g><title>{xml(title)}</title>",
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="{fill}" stroke="{stroke}"{dash}/>',
    ]
    for i, (text, weight, size) in enumerate(lines):
        out.append(
            f'<text x="{x + w // 2}" y="{y + 24 + i * 20}" text-anchor="middle" font-size="{size}" '
            f'font-weight="{weight}" fill="{ink}" {_FONT}>{xml(_fit(text, w))}</text>'
        )
    out.append("</g>")
    return tuple(out)


def _legend(y: int, occupancy: bool, states: frozenset[str] = frozenset()) -> tuple[str, ...]:
    items = [(HELD[0], HELD[2], "held by a pod"), (FREE[0], FREE[2], "free")] if occupancy else []
    if not occupancy:
        items.append((PLANNED[0], PLANNED[2], "planned partition"))
    items.append((UNALLOCATED, "#bbbbbb", "unallocated"))
    items += [("#ffffff", OFF_PLAN[s][0], OFF_PLAN[s][1]) for s in sorted(states & OFF_PLAN.keys())]
    out, x = [], _MARGIN
    for fill, stroke, label in items:
        out.append(f'<rect x="{x}" y="{y}" width="14" height="14" fill="{fill}" stroke="{stroke}"/>')
        out.append(f'<text x="{x + 20}" y="{y + 12}" font-size="12" fill="#333333" {_FONT}>{xml(label)}</text>')
        x += 20 + int(len(label) * _CHAR_W) + 24
    return tuple(out)


def _ruler(slices: int, cell: int) -> tuple[str, ...]:
    """The ruler: one cell per memory slice, numbered as NVML counts placements."""
    out: list[str] = []
    for i in range(slices):
        x = _MARGIN + i * cell
        out.append(
            f'<text x="{x + cell // 2}" y="{_BAR_Y - 8}" text-anchor="middle" font-size="11" fill="#666666" '
            f"{_FONT}>{i}</text>"
        )
        out.append(
            f'<rect x="{x + 1}" y="{_BAR_Y}" width="{cell - 2}" height="{_BAR_H}" fill="{UNALLOCATED}" '
            f'stroke="#cccccc"><title>memory slice {i}: unallocated</title></rect>'
        )
    return tuple(out)


def gpu_svg(gpu: GpuSliceMap, *, node: str, caption: str = "planned cut", occupancy: bool = True) -> bytes:
    """One GPU's cut. `caption` says which cut it is ("planned cut", "before: main@…", "after: …");
    without `occupancy` (a plan between two revisions) partitions are drawn as planned, not free/held."""
    slices = max(gpu.memory_slices, 1)
    cell = (_WIDTH - 2 * _MARGIN) // slices
    width = 2 * _MARGIN + cell * slices
    placed = sorted((p for p in gpu.partitions if p.start is not None), key=lambda p: (p.start or 0, p.profile))
    unplaced = [p for p in gpu.partitions if p.start is None]
    rows = 1 + (1 if unplaced else 0)
    legend_y = _BAR_Y + rows * (_BAR_H + _ROW_GAP) + 4
    height = legend_y + 58
    name = f"node {node}, GPU {gpu.index} ({gpu.model})"
    held = sum(1 for p in gpu.partitions if p.holder)
    if not gpu.mig_enabled:
        summary = "MIG disabled: the whole GPU is one device"
    elif occupancy:
        summary = f"{len(gpu.partitions)} MIG partition(s), {held} held, {len(gpu.partitions) - held} free"
    else:
        summary = f"{len(gpu.partitions)} MIG partition(s)"
    observed_holders = gpu.holders_source == "observed"
    if occupancy:
        cut = (
            "Cut: observed on the GPU by the node's observer (NVML)."
            if gpu.layout_source == "observed"
            else "Cut: planned (no observer report for this node)."
        )
        who = "the kubelet's allocations (observed)" if observed_holders else "inferred from pod requests"
        note = f"{cut} Holders: {who}."
    else:
        note = "The cut as the inventory plans it; which pods hold partitions is not shown."
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="map-title map-desc">',
        f'<title id="map-title">{xml(f"MIG slice map of {name}: {caption}")}</title>',
        f'<desc id="map-desc">{xml(f"{summary}. {note}")}</desc>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{_MARGIN}" y="26" font-size="16" font-weight="bold" fill="#111111" {_FONT}>{xml(name)}</text>',
        f'<text x="{_MARGIN}" y="46" font-size="12" fill="#444444" {_FONT}>{xml(f"{caption} · {summary}")}</text>',
    ]
    out += _ruler(slices, cell)
    if not gpu.mig_enabled:
        whole = SlicePartition(profile="whole GPU", start=0, size=slices, owner="MIG disabled", holder=None)
        title = f"GPU {gpu.index}: MIG disabled, the whole GPU is one device (nvidia.com/gpu)"
        out += _partition(
            whole, _MARGIN + 2, _BAR_Y + 2, cell * slices - 4, _BAR_H - 4, slices, False, title, occupancy
        )
    for p in placed:
        start = min(p.start or 0, slices - 1)
        size = max(min(p.size, slices - start), 1)
        x = _MARGIN + start * cell + 2
        out += _partition(
            p, x, _BAR_Y + 2, size * cell - 4, _BAR_H - 4, slices, False, None, occupancy, observed_holders
        )
    if unplaced:
        missing = any(p.state == "missing" for p in unplaced)
        row_label = "planned, missing on the GPU" if missing else "placement chosen by the driver"
        y = _BAR_Y + _BAR_H + _ROW_GAP
        out.append(
            f'<text x="{width - _MARGIN}" y="{y - 3}" text-anchor="end" font-size="11" fill="#666666" '
            f"{_FONT}>{row_label} (dashed)</text>"
        )
        x = _MARGIN
        for p in unplaced:
            w = max(p.size, 1) * cell
            out += _partition(p, x + 2, y + 2, w - 4, _BAR_H - 4, slices, True, None, occupancy, observed_holders)
            x += w
    out += _legend(legend_y, occupancy, frozenset(p.state for p in gpu.partitions))
    out.append(f'<text x="{_MARGIN}" y="{legend_y + 36}" font-size="11" fill="#555555" {_FONT}>{xml(note)}</text>')
    out.append("</svg>")
    return ("\n".join(out) + "\n").encode("utf-8")


def fence(lines: Sequence[str]) -> list[str]:
    """Lines as a fenced code block whose fence no line can close (CommonMark §4.5)."""
    longest = max((len(m) for ln in lines for m in re.findall("`+", ln)), default=0)
    marker = "`" * max(3, longest + 1)
    return [marker, *lines, marker]


_STATE_NOTE = {
    "moved": "placed by the driver",
    "unplanned": "not in the plan",
}


def slice_map_text(gpu: GpuSliceMap) -> list[str]:
    """One GPU as text: a ruler of memory slices, then one row per partition with its placement.

    The head says whether the cut is the GPU's (observed by its node's observer) or the plan's, and whether
    the holders are observed (the kubelet) or inferred (pod requests matched to owners)."""
    head = f"GPU {gpu.index}  {gpu.model}"
    source = f"[{cut_caption(gpu)}]"
    if not gpu.mig_enabled:
        return [f"{head}  MIG disabled (whole GPU)  {source}"]
    lines = [f"{head}  MIG  {source}", f"  {'slice':<12} {''.join(str(i % 10) for i in range(gpu.memory_slices))}"]
    if not gpu.partitions:
        lines.append(f"  {'(empty)':<12} {'.' * gpu.memory_slices}")
    for p in sorted(gpu.partitions, key=lambda p: (p.start if p.start is not None else 99, p.profile)):
        if p.state == "missing":
            bar = "-" * gpu.memory_slices
            where = "missing" + (f" (planned at {p.planned_start})" if p.planned_start is not None else "")
        elif p.start is None:
            bar = "?" * gpu.memory_slices
            where = "placement chosen by the driver"
        else:
            bar = "".join("#" if p.start <= i < p.start + p.size else "." for i in range(gpu.memory_slices))
            where = f"at {p.start}"
        owner = f"owner {p.owner}" if p.owner else "unowned"
        held = f"held by {p.holder}" if p.holder else ("not on the GPU" if p.state == "missing" else "free")
        note = _STATE_NOTE.get(p.state, "")
        if p.state == "moved" and p.planned_start is not None:
            note += f"; planned at {p.planned_start}"
        lines.append(f"  {p.profile:<12} {bar}  {where:<6} {owner}, {held}" + (f"  ({note})" if note else ""))
    return lines


def _map_links(node: str, gpus: tuple[GpuSliceMap, ...]) -> list[str]:
    """Relative image links from nodes/ to the node's SVG maps (GitHub and GitLab render those, not inline
    <svg>)."""
    links = [f"![{md.text(f'{node} GPU {g.index} slice map')}](../{quote(gpu_map_name(node, g.index))})" for g in gpus]
    kinds = sorted({cut_caption(g) for g in gpus})
    return ["", f"Slice maps ({'; '.join(kinds)}):", "", *links]


def render_node_page(node: NodeReport, gpus: tuple[GpuSliceMap, ...], *, pictured: bool) -> bytes:
    """The node's page: status, findings (with the meaning of their codes), occupancy per profile, and a
    text slice map of each GPU, with its SVG picture beside it when `pictured`."""
    out = [f"# {md.text(node.name)}: {node.status.value}", ""]
    facts = ["[drift report](../README.md)"]
    if node.mig_config:
        facts.append(f"mig.config {md.code(node.mig_config)}")
    if node.observer:
        facts.append(f"observer {md.text(node.observer)}")
    out += [" · ".join(facts), ""]
    if node.findings:
        out += ["## Findings", "", findings_table(node.findings), ""]
        out += ["Finding codes on this page:", "", legend({f.code for f in node.findings}), ""]
    if node.occupancy:
        rows = [
            [
                o.profile,
                o.total,
                o.used,
                o.free,
                ", ".join(h.pod + (f" ({h.owner})" if h.owner else "") for h in o.holders),
                o.source,
            ]
            for o in node.occupancy
        ]
        out += ["## Occupancy", "", md.table(["profile", "total", "used", "free", "held by", "source"], rows), ""]
    if gpus:
        out += ["## Slice maps", ""]
        out.extend(fence([line for g in gpus for line in slice_map_text(g)]))
        if pictured:
            out += _map_links(node.name, gpus)
    return ("\n".join(out).rstrip() + "\n").encode("utf-8")
