"""drift.analyze is an ordered tuple of checks (drift.CHECKS), like the engine's steps: each check takes the one
DriftContext and returns findings, the tuple is the order, and a check not in the tuple does not run."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from datetime import UTC, datetime

import pytest
from helpers import planning as fixtures

from reconciler.logic.drift import drift
from reconciler.model.drift import Finding
from reconciler.model.inventory import ApplyMode, DesiredState
from reconciler.model.observed import ObservedState

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def _inputs(case: str) -> tuple[DesiredState, ObservedState]:
    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    return desired, fixtures.observed_state(fixtures.read(case, "observed.yaml") or {}, desired)


def test_every_check_of_the_module_is_in_the_tuple_once() -> None:
    defined = {name for name, f in inspect.getmembers(drift, inspect.isfunction) if name.startswith("_check_")}
    listed = [c.__name__ for c in drift.CHECKS]
    assert len(listed) == len(set(listed))
    assert set(listed) == defined


@pytest.mark.parametrize("case", fixtures.cases()[:20])
def test_analyze_runs_the_checks_in_their_order_and_keeps_what_they_find(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    desired, observed = _inputs(case)
    ran: list[str] = []
    found: list[Finding] = []

    def recording(check: drift.Check) -> drift.Check:
        def run(ctx: drift.DriftContext) -> Iterable[Finding]:
            ran.append(check.__name__)
            out = list(check(ctx))
            found.extend(out)
            return out

        return run

    monkeypatch.setattr(drift, "CHECKS", tuple(recording(c) for c in drift.CHECKS))
    analysis = drift.analyze(desired, observed, now=NOW)
    monkeypatch.undo()
    assert ran == [c.__name__ for c in drift.CHECKS]
    agent = desired.cluster.apply.mode is ApplyMode.AGENT
    kept = [f for f in found if not (agent and f.code in drift._GPU_OPERATOR_ONLY)]
    assert analysis.findings == tuple(sorted(kept, key=Finding.sort_key))


def test_a_check_left_out_of_the_tuple_does_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    case = next(c for c in fixtures.cases() if "MP510" in str(fixtures.read(c, "expected.yaml")))
    desired, observed = _inputs(case)
    assert any(f.code == "MP510" for f in drift.analyze(desired, observed, now=NOW).findings)
    monkeypatch.setattr(drift, "CHECKS", tuple(c for c in drift.CHECKS if c is not drift._check_missing_nodes))
    assert not any(f.code == "MP510" for f in drift.analyze(desired, observed, now=NOW).findings)
