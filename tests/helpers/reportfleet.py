"""A small drift report to write into Git: n nodes of one H200 each (the report store and pack tests share it)."""

from __future__ import annotations

from reconciler.model.drift import DriftReport, Finding, GpuSliceMap, NodeReport, NodeStatus, Occupancy
from reconciler.model.revisions import Revision


def fleet(n: int, drifted: set[int], *, held: int | None = None, rev: str = "a") -> DriftReport:
    """n nodes of one H200 each; the drifted ones get a finding (and maps: more than 100 nodes map only those);
    node `held` has one partition held."""
    nodes, slice_maps = [], {}
    for i in range(n):
        name = f"gpu-{i:03d}"
        used = 1 if i == held else 0
        occ = (Occupancy(name, "1g.18gb", 7, used, ()),)
        findings = (Finding(code="MP501", message="layout differs", node=name, gpu=0),) if i in drifted else ()
        status = NodeStatus.DRIFTED if i in drifted else NodeStatus.IN_SYNC
        nodes.append(NodeReport(name, status, findings, occ, mig_config=f"cfg-{i}"))
        slice_maps[name] = (GpuSliceMap(index=0, model="H200-141GB", mig_enabled=True, memory_slices=8),)
    return DriftReport(
        cluster="c", revision=Revision("main", rev * 40), strategy="mixed", nodes=tuple(nodes), slice_maps=slice_maps
    )
