"""A pod whose status.phase is not a string (a list, a map, a number: what no API server sends, but what a proxy or a
hostile server may) is read as a pod without a phase, on every path a listed or watched pod takes: the LIST page
(typed and full decode), the PodSorter (reboot tally, GPU pods), a watch-fed cache's PodRecord, and the occupancy
drift and the planner compute from them. Before, `phase in frozenset(...)` raised `TypeError: unhashable type` and
the whole cycle failed (rebootpods.py tally_entry; logic/observe/occupancy.py)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube import shapes as kubeshapes
from reconciler.adapters.kube.cluster import read_list_page
from reconciler.logic.observe.occupancy import node_occupancy
from reconciler.model.inventory import GpuOperatorSettings, MigStrategy
from reconciler.model.observed import ObservedState

OPS = GpuOperatorSettings()
GPU = "nvidia.com/gpu"
MISSING = object()  # no phase key at all
HOSTILE = [[], {}, ["Running"], {"phase": "Running"}, ["Succeeded"], 5, 1.5, True, False, None, ""]


def _pods(phase: Any) -> list[dict[str, Any]]:
    """A GPU pod holding a device, a plain pod (counted by the reboot tally only), each with `phase`; a third pod
    that finished, so the node has something the tally must leave out."""
    status: dict[str, Any] = {} if phase is MISSING else {"phase": phase}
    gpu = {
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "u-1",
            "resourceVersion": "4",
            "ownerReferences": [{"kind": "Job", "name": "train", "controller": True}],
        },
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "main", "resources": {"limits": {GPU: "2"}}}]},
        "status": status,
    }
    plain = {
        "metadata": {"name": "web", "namespace": "team-a", "uid": "u-2", "resourceVersion": "4"},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "main"}]},
        "status": dict(status),
    }
    done = {
        "metadata": {"name": "old", "namespace": "team-a", "uid": "u-3", "resourceVersion": "4"},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "main", "resources": {"limits": {GPU: "1"}}}]},
        "status": {"phase": "Succeeded"},
    }
    return [gpu, plain, done]


def _page(pods: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": pods})


def _observe(items: list[dict[str, Any]]) -> ObservedState:
    return kubeobserve.observed_state(
        OPS,
        nodes=[],
        pods=items,
        cluster_policy=None,
        daemonset=None,
        config_map=lambda name: None,
        device_plugin_log=lambda pod: None,
        mig_manager_log=lambda pod: None,
        max_log_reads=0,
    )


def _from_records(items: list[dict[str, Any]]) -> ObservedState:
    """The watch-fed cache's path: each pod read once into a PodRecord, sorted later (add_record)."""
    sorter = kubeobserve.PodSorter(
        OPS,
        failed=frozenset(),
        daemonset=False,
        device_plugin_log=lambda pod: None,
        mig_manager_log=lambda pod: None,
        max_log_reads=0,
    )
    shared = kubeobserve.Shared()
    for obj in items:
        gpu_pod = lambda o: kubeobserve.gpu_pod_from_json(o, shared)  # noqa: E731
        sorter.add_record(kubeobserve.pod_record(obj, gpu_pod, shared=shared))
    return kubeobserve.observed_from_parts(
        OPS, nodes={}, pods=sorter, cluster_policy=None, daemonset=None, config_map=lambda name: None
    )


def _what_a_cycle_reads(observed: ObservedState) -> tuple[Any, ...]:
    node = observed.node_pods["gpu-1"]
    occupancy = node_occupancy(node="gpu-1", plan=None, strategy=MigStrategy.MIXED, pods=observed.pods)
    return (
        [(p.key, p.phase, p.active, p.holds_devices) for p in observed.pods],
        (node.count, node.names, node.unreplicated_names, node.unreplicated_count),
        [(p.key, p.phase) for p in (*node.pods, *node.unreplicated)],  # what drain reads
        [(e.profile, e.used, e.total, [h.pod for h in e.holders]) for e in occupancy.entries],
    )


@pytest.mark.parametrize("shape", [kubeshapes.PODS, None], ids=["typed", "full"])
@pytest.mark.parametrize("phase", HOSTILE, ids=repr)
def test_a_phase_that_is_not_a_string_reads_as_a_missing_one(phase: Any, shape: Any) -> None:
    items, _ = read_list_page(_page(_pods(phase)), "list pods", shape)
    want, _ = read_list_page(_page(_pods(MISSING)), "list pods", shape)
    expected = _what_a_cycle_reads(_observe(want))
    assert _what_a_cycle_reads(_observe(items)) == expected
    assert _what_a_cycle_reads(_from_records(items)) == expected


def test_a_missing_phase_is_pending_and_holds_its_devices() -> None:
    """What the hostile phases are compared with: the GPU pod counts as bound and holding 2 GPUs, both unfinished
    pods are counted by the reboot tally, the finished one holds nothing and is not counted."""
    items, _ = read_list_page(_page(_pods(MISSING)), "list pods", kubeshapes.PODS)
    pods, tally, details, occupancy = _what_a_cycle_reads(_observe(items))
    assert pods == [("team-a/train", "Pending", True, True), ("team-a/old", "Succeeded", False, False)]
    assert tally[0] == 2 and set(tally[1]) | set(tally[2]) == {"team-a/train", "team-a/web"}
    assert {phase for _, phase in details} == {"Pending"}
    assert occupancy == [("gpu", 2, 0, ["team-a/train"])]  # 2 of nvidia.com/gpu used, none advertised


@pytest.mark.parametrize("status", ["Running", ["Running"], 7])
def test_a_status_that_is_not_an_object_reads_as_no_phase(status: Any) -> None:
    """The full decode's path (the typed one refuses such a page): the GPU pod is read, not a crash."""
    pods = _pods(MISSING)
    for pod in pods[:2]:
        pod["status"] = status
    items, _ = read_list_page(_page(pods), "list pods", kubeshapes.PODS)
    want, _ = read_list_page(_page(_pods(MISSING)), "list pods", kubeshapes.PODS)
    assert _what_a_cycle_reads(_observe(items)) == _what_a_cycle_reads(_observe(want))
