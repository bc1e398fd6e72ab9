"""Benchmark: the size of the report files migplan commits, at 100, 1,000 and 5,000 nodes.

    .venv/bin/python benchmarks/reports.py [--nodes 100 1000 5000] [--drift-percent 1] [--first-report]

Self-contained and pure: builds a DriftReport of N nodes x 8 H200 (mixed cuts 3g+2g+1g+1g, 7x 1g, 4g+3g
and a whole-GPU 7g, owners team-0..39, about half the partitions held by a pod) with --drift-percent of
the nodes Drifted (two findings each, an observed cut with a partition placed by the driver), renders it
with reports.render_reports exactly as the controller does, and prints per fleet size: README.md,
drift.yaml, the node pages, the maps, the total and the number of files, the render time; then what one
pod starting on one in-sync node changes (the files a report commit's diff touches).

With --first-report (issue 29): the worst cycle instead, the whole fleet out of sync (every node Drifted, so
every GPU gets a map), every node page and map rendered as the report writer renders them (page_sources),
with the CPU seconds of the rendering and the process's peak RSS. Run one size per process: peak RSS only
grows.

Target (issue 15): README.md at most 256 KB at 5,000 nodes with 1% drift.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reconciler.logic.reports import reports  # noqa: E402
from reconciler.model.drift import (  # noqa: E402
    DriftReport,
    Finding,
    FindingSeverity,
    GpuSliceMap,
    Holder,
    NodeReport,
    NodeStatus,
    Occupancy,
    OwnerAccount,
    SlicePartition,
)
from reconciler.model.revisions import Revision  # noqa: E402

README_LIMIT = 256 * 1024
# (profile, start, size) per cut; the planner's placements for H200 (8 memory slices)
CUTS = [
    [("3g.71gb", 4, 4), ("2g.35gb", 0, 2), ("1g.18gb", 2, 1), ("1g.18gb", 3, 1)],
    [("1g.18gb", i, 1) for i in range(7)],
    [("4g.71gb", 0, 4), ("3g.71gb", 4, 4)],
    [("7g.141gb", 0, 8)],
]


def _gpu(node: int, index: int, drifted: bool) -> GpuSliceMap:
    parts = []
    for k, (profile, start, size) in enumerate(CUTS[(node + index) % len(CUTS)]):
        owner = f"team-{(node + k) % 40}" if k == 0 else None
        holder = f"ml/{owner or 'batch'}-{node:05d}-{index}-{k}" if (node + index + k) % 2 == 0 else None
        parts.append(SlicePartition(profile, start, size, owner=owner, holder=holder))
    if drifted and index == 0:
        first = parts[0]
        parts[0] = SlicePartition(first.profile, 0, first.size, first.owner, first.holder, "moved", first.start)
        return GpuSliceMap(index, "H200-141GB", True, 8, tuple(parts), layout_source="observed")
    return GpuSliceMap(index, "H200-141GB", True, 8, tuple(parts))


def _occupancy(name: str, gpus: tuple[GpuSliceMap, ...]) -> tuple[Occupancy, ...]:
    per: dict[str, tuple[int, list[Holder]]] = {}
    for g in gpus:
        for p in g.partitions:
            total, holders = per.get(p.profile, (0, []))
            if p.holder:
                holders.append(Holder(p.holder, 1, p.owner))
            per[p.profile] = (total + 1, holders)
    return tuple(
        Occupancy(name, profile, total, len(holders), tuple(sorted(holders, key=lambda h: h.pod)))
        for profile, (total, holders) in sorted(per.items())
    )


def fleet(nodes: int, drift_percent: float) -> DriftReport:
    """The synthetic report (deterministic)."""
    n_drift = max(1, int(nodes * drift_percent / 100))
    step = max(1, nodes // n_drift)
    drifted = set(range(0, nodes, step)[:n_drift])
    reports_, maps = [], {}
    for i in range(nodes):
        name = f"gpu-h200-{i:05d}"
        gpus = tuple(_gpu(i, g, i in drifted) for g in range(8))
        maps[name] = gpus
        findings: tuple[Finding, ...] = ()
        if i in drifted:
            findings = (
                Finding(
                    "MP501", "gpu 0 advertises 0 of 1 planned 3g.71gb", FindingSeverity.WARNING, name, 0, "3g.71gb"
                ),
                Finding("MP540", "gpu 0: 3g.71gb placed at 0, planned at 4", FindingSeverity.INFO, name, 0, "3g.71gb"),
            )
        status = NodeStatus.DRIFTED if i in drifted else NodeStatus.IN_SYNC
        reports_.append(
            NodeReport(name, status, findings, _occupancy(name, gpus), mig_config=f"migplan-{i % 4}", observer="absent")
        )
    owners = tuple(OwnerAccount(f"team-{t}", "3g.71gb", nodes // 10, nodes // 20, nodes // 20) for t in range(40))
    return DriftReport(
        cluster="par1-prod",
        revision=Revision("main", "c0ffee" * 6 + "c0ff"),
        strategy="mixed",
        nodes=tuple(reports_),
        slice_maps=maps,
        owners=owners,
    )


def _kb(n: int) -> str:
    return f"{n / 1024:,.1f} KB"


def measure(nodes: int, drift_percent: float) -> bool:
    report = fleet(nodes, drift_percent)
    start = time.perf_counter()
    files = reports.render_reports(report)
    took = time.perf_counter() - start
    readme, drift = len(files[reports.README_FILE]), len(files[reports.DRIFT_FILE])
    pages = [len(v) for k, v in files.items() if k.startswith(reports.NODES_DIR + "/")]
    maps = [len(v) for k, v in files.items() if k.startswith("maps/")]
    total = sum(len(v) for v in files.values())
    ok = readme <= README_LIMIT
    print(
        f"{nodes:>5} nodes, {drift_percent:g}% drift: README.md {_kb(readme)}"
        f" ({'<=' if ok else '>'} 256 KB), drift.yaml {_kb(drift)}, {len(pages)} node pages {_kb(sum(pages))}"
        f" (largest {_kb(max(pages, default=0))}), {len(maps)} maps {_kb(sum(maps))};"
        f" total {_kb(total)} in {len(files)} files; rendered in {took:.2f} s"
    )
    # One pod starts on one in-sync node: which files a report commit would change.
    i = next(k for k, n in enumerate(report.nodes) if n.status is NodeStatus.IN_SYNC)
    node = report.nodes[i]
    occ = node.occupancy[0]
    busier = Occupancy(occ.node, occ.profile, occ.total, min(occ.used + 1, occ.total), occ.holders)
    moved = DriftReport(
        report.cluster,
        report.revision,
        report.strategy,
        (*report.nodes[:i], NodeReport(node.name, node.status, node.findings, (busier, *node.occupancy[1:]),
                                       node.mig_config, node.observer), *report.nodes[i + 1 :]),
        report.cluster_findings,
        report.slice_maps,
        report.owners,
    )  # fmt: skip
    after = reports.render_reports(moved)
    changed = sorted(k for k in files.keys() | after.keys() if files.get(k) != after.get(k))
    print(f"       one pod more on {node.name}: the commit changes {len(changed)} file(s): {', '.join(changed)}")
    return ok


def first_report(nodes: int) -> None:
    """Every node Drifted: every node page and every GPU's map rendered, as a first report renders them."""
    report = fleet(nodes, 100.0)
    start = time.process_time()
    count = size = 0
    for page in reports.page_sources(report):
        size += len(page.render())
        count += 1
    took = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"{nodes:>5} nodes all out of sync: {count} pages and maps, {_kb(size)}, rendered in {took:.2f} s CPU;"
          f" peak RSS {peak:,.0f} MiB")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    ap.add_argument("--drift-percent", type=float, default=1.0)
    ap.add_argument("--first-report", action="store_true", help="render the whole fleet out of sync (issue 29)")
    args = ap.parse_args()
    if args.first_report:
        for n in args.nodes:
            first_report(n)
        return 0
    ok = all([measure(n, args.drift_percent) for n in args.nodes])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
