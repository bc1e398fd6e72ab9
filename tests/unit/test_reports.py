"""Report rendering: drift.yaml is data, README.md is for people; both deterministic and clock-free."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import yaml
from helpers import planning as fixtures
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic import drift, planner, reports


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


def test_readme_has_summary_findings_occupancy_and_slice_map() -> None:
    report = _report("pod-findings", datetime(2026, 12, 2, tzinfo=UTC))
    text = reports.render_reports(report)["README.md"].decode()
    assert text.index("## Summary") < text.index("## Nodes") < text.index("### gpu-h200-01: Error")
    assert "| Error    |       1 |" in text or re.search(r"\|\s*Error\s*\|\s*1\s*\|", text)
    assert "MP506" in text and "MP513" in text
    assert re.search(r"\|\s*MP513\s*\|\s*info\s*\|\s*no free partition of a profile is left", text)  # legend
    # slice map: the 3g.71gb at memory slice 4 spans slices 4-7 and is held by vllm-0
    assert re.search(r"3g\.71gb\s+\.\.\.\.####\s+at 4\s+owner vllm-llama-70b, held by ml/vllm-0", text)
    assert re.search(r"2g\.35gb\s+##\.\.\.\.\.\.\s+at 0\s+owner embeddings, free", text)


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
