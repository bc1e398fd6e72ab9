"""Render a DriftReport as the two files committed to the reports branch: drift.yaml and README.md.

Pure: a DriftReport in, `{"drift.yaml": bytes, "README.md": bytes}` out. No timestamps in the
content (the report is committed only when its bytes change, so a clock in it would make a commit
per cycle); the revision it was computed against is in both files. Output is deterministic: nodes
by name, findings by (node, code, gpu, profile), holders by pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from tabulate import tabulate

from reconciler.logic.drift import FINDING_CODES
from reconciler.model.drift import DriftReport, Finding, GpuSliceMap, NodeReport, NodeStatus

DRIFT_FILE = "drift.yaml"
README_FILE = "README.md"


def render_reports(report: DriftReport) -> dict[str, bytes]:
    return {DRIFT_FILE: render_drift_yaml(report), README_FILE: render_readme(report)}


def _legend(codes: set[str]) -> str:
    """The meaning of each finding code present, so the README is readable without the docs."""
    rows = [[c, FINDING_CODES[c][0].value, FINDING_CODES[c][1]] for c in sorted(codes) if c in FINDING_CODES]
    return tabulate(rows, headers=["code", "severity", "meaning"], tablefmt="github")


def report_to_json(report: DriftReport) -> dict[str, Any]:
    """The drift.yaml document as plain data (also what `-o json` prints under "report")."""
    return {
        "apiVersion": "migplan/v1",
        "kind": "DriftReport",
        "cluster": report.cluster,
        "revision": str(report.revision),
        "strategy": report.strategy,
        "inSync": report.in_sync,
        "summary": report.counts(),
        "clusterFindings": [f.to_json() for f in report.cluster_findings],
        "nodes": [_node_json(n) for n in report.nodes],
    }


def _node_json(n: NodeReport) -> dict[str, Any]:
    out: dict[str, Any] = {"name": n.name, "status": n.status.value}
    if n.mig_config:
        out["migConfig"] = n.mig_config
    out["findings"] = [f.to_json() for f in n.findings]
    out["occupancy"] = [o.to_json() for o in n.occupancy]
    return out


def render_drift_yaml(report: DriftReport) -> bytes:
    text = yaml.dump(
        report_to_json(report),
        Dumper=yaml.CSafeDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1000,
    )
    return text.encode("utf-8")


# --- README.md --------------------------------------------------------------------------------------

_STATUS_ORDER = [NodeStatus.ERROR, NodeStatus.MISSING, NodeStatus.DRIFTED, NodeStatus.UNDOCUMENTED, NodeStatus.IN_SYNC]


def _md(text: object) -> str:
    """A table cell: pipes escaped, newlines flattened."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _findings_table(findings: tuple[Finding, ...]) -> str:
    rows = [
        [f.code, f.severity.value, "" if f.gpu is None else f.gpu, f.profile or "", _md(f.message)] for f in findings
    ]
    return tabulate(rows, headers=["code", "severity", "gpu", "profile", "message"], tablefmt="github")


def slice_map_text(gpu: GpuSliceMap) -> list[str]:
    """One GPU as text: a ruler of memory slices, then one row per partition with its placement."""
    head = f"GPU {gpu.index}  {gpu.model}"
    if not gpu.mig_enabled:
        return [f"{head}  MIG disabled (whole GPU)"]
    lines = [f"{head}  MIG", f"  {'slice':<12} {''.join(str(i % 10) for i in range(gpu.memory_slices))}"]
    if not gpu.partitions:
        lines.append(f"  {'(empty)':<12} {'.' * gpu.memory_slices}")
    for p in sorted(gpu.partitions, key=lambda p: (p.start if p.start is not None else 99, p.profile)):
        if p.start is None:
            bar = "?" * gpu.memory_slices
            where = "placement chosen by the driver"
        else:
            bar = "".join("#" if p.start <= i < p.start + p.size else "." for i in range(gpu.memory_slices))
            where = f"at {p.start}"
        owner = f"owner {p.owner}" if p.owner else "unowned"
        held = f"held by {p.holder}" if p.holder else "free"
        lines.append(f"  {p.profile:<12} {bar}  {where:<6} {owner}, {held}")
    return lines


def render_readme(report: DriftReport) -> bytes:
    counts = report.counts()
    out: list[str] = [f"# MIG drift report: {report.cluster}", ""]
    out.append(f"Inventory revision `{report.revision}`, MIG strategy `{report.strategy}`. ")
    verdict = "in sync with the inventory" if report.in_sync else "**not** in sync with the inventory"
    out.append(f"The cluster is {verdict}. Written by migplan; do not edit.")
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
    out += ["", "## Nodes", ""]
    rows = [[n.name, n.status.value, n.mig_config or "", len(n.findings)] for n in report.nodes]
    out.append(tabulate(rows, headers=["node", "status", "mig.config", "findings"], tablefmt="github"))
    maps: Mapping[str, tuple[GpuSliceMap, ...]] = report.slice_maps
    for n in report.nodes:
        out += ["", f"### {n.name}: {n.status.value}", ""]
        if n.findings:
            out += [_findings_table(n.findings), ""]
        if n.occupancy:
            rows = [
                [
                    o.profile,
                    o.total,
                    o.used,
                    o.free,
                    _md(", ".join(f"{h.pod}" + (f" ({h.owner})" if h.owner else "") for h in o.holders)),
                ]
                for o in n.occupancy
            ]
            out += [tabulate(rows, headers=["profile", "total", "used", "free", "held by"], tablefmt="github"), ""]
        gpus = maps.get(n.name, ())
        if gpus:
            out.append("```")
            for g in gpus:
                out.extend(slice_map_text(g))
            out.append("```")
    return ("\n".join(out).rstrip() + "\n").encode("utf-8")
