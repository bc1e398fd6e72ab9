"""A committed drift report's holders as observed pods: what migplan wrote comes back, anything else is skipped."""

from __future__ import annotations

from reconciler.adapters.git.reportbranch import parse_report
from reconciler.logic.reports.reports import render_drift_yaml
from reconciler.logic.review.reportoccupancy import observed_from_report
from reconciler.model.drift import DriftReport, Holder, NodeReport, NodeStatus, Occupancy
from reconciler.model.revisions import Revision


def test_holders_round_trip_through_the_real_writer() -> None:
    occ = (
        Occupancy("n1", "3g.71gb", 2, 1, (Holder("ml/a", 1, "team-a"),)),
        Occupancy("n1", "1g.18gb+me", 1, 1, (Holder("ml/a", 1, None),)),
        Occupancy("n1", "gpu", 1, 1, (Holder("ml/b", 1, None),)),
    )
    data = render_drift_yaml(
        DriftReport("c", Revision("main", "a" * 40), "mixed", (NodeReport("n1", NodeStatus.IN_SYNC, occupancy=occ),))
    )
    doc = parse_report(data)
    assert not isinstance(doc, str)
    pods = {p.key: p for p in observed_from_report(doc).pods}
    assert set(pods) == {"ml/a", "ml/b"}
    assert dict(pods["ml/a"].requested()) == {"nvidia.com/mig-3g.71gb": 1, "nvidia.com/mig-1g.18gb.me": 1}
    assert pods["ml/a"].labels == {"app": "team-a"} and pods["ml/a"].node == "n1" and pods["ml/a"].holds_devices
    assert dict(pods["ml/b"].requested()) == {"nvidia.com/gpu": 1} and pods["ml/b"].labels == {}


def test_hostile_holders_are_skipped() -> None:
    bad = [
        {"pod": "no-namespace", "count": 1},
        {"pod": "ns/UPPER", "count": 1},
        {"pod": "ns/ok", "count": True},
        {"pod": "ns/ok", "count": 10**9},
        {"pod": "ns/ok", "count": -1},
        {"pod": ["ns/ok"], "count": 1},
        "ns/ok",
    ]
    doc = {"kind": "DriftReport", "nodes": [
        {"name": "n1", "occupancy": [{"profile": "3g.71gb", "holders": bad}]},
        {"name": "../x", "occupancy": [{"profile": "3g.71gb", "holders": [{"pod": "ns/p", "count": 1}]}]},
        {"name": "n2", "occupancy": [{"profile": "3g 71gb|x", "holders": [{"pod": "ns/p", "count": 1}]}]},
        {"name": "n3", "occupancy": "nope"},
        "nope",
    ]}  # fmt: skip
    assert observed_from_report(doc).pods == ()
    assert observed_from_report({"nodes": None}).pods == ()


def test_parse_report_refuses_what_migplan_never_writes() -> None:
    assert parse_report(b"&a [1]\n") == "it uses YAML anchors or aliases (migplan never writes them)"
    assert "nested deeper" in str(parse_report(b"kind: DriftReport\nnodes: " + b"[" * 20 + b"]" * 20))
    assert parse_report(b"kind: Other\nnodes: []\n") == "not a migplan DriftReport"
    assert str(parse_report(b"\t: : [")).startswith("not YAML")
