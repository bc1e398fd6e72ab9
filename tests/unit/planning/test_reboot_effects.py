"""mig-manager's host effects around a MIG mode change are part of what a change takes (issue 26 item 2, partial):
WITH_REBOOT reboots the node when the mode step fails for any reason, a host driver stops the kubelet for the mode
change (mig-parted pkg/mig/reconfigure/reconfigure.go `Run`, `checkMigModeChangeRequired`; the operator's mig-manager
entrypoint exports WITH_SHUTDOWN_HOST_GPU_CLIENTS=$IS_HOST_DRIVER)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from helpers import planning as fixtures

from reconciler.logic.planning import disruption, planner
from reconciler.model.plans import Kind

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)


def _node_change_reason(case: str, **cp_fields: object) -> str:
    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read(case, "observed.yaml") or {}, desired)
    assert observed.cluster_policy is not None
    observed = replace(observed, cluster_policy=replace(observed.cluster_policy, **cp_fields))
    plan = planner.plan(desired, observed, now=NOW)
    (change,) = [c for c in plan.changes if c.kind is Kind.NODE_MIG_CONFIG and c.subject == "node/gpu-a"]
    return change.reason


def test_with_reboot_is_said_where_the_change_flips_a_mig_mode() -> None:
    plain = _node_change_reason("guard-mode-flip-other-gpu")
    assert "WITH_REBOOT" not in plain and "kubelet" not in plain
    rebooting = _node_change_reason("guard-mode-flip-other-gpu", mig_manager_env={"WITH_REBOOT": "true"})
    assert "mig-manager reboots the node and every pod on it ends" in rebooting
    host = _node_change_reason("guard-mode-flip-other-gpu", driver_enabled=False)
    assert "stops the kubelet" in host and "NotReady" in host


def test_without_a_mode_flip_the_mode_step_has_nothing_to_do() -> None:
    recut = _node_change_reason("guard-unaffected-gpu", mig_manager_env={"WITH_REBOOT": "true"}, driver_enabled=False)
    assert "WITH_REBOOT" not in recut and "kubelet" not in recut


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("false", False), ("0", False), ("F", False), ("true", True), ("1", True), ("yes", True)],
)
def test_with_reboot_is_read_as_go_reads_it_and_unparseable_counts_as_true(value: str | None, expected: bool) -> None:
    assert disruption.go_bool(value) is expected
