"""A GPU's MIG cut as a picture: one SVG per GPU, for the report pages and for `migplan plan`.

Pure: a GpuSliceMap in, SVG bytes out; deterministic (integer geometry, partitions in placement order, no
clock, no random ids), so an unchanged cut is byte-identical and makes no report commit.

Why files and not inline <svg>: GitHub and GitLab strip <svg> from Markdown but render an SVG file that
the Markdown links as an image (`![…](maps/<node>-gpu<i>.svg)`), so the report writer commits these next
to README.md. Such an image is shown without scripts or external fetches: everything is inline here, with
an opaque white background so it stays readable on a dark theme.

What it shows, and says it shows: the GPU's cut, each partition over the memory slices it takes (profile,
owner, holder), free vs held, and the slices left unallocated. Where the node's observer reports, the cut
is the GPU's real one (NVML) with the partitions the plan places elsewhere or lacks named as such, and the
holders are the kubelet's allocations; elsewhere it is the planned cut (the inventory) with the holders
occupancy infers from the pods' requests. The caption, the description and every partition's title say
which (GpuSliceMap.layout_source, holders_source) rather than pretend.

Accessible: role="img" with a <title> and <desc> for the whole map, and a <title> per partition (a
tooltip in browsers, the text a screen reader announces).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

from reconciler.model.drift import GpuSliceMap, SlicePartition

__all__ = [
    "MAPS_DIR",
    "gpu_map_name",
    "gpu_svg",
    "map_file_name",
    "node_maps",
    "partition_title",
    "plan_maps",
    "xml",
]

MAPS_DIR = "maps"  # under reports.path

_MARGIN = 16
_WIDTH = 720
_BAR_Y = 78
_BAR_H = 84
_ROW_GAP = 14
# On the <svg> element alone: font-family is an inherited property (SVG 1.1 and 2, "presentation attributes"), so
# every <text> of the map takes it from there. Likewise the labels that share a size, an anchor and an ink are
# grouped under a <g> carrying them (a partition, the ruler, the legend): a map is about half the bytes it was with
# every attribute on every <text> (issue 29), drawn the same. <g> rather than a <style> sheet: GitHub and GitLab
# show an SVG file as an image, and presentation attributes are plain SVG that every viewer and sanitiser keeps.
_FONT = 'font-family="DejaVu Sans, Verdana, Arial, sans-serif"'
_CHAR_W = 7.2  # average advance of the 12px font, to shorten labels that would overflow their box

HELD = ("#2f5f9e", "#ffffff", "#1d3f6e")  # fill, text, stroke
FREE = ("#dcefd5", "#1b3a12", "#4f8a3c")
PLANNED = ("#e6e9f2", "#1f2a44", "#5b6b8f")  # occupancy not shown (migplan plan's before/after)
UNALLOCATED = "#eeeeee"
# An observed partition set against the plan: its outline says where it stands (dashed, in its colour).
OFF_PLAN = {"moved": ("#b9770e", "placed by the driver, not as planned"), "unplanned": ("#c0392b", "not in the plan")}

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")
# What xml() changes: a forbidden character or a markup one. Most strings have none (a first fleet-wide report
# escapes some 700,000 strings, issue 29): one C-level search returns those as they are.
_TOUCHED = re.compile('[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff&<>"]')


def xml(text: object) -> str:
    """Text or attribute value safe in XML 1.0: markup escaped, characters XML forbids dropped.

    Per character (each is dropped, escaped or kept on its own), so escaping a concatenation is concatenating the
    escaped parts: what _draw relies on to escape a holder apart from the rest of a partition's drawing."""
    s = str(text)
    if _TOUCHED.search(s) is None:
        return s
    s = _CONTROL.sub("", s)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def map_file_name(node: str, index: int, suffix: str = "") -> str:
    """`<node>-gpu<i>[-suffix].svg` (node names are validated DNS names: safe as file names)."""
    return f"{node}-gpu{index}{'-' + suffix if suffix else ''}.svg"


def gpu_map_name(node: str, index: int) -> str:
    """`maps/<node>-gpu<i>.svg`, relative to reports.path."""
    return f"{MAPS_DIR}/{map_file_name(node, index)}"


def _fit(text: str, width: float) -> str:
    room = max(int((width - 10) / _CHAR_W), 1)
    return text if len(text) <= room else text[: max(room - 1, 1)] + "…"


def partition_title(
    p: SlicePartition, memory_slices: int, *, occupancy: bool = True, observed_holders: bool = False
) -> str:
    if not occupancy:
        return f"{p.profile}: {_where(p.start, p.size, memory_slices)}; {_owner(p.owner)}"
    if p.state == "missing":
        at = f" at memory slice {p.planned_start}" if p.planned_start is not None else ""
        return f"{p.profile}: planned{at}, missing on the GPU; {_owner(p.owner)}"
    if p.holder:
        head, tail = _held_title(
            p.profile, p.start, p.size, p.owner, p.state, p.planned_start, memory_slices, observed_holders
        )
        return head + p.holder + tail
    free = f"{p.profile}: {_where(p.start, p.size, memory_slices)}; {_owner(p.owner)}; free"
    return free + _state_note(p.state, p.planned_start)


def _where(start: int | None, size: int, memory_slices: int) -> str:
    if start is None:
        return f"{size} memory slice(s), placement chosen by the driver"
    last = start + size - 1
    return f"memory slices {start}-{last} of {memory_slices}" if size > 1 else f"memory slice {start}"


def _owner(owner: str | None) -> str:
    return f"owner {owner}" if owner else "no owner"


def _state_note(state: str, planned_start: int | None) -> str:
    if state == "moved":
        return f"; placed by the driver, planned at {planned_start}"
    return "; not in the plan" if state == "unplanned" else ""


def _held_title(
    profile: str,
    start: int | None,
    size: int,
    owner: str | None,
    state: str,
    planned_start: int | None,
    memory_slices: int,
    observed_holders: bool,
) -> tuple[str, str]:
    """A held partition's title around its holder (the holder goes between the two)."""
    how = "observed: the kubelet's allocation" if observed_holders else "inferred from pod requests"
    head = f"{profile}: {_where(start, size, memory_slices)}; {_owner(owner)}; held by "
    return head, f" ({how})" + _state_note(state, planned_start)


# Most GPUs of a fleet share their cut, so the same fragments come back thousands of times in a first report
# (issue 29): the fragments are memoized on every value they are drawn from (typed, so True and 1 stay apart),
# never on the node or GPU that names them, which only gpu_svg's header writes, nor on a partition's holder, which
# _draw escapes into its frame. Bounded: a fleet of unique cuts, owners or geometries evicts rather than grows.
_FRAGMENTS = 1024


def _draw(
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
) -> str:
    """One partition: its <g> (title, box, labels), its lines joined as gpu_svg joins them.

    A holder is a pod name, unique across the fleet: memoized with it, the drawing would be drawn anew for every
    held partition (issue 29: 131,637 of them in a first report at 5,000 nodes). So _partition memoizes everything
    but the holder and the holder is escaped into the gaps it leaves: xml() works per character, so the bytes are
    those of the whole drawing escaped at once."""
    held = bool(p.holder) and occupancy
    frame = _partition(
        p.profile, p.start, p.size, p.owner, p.state, p.planned_start, held,
        x, y, w, h, memory_slices, dashed, title, occupancy, observed_holders,
    )  # fmt: skip
    if not held:
        return frame[0]
    holder = p.holder or ""
    # Too long for its box: the pod's name says more than its namespace (both are in the title).
    shown = holder.split("/", 1)[1] if len(holder) * _CHAR_W > w - 10 and "/" in holder else holder
    if len(frame) == 3:  # the title names the holder too
        return frame[0] + xml(holder) + frame[1] + xml(_fit(shown, w)) + frame[2]
    return frame[0] + xml(_fit(shown, w)) + frame[1]


@functools.lru_cache(maxsize=_FRAGMENTS, typed=True)
def _partition(
    profile: str,
    start: int | None,
    size: int,
    owner: str | None,
    state: str,
    planned_start: int | None,
    held: bool,
    x: int,
    y: int,
    w: int,
    h: int,
    memory_slices: int,
    dashed: bool,
    title: str | None,
    occupancy: bool,
    observed_holders: bool,
) -> tuple[str, ...]:
    """A partition's drawing less its holder: the whole drawing when it shows no holder (free, or occupancy not
    shown), else the text around the holder's label and, when the title names the holder, around it there."""
    fill, ink, stroke = (HELD if held else FREE) if occupancy else PLANNED
    dash = ' stroke-width="2" stroke-dasharray="6 4"' if dashed else ' stroke-width="2"'
    if state in OFF_PLAN:
        stroke, dash = OFF_PLAN[state][0], ' stroke-width="3" stroke-dasharray="8 3"'
    # The group carries what the labels share (anchor, size, ink; the font is the map's): the first label says only
    # what sets it apart. The box has its own fill and stroke, so it inherits nothing that shows.
    lines = [(profile, ' font-size="13" font-weight="bold"'), (owner or "unowned", "")]
    if occupancy:
        lines.append(("" if held else "free", ""))  # a holder's label is filled in by _draw
    labels = [
        f'<text x="{x + w // 2}" y="{y + 24 + i * 20}"{own}>{xml(_fit(text, w)) if text else ""}'
        for i, (text, own) in enumerate(lines)
    ]
    body = (
        f'</title>\n<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="{fill}" stroke="{stroke}"{dash}/>\n'
        + "</text>\n".join(labels)
    )
    end = "</text>\n</g>"
    group = f'<g text-anchor="middle" font-size="12" fill="{ink}"><title>'
    bare = SlicePartition(profile, start, size, owner, None, state, planned_start)
    if not held:
        named = title or partition_title(bare, memory_slices, occupancy=occupancy, observed_holders=observed_holders)
        return (f"{group}{xml(named)}{body}{end}",)
    if title or state == "missing":  # the title does not name the holder
        named = title or partition_title(bare, memory_slices)
        return f"{group}{xml(named)}{body}", end
    head, tail = _held_title(profile, start, size, owner, state, planned_start, memory_slices, observed_holders)
    return f"{group}{xml(head)}", xml(tail) + body, end


@functools.lru_cache(maxsize=64, typed=True)
def _legend(y: int, occupancy: bool, states: frozenset[str] = frozenset()) -> tuple[str, ...]:
    items = [(HELD[0], HELD[2], "held by a pod"), (FREE[0], FREE[2], "free")] if occupancy else []
    if not occupancy:
        items.append((PLANNED[0], PLANNED[2], "planned partition"))
    items.append((UNALLOCATED, "#bbbbbb", "unallocated"))
    items += [("#ffffff", OFF_PLAN[s][0], OFF_PLAN[s][1]) for s in sorted(states & OFF_PLAN.keys())]
    out, x = ['<g font-size="12" fill="#333333">'], _MARGIN  # the labels' size and ink; each swatch has its own
    for fill, stroke, label in items:
        out.append(f'<rect x="{x}" y="{y}" width="14" height="14" fill="{fill}" stroke="{stroke}"/>')
        out.append(f'<text x="{x + 20}" y="{y + 12}">{xml(label)}</text>')
        x += 20 + int(len(label) * _CHAR_W) + 24
    out.append("</g>")
    return tuple(out)


@functools.lru_cache(maxsize=64, typed=True)
def _ruler(slices: int, cell: int) -> tuple[str, ...]:
    """The ruler: one cell per memory slice, numbered as NVML counts placements."""
    out = ['<g text-anchor="middle" font-size="11" fill="#666666">']  # the numbers' look; each cell has its own
    for i in range(slices):
        x = _MARGIN + i * cell
        out.append(f'<text x="{x + cell // 2}" y="{_BAR_Y - 8}">{i}</text>')
        out.append(
            f'<rect x="{x + 1}" y="{_BAR_Y}" width="{cell - 2}" height="{_BAR_H}" fill="{UNALLOCATED}" '
            f'stroke="#cccccc"><title>memory slice {i}: unallocated</title></rect>'
        )
    out.append("</g>")
    return tuple(out)


def clear_fragments() -> None:
    """Forget the memoized fragments (tests: render from scratch to compare with a warm render)."""
    _partition.cache_clear()
    _chrome.cache_clear()
    _legend.cache_clear()
    _ruler.cache_clear()


def gpu_svg(gpu: GpuSliceMap, *, node: str, caption: str = "planned cut", occupancy: bool = True) -> bytes:
    """One GPU's cut. `caption` says which cut it is ("planned cut", "before: main@…", "after: …");
    without `occupancy` (a plan between two revisions) partitions are drawn as planned, not free/held."""
    slices = max(gpu.memory_slices, 1)
    cell = (_WIDTH - 2 * _MARGIN) // slices
    width = 2 * _MARGIN + cell * slices
    placed = sorted((p for p in gpu.partitions if p.start is not None), key=lambda p: (p.start or 0, p.profile))
    unplaced = [p for p in gpu.partitions if p.start is None]
    rows = 1 + (1 if unplaced else 0)
    name = xml(f"node {node}, GPU {gpu.index} ({gpu.model})")
    held = sum(1 for p in gpu.partitions if p.holder)
    if not gpu.mig_enabled:
        summary = "MIG disabled: the whole GPU is one device"
    elif occupancy:
        summary = f"{len(gpu.partitions)} MIG partition(s), {held} held, {len(gpu.partitions) - held} free"
    else:
        summary = f"{len(gpu.partitions)} MIG partition(s)"
    observed_holders = gpu.holders_source == "observed"
    states = frozenset(p.state for p in gpu.partitions)
    top, below_title, ruler, bottom = _chrome(
        slices, rows, caption, summary, occupancy, gpu.layout_source, observed_holders, states
    )
    out = [
        top,
        f'<title id="map-title">MIG slice map of {name}: {xml(caption)}</title>',
        below_title,
        f'<text x="{_MARGIN}" y="26" font-size="16" font-weight="bold" fill="#111111">{name}</text>',
        ruler,
    ]
    if not gpu.mig_enabled:
        whole = SlicePartition(profile="whole GPU", start=0, size=slices, owner="MIG disabled", holder=None)
        title = f"GPU {gpu.index}: MIG disabled, the whole GPU is one device (nvidia.com/gpu)"
        out.append(
            _draw(whole, _MARGIN + 2, _BAR_Y + 2, cell * slices - 4, _BAR_H - 4, slices, False, title, occupancy)
        )
    for p in placed:
        start = min(p.start or 0, slices - 1)
        size = max(min(p.size, slices - start), 1)
        x = _MARGIN + start * cell + 2
        out.append(
            _draw(p, x, _BAR_Y + 2, size * cell - 4, _BAR_H - 4, slices, False, None, occupancy, observed_holders)
        )
    if unplaced:
        missing = any(p.state == "missing" for p in unplaced)
        row_label = "planned, missing on the GPU" if missing else "placement chosen by the driver"
        y = _BAR_Y + _BAR_H + _ROW_GAP
        out.append(
            f'<text x="{width - _MARGIN}" y="{y - 3}" text-anchor="end" font-size="11" fill="#666666">'
            f"{row_label} (dashed)</text>"
        )
        x = _MARGIN
        for p in unplaced:
            w = max(p.size, 1) * cell
            out.append(_draw(p, x + 2, y + 2, w - 4, _BAR_H - 4, slices, True, None, occupancy, observed_holders))
            x += w
    return ("\n".join(out) + "\n" + bottom).encode("utf-8")


# What a map draws from its GPU's shape and sources alone, not from its node or partitions: the same few values for
# a whole fleet (issue 29), each piece already joined as gpu_svg joins its lines. Bounded like the other fragments.
@functools.lru_cache(maxsize=256, typed=True)
def _chrome(
    slices: int,
    rows: int,
    caption: str,
    summary: str,
    occupancy: bool,
    layout_source: str,
    observed_holders: bool,
    states: frozenset[str],
) -> tuple[str, str, str, str]:
    """(the <svg> tag; the description and background; the caption line and the ruler; the legend, the note and
    the end), the pieces gpu_svg puts around the map's title, name and partitions."""
    cell = (_WIDTH - 2 * _MARGIN) // slices
    width = 2 * _MARGIN + cell * slices
    legend_y = _BAR_Y + rows * (_BAR_H + _ROW_GAP) + 4
    height = legend_y + 58
    if occupancy:
        cut = (
            "Cut: observed on the GPU by the node's observer (NVML)."
            if layout_source == "observed"
            else "Cut: planned (no observer report for this node)."
        )
        who = "the kubelet's allocations (observed)" if observed_holders else "inferred from pod requests"
        note = f"{cut} Holders: {who}."
    else:
        note = "The cut as the inventory plans it; which pods hold partitions is not shown."
    top = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="map-title map-desc" {_FONT}>'
    )
    below_title = (
        f'<desc id="map-desc">{xml(f"{summary}. {note}")}</desc>\n'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>'
    )
    caption_line = f'<text x="{_MARGIN}" y="46" font-size="12" fill="#444444">{xml(f"{caption} · {summary}")}</text>'
    end = [
        *_legend(legend_y, occupancy, states),
        f'<text x="{_MARGIN}" y="{legend_y + 36}" font-size="11" fill="#555555">{xml(note)}</text>',
        "</svg>",
    ]
    return top, below_title, "\n".join([caption_line, *_ruler(slices, cell)]), "\n".join(end) + "\n"


def node_maps(node: str, gpus: Iterable[GpuSliceMap], *, caption: str = "planned cut") -> dict[str, bytes]:
    """File name (under reports.path) -> SVG, for every GPU of a node."""
    return {gpu_map_name(node, g.index): gpu_svg(g, node=node, caption=caption) for g in gpus}


def plan_maps(
    before: Mapping[str, tuple[GpuSliceMap, ...]],
    after: Mapping[str, tuple[GpuSliceMap, ...]],
    gpus: Iterable[tuple[str, int]],
    *,
    before_caption: str,
    after_caption: str,
) -> list[tuple[str, int, str | None, str | None, dict[str, bytes]]]:
    """Before/after maps of the GPUs a plan changes: (node, gpu, before file, after file, files), one per
    GPU in order; a file is None where the GPU is not in that revision (a node added or removed)."""
    out = []
    for node, index in sorted(set(gpus)):
        files: dict[str, bytes] = {}
        names: list[str | None] = []
        for side, maps, caption in (("before", before, before_caption), ("after", after, after_caption)):
            gpu = next((g for g in maps.get(node, ()) if g.index == index), None)
            if gpu is None:
                names.append(None)
                continue
            name = map_file_name(node, index, side)
            files[name] = gpu_svg(gpu, node=node, caption=caption, occupancy=False)
            names.append(name)
        out.append((node, index, names[0], names[1], files))
    return out
