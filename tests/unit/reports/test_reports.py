"""Report rendering: drift.yaml is data, README.md is for people; both deterministic and clock-free."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Any

import yaml
from helpers import planning as fixtures
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.logic.reports import reports
from reconciler.model.drift import (
    DriftReport,
    Finding,
    FindingSeverity,
    Holder,
    NodeReport,
    NodeStatus,
    Occupancy,
)
from reconciler.model.revisions import Revision


def _report(case: str, now: datetime) -> Any:
    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read(case, "observed.yaml") or {}, desired)
    analysis = drift.analyze(desired, observed, now=now)
    return drift.build_report(desired, observed, analysis, planner.plan(desired, observed, now=now))


def test_drift_yaml_is_the_report_as_data() -> None:
    report = _report("pod-findings", datetime(2026, 12, 2, tzinfo=UTC))
    doc = yaml.safe_load(reports.render_reports(report)["drift.yaml"])
    assert doc["kind"] == "DriftReport" and doc["cluster"] == "par1-prod" and doc["strategy"] == "mixed"
    (node,) = doc["nodes"]
    assert node["name"] == "gpu-h200-01" and node["status"] == "Error"
    assert [f["code"] for f in node["findings"]] == ["MP506", "MP548"]  # MP548: it pins the node by hostname
    assert node["findings"][0]["pods"] == ["batch/old-train"]
    occ = {o["profile"]: o for o in node["occupancy"]}
    assert occ["3g.71gb"] == {
        "profile": "3g.71gb",
        "source": "inferred",
        "total": 2,
        "used": 2,
        "free": 0,
        "holders": [
            {"pod": "ml/vllm-0", "count": 1, "owner": "vllm-llama-70b"},
            {"pod": "ml/vllm-1", "count": 1, "owner": "vllm-llama-70b"},
        ],
    }
    assert {f["code"] for f in doc["clusterFindings"]} == {"MP512", "MP513", "MP560"}
    assert doc["summary"]["Error"] == 1 and doc["inSync"] is False


def test_readme_has_summary_findings_and_links_the_node_page() -> None:
    report = _report("pod-findings", datetime(2026, 12, 2, tzinfo=UTC))
    files = reports.render_reports(report)
    text = files["README.md"].decode()
    assert text.index("## Summary") < text.index("## Capacity") < text.index("## Nodes")
    assert re.search(r"\|\s*Error\s*\|\s*1\s*\|", text)
    assert "MP506" in text and "MP513" in text
    assert re.search(r"\|\s*MP513\s*\|\s*info\s*\|\s*no free partition of a profile is left", text)  # legend
    assert "| [gpu-h200-01](nodes/gpu-h200-01.md) | Error |" in text
    assert "###" not in text and "slice  " not in text  # per-node detail is on the page, not here
    # capacity per profile over the cluster: both 3g.71gb held, saturation 100%
    assert re.search(r"\| 3g\.71gb \| 1 \| 2 \| 2 \| 0 \| 100% \|", text), text


def test_node_page_has_findings_occupancy_and_slice_map() -> None:
    report = _report("pod-findings", datetime(2026, 12, 2, tzinfo=UTC))
    page = reports.render_reports(report)["nodes/gpu-h200-01.md"].decode()
    assert page.startswith("# gpu-h200-01: Error\n")
    assert page.index("## Findings") < page.index("## Occupancy") < page.index("## Slice maps")
    assert "| MP506 | error |" in page and "[drift report](../README.md)" in page
    assert re.search(r"\|\s*MP506\s*\|\s*error\s*\|", page.split("Finding codes on this page:")[1])  # legend
    # slice map: the 3g.71gb at memory slice 4 spans slices 4-7 and is held by vllm-0
    assert re.search(r"3g\.71gb\s+\.\.\.\.####\s+at 4\s+owner vllm-llama-70b, held by ml/vllm-0", page)
    assert re.search(r"2g\.35gb\s+##\.\.\.\.\.\.\s+at 0\s+owner embeddings, free", page)
    assert "../maps/gpu-h200-01-gpu0.svg" in page
    assert str(report.revision) not in page and "par1-prod" not in page  # the node's content only


def _fleet(n: int, drifted: set[int], *, holders: int = 0) -> DriftReport:
    """A synthetic report of n nodes, those in `drifted` Drifted with a finding."""
    nodes = []
    for i in range(n):
        name = f"gpu-{i:05d}"
        occ = (Occupancy(name, "1g.18gb", 7, holders, tuple(Holder(f"ml/p{j}", 1) for j in range(holders))),)
        if i in drifted:
            f = Finding(code="MP501", message="layout differs", severity=FindingSeverity.WARNING, node=name, gpu=0)
            nodes.append(NodeReport(name, NodeStatus.DRIFTED, (f,), occ, mig_config=f"cfg-{i}"))
        else:
            nodes.append(NodeReport(name, NodeStatus.IN_SYNC, (), occ, mig_config=f"cfg-{i}"))
    return DriftReport(cluster="c", revision=Revision("main", "a" * 40), strategy="mixed", nodes=tuple(nodes))


def test_a_node_page_changes_only_with_its_node() -> None:
    before = reports.render_reports(_fleet(50, {3}))
    after = reports.render_reports(
        dataclasses.replace(
            _fleet(50, {3, 7}), revision=Revision("main", "b" * 40), cluster="renamed", strategy="single"
        )
    )
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == ["README.md", "drift.yaml", "nodes/gpu-00007.md"]  # revision, cluster: not in the pages
    # a pod starting on one node: that node's page only (and the totals)
    busy = _fleet(50, {3})
    one = dataclasses.replace(busy.nodes[9], occupancy=(dataclasses.replace(busy.nodes[9].occupancy[0], used=1),))
    busy = dataclasses.replace(busy, nodes=(*busy.nodes[:9], one, *busy.nodes[10:]))
    moved = reports.render_reports(busy)
    assert sorted(k for k in moved if moved[k] != before[k]) == ["README.md", "drift.yaml", "nodes/gpu-00009.md"]


def test_readme_lists_only_nodes_not_in_sync_and_stays_bounded() -> None:
    report = _fleet(reports.README_IN_SYNC_NAMES + 20, {4, 11})
    files = reports.render_reports(report)
    text = files["README.md"].decode()
    linked = re.findall(r"^\| \[([^\]]+)\]\(nodes/", text, re.M)
    assert linked == ["gpu-00004", "gpu-00011"]
    assert f"InSync: {reports.README_IN_SYNC_NAMES + 18} node(s)." in text  # counted, not named, beyond the cap
    assert len([k for k in files if k.startswith("nodes/")]) == len(report.nodes)  # every node has its page
    # every node drifted, holders on each: the README is capped and says so; the pages hold them all
    worst = _fleet(reports.README_NODE_ROWS + 5, set(range(reports.README_NODE_ROWS + 5)), holders=7)
    text = reports.render_readme(worst).decode()
    assert len(re.findall(r"^\| \[", text, re.M)) == reports.README_NODE_ROWS
    assert "5 more nodes not in sync are not listed here" in text
    assert len(text.encode()) < 256 * 1024


def test_in_sync_nodes_are_named_while_few() -> None:
    text = reports.render_readme(_fleet(3, set())).decode()
    assert "Every node is in sync." in text
    assert "InSync: 3 node(s): [gpu-00000](nodes/gpu-00000.md), [gpu-00001](nodes/gpu-00001.md)" in text


def test_reports_do_not_change_with_the_clock() -> None:
    a = reports.render_reports(_report("in-sync", datetime(2026, 12, 2, 10, tzinfo=UTC)))
    b = reports.render_reports(_report("in-sync", datetime(2027, 1, 1, 3, tzinfo=UTC)))
    assert a == b
    assert b"2026" not in a["README.md"] and b"2026" not in a["drift.yaml"]


def test_summary_line_counts() -> None:
    report = _report("missing-undocumented", datetime(2026, 12, 2, tzinfo=UTC))
    assert report.summary() == "drift: par1-prod vs workdir@dir: 1 Missing, 1 Undocumented; 2 finding(s), 1 error(s)"
    assert report.counts()["Missing"] == 1 and not report.in_sync
    assert _report("in-sync", datetime(2026, 12, 2, tzinfo=UTC)).in_sync


_scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=30)
_docs = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12), _docs, min_size=1, max_size=5))
def test_yaml_emitter_round_trips(doc: dict[str, Any]) -> None:
    assert yaml.safe_load(reports.yaml_text(doc)) == doc


def test_drift_yaml_round_trips_for_every_fixture() -> None:
    for case in fixtures.cases():
        report = _report(case, datetime(2026, 12, 2, tzinfo=UTC))
        assert yaml.safe_load(reports.render_drift_yaml(report)) == reports.report_to_json(report), case


def test_source_state_in_both_files() -> None:
    report = _report("in-sync", datetime(2026, 12, 2, tzinfo=UTC))
    source = {
        "revision": "main@sha1:" + "a" * 40,
        "latest": "main@sha1:" + "b" * 40,
        "stale": True,
        "refused": {
            "revision": "main@sha1:" + "b" * 40,
            "code": "MP720",
            "reason": "newer revision invalid",
            "signer": None,
            "errors": [{"code": "MP203", "message": "profile 9g.99gb unknown", "file": "nodes/a.yaml", "line": 12}],
        },
    }
    files = reports.render_reports(report, source=source)
    assert yaml.safe_load(files["drift.yaml"])["source"] == source
    text = files["README.md"].decode()
    assert f"**`main@sha1:{'b' * 40}` is NOT applied**: MP720 newer revision invalid" in text
    assert "nodes/a.yaml:12: MP203 profile 9g.99gb unknown" in text
    assert text.index("## Source") < text.index("## Summary")
    assert reports.render_reports(report) == reports.render_reports(report, source=None)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=300), min_size=1, max_size=5, unique=True))
def test_every_node_name_gets_a_safe_distinct_page(names: list[str]) -> None:
    from reconciler.adapters.git.reports import check_report_paths

    pages = [reports.node_page_name(n) for n in names]
    assert check_report_paths("reports", pages) is None, pages  # one bad name never refuses the whole report
    assert len(set(pages)) == len(names)


def test_node_names_are_page_names_and_hostile_ones_are_not() -> None:
    assert reports.node_page_name("gpu-h200-01.par1") == "nodes/gpu-h200-01.par1.md"
    hostile = reports.node_page_name("../../.git/config")
    assert hostile.startswith("nodes/_.._.._.git_config-") and hostile.count("/") == 1
    report = _fleet(2, {1})
    bad = dataclasses.replace(report.nodes[1], name="x|y](javascript:alert(1))")
    text = reports.render_readme(dataclasses.replace(report, nodes=(report.nodes[0], bad))).decode()
    (row,) = [ln for ln in text.splitlines() if ln.startswith("| [")]
    assert row.startswith("| [x\\|y\\](javascript:alert(1))](nodes/_x_y__javascript_alert_1__-")
