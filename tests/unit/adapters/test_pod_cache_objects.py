"""What a watch-fed pod cache keeps of one pod beyond what the fleet's pods share: few objects (issue 29, memory).

A `migplan run` cache keeps a record per pod for the process's life (140,000 at 5,000 nodes), so each object a record
holds alone costs that many times over. Counted by structure, not by size: the objects reachable from one record
that are not reachable from another record of a pod alike (same node, labels, owner, phase, requests) are what
that pod costs alone.
"""

from __future__ import annotations

import gc
from typing import Any

import orjson
import pytest

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.observe import PodRecord


def _pod(name: str, *, gpu: bool = True) -> Any:
    container: dict[str, Any] = {"name": "main"}
    if gpu:
        container["resources"] = {
            "requests": {"nvidia.com/mig-1g.18gb": "1"},
            "limits": {"nvidia.com/mig-1g.18gb": "1"},
        }
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "serving",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "labels": {"app": "vllm"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "vllm-5d9c", "controller": True}],
        },
        "spec": {"nodeName": "gpu-00001", "containers": [container]},
        "status": {"phase": "Running"},
    }
    return orjson.loads(orjson.dumps(pod))  # decoded on its own, as a page or a watch event is: no string shared


def _reachable(root: object) -> dict[int, object]:
    """Every object reachable from `root` (types and other code objects left out: they are the program's)."""
    seen: dict[int, object] = {}
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen[id(obj)] = obj
        todo.extend(gc.get_referents(obj))
    return seen


def _own(record: PodRecord, other: PodRecord) -> list[str]:
    """The types of the objects `record` holds that `other` does not hold too, sorted."""
    theirs = _reachable(other)
    return sorted(type(o).__name__ for i, o in _reachable(record).items() if i not in theirs)


def _records(*pods: Any) -> list[PodRecord]:
    cluster = KubeCluster(object(), watch=True)  # type: ignore[arg-type]
    made = [cluster._pod_entry(p) for p in pods]  # what the cache stores, as a LIST or a watch hands it the pods
    out = []
    for entry in made:
        assert entry is not None
        key, record = entry
        assert key is record.key
        out.append(record)
    return out


def test_a_cached_gpu_pod_holds_its_record_its_pod_and_two_names() -> None:
    first, second = _records(_pod("vllm-5d9c-a"), _pod("vllm-5d9c-b"))
    # The record, its key, the ObservedPod and the pod's name: the reboot tally's entry is no object of its own
    # (its traits are the ones all alike pods share) and the pod's key is the record's very string.
    assert _own(first, second) == ["ObservedPod", "PodRecord", "str", "str"]
    assert first.gpu is not None and first.gpu.key is first.key
    assert first.traits is second.traits
    assert first.extras is None


def test_a_cached_pod_without_gpu_holds_its_record_and_key() -> None:
    first, second = _records(_pod("web-a", gpu=False), _pod("web-b", gpu=False))
    assert first.gpu is None
    assert _own(first, second) == ["PodRecord", "str"]


def test_the_tally_entry_is_the_listed_pod_s() -> None:
    (record,) = _records(_pod("vllm-5d9c-a"))
    labels = {"app": "vllm"}
    assert record.tally == ("gpu-00001", ("serving/vllm-5d9c-a", labels, "ReplicaSet", True, "Running", False))


def test_the_traits_table_is_bounded_and_its_traits_are_the_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeobserve, "SHARED_TABLE_LIMIT", 4)
    parts = kubeobserve.CacheParts()
    for i in range(20):  # a pod of its own Job each: labels never seen again
        pod = _pod(f"job-{i}")
        pod["metadata"]["labels"] = {"job-name": f"job-{i}"}
        record = kubeobserve.pod_record(pod, shared=parts)
        assert record.traits == ({"job-name": f"job-{i}"}, "ReplicaSet", True, "Running", False)
        assert len(parts._traits) <= 4
