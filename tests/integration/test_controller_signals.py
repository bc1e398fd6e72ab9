"""What a cycle tells the cluster (pure: reconciler.controller.signals) and how it is logged (JSON lines)."""

from __future__ import annotations

import io
import json
import logging

from reconciler.controller import signals
from reconciler.controller.logs import setup_logging
from reconciler.model.drift import DriftReport, Finding, FindingSeverity, NodeReport, NodeStatus, Occupancy
from reconciler.model.plans import Action, Change, Kind, Plan
from reconciler.model.revisions import Revision
from reconciler.model.signals import EventIntent, MarkState, Reason
from reconciler.settings import LogFormat

REV = Revision("main", "a" * 40)


def report(*nodes: NodeReport, cluster: tuple[Finding, ...] = ()) -> DriftReport:
    return DriftReport(cluster="c", revision=REV, strategy="mixed", nodes=nodes, cluster_findings=cluster)


def node(name: str, status: NodeStatus, *codes: str, pods: tuple[str, ...] = ()) -> NodeReport:
    sev = {"MP504": FindingSeverity.ERROR, "MP507": FindingSeverity.ERROR, "MP509": FindingSeverity.INFO}
    findings = tuple(
        Finding(c, f"{c} on {name}", sev.get(c, FindingSeverity.WARNING), node=name, pods=pods) for c in codes
    )
    occ = (Occupancy(name, "1g.18gb", 4, 1),)
    return NodeReport(name, status, findings, occ)


def label_change(n: str) -> Change:
    return Change(f"node/{n}", Action.CONFIGURE, Kind.NODE_MIG_CONFIG, reason="relabel")


def by(events: tuple[EventIntent, ...]) -> dict[tuple[str, str], EventIntent]:
    return {(e.regarding.name, e.reason.value): e for e in events}


def test_each_node_gets_one_mark_and_the_right_events() -> None:
    r = report(
        node("n-sync", NodeStatus.IN_SYNC),
        node("n-drift", NodeStatus.DRIFTED, "MP501"),
        node("n-failed", NodeStatus.DRIFTED, "MP507"),
        node("n-held", NodeStatus.DRIFTED, "MP519", pods=("default/llm-0",)),
        node("n-applying", NodeStatus.DRIFTED, "MP501"),
        node("n-missing", NodeStatus.MISSING, "MP510"),
        cluster=(Finding("MP502", "strategy single, plan mixed"),),
    )
    held = Change("node/n-held", Action.SKIP, Kind.NODE_MIG_CONFIG, reason="guard", blocked_by=("default/llm-0",))
    policy = Change("clusterpolicy/cluster-policy", Action.CONFIGURE, Kind.CLUSTER_POLICY, reason="strategy mixed")
    events, marks = signals.build(
        report=r,
        plan=Plan((held,), REV),
        applied=(label_change("n-applying"), policy),
        errors=(),
        cluster_policy="cluster-policy",
    )
    m = {x.node: x for x in marks}
    assert m["n-sync"].state is MarkState.IN_SYNC and "main@sha1:" in m["n-sync"].reason
    assert m["n-drift"].state is MarkState.DRIFTED and "MP501" in m["n-drift"].reason
    assert m["n-failed"].state is MarkState.FAILED and "MP507" in m["n-failed"].reason
    assert m["n-held"].state is MarkState.HELD and "default/llm-0" in m["n-held"].reason
    assert m["n-applying"].state is MarkState.APPLYING
    assert "n-missing" not in m  # a node that is not there cannot carry a mark
    e = by(events)
    assert e[("n-drift", "DriftDetected")].warning
    assert e[("n-failed", "ApplyFailed")].warning
    assert e[("n-held", "ChangeHeld")].warning and "default/llm-0" in e[("n-held", "ChangeHeld")].message
    assert not e[("n-applying", "ApplyStarted")].warning
    assert e[("cluster-policy", "ApplyStarted")].regarding.api_version == "nvidia.com/v1"
    assert e[("cluster-policy", "DriftDetected")].regarding.kind == "ClusterPolicy"
    assert ("n-sync", "ApplySucceeded") not in e
    assert all(ev.reason.value[0].isupper() for ev in events)


def test_apply_succeeded_once_a_node_that_was_applying_is_in_sync() -> None:
    events, marks = signals.build(
        report=report(node("n1", NodeStatus.IN_SYNC)),
        plan=Plan((), REV),
        applied=(),
        errors=(),
        cluster_policy="cp",
        previously_applying={"n1"},
    )
    assert [(e.regarding.name, e.reason) for e in events] == [("n1", Reason.APPLY_SUCCEEDED)]
    assert marks[0].state is MarkState.IN_SYNC


def test_events_and_marks_are_raised_on_change_only() -> None:
    r = report(node("n1", NodeStatus.DRIFTED, "MP501"))
    first, marks1 = signals.build(report=r, plan=None, applied=(), errors=(), cluster_policy="cp")
    second, marks2 = signals.build(report=r, plan=None, applied=(), errors=(), cluster_policy="cp")
    assert signals.diff_events((), first) == first and len(first) == 1
    assert signals.diff_events(first, second) == ()  # a drift that lasts is one Event
    assert signals.changed_marks({m.node: m for m in marks1}, marks2) == ()
    healed, marks3 = signals.build(
        report=report(node("n1", NodeStatus.IN_SYNC)), plan=None, applied=(), errors=(), cluster_policy="cp"
    )
    assert signals.changed_marks({m.node: m for m in marks2}, marks3) == marks3
    again, _ = signals.build(report=r, plan=None, applied=(), errors=(), cluster_policy="cp")
    assert signals.diff_events(healed, again) == again  # and it comes back: raised again


def test_messages_fit_an_event_and_metrics_rows() -> None:
    long = NodeReport("n1", NodeStatus.DRIFTED, tuple(Finding("MP501", "x" * 2000, node="n1") for _ in range(3)))
    events, marks = signals.build(report=report(long), plan=None, applied=(), errors=(), cluster_policy="cp")
    assert all(len(e.message) <= 900 for e in events) and len(marks[0].reason) <= 900
    r = report(node("a", NodeStatus.IN_SYNC), node("b", NodeStatus.DRIFTED, "MP501", "MP501"))
    assert signals.occupancy_rows(r) == (("a", "1g.18gb", 4, 1), ("b", "1g.18gb", 4, 1))
    assert signals.finding_counts(r) == {"MP501": 2}


def test_json_logs_carry_revision_node_and_code() -> None:
    out = io.StringIO()
    handler = setup_logging(LogFormat.JSON, "INFO", stream=out)
    try:
        logging.getLogger("migplan.controller").warning(
            "gpu-h200-01 advertises 9 x 1g", extra={"revision": str(REV), "node": "gpu-h200-01", "code": "MP501"}
        )
    finally:
        logging.getLogger().removeHandler(handler)
    line = json.loads(out.getvalue().strip().splitlines()[-1])
    assert line["level"] == "warning" and line["logger"] == "migplan.controller"
    assert (line["revision"], line["node"], line["code"]) == (str(REV), "gpu-h200-01", "MP501")
    assert line["message"] == "gpu-h200-01 advertises 9 x 1g" and "time" in line
