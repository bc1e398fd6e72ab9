"""Render a DriftReport as the files committed to the reports branch.

Pure: a DriftReport in, `{relative path: bytes}` out: drift.yaml (the whole report as data, the one
machine-readable entry point), README.md (for people: the summary, capacity and saturation per profile
and owner, and only the nodes not in sync, each linking to its page), nodes/<node>.md (one page per node:
findings, occupancy, slice map; see nodepages) and maps/*.svg. README.md stays small at any fleet size
(its node list and other per-item lists are capped); a node page depends on its node alone, so a
report commit's diff touches only what changed. No timestamps in the content (the report is committed
only when its bytes change, so a clock in it would make a commit per cycle); the revision it was
computed against is in drift.yaml and README.md only (in every page, each new revision would rewrite
them all). Output is deterministic: nodes by name, findings by (node, code, gpu, profile), holders by pod.
"""

from __future__ import annotations

import functools
import io
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from reconciler.logic.reports import markdown as md
from reconciler.logic.reports import slicesvg
from reconciler.logic.reports.nodepages import (
    NODES_DIR,
    cut_caption,
    findings_table,
    legend,
    node_page_link,
    node_page_name,
    render_node_page,
    slice_map_text,
)
from reconciler.model.drift import DriftReport, GpuSliceMap, NodeReport, NodeStatus

__all__ = [
    "DRIFT_FILE",
    "MAP_EVERY_NODE_UP_TO",
    "NODES_DIR",
    "README_FILE",
    "README_NODE_ROWS",
    "PageSource",
    "RenderMemo",
    "cut_caption",
    "gpu_json",
    "mapped_nodes",
    "node_page_name",
    "page_sources",
    "render_drift_yaml",
    "render_node_pages",
    "render_readme",
    "render_reports",
    "render_slice_maps",
    "render_top_files",
    "report_to_json",
    "slice_map_text",
    "yaml_text",
]

DRIFT_FILE = "drift.yaml"
README_FILE = "README.md"


class RenderMemo:
    """The per-node files of the last report, with the values each was rendered from, so the next report
    renders again only the nodes whose values changed (a long-lived controller keeps one across cycles).

    A node page depends on (its NodeReport, its GPUs' slice maps, whether it is pictured) alone and a map on
    (node, GpuSliceMap) alone (see the module docstring), and these are frozen values compared by equality: an
    unchanged node's bytes are the very bytes rendered before. Only the last report's nodes are kept."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[tuple[NodeReport, tuple[GpuSliceMap, ...], bool], bytes]] = {}
        self.maps: dict[tuple[str, int], tuple[GpuSliceMap, bytes]] = {}
        self.rendered = 0  # files rendered by the last report (the others came from the memo)
        # When the report is written into Git (adapters/git/reportstore.py): path -> (input digest, blob id) of each
        # per-node file, so neither the bytes nor the inputs need be kept (pageindex.input_digest tells equal inputs
        # apart from changed ones); pages/maps are then left empty.
        self.stored: dict[str, tuple[str, str]] = {}


@dataclass(frozen=True, slots=True)
class PageSource:
    """A per-node file of the report, not rendered yet: its path, the values its bytes depend on alone (frozen,
    compared by equality, digested by pageindex.input_digest) and how to render it. The report writer renders
    it only when no earlier report holds a page rendered from equal values."""

    path: str
    inputs: object
    render: Callable[[], bytes]


def page_sources(report: DriftReport) -> Iterator[PageSource]:
    """Every per-node file of the report (what render_node_pages and render_slice_maps give), unrendered."""
    pictured = mapped_nodes(report)
    for n in report.nodes:
        gpus = tuple(report.slice_maps.get(n.name, ()))
        shown = n.name in pictured
        render = functools.partial(render_node_page, n, gpus, pictured=shown)
        yield PageSource(node_page_name(n.name), (n, gpus, shown), render)
    for node in sorted(pictured):
        for g in report.slice_maps[node]:
            # No revision in the picture: a new revision leaves an unchanged GPU's file alone.
            draw = functools.partial(slicesvg.gpu_svg, g, node=node, caption=cut_caption(g))
            yield PageSource(slicesvg.gpu_map_name(node, g.index), (node, g), draw)


def render_top_files(
    report: DriftReport, *, source: Mapping[str, Any] | None = None, doc: Mapping[str, Any] | None = None
) -> dict[str, bytes]:
    """drift.yaml and README.md: rendered for every report (they carry the revision and the whole summary).
    `doc`: report_to_json(report), when the caller has it already (it is not changed)."""
    return {
        DRIFT_FILE: render_drift_yaml(report, source=source, doc=doc),
        README_FILE: render_readme(report, source=source),
    }


def render_reports(
    report: DriftReport, *, source: Mapping[str, Any] | None = None, memo: RenderMemo | None = None
) -> dict[str, bytes]:
    """Every report file. `source` is the Git source's state (SourceResult.to_json(): revision,
    latest, stale, refused{...}, source_error{...}, signature{...}); when given, drift.yaml carries
    it as `source:` and README.md says which revision is applied and why a newer one is not. With
    `memo`, a node whose values did not change since the memo's report is not rendered again."""
    files = render_top_files(report, source=source)
    if memo is not None:
        memo.rendered = 0
    files.update(render_node_pages(report, memo=memo))
    files.update(render_slice_maps(report, memo=memo))
    return files


def render_node_pages(report: DriftReport, *, memo: RenderMemo | None = None) -> dict[str, bytes]:
    """`nodes/<node>.md` for every node of the report (nodepages.render_node_page)."""
    pictured = mapped_nodes(report)
    if memo is None:
        return {
            node_page_name(n.name): render_node_page(n, report.slice_maps.get(n.name, ()), pictured=n.name in pictured)
            for n in report.nodes
        }
    out: dict[str, bytes] = {}
    pages: dict[str, tuple[tuple[NodeReport, tuple[GpuSliceMap, ...], bool], bytes]] = {}
    for n in report.nodes:
        key = (n, tuple(report.slice_maps.get(n.name, ())), n.name in pictured)
        last = memo.pages.get(n.name)
        if last is not None and last[0] == key:
            data = last[1]
        else:
            data = render_node_page(key[0], key[1], pictured=key[2])
            memo.rendered += 1
        pages[n.name] = (key, data)
        out[node_page_name(n.name)] = data
    memo.pages = pages  # only this report's nodes: a node gone from the fleet is forgotten
    return out


# Pictures for every node of a cluster up to this size; beyond it only for the nodes not in sync (those a
# person opens): 5,000 nodes x 8 GPUs would be 40,000 files (~250 MB) rewritten into every report.
MAP_EVERY_NODE_UP_TO = 100


def mapped_nodes(report: DriftReport) -> frozenset[str]:
    """The planned nodes whose GPUs get an SVG map (see MAP_EVERY_NODE_UP_TO)."""
    planned = set(report.slice_maps)
    if len(planned) <= MAP_EVERY_NODE_UP_TO:
        return frozenset(planned)
    return frozenset(n.name for n in report.nodes if n.name in planned and n.status is not NodeStatus.IN_SYNC)


def render_slice_maps(report: DriftReport, *, memo: RenderMemo | None = None) -> dict[str, bytes]:
    """`maps/<node>-gpu<i>.svg` for every GPU of the mapped nodes, linked from their nodes/<node>.md."""
    out: dict[str, bytes] = {}
    maps: dict[tuple[str, int], tuple[GpuSliceMap, bytes]] = {}
    for node in sorted(mapped_nodes(report)):
        for g in report.slice_maps[node]:
            last = memo.maps.get((node, g.index)) if memo is not None else None
            if last is not None and last[0] == g:
                data = last[1]
            else:
                # No revision in the picture: a new revision leaves an unchanged GPU's file alone.
                data = slicesvg.gpu_svg(g, node=node, caption=cut_caption(g))
                if memo is not None:
                    memo.rendered += 1
            maps[(node, g.index)] = (g, data)
            out[slicesvg.gpu_map_name(node, g.index)] = data
    if memo is not None:
        memo.maps = maps
    return out


def report_to_json(report: DriftReport) -> dict[str, Any]:
    """The drift.yaml document as plain data (also what `-o json` prints under "report").

    Observed GPU cuts (`gpus:` per node) are given for the nodes that get a picture (mapped_nodes: every
    node of a cluster up to MAP_EVERY_NODE_UP_TO planned nodes, beyond only those not in sync): 5,000 nodes
    of 56 observed partitions each would make drift.yaml some 60 MB."""
    detailed = mapped_nodes(report)
    return {
        "apiVersion": "migplan/v1",
        "kind": "DriftReport",
        "cluster": report.cluster,
        "revision": str(report.revision),
        "strategy": report.strategy,
        "inSync": report.in_sync,
        "summary": report.counts(),
        "clusterFindings": [f.to_json() for f in report.cluster_findings],
        "owners": [a.to_json() for a in report.owners],
        # Only when mig-manager reboots or stops the kubelet: what a plan read from this report must say.
        **({"migManager": report.mig_manager.to_json()} if report.mig_manager is not None else {}),
        "nodes": [_node_json(n, report.slice_maps.get(n.name, ()) if n.name in detailed else ()) for n in report.nodes],
    }


def _node_json(n: NodeReport, gpus: tuple[GpuSliceMap, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"name": n.name, "status": n.status.value}
    if n.mig_config:
        out["migConfig"] = n.mig_config
    if n.observer:
        out["observer"] = n.observer
    out["findings"] = [f.to_json() for f in n.findings]
    out["occupancy"] = [o.to_json() for o in n.occupancy]
    if n.reboot_ends is not None:
        out["rebootEnds"] = {"pods": n.reboot_ends, "names": list(n.reboot_names)}
    if n.dra is not None:  # only on a DRA node: what a plan read from this report names devices and claims by
        out["dra"] = n.dra.to_json()
    observed = [g for g in gpus if g.layout_source == "observed"]
    if observed:
        # The GPUs' real cut, only where an observer reports it (the planned cut is the inventory itself).
        out["gpus"] = [gpu_json(g) for g in observed]
    return out


def gpu_json(g: GpuSliceMap) -> dict[str, Any]:
    """One GPU's cut as data: where the layout and the holders come from, and each partition."""
    parts = []
    for p in sorted(g.partitions, key=lambda p: (p.start if p.start is not None else 99, p.profile)):
        # defaults left out (state planned, no owner, no holder) to keep a large report small
        item: dict[str, Any] = {"profile": p.profile, "start": p.start, "size": p.size}
        if p.state != "planned":
            item["state"] = p.state
        if p.planned_start is not None:
            item["plannedStart"] = p.planned_start
        if p.owner:
            item["owner"] = p.owner
        if p.holder:
            item["holders"] = p.holder.split(", ")
        parts.append(item)
    return {
        "index": g.index,
        "migEnabled": g.mig_enabled,
        "layout": g.layout_source,
        "holders": g.holders_source,
        "partitions": parts,
    }


def render_drift_yaml(
    report: DriftReport, *, source: Mapping[str, Any] | None = None, doc: Mapping[str, Any] | None = None
) -> bytes:
    """Block-style YAML, emitted directly: PyYAML's representer costs seconds on a 5,000-node report.

    Strings that could be read back as something else (numbers, booleans, null, anything with YAML
    syntax characters) are written as JSON strings, which YAML reads as double-quoted scalars; the
    tests load the output back with yaml.safe_load and compare it with report_to_json(). `doc`: that very
    document, when the caller has it already (it is not changed).
    """
    data = dict(doc) if doc is not None else report_to_json(report)
    if source is not None:
        data = {**{k: v for k, v in data.items() if k != "nodes"}, "source": dict(source), "nodes": data["nodes"]}
    return yaml_bytes(data)


def yaml_text(doc: dict[str, Any]) -> str:
    """A mapping of plain data (dict, list, str, int, float, bool, None) as block-style YAML."""
    return yaml_bytes(doc).decode("utf-8")


def yaml_bytes(doc: dict[str, Any]) -> bytes:
    """yaml_text(doc), encoded as UTF-8, made without holding the document's lines all at once: a 5,000-node
    drift.yaml is some 700,000 lines, and as one list of strings, then joined, then encoded, it was the largest
    transient of `migplan run`'s report cycle. The lines go into the buffer a few thousand at a time."""
    if not doc:
        return b"{}\n"
    sink = io.BytesIO()
    emitter = _Emitter([], sink)
    emitter.block(doc, 0)
    emitter.flush()
    # (getvalue hands over the buffer itself, trimmed to size, when nothing else holds a view of it: no copy)
    return sink.getvalue()


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./@+-]*(?: [A-Za-z0-9_./@+()-]+)*$")
_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})
_RESERVED_LONGEST = max(map(len, _RESERVED))


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    # (only a short text can be a reserved word: the longest is "false")
    if _PLAIN.fullmatch(text) and (len(text) > _RESERVED_LONGEST or text.lower() not in _RESERVED):
        return text
    return _quote(text)


# Allowed raw inside a double-quoted scalar: printable, and not a YAML line break (NEL, LS, PS) or BOM.
_NOT_PRINTABLE = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


def _quote(text: str) -> str:
    """A YAML double-quoted scalar: JSON escaping, plus escapes for what YAML may not contain raw."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _NOT_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) < 0x10000 else "", quoted)


_KEYS_REMEMBERED = 4096
_FLUSH_LINES = 4096  # lines an emitter holds at most before it moves them into its sink (checked per mapping/list)


class _Emitter:
    """Appends block YAML lines to `out`. A drift.yaml repeats a few mapping keys (profile, holders, pod, ...) tens
    of thousands of times: each distinct key is turned into its scalar once per document (values, mostly distinct
    pod names and messages, are not remembered: that would hold a second table as large as the report)."""

    __slots__ = ("keys", "out", "sink")

    def __init__(self, out: list[str], sink: io.BytesIO) -> None:
        self.out = out  # the lines not yet in `sink` (cleared in place: `block` holds its append)
        self.sink = sink
        self.keys: dict[str, str] = {}

    def flush(self) -> None:
        """Move the pending lines into the sink, each ended by a newline."""
        out = self.out
        if out:
            out.append("")
            self.sink.write("\n".join(out).encode("utf-8"))
            out.clear()

    def key(self, k: Any) -> str:
        if type(k) is not str:
            return _scalar(k)
        text = self.keys.get(k)
        if text is None:
            text = _scalar(k)
            if len(self.keys) < _KEYS_REMEMBERED:  # keys read from the cluster (resource names) are not many either
                self.keys[k] = text
        return text

    def block(self, value: Any, indent: int, *, dash: bool = False) -> None:
        """Append a non-empty mapping or list as block YAML at `indent`; with `dash` the mapping is a list item
        whose first key shares the line with the '- ' (placed in the two columns before).

        The str, int, dict and list of a drift.yaml (exact types) are written here without a call per value (half a
        million values at 5,000 nodes); any other value takes inline's (and _scalar's) general way, same text."""
        if len(self.out) >= _FLUSH_LINES:
            self.flush()
        append, keys, fullmatch = self.out.append, self.keys, _PLAIN.fullmatch
        pad = " " * indent
        if isinstance(value, dict):
            start = " " * (indent - 2) + "- " if dash else pad
            for k, v in value.items():
                ks = keys.get(k) if type(k) is str else None
                if ks is None:
                    ks = self.key(k)
                kind = type(v)
                if kind is str:
                    if fullmatch(v) and (len(v) > _RESERVED_LONGEST or v.lower() not in _RESERVED):
                        append(f"{start}{ks}: {v}")
                    else:
                        append(f"{start}{ks}: {_quote(v)}")
                elif kind is int:
                    append(f"{start}{ks}: {v}")
                elif kind is list or kind is dict:
                    if v:
                        append(f"{start}{ks}:")
                        self.block(v, indent + 2)
                    else:
                        append(f"{start}{ks}: {'[]' if kind is list else '{}'}")
                elif isinstance(v, dict | list) and v:
                    append(f"{start}{ks}:")
                    self.block(v, indent + 2)
                else:
                    append(f"{start}{ks}: {self.inline(v)}")
                start = pad
            return
        for item in value:
            kind = type(item)
            if kind is dict or kind is list or isinstance(item, dict | list):
                if not item:
                    append(pad + "- " + self.inline(item))
                elif isinstance(item, dict):
                    self.block(item, indent + 2, dash=True)
                else:
                    append(pad + "-")
                    self.block(item, indent + 2)
            elif kind is str:
                if fullmatch(item) and (len(item) > _RESERVED_LONGEST or item.lower() not in _RESERVED):
                    append(pad + "- " + item)
                else:
                    append(pad + "- " + _quote(item))
            else:
                append(pad + "- " + self.inline(item))

    def inline(self, value: Any) -> str:
        kind = type(value)
        if kind is str:  # _scalar's answer for a str, without its checks for other types
            plain = _PLAIN.fullmatch(value) and (len(value) > _RESERVED_LONGEST or value.lower() not in _RESERVED)
            return value if plain else _quote(value)
        if kind is int:  # (not a bool, nor an int subclass: those take _scalar's way)
            return str(value)
        if isinstance(value, dict):
            if not value:
                return "{}"
            return "{" + ", ".join(f"{self.key(k)}: {self.inline(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(self.inline(v) for v in value) + "]"
        return _scalar(value)


# --- README.md --------------------------------------------------------------------------------------

_STATUS_ORDER = [NodeStatus.ERROR, NodeStatus.MISSING, NodeStatus.DRIFTED, NodeStatus.UNDOCUMENTED, NodeStatus.IN_SYNC]


# Every string below reaches Markdown through reconciler.logic.reports.markdown (text, code, table, fence):
# names, messages, log lines and signers are not migplan's to trust. Tables use markdown.table, not
# tabulate: its per-cell type sniffing costs seconds over 5,000 nodes.

# README.md lists at most this many nodes not in sync (worst first), and at most this many of any other
# list (cluster findings, pods holding another owner's partitions): ~100 bytes a row keeps it well
# under 256 KB whatever the fleet; drift.yaml and the node pages hold every one.
README_NODE_ROWS = 1000
README_LIST_ITEMS = 200
# In-sync nodes are named (linked) in README.md up to this many; beyond, counted.
README_IN_SYNC_NAMES = 100


def _source_lines(source: Mapping[str, Any]) -> list[str]:
    out = ["", "## Source", ""]
    out.append(f"- Applied revision: {md.code(source.get('revision') or 'none')}")
    if source.get("latest") and source.get("latest") != source.get("revision"):
        out.append(f"- Latest revision seen: {md.code(source['latest'])}")
    refused = source.get("refused")
    if refused:
        out.append(
            f"- **{md.code(refused.get('revision'))} is NOT applied**: "
            f"{md.text(refused.get('code'))} {md.text(refused.get('reason'))}"
        )
        if refused.get("signer"):
            out.append(f"  - signer: {md.text(refused['signer'])}")
        for e in refused.get("errors") or ():
            where = e.get("file") or "<inventory>"
            if e.get("line"):
                where += f":{e['line']}"
            out.append(f"  - {md.text(where)}: {md.text(e.get('code'))} {md.text(e.get('message'))}")
    err = source.get("source_error")
    if err:
        out.append(
            f"- Source error: {md.text(err.get('code'))} {md.text(err.get('message'))} ({md.text(err.get('url'))})"
        )
    sig = source.get("signature")
    if sig:
        signer = f" ({md.text(sig.get('signer'))})" if sig.get("signer") else ""
        out.append(f"- Signature: {md.text(sig.get('status'))}{signer}")
    return out


def _percent(part: int, whole: int) -> str:
    return f"{100 * part // whole}%" if whole else "-"


def _capacity_rows(report: DriftReport) -> list[list[object]]:
    """Per profile over the cluster: nodes offering it, partitions, held, free and saturation (held/total)."""
    totals: dict[str, list[int]] = {}
    for n in report.nodes:
        for o in n.occupancy:
            row = totals.setdefault(o.profile, [0, 0, 0, 0])
            row[0] += 1
            row[1] += o.total
            row[2] += o.used
            row[3] += o.free
    return [[p, c, t, u, f, _percent(u, t)] for p, (c, t, u, f) in sorted(totals.items())]


def _capped(items: list[str], limit: int) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _nodes_lines(report: DriftReport) -> list[str]:
    """The nodes not in sync, worst status first, each linked to its page (capped: README_NODE_ROWS);
    the in-sync ones counted, and linked while few."""
    rank = {s: i for i, s in enumerate(_STATUS_ORDER)}
    off = sorted(
        (n for n in report.nodes if n.status is not NodeStatus.IN_SYNC), key=lambda n: (rank[n.status], n.name)
    )
    in_sync = [n.name for n in report.nodes if n.status is NodeStatus.IN_SYNC]
    out = ["", "## Nodes", ""]
    out.append(
        f"Every node's findings, occupancy and slice maps are on its own page, `{NODES_DIR}/<node>.md`; "
        f"the nodes not in sync are listed here, worst first, each linking to its page. The whole report as "
        f"data, every node included, is `{DRIFT_FILE}`."
    )
    if off:
        rows = [
            [node_page_link(n.name), n.status.value, md.text(n.mig_config or ""), len(n.findings)]
            for n in off[:README_NODE_ROWS]
        ]
        # the node cell is a link built from escaped text: joined as is, every other cell through md.text
        lines = ["| node | status | mig.config | findings |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
        out += ["", "\n".join(lines)]
        if len(off) > README_NODE_ROWS:
            out += [
                "",
                f"{len(off) - README_NODE_ROWS} more nodes not in sync are not listed here: drift.yaml lists every "
                f"node, and each has its page.",
            ]
    else:
        out += ["", "Every node is in sync."]
    if in_sync:
        named = ""
        if len(in_sync) <= README_IN_SYNC_NAMES:
            named = ": " + ", ".join(node_page_link(x) for x in in_sync)
        out += ["", f"InSync: {len(in_sync)} node(s){named}."]
    pictured = mapped_nodes(report)
    if len(pictured) < len(report.slice_maps):
        out += [
            "",
            f"Slice-map pictures (maps/*.svg) are drawn for the nodes not in sync: the cluster has more than "
            f"{MAP_EVERY_NODE_UP_TO} planned nodes.",
        ]
    return out


def render_readme(report: DriftReport, *, source: Mapping[str, Any] | None = None) -> bytes:
    """README.md: the head (revision, verdict, source), the summary, the finding codes present, cluster
    findings, capacity and saturation per profile and per owner, and the nodes not in sync. Bounded
    whatever the fleet's size: per-node detail is on the node pages."""
    counts = report.counts()
    out: list[str] = [f"# MIG drift report: {md.text(report.cluster)}", ""]
    out.append(f"Inventory revision {md.code(report.revision)}, MIG strategy {md.code(report.strategy)}. ")
    verdict = "in sync with the inventory" if report.in_sync else "**not** in sync with the inventory"
    out.append(f"The cluster is {verdict}. Written by migplan; do not edit.")
    if source is not None:
        out += _source_lines(source)
    out += ["", "## Summary", ""]
    summary = [[s.value, counts[s.value]] for s in _STATUS_ORDER]
    out.append(tabulate(summary, headers=["status", "nodes"], tablefmt="github"))
    by_code: dict[str, int] = {}
    for f in report.findings:
        by_code[f.code] = by_code.get(f.code, 0) + 1
    if by_code:
        out += ["", tabulate(sorted(by_code.items()), headers=["finding", "count"], tablefmt="github")]
        out += ["", "Finding codes in this report:", "", legend(set(by_code))]
    if report.cluster_findings:
        out += ["", "## Cluster", "", findings_table(report.cluster_findings[:README_LIST_ITEMS])]
        if len(report.cluster_findings) > README_LIST_ITEMS:
            more = len(report.cluster_findings) - README_LIST_ITEMS
            out += ["", f"{more} more cluster findings are not listed here: drift.yaml lists every one."]
    capacity = _capacity_rows(report)
    if capacity:
        out += ["", "## Capacity", ""]
        out.append("Per profile over the cluster: partitions, how many a pod holds, saturation (held/total).")
        out += ["", md.table(["profile", "nodes", "partitions", "held", "free", "saturation"], capacity)]
    if report.owners:
        out += ["", "## Owners", ""]
        out.append(
            "Per owner and profile: partitions the inventory reserves, how many of them are held, how many "
            "partitions of the profile the owner's pods hold, and pods of other owners holding its partitions "
            "(observed: the kubelet's allocations; inferred: pod requests matched to owners)."
        )
        out.append("")
        rows = [
            [
                a.owner or "(unowned)",
                a.profile,
                a.reserved,
                a.held,
                _percent(a.held, a.reserved),
                a.held_by_owner,
                _capped(list(a.foreign), 10),
                a.source,
            ]
            for a in report.owners
        ]
        headers = ["owner", "profile", "reserved", "held", "saturation", "held by owner", "held by other owners"]
        out.append(md.table([*headers, "source"], rows))
    out += _nodes_lines(report)
    return ("\n".join(out).rstrip() + "\n").encode("utf-8")
