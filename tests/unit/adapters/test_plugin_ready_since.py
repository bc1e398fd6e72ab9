"""The device-plugin pod's Ready time, read from its Ready condition, decides when the planner trusts the counts.

NVIDIA's device-plugin DaemonSet has no readiness probe: Ready comes before the kubelet reports the plugin's
resources. The planner waits PLUGIN_SETTLE after the pod's Ready transition (tests/fixtures/planning/
reapply-recut-plugin-*); here, the adapter's reading of the condition, worst values included.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.adapters.kube.observe import device_plugin_pod_from_json, pod_ready_since


def _pod(conditions: Any) -> dict[str, Any]:
    return {"metadata": {"name": "dp-1"}, "spec": {"nodeName": "n1"}, "status": {"conditions": conditions}}


def test_ready_since_is_the_ready_conditions_transition_time() -> None:
    pod = device_plugin_pod_from_json(
        _pod(
            [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-12-02T09:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-02T09:59:55Z"},
            ]
        )
    )
    assert pod.ready
    assert pod.ready_since == datetime(2026, 12, 2, 9, 59, 55, tzinfo=UTC)


@pytest.mark.parametrize(
    "conditions",
    [
        [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-12-02T09:59:55Z"}],
        [{"type": "Ready", "status": "True"}],
        [{"type": "Ready", "status": "True", "lastTransitionTime": 12}],
        [{"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}],
        [{"type": "Ready", "status": "True", "lastTransitionTime": "9999-99-99T99:99:99Z"}],
        ["not a mapping"],
        None,
        [],
    ],
)
def test_unreadable_or_not_ready_gives_no_time(conditions: Any) -> None:
    assert pod_ready_since(_pod(conditions)) is None
    assert device_plugin_pod_from_json(_pod(conditions)).ready_since is None
