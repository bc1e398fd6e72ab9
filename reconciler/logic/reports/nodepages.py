"""One Markdown page per node of the drift report: `nodes/<node>.md` under reports.path.

Pure: a NodeReport and its GPUs' slice maps in, bytes out. A page's bytes depend on that node alone
(its status, findings, occupancy and cut) and on whether its maps are drawn (see reports.mapped_nodes):
no revision, no cluster name, no clock. The report writer commits only what changed, so a pod starting
on one node rewrites one page, and a new inventory revision that leaves a node alone leaves its page
alone (the revision is in README.md and drift.yaml only).

Every string from the inventory or the cluster reaches Markdown through reconciler.logic.reports.markdown.
"""

from __future__ import annotations

import functools
import hashlib
import re
from urllib.parse import quote

from tabulate import tabulate

from reconciler.logic.drift.drift import FINDING_CODES
from reconciler.logic.reports import markdown as md
from reconciler.logic.reports import slicesvg
from reconciler.model.drift import Finding, GpuSliceMap, NodeReport

NODES_DIR = "nodes"  # under reports.path, next to README.md and maps/


# A Kubernetes node name (RFC 1123 subdomain), short enough that `<name>.md` fits a file system's 255 bytes.
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")
_MAX_NAME = 200


def node_page_name(node: str) -> str:
    """`nodes/<node>.md`, relative to reports.path.

    Node names are DNS names (the API server validates them), so the page is named after the node. Any
    other string (this is data from the cluster) gets `<name with _ for each unsafe character>-<hash>.md`:
    every page path passes the report writer's path check (one bad name must not refuse the whole
    report), and the underscore, which no DNS name has, keeps it apart from every real node's page."""
    if len(node) <= _MAX_NAME and _DNS_NAME.fullmatch(node):
        return f"{NODES_DIR}/{node}.md"
    digest = hashlib.sha256(node.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{NODES_DIR}/_{_UNSAFE.sub('_', node)[:64]}-{digest}.md"


def node_page_link(node: str) -> str:
    """A Markdown link to the node's page, from README.md (the name escaped, the target percent-encoded)."""
    return f"[{md.text(node)}]({quote(node_page_name(node))})"


def cut_caption(g: GpuSliceMap) -> str:
    """Which cut a map shows and where its holders come from, in the words the report uses."""
    layout = "observed cut" if g.layout_source == "observed" else "planned cut"
    return f"{layout}, holders {g.holders_source}"


def findings_table(findings: tuple[Finding, ...]) -> str:
    rows = [[f.code, f.severity.value, "" if f.gpu is None else f.gpu, f.profile or "", f.message] for f in findings]
    return md.table(["code", "severity", "gpu", "profile", "message"], rows)


def legend(codes: set[str]) -> str:
    """The meaning of each finding code present, so a page is readable without the docs."""
    return _legend_of(tuple(sorted(c for c in codes if c in FINDING_CODES)))


# A fleet-wide report draws a legend on every drifted node's page, mostly for the same few codes (issue 29): the
# table depends on the known codes present and nothing else (FINDING_CODES is a constant), so it is drawn once per
# set. Bounded: at most one entry per subset of codes seen, evicted past 256.
@functools.lru_cache(maxsize=256)
def _legend_of(known: tuple[str, ...]) -> str:
    rows = [[c, FINDING_CODES[c][0].value, FINDING_CODES[c][1]] for c in known]
    return tabulate(rows, headers=["code", "severity", "meaning"], tablefmt="github")


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
    lines = [f"{head}  MIG  {source}", f"  {'slice':<12} {_ruler(gpu.memory_slices)}"]
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
            bar = _bar(p.start, p.size, gpu.memory_slices)
            where = f"at {p.start}"
        owner = f"owner {p.owner}" if p.owner else "unowned"
        held = f"held by {p.holder}" if p.holder else ("not on the GPU" if p.state == "missing" else "free")
        note = _STATE_NOTE.get(p.state, "")
        if p.state == "moved" and p.planned_start is not None:
            note += f"; planned at {p.planned_start}"
        lines.append(f"  {p.profile:<12} {bar}  {where:<6} {owner}, {held}" + (f"  ({note})" if note else ""))
    return lines


# A fleet's GPUs have a few slice counts and placements (issue 29: 40,000 maps, a million characters drawn one by
# one): each ruler and bar is drawn once. Bounded: the values come from the cluster and the inventory.
@functools.lru_cache(maxsize=64)
def _ruler(memory_slices: int) -> str:
    return "".join(str(i % 10) for i in range(memory_slices))


@functools.lru_cache(maxsize=1024)
def _bar(start: int, size: int, memory_slices: int) -> str:
    return "".join("#" if start <= i < start + size else "." for i in range(memory_slices))


def _map_links(node: str, gpus: tuple[GpuSliceMap, ...]) -> list[str]:
    """Relative image links from nodes/ to the node's SVG maps (GitHub and GitLab render those, not inline
    <svg>)."""
    links = [
        f"![{md.text(f'{node} GPU {g.index} slice map')}](../{quote(slicesvg.gpu_map_name(node, g.index))})"
        for g in gpus
    ]
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
        out.extend(md.fence([line for g in gpus for line in slice_map_text(g)]))
        if pictured:
            out += _map_links(node.name, gpus)
    return ("\n".join(out).rstrip() + "\n").encode("utf-8")
