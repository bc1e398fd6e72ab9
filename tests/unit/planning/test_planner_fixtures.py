"""Table tests: every case under tests/fixtures/planning/ through drift, occupancy and the planner."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from helpers import planning as fixtures

from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.model.plans import Action

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def _run(case: str) -> tuple[Any, ...]:
    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read(case, "observed.yaml") or {}, desired)
    expected = fixtures.read(case, "expected.yaml")
    now = datetime.fromisoformat(expected["now"].replace("Z", "+00:00")) if "now" in expected else NOW
    analysis = drift.analyze(desired, observed, now=now)
    the_plan = planner.plan(desired, observed, now=now, rendered=analysis.rendered)
    report = drift.build_report(desired, observed, analysis, the_plan)
    return desired, observed, expected, analysis, the_plan, report


def _key(f: Any) -> str:
    return " ".join(x for x in (f.node or "-", f.code, f.profile or "") if x)


@pytest.mark.parametrize("case", fixtures.cases())
def test_findings(case: str) -> None:
    _, _, expected, _, _, report = _run(case)
    assert sorted(_key(f) for f in report.findings) == sorted(expected["findings"])


@pytest.mark.parametrize("case", fixtures.cases())
def test_node_status(case: str) -> None:
    _, _, expected, _, _, report = _run(case)
    got = {n.name: n.status.value for n in report.nodes if n.name in expected["status"]}
    assert got == expected["status"]


@pytest.mark.parametrize("case", fixtures.cases())
def test_plan(case: str) -> None:
    _, _, expected, _, the_plan, _ = _run(case)
    got = [f"{c.action.value} {c.kind.value} {c.subject}" for c in the_plan.changes if c.action is not Action.UNCHANGED]
    assert got == expected["plan"]
    if "blockedBy" in expected:
        blocked = {c.subject: list(c.blocked_by) for c in the_plan.changes if c.blocked_by}
        assert blocked == expected["blockedBy"]
    if "clusterPolicyPatch" in expected:
        (cp,) = [c for c in the_plan.changes if c.subject.startswith("clusterpolicy/") and c.writes]
        assert cp.patch is not None
        assert cp.patch["spec"] == expected["clusterPolicyPatch"]["spec"]


@pytest.mark.parametrize("case", [c for c in fixtures.cases() if "occupancy" in fixtures.read(c, "expected.yaml")])
def test_occupancy(case: str) -> None:
    _, _, expected, analysis, _, _ = _run(case)
    for node, profiles in expected["occupancy"].items():
        got = {o.profile: [o.total, o.used] for o in analysis.occupancy[node].entries}
        assert got == profiles
    for node, profiles in expected.get("holders", {}).items():
        for profile, holders in profiles.items():
            (entry,) = [o for o in analysis.occupancy[node].entries if o.profile == profile]
            assert [f"{h.pod} {h.owner}" for h in entry.holders] == holders


@pytest.mark.parametrize("case", fixtures.cases())
def test_plan_is_deterministic_and_pure(case: str) -> None:
    _, _, _, _, first, report1 = _run(case)
    _, _, _, _, second, report2 = _run(case)
    assert first == second
    assert report1 == report2


def test_migplan_only_lifts_a_cordon_the_node_still_has() -> None:
    """Issue 10 item 9: once a person uncordoned the node, migplan drops only its annotation and never writes
    spec.unschedulable (a later cordon is that person's); with the node still cordoned it uncordons it - unless
    managedFields say spec.unschedulable is no longer migplan's field (uncordoned and re-cordoned by someone else
    between two cycles). Without managedFields (ownership unknown) it uncordons as before."""
    for case, spec_written in (
        ("uncordoned-by-someone-else", False),
        ("recordoned-by-someone-else", False),
        ("uncordon-after-success", True),  # no managedFields: ownership unknown
        ("uncordon-still-migplans", True),
    ):
        _, observed, _, _, the_plan, _ = _run(case)
        (change,) = [c for c in the_plan.changes if c.action is not Action.UNCHANGED]
        assert change.patch is not None
        assert change.patch["metadata"]["annotations"] == {"migplan.io/cordoned": None}
        assert ("spec" in change.patch) is spec_written, case
        if not spec_written and observed.nodes["gpu-h200-01"].unschedulable:
            assert "cordoned again by someone else" in change.reason
