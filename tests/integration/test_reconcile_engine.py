"""reconcile_once's step discipline with an in-memory cluster: dry run first, stop at the first failure,
report every write not made, write nothing in report-only mode or with --dry-run."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from helpers import planning as fixtures

from reconciler.engine import reconcile_once
from reconciler.model.cycles import EXIT_DRIFT, EXIT_ERROR, EXIT_IN_SYNC
from reconciler.model.errors import Transient
from reconciler.model.inventory import ApplyMode, GpuOperatorSettings
from reconciler.model.observed import ObservedState
from reconciler.model.plans import Change

NOW = datetime(2026, 12, 2, 10, tzinfo=UTC)


class RecordingCluster:
    """Serves one observed state; records every apply call; can refuse one subject."""

    def __init__(self, observed: ObservedState, *, fail_on: str | None = None, fail_dry_run: bool = False) -> None:
        self.observed = observed
        self.calls: list[tuple[str, bool]] = []
        self.fail_on = fail_on
        self.fail_dry_run = fail_dry_run

    def observe(self, ops: GpuOperatorSettings) -> ObservedState:
        return self.observed

    def apply(self, change: Change, *, dry_run: bool = False) -> None:
        if change.subject == self.fail_on and dry_run == self.fail_dry_run:
            raise Transient("HTTP 500: etcdserver: request timed out", code="MP554")
        self.calls.append((change.subject, dry_run))


def _case(name: str, mode: ApplyMode | None = None) -> tuple[Any, ObservedState]:
    desired = fixtures.desired_state(fixtures.read(name, "desired.yaml"))
    if mode is not None:
        apply = dataclasses.replace(desired.cluster.apply, mode=mode)
        desired = dataclasses.replace(desired, cluster=dataclasses.replace(desired.cluster, apply=apply))
    return desired, fixtures.observed_state(fixtures.read(name, "observed.yaml") or {}, desired)


def test_whole_plan_is_dry_run_before_any_real_write() -> None:
    desired, observed = _case("article-single-strategy")
    cluster = RecordingCluster(observed)
    result = reconcile_once(desired=desired, cluster=cluster, now=NOW)
    subjects = [
        "configmap/gpu-operator/migplan-mig-parted-config",
        "clusterpolicy/cluster-policy",
        "daemonset/gpu-operator/nvidia-device-plugin-daemonset",
        "node/gpu-h200-01",
    ]
    # The dry run goes out concurrently (any order), then the real writes in plan order.
    assert sorted(cluster.calls[:4]) == sorted((s, True) for s in subjects)
    assert cluster.calls[4:] == [(s, False) for s in subjects]
    assert [c.subject for c in result.applied] == subjects
    assert result.status.exit_code == EXIT_DRIFT and not result.errors and result.report is not None


def test_dry_run_and_report_only_write_nothing() -> None:
    desired, observed = _case("article-single-strategy")
    cluster = RecordingCluster(observed)
    result = reconcile_once(desired=desired, cluster=cluster, now=NOW, dry_run=True)
    assert all(dry for _, dry in cluster.calls) and len(cluster.calls) == 4
    assert not result.applied and len(result.not_applied) == 4

    desired, observed = _case("article-single-strategy", ApplyMode.REPORT_ONLY)
    cluster = RecordingCluster(observed)
    result = reconcile_once(desired=desired, cluster=cluster, now=NOW)
    assert cluster.calls == [] and len(result.not_applied) == 4 and result.status.exit_code == EXIT_DRIFT


def test_a_failed_write_stops_the_cycle_and_is_reported_with_what_was_not_done() -> None:
    desired, observed = _case("article-single-strategy")
    cluster = RecordingCluster(observed, fail_on="daemonset/gpu-operator/nvidia-device-plugin-daemonset")
    result = reconcile_once(desired=desired, cluster=cluster, now=NOW)
    assert [c.subject for c in result.applied] == [
        "configmap/gpu-operator/migplan-mig-parted-config",
        "clusterpolicy/cluster-policy",
    ]
    assert [c.subject for c in result.not_applied] == [
        "daemonset/gpu-operator/nvidia-device-plugin-daemonset",
        "node/gpu-h200-01",
    ]
    (err,) = result.errors
    assert err.step == "apply_plan" and err.code == "MP554" and "2 of 4 write(s) made" in err.message
    assert result.status.exit_code == EXIT_ERROR
    assert result.report is not None  # the report is still written


def test_a_refused_dry_run_writes_nothing() -> None:
    desired, observed = _case("article-single-strategy")
    cluster = RecordingCluster(observed, fail_on="clusterpolicy/cluster-policy", fail_dry_run=True)
    result = reconcile_once(desired=desired, cluster=cluster, now=NOW)
    assert all(dry for _, dry in cluster.calls)
    assert not result.applied and len(result.not_applied) == 4 and result.status.exit_code == EXIT_ERROR
    assert "dry run refused clusterpolicy/cluster-policy" in result.errors[0].message


def test_with_dry_run_every_write_is_checked_relabels_included() -> None:
    desired, observed = _case("article-single-strategy")
    cluster = RecordingCluster(observed, fail_on="node/gpu-h200-01", fail_dry_run=True)
    result = reconcile_once(desired=desired, cluster=cluster, now=NOW, dry_run=True)
    assert all(dry for _, dry in cluster.calls) and not result.applied
    assert result.status.exit_code == EXIT_ERROR and "dry run refused node/gpu-h200-01" in result.errors[0].message


def test_in_sync_makes_no_write_and_exits_zero() -> None:
    desired, observed = _case("in-sync")
    cluster = RecordingCluster(observed)
    result = reconcile_once(desired=desired, cluster=cluster, now=NOW)
    assert cluster.calls == [] and result.converged and result.status.exit_code == EXIT_IN_SYNC
    assert result.to_json()["report"]["inSync"] is True
