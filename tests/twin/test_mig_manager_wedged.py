"""mig-manager's client wait on the twin (mig-parted reconfigure.go waitForPodsToBeDeleted): a device-plugin pod
that cannot terminate makes the wait time out after 5 minutes, and the run ends without setState — state `pending`,
GPU clients `paused-for-mig-change` — until the node's mig-manager pod is restarted (drift case
`mig-manager-wedged`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.operator import clientwait
from reconciler.twin.operator.controller import DEPLOY_LABELS, MIG_CONFIG, MIG_CONFIG_STATE, PAUSED

INVENTORY = Path(__file__).resolve().parents[2] / "inventory"
NS = "gpu-operator"
NODE = "gpu-h200-02"  # no pod holds a partition there: an apply can succeed
WAIT_LINE = (
    "Error: failed to wait for pods to be deleted: device-plugin pod did not shutdown: context deadline exceeded"
)


class Clock:
    """The twin's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def labels(twin: ClusterTwin, node: str = NODE) -> dict[str, str]:
    return dict(twin.store.get("nodes", node)["metadata"].get("labels") or {})


def pods(twin: ClusterTwin, app: str, node: str = NODE) -> list[dict[str, Any]]:
    return [
        p
        for p in twin.store.list("pods", NS)
        if (p["metadata"].get("labels") or {}).get("app") == app and p["spec"].get("nodeName") == node
    ]


@pytest.fixture
def wedged() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY, drift=[f"mig-manager-wedged:{NODE}"], tls=False) as twin:
        twin.settle()
        yield twin
        assert twin.operator.errors == []


def test_the_drift_case_leaves_the_node_pending_with_its_gpu_clients_paused(wedged: ClusterTwin) -> None:
    have = labels(wedged)
    assert have[MIG_CONFIG_STATE] == "pending"
    paused = {k: have.get(k) for k in DEPLOY_LABELS if k in have}
    assert paused and set(paused.values()) == {PAUSED}, paused  # every client label the node had, paused
    stuck = pods(wedged, "nvidia-device-plugin-daemonset")
    assert len(stuck) == 1 and stuck[0]["metadata"].get("deletionTimestamp")  # Terminating, and staying
    assert wedged.operator.mig_manager_log[NODE][-1] == WAIT_LINE
    # Nothing moves by itself: mig-manager waits for another label value, the operator honours the paused values.
    for _ in range(3):
        wedged.tick()
    assert labels(wedged) == have


def test_restarting_the_nodes_mig_manager_pod_is_the_way_out(wedged: ClusterTwin) -> None:
    before = labels(wedged)
    # The pod it waited for finally leaves (here: the container could be killed after all) ...
    wedged.operator.stuck_terminating.discard(NODE)
    wedged.operator.mark_node(NODE)
    wedged.settle()
    assert not pods(wedged, "nvidia-device-plugin-daemonset")
    assert labels(wedged)[MIG_CONFIG_STATE] == "pending"  # ... which alone changes nothing
    # kubectl -n gpu-operator delete pod -l app=nvidia-mig-manager --field-selector spec.nodeName=<node>
    (mm,) = pods(wedged, "nvidia-mig-manager")
    wedged.store.delete("pods", mm["metadata"]["name"], NS)
    wedged.settle()
    after = labels(wedged)
    assert after[MIG_CONFIG] == before[MIG_CONFIG]
    assert after[MIG_CONFIG_STATE] == "success"  # the new process ran the label's config once
    assert {after[k] for k in DEPLOY_LABELS if k in after} == {"true"}  # setState: maybeSetTrue(paused) = true
    assert len(pods(wedged, "nvidia-device-plugin-daemonset")) == 1  # the device plugin is back


def test_heal_gives_the_node_back_its_inventory_config(wedged: ClusterTwin) -> None:
    wedged.heal(f"mig-manager-wedged:{NODE}")
    have = labels(wedged)
    assert have[MIG_CONFIG_STATE] == "success"
    assert PAUSED not in have.values()
    assert len(pods(wedged, "nvidia-device-plugin-daemonset")) == 1


def test_the_wait_times_out_after_five_minutes_of_the_twins_clock() -> None:
    clock = Clock()
    with ClusterTwin.from_inventory(INVENTORY, tls=False, clock=clock) as twin:
        twin.settle()
        value = labels(twin)[MIG_CONFIG]
        twin.operator.stuck_terminating.add(NODE)
        # Another config for the node: all of its smallest profile (all-1g.18gb is in the generated list too).
        twin.inject(f"mig-config-failed:{NODE}")  # adds all-1g.18gb to the ConfigMap (and marks it failed)
        twin.store.patch("nodes", NODE, {"metadata": {"labels": {MIG_CONFIG: value}}})
        twin.settle()
        twin.store.patch("nodes", NODE, {"metadata": {"labels": {MIG_CONFIG: "all-1g.18gb"}}})
        twin.settle()
        assert labels(twin)[MIG_CONFIG_STATE] == "pending"
        clock.now += clientwait.WAIT_TIMEOUT_SECONDS - 1
        twin.tick()
        assert WAIT_LINE not in twin.operator.mig_manager_log[NODE]  # still waiting
        clock.now += 1
        twin.tick()
        assert twin.operator.mig_manager_log[NODE][-1] == WAIT_LINE
        assert labels(twin)[MIG_CONFIG_STATE] == "pending"  # Run returned before setState
        assert twin.operator.errors == []
