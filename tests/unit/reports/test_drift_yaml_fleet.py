"""drift.yaml of whole fleets (150 nodes x 8 H200, so past MAP_EVERY_NODE_UP_TO: only the nodes not in sync get their
cut), from analyze -> plan -> build_report as a cycle makes them: reads back (PyYAML's own parser) as the report's
document, equal to what PyYAML's safe_dump of that document reads back as (an independent rendering), on a fleet
drifted everywhere (no node carries its mig.config yet) and on a fleet with a few nodes drifted (labels, counts).
Owners, unowned holders, a pod holding another owner's partition, several pods of one owner, pods named like YAML
words and numbers: every value kind drift.yaml's emitter writes without a call per value."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml
from helpers import planning as fixtures

from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.logic.reports import reports
from reconciler.model.drift import DriftReport, NodeStatus

NODES = 150
CUT = ["3g.71gb team-a", "2g.35gb team-b", "1g.18gb team-a", "1g.18gb"]
COUNTS = {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.71gb": 8, "nvidia.com/mig-2g.35gb": 8, "nvidia.com/mig-1g.18gb": 16}
# pod names that YAML would read as something else unless quoted
ODD = ["true", "1e3", "null", "no", "0x1f", "a: b", "- x", "#c", "yes", "~"]


def _raw(drifted: set[int] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(desired, observed) of the fleet; `drifted`: the nodes off their plan (None: every node without its config)."""
    names = [f"gpu-{i:04d}" for i in range(NODES)]
    desired = {
        "cluster": {"name": "fleet", "migStrategy": "mixed"},
        "nodes": {n: {"gpus": [{"index": 0, "partitions": CUT}], "replicate": 8} for n in names},
    }
    nodes: dict[str, Any] = {}
    pods: list[dict[str, Any]] = []
    for i, n in enumerate(names):
        labels = {"nvidia.com/gpu.present": "true", "nvidia.com/mig.config.state": "success"}
        counts = dict(COUNTS)
        if drifted is None:
            labels["nvidia.com/mig.config"] = "all-disabled"
        elif i in drifted:
            labels["nvidia.com/mig.config"] = "$config" if i % 2 else "other"
            counts["nvidia.com/mig-1g.18gb"] = 14  # a GPU recut by hand: counts off the plan
        else:
            labels["nvidia.com/mig.config"] = "$config"
        nodes[n] = {"labels": labels, "allocatable": counts}
        for k in range(i % 5 + 2):  # 3g of team-a, 2g of team-b, 1g unowned, ...
            profile = ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb", "3g.71gb", "2g.35gb"][k]
            app = {0: "team-a", 1: "team-b", 4: "team-b"}.get(k)  # k=4: team-b's pod on team-a's 3g
            name = ODD[(i + k) % len(ODD)] if (i + k) % 7 == 0 else f"w-{n}-{k}"
            pods.append(
                {
                    "ns": "ml" if k % 2 else "default",
                    "name": name if name not in {p["name"] for p in pods} else f"{name}-{i}-{k}",
                    "node": n,
                    "labels": {"app": app} if app else {},
                    "containers": [{"limits": {f"nvidia.com/mig-{profile}": 1}}],
                }
            )
    return desired, {"nodes": nodes, "pods": pods}


def _report(drifted: set[int] | None) -> DriftReport:
    raw_desired, raw_observed = _raw(drifted)
    desired = fixtures.desired_state(raw_desired)
    observed = fixtures.observed_state(raw_observed, desired)
    now = datetime(2026, 12, 4, tzinfo=UTC)
    analysis = drift.analyze(desired, observed, now=now)
    return drift.build_report(desired, observed, analysis, planner.plan(desired, observed, now=now))


def _check(report: DriftReport) -> dict[str, Any]:
    doc = reports.report_to_json(report)
    text = reports.render_drift_yaml(report, doc=doc)
    ours: dict[str, Any] = yaml.safe_load(text)
    assert ours == doc
    assert ours == yaml.safe_load(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    assert text == reports.render_drift_yaml(report)  # the same bytes with or without the document given
    return ours


def test_drift_yaml_of_a_fleet_drifted_everywhere() -> None:
    report = _report(None)
    ours = _check(report)
    assert len(ours["nodes"]) == NODES and all(n["status"] != NodeStatus.IN_SYNC.value for n in ours["nodes"])
    held = [h for n in ours["nodes"] for o in n["occupancy"] for h in o["holders"]]
    assert {h["pod"].split("/", 1)[1] for h in held} >= set(ODD)  # the odd names went through, read back as text
    assert any(h.get("owner") == "team-a" for h in held) and any("owner" not in h for h in held)
    assert {a["owner"] for a in ours["owners"]} >= {"team-a", "team-b"}


def test_drift_yaml_of_a_fleet_with_a_few_nodes_drifted() -> None:
    drifted = {3, 40, 41, 99, 149}
    report = _report(drifted)
    ours = _check(report)
    off = {n["name"] for n in ours["nodes"] if n["status"] != NodeStatus.IN_SYNC.value}
    assert off == {f"gpu-{i:04d}" for i in drifted}
    foreign = [a for a in ours["owners"] if a.get("foreignHolders")]
    assert foreign, "team-b's pods on team-a's partitions are named"
