"""reconciler.logic.codecs.dpsharing: the device-plugin config's sharing folded into what a node is expected to
advertise, and the config that applies to each node (label, default, empty config), as NVIDIA's plugin and
config-manager do."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.logic.codecs import dpsharing
from reconciler.logic.codecs.dpsharing import Sharing, Unbelievable
from reconciler.logic.drift import nodestate
from reconciler.model.observed import ClusterPolicyState, ConfigMapState, ObservedNode, ObservedState

TS4 = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - {name: mig-1g.18gb, replicas: 4}\n"
RENAME = (
    "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
    "      - {name: nvidia.com/mig-1g.18gb, replicas: 2, rename: my-name}\n"
)


def test_time_slicing_multiplies_the_shared_resource_only() -> None:
    s = dpsharing.parse_entry(TS4, "ts4")
    assert isinstance(s, Sharing) and s.strategy == "time-slicing"
    expected = {"nvidia.com/mig-1g.18gb": 4, "nvidia.com/mig-3g.71gb": 2, "nvidia.com/gpu": 0}
    assert dpsharing.fold(expected, s) == {
        "nvidia.com/mig-1g.18gb": 16,
        "nvidia.com/mig-3g.71gb": 2,
        "nvidia.com/gpu": 0,
    }


def test_rename_by_default_moves_the_count_to_the_shared_name_and_a_custom_rename_is_ignored() -> None:
    s = dpsharing.parse_entry(RENAME, "r")
    assert isinstance(s, Sharing)
    assert dpsharing.fold({"nvidia.com/mig-1g.18gb": 4}, s) == {"nvidia.com/mig-1g.18gb.shared": 8}


def test_mps_block_wins_and_fails_requests_greater_than_one_by_default() -> None:
    text = (
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 8}]\n"
        "  mps:\n    resources: [{name: gpu, replicas: 3}]\n"
    )
    s = dpsharing.parse_entry(text, "m")
    assert isinstance(s, Sharing) and s.strategy == "mps" and s.fail_requests_greater_than_one
    assert s.replicas == {"nvidia.com/gpu": 3}
    assert dpsharing.refusal(s, "mixed", True) is not None
    assert dpsharing.refusal(s, "single", True) == "sharing using MPS is not supported for MIG devices"
    assert dpsharing.refusal(s, "none", False) is None


def test_struct_keys_match_case_insensitively_as_encoding_json_does() -> None:
    s = dpsharing.parse_entry("Sharing:\n  timeslicing:\n    resources: [{name: gpu, replicas: 2}]\n", "c")
    assert isinstance(s, Sharing) and s.replicas == {"nvidia.com/gpu": 2}


def test_the_same_resource_twice_keeps_the_larger_replica_count() -> None:
    text = "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2}, {name: gpu, replicas: 5}]\n"
    s = dpsharing.parse_entry(text, "d")
    assert isinstance(s, Sharing) and s.replicas == {"nvidia.com/gpu": 5}


@pytest.mark.parametrize(
    "text",
    [
        "version: v2\n",
        "sharing:\n  timeSlicing:\n    resources: []\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 1}]\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu}]\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: true}]\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2.5}]\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 99999999999}]\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2, devices: some}]\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2, devices: 0}]\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: Not_A_Name, replicas: 2}]\n",
        "sharing:\n  timeSlicing:\n    renameByDefault: yes please\n    resources: [{name: gpu, replicas: 2}]\n",
        "sharing: [1, 2]\n",
        "sharing:\n  timeSlicing: {resources: [{name: gpu, replicas: 2}]}\n  TimeSlicing: {}\n",
        "{unclosed",
        "- a list\n",
        "x" * (dpsharing._MAX_TEXT + 1),
    ],
)
def test_what_the_plugin_cannot_load_is_unbelievable(text: str) -> None:
    assert isinstance(dpsharing.parse_entry(text, "bad"), Unbelievable)


@pytest.mark.parametrize("text", ["", "version: v1\n", "flags: {migStrategy: mixed}\n", "sharing: null\n"])
def test_a_config_without_sharing_shares_nothing(text: str) -> None:
    assert dpsharing.parse_entry(text, "plain") is None


def _observed(labels: dict[str, str], data: dict[str, str] | None, default: str | None) -> ObservedState:
    node = ObservedNode(name="n", labels=labels)
    cp = ClusterPolicyState("cp", "mixed", "m", "dp" if data is not None else None, default)
    cm = ConfigMapState("gpu-operator", "dp", data) if data is not None else None
    return ObservedState(nodes={"n": node}, cluster_policy=cp, device_plugin_config_map=cm)


def test_the_node_label_then_the_default_then_the_empty_config() -> None:
    data = {"default": "version: v1\n", "ts4": TS4}
    label = {dpsharing.DP_CONFIG_LABEL: "ts4"}
    assert isinstance(dpsharing.sharing_by_node(_observed(label, data, "default"))["n"], Sharing)
    assert dpsharing.sharing_by_node(_observed({}, data, "default")) == {}
    assert isinstance(dpsharing.sharing_by_node(_observed({}, data, "ts4"))["n"], Sharing)
    # FALLBACK_STRATEGIES=empty (the operator's): no label, no default -> no config, even with one entry
    assert dpsharing.sharing_by_node(_observed({}, {"ts4": TS4}, None)) == {}
    assert dpsharing.sharing_by_node(_observed(label, None, None)) == {}  # no spec.devicePlugin.config


def test_a_missing_entry_or_configmap_is_unbelievable() -> None:
    label = {dpsharing.DP_CONFIG_LABEL: "nope"}
    assert isinstance(dpsharing.sharing_by_node(_observed(label, {"default": ""}, None))["n"], Unbelievable)
    obs = _observed({}, {}, "default")
    missing = ObservedState(nodes=obs.nodes, cluster_policy=obs.cluster_policy, device_plugin_config_map=None)
    assert isinstance(dpsharing.sharing_by_node(missing)["n"], Unbelievable)


def test_classify_compares_shared_counts_and_never_calls_an_unreadable_config_changed_by_hand() -> None:
    plan = {"nvidia.com/mig-1g.18gb": 4, "nvidia.com/gpu": 0}
    node = ObservedNode(name="n", allocatable={"nvidia.com/mig-1g.18gb": 16, "nvidia.com/gpu": 0})
    shared = dpsharing.parse_entry(TS4, "ts4")
    ready = nodestate.Readiness(True, {"n": True}, {"n": shared})
    assert nodestate.classify(node, plan, ready) is nodestate.Geometry.AS_CONFIGURED
    unshared = nodestate.Readiness(True, {"n": True})
    assert nodestate.classify(node, plan, unshared) is nodestate.Geometry.CHANGED_BY_HAND
    unknown = nodestate.Readiness(True, {"n": True}, {"n": Unbelievable("unreadable")})
    assert nodestate.classify(node, plan, unknown) is nodestate.Geometry.UNSETTLED
    # sharing does not hide a real difference: 12 replicas are 3 partitions, not the plan's 4
    cut = ObservedNode(name="n", allocatable={"nvidia.com/mig-1g.18gb": 12})
    assert nodestate.classify(cut, plan, ready) is nodestate.Geometry.CHANGED_BY_HAND


def _shared_cluster(text: str, asks: int) -> list[str]:
    """The article node sharing its 1g.18gb by `text`, with one pod whose container asks `asks` of them."""
    from helpers import planning as fixtures

    from reconciler.logic.drift import drift
    from reconciler.model.observed import ContainerResources, ObservedPod

    desired = fixtures.desired_state(fixtures.read("in-sync", "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read("in-sync", "observed.yaml") or {}, desired)
    node = observed.nodes["gpu-h200-01"]
    labels = {**node.labels, dpsharing.DP_CONFIG_LABEL: "s"}
    pod = ObservedPod(
        namespace="ml",
        name="nb",
        node="gpu-h200-01",
        phase="Pending",
        containers=(ContainerResources("main", limits={"nvidia.com/mig-1g.18gb": asks}),),
    )
    assert observed.cluster_policy is not None
    cp = replace(observed.cluster_policy, device_plugin_config_name="dp")
    observed = replace(
        observed,
        nodes={**observed.nodes, "gpu-h200-01": replace(node, labels=labels)},
        pods=(*observed.pods, pod),
        cluster_policy=cp,
        device_plugin_config_map=ConfigMapState("gpu-operator", "dp", {"s": text}),
    )
    analysis = drift.analyze(desired, observed)
    return [f.code for f in analysis.findings if f.code == "MP566" and f.pods == ("ml/nb",)]


def test_more_than_one_shared_device_per_container_is_refused_where_the_config_says_so() -> None:
    strict = TS4.replace("  timeSlicing:\n", "  timeSlicing:\n    failRequestsGreaterThanOne: true\n")
    assert _shared_cluster(strict, 2) == ["MP566"]
    assert _shared_cluster(strict, 1) == []
    assert _shared_cluster(TS4, 2) == []  # time-slicing fails them only when the config says so
