"""Render a DriftReport as the two files committed to the reports branch: drift.yaml and README.md.

Pure: a DriftReport in, `{"drift.yaml": bytes, "README.md": bytes}` out. No timestamps in the
content (the report is committed only when its bytes change, so a clock in it would make a commit
per cycle); the revision it was computed against is in both files. Output is deterministic: nodes
by name, findings by (node, code, gpu, profile), holders by pod.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from tabulate import tabulate

from reconciler.logic import markdown as md
from reconciler.logic import slicesvg
from reconciler.logic.drift import FINDING_CODES
from reconciler.model.drift import DriftReport, Finding, GpuSliceMap, NodeReport, NodeStatus

DRIFT_FILE = "drift.yaml"
README_FILE = "README.md"


def render_reports(report: DriftReport, *, source: Mapping[str, Any] | None = None) -> dict[str, bytes]:
    """Both report files. `source` is the Git source's state (SourceResult.to_json(): revision,
    latest, stale, refused{...}, source_error{...}, signature{...}); when given, drift.yaml carries
    it as `source:` and README.md says which revision is applied and why a newer one is not."""
    files = {DRIFT_FILE: render_drift_yaml(report, source=source), README_FILE: render_readme(report, source=source)}
    files.update(render_slice_maps(report))
    return files


# Pictures for every node of a cluster up to this size; beyond it only for the nodes not in sync (those a
# person opens): 5,000 nodes x 8 GPUs would be 40,000 files (~250 MB) rewritten into every report.
MAP_EVERY_NODE_UP_TO = 100


def mapped_nodes(report: DriftReport) -> frozenset[str]:
    """The planned nodes whose GPUs get an SVG map (see MAP_EVERY_NODE_UP_TO)."""
    planned = set(report.slice_maps)
    if len(planned) <= MAP_EVERY_NODE_UP_TO:
        return frozenset(planned)
    return frozenset(n.name for n in report.nodes if n.name in planned and n.status is not NodeStatus.IN_SYNC)


def render_slice_maps(report: DriftReport) -> dict[str, bytes]:
    """`maps/<node>-gpu<i>.svg` for every GPU of the mapped nodes, linked from README.md."""
    out: dict[str, bytes] = {}
    for node in sorted(mapped_nodes(report)):
        for g in report.slice_maps[node]:
            caption = f"{cut_caption(g)} vs {report.revision}"
            out[slicesvg.gpu_map_name(node, g.index)] = slicesvg.gpu_svg(g, node=node, caption=caption)
    return out


def cut_caption(g: GpuSliceMap) -> str:
    """Which cut a map shows and where its holders come from, in the words the report uses."""
    layout = "observed cut" if g.layout_source == "observed" else "planned cut"
    return f"{layout}, holders {g.holders_source}"


def _map_links(node: str, gpus: tuple[GpuSliceMap, ...]) -> list[str]:
    """Relative image links to the node's SVG maps (GitHub and GitLab render those, not inline <svg>)."""
    links = [
        f"![{md.text(f'{node} GPU {g.index} slice map')}]({quote(slicesvg.gpu_map_name(node, g.index))})" for g in gpus
    ]
    kinds = sorted({cut_caption(g) for g in gpus})
    return ["", f"Slice maps ({'; '.join(kinds)}):", "", *links]


def _legend(codes: set[str]) -> str:
    """The meaning of each finding code present, so the README is readable without the docs."""
    rows = [[c, FINDING_CODES[c][0].value, FINDING_CODES[c][1]] for c in sorted(codes) if c in FINDING_CODES]
    return tabulate(rows, headers=["code", "severity", "meaning"], tablefmt="github")


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


def render_drift_yaml(report: DriftReport, *, source: Mapping[str, Any] | None = None) -> bytes:
    """Block-style YAML, emitted directly: PyYAML's representer costs seconds on a 5,000-node report.

    Strings that could be read back as something else (numbers, booleans, null, anything with YAML
    syntax characters) are written as JSON strings, which YAML reads as double-quoted scalars; the
    tests load the output back with yaml.safe_load and compare it with report_to_json().
    """
    doc = report_to_json(report)
    if source is not None:
        doc = {**{k: v for k, v in doc.items() if k != "nodes"}, "source": dict(source), "nodes": doc["nodes"]}
    return yaml_text(doc).encode("utf-8")


def yaml_text(doc: dict[str, Any]) -> str:
    """A mapping of plain data (dict, list, str, int, float, bool, None) as block-style YAML."""
    if not doc:
        return "{}\n"
    out: list[str] = []
    _emit(doc, 0, out)
    return "\n".join(out) + "\n"


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./@+-]*(?: [A-Za-z0-9_./@+()-]+)*$")
_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    return _quote(text)


# Allowed raw inside a double-quoted scalar: printable, and not a YAML line break (NEL, LS, PS) or BOM.
_NOT_PRINTABLE = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


def _quote(text: str) -> str:
    """A YAML double-quoted scalar: JSON escaping, plus escapes for what YAML may not contain raw."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _NOT_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) < 0x10000 else "", quoted)


def _emit(value: Any, indent: int, out: list[str], *, dash: bool = False) -> None:
    """Append a non-empty mapping or list as block YAML at `indent`; with `dash` the mapping is a
    list item whose first key shares the line with the '- ' (placed in the two columns before)."""
    if isinstance(value, dict):
        for i, (k, v) in enumerate(value.items()):
            start = " " * (indent - 2) + "- " if dash and i == 0 else " " * indent
            if isinstance(v, dict | list) and v:
                out.append(f"{start}{_scalar(k)}:")
                _emit(v, indent + 2, out)
            else:
                out.append(f"{start}{_scalar(k)}: {_inline(v)}")
        return
    for item in value:
        if isinstance(item, dict) and item:
            _emit(item, indent + 2, out, dash=True)
        elif isinstance(item, list) and item:
            out.append(" " * indent + "-")
            _emit(item, indent + 2, out)
        else:
            out.append(" " * indent + "- " + _inline(item))


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}" if not value else "{" + ", ".join(f"{_scalar(k)}: {_inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return _scalar(value)


# --- README.md --------------------------------------------------------------------------------------

_STATUS_ORDER = [NodeStatus.ERROR, NodeStatus.MISSING, NodeStatus.DRIFTED, NodeStatus.UNDOCUMENTED, NodeStatus.IN_SYNC]


# Every string below reaches Markdown through reconciler.logic.markdown (text, code, table, fence):
# names, messages, log lines and signers are not migplan's to trust. Per-node tables use
# markdown.table, not tabulate: its per-cell type sniffing costs seconds over 5,000 nodes.


def _findings_table(findings: tuple[Finding, ...]) -> str:
    rows = [[f.code, f.severity.value, "" if f.gpu is None else f.gpu, f.profile or "", f.message] for f in findings]
    return md.table(["code", "severity", "gpu", "profile", "message"], rows)


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


def render_readme(report: DriftReport, *, source: Mapping[str, Any] | None = None) -> bytes:
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
    findings = report.findings
    by_code: dict[str, int] = {}
    for f in findings:
        by_code[f.code] = by_code.get(f.code, 0) + 1
    if by_code:
        out += ["", tabulate(sorted(by_code.items()), headers=["finding", "count"], tablefmt="github")]
        out += ["", "Finding codes in this report:", "", _legend(set(by_code))]
    if report.cluster_findings:
        out += ["", "## Cluster", "", _findings_table(report.cluster_findings)]
    if report.owners:
        out += ["", "## Owners", ""]
        out.append(
            "Per owner and profile: partitions the inventory reserves, how many of them are held, how many "
            "partitions of the profile the owner's pods hold, and pods of other owners holding its partitions "
            "(observed: the kubelet's allocations; inferred: pod requests matched to owners)."
        )
        out.append("")
        rows = [
            [a.owner or "(unowned)", a.profile, a.reserved, a.held, a.held_by_owner, ", ".join(a.foreign), a.source]
            for a in report.owners
        ]
        out.append(
            md.table(["owner", "profile", "reserved", "held", "held by owner", "held by other owners", "source"], rows)
        )
    out += ["", "## Nodes", ""]
    rows = [[n.name, n.status.value, n.mig_config or "", len(n.findings)] for n in report.nodes]
    out.append(md.table(["node", "status", "mig.config", "findings"], rows))
    maps: Mapping[str, tuple[GpuSliceMap, ...]] = report.slice_maps
    pictured = mapped_nodes(report)
    if len(pictured) < len(maps):
        out += [
            "",
            f"Slice-map pictures (maps/*.svg) are drawn for the nodes not in sync: the cluster has more than "
            f"{MAP_EVERY_NODE_UP_TO} planned nodes.",
        ]
    for n in report.nodes:
        out += ["", f"### {md.text(n.name)}: {n.status.value}", ""]
        if n.findings:
            out += [_findings_table(n.findings), ""]
        if n.occupancy:
            rows = [
                [
                    o.profile,
                    o.total,
                    o.used,
                    o.free,
                    ", ".join(h.pod + (f" ({h.owner})" if h.owner else "") for h in o.holders),
                    o.source,
                ]
                for o in n.occupancy
            ]
            out += [md.table(["profile", "total", "used", "free", "held by", "source"], rows), ""]
        gpus = maps.get(n.name, ())
        if gpus:
            out.extend(md.fence([line for g in gpus for line in slice_map_text(g)]))
            if n.name in pictured:
                out += _map_links(n.name, gpus)
    return ("\n".join(out).rstrip() + "\n").encode("utf-8")
