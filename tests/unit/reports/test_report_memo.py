"""Reports cost in proportion to what changed (issue 29, item 2): with a RenderMemo, a node whose values did not
change since the last report is not rendered again, and the files are byte for byte those rendered without it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from helpers import planning as fixtures

from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.logic.reports import reports
from reconciler.model.drift import DriftReport, Finding, GpuSliceMap, NodeReport, NodeStatus, Occupancy
from reconciler.model.revisions import Revision


def _fixture(case: str) -> Any:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read(case, "observed.yaml") or {}, desired)
    return drift.build_report(
        desired, observed, drift.analyze(desired, observed, now=now), planner.plan(desired, observed, now=now)
    )


def _fleet(n: int, drifted: set[int], *, maps: bool = True) -> DriftReport:
    """n nodes of one GPU each (so more than MAP_EVERY_NODE_UP_TO get maps only when not in sync)."""
    nodes, slice_maps = [], {}
    for i in range(n):
        name = f"gpu-{i:05d}"
        occ = (Occupancy(name, "1g.18gb", 7, 0, ()),)
        if i in drifted:
            f = Finding(code="MP501", message="layout differs", node=name, gpu=0)
            nodes.append(NodeReport(name, NodeStatus.DRIFTED, (f,), occ, mig_config=f"cfg-{i}"))
        else:
            nodes.append(NodeReport(name, NodeStatus.IN_SYNC, (), occ, mig_config=f"cfg-{i}"))
        if maps:
            slice_maps[name] = (GpuSliceMap(index=0, model="H200-141GB", mig_enabled=True, memory_slices=8),)
    return DriftReport(
        cluster="c", revision=Revision("main", "a" * 40), strategy="mixed", nodes=tuple(nodes), slice_maps=slice_maps
    )


def test_the_memo_renders_the_same_bytes_as_without_it() -> None:
    for case in ("pod-findings", "in-sync"):
        report = _fixture(case)
        memo = reports.RenderMemo()
        first = reports.render_reports(report, memo=memo)
        assert first == reports.render_reports(report)
        assert memo.rendered == sum(1 for k in first if "/" in k)  # every per-node file, the first time
        again = reports.render_reports(report, memo=memo)
        assert again == first and memo.rendered == 0  # nothing changed: nothing rendered


def test_only_the_nodes_that_changed_are_rendered_again() -> None:
    memo = reports.RenderMemo()
    before = reports.render_reports(_fleet(300, {3}), memo=memo)
    # node 7 drifts (its page changes and it gets a map); a new revision changes no page
    after_report = dataclasses.replace(_fleet(300, {3, 7}), revision=Revision("main", "b" * 40))
    after = reports.render_reports(after_report, memo=memo)
    assert after == reports.render_reports(after_report)
    assert memo.rendered == 2  # nodes/gpu-00007.md and maps/gpu-00007-gpu0.svg, nothing else
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert [k for k in changed if "/" in k] == ["maps/gpu-00007-gpu0.svg", "nodes/gpu-00007.md"]


def test_a_changed_gpu_map_or_a_removed_node_is_not_served_from_the_memo() -> None:
    memo = reports.RenderMemo()
    report = _fleet(5, set())
    reports.render_reports(report, memo=memo)
    recut = dataclasses.replace(report.slice_maps["gpu-00002"][0], mig_enabled=False)
    changed = dataclasses.replace(report, slice_maps={**report.slice_maps, "gpu-00002": (recut,)})
    out = reports.render_reports(changed, memo=memo)
    assert out == reports.render_reports(changed) and memo.rendered == 2  # its map and its page (which shows it)
    kept = {n.name: changed.slice_maps[n.name] for n in changed.nodes[:2]}
    fewer = dataclasses.replace(changed, nodes=changed.nodes[:2], slice_maps=kept)
    reports.render_reports(fewer, memo=memo)
    assert sorted(memo.pages) == ["gpu-00000", "gpu-00001"]  # a node gone from the fleet is forgotten
    assert all(node in ("gpu-00000", "gpu-00001") for node, _ in memo.maps)
