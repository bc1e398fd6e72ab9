"""The twin's GPU Operator writes the device-plugin DaemonSet as gpu-operator's object_controls.go DaemonSet() does:
rendered whole with the ClusterPolicy as controller and `nvidia.com/last-applied-hash`; replaced whole (foreign
annotations dropped, pods rolled) only when that hash changes; left alone otherwise
(reconciler/twin/operator/dsupdate.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.operator.dsupdate import HASH_ANNOTATION

INVENTORY = Path(__file__).resolve().parents[2] / "inventory"
NS = "gpu-operator"
DS = "nvidia-device-plugin-daemonset"
CP = "cluster-policy"
MARKER = "example.com/restarted-for"


@pytest.fixture
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY, tls=False) as t:
        t.settle()
        yield t
        assert t.operator.errors == []


def ds(twin: ClusterTwin) -> dict[str, Any]:
    obj: dict[str, Any] = twin.store.get("daemonsets.apps", DS, NS)
    return obj


def dp_pods(twin: ClusterTwin) -> dict[str, str]:
    """node → device-plugin pod uid."""
    return {
        p["spec"]["nodeName"]: p["metadata"]["uid"]
        for p in twin.store.list("pods", NS)
        if (p["metadata"].get("labels") or {}).get("app") == DS
    }


def count_pod_creations(twin: ClusterTwin) -> list[str]:
    created: list[str] = []

    def cb(kind: str, obj: dict[str, Any]) -> None:
        if kind == "ADDED" and obj.get("kind") == "Pod" and (obj["metadata"].get("labels") or {}).get("app") == DS:
            created.append(obj["spec"]["nodeName"])

    twin.store.subscribe(cb)
    return created


def env(obj: dict[str, Any]) -> dict[str, str]:
    (c,) = [c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-device-plugin"]
    return {e["name"]: e.get("value", "") for e in c.get("env") or []}


def test_the_daemonset_is_the_cluster_policys_and_carries_its_hash(twin: ClusterTwin) -> None:
    obj = ds(twin)
    (owner,) = obj["metadata"]["ownerReferences"]
    cp = twin.store.get("clusterpolicies.nvidia.com", CP)
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "ClusterPolicy",
        CP,
        cp["metadata"]["uid"],
        True,
    )
    assert obj["metadata"]["annotations"][HASH_ANNOTATION]


def test_edits_survive_while_the_rendered_hash_is_unchanged(twin: ClusterTwin) -> None:
    twin.store.patch("daemonsets.apps", DS, {"metadata": {"annotations": {MARKER: "mixed"}}}, NS)
    twin.settle()
    # A ClusterPolicy change that does not touch the device plugin's rendering: the operator skips the update.
    twin.store.patch("clusterpolicies.nvidia.com", CP, {"spec": {"migManager": {"env": [{"name": "X", "value": "1"}]}}})
    twin.settle()
    assert ds(twin)["metadata"]["annotations"][MARKER] == "mixed"


def test_a_strategy_change_replaces_the_daemonset_whole_and_rolls_each_pod_once(twin: ClusterTwin) -> None:
    # `none` is a strategy every node's plugin starts with (no crash loop to stall the rolling update)
    twin.store.patch("daemonsets.apps", DS, {"metadata": {"annotations": {MARKER: "none"}}}, NS)
    twin.settle()
    before, hash_before = dp_pods(twin), ds(twin)["metadata"]["annotations"][HASH_ANNOTATION]
    created = count_pod_creations(twin)
    twin.store.patch("clusterpolicies.nvidia.com", CP, {"spec": {"mig": {"strategy": "none"}}})
    twin.settle()
    after = ds(twin)
    assert env(after)["MIG_STRATEGY"] == "none"  # applyMIGConfiguration
    assert MARKER not in after["metadata"]["annotations"]  # the full Update dropped what the operator does not render
    assert after["metadata"]["annotations"][HASH_ANNOTATION] != hash_before
    assert sorted(created) == sorted(before)  # exactly one new pod per node
    assert all(dp_pods(twin)[n] != uid for n, uid in before.items())
    for _ in range(3):  # and nothing more while nothing changes
        twin.operator.mark("global")
        twin.settle()
    assert sorted(created) == sorted(before)


def test_the_rolling_update_stops_at_a_node_whose_new_plugin_crash_loops(twin: ClusterTwin) -> None:
    """maxUnavailable 1 (kubernetes daemon/update.go rollingUpdate): a new pod that never becomes available holds
    every other old pod in place; the nodes not reached keep their old plugin and strategy."""
    before = dp_pods(twin)
    created = count_pod_creations(twin)
    twin.store.patch("clusterpolicies.nvidia.com", CP, {"spec": {"mig": {"strategy": "single"}}})
    twin.settle()
    status = ds(twin)["status"]
    assert len(created) == 1  # the first node by name: its plugin refuses `single` on mixed MIG GPUs
    (first,) = created
    assert first == sorted(before)[0]
    pods = dp_pods(twin)
    assert pods[first] != before[first]
    assert all(pods[n] == before[n] for n in before if n != first)  # not reached
    assert status["updatedNumberScheduled"] == 1 and status["numberUnavailable"] == 1
    # back to mixed: a third generation; the crash-looping pod is replaced at once, then one node at a time
    twin.store.patch("clusterpolicies.nvidia.com", CP, {"spec": {"mig": {"strategy": "mixed"}}})
    twin.settle()
    assert ds(twin)["status"]["updatedNumberScheduled"] == len(before)
    assert ds(twin)["status"]["numberUnavailable"] == 0
