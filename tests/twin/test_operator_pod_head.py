"""The operator's first read of the pods decodes most of them pruned (`cache.pod_head`, issue 29 item 4): what it
remembers of a pod must be what it remembers of the whole pod, for every pod a twin stores and for pods at the
edges of the shape (no labels, no status, a null status, limits only, DRA-mapped requests, deleting, unbound)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.operator.cache import OperatorCache, PodInfo, pod_head


def _remembered(obj: dict[str, Any]) -> PodInfo:
    return OperatorCache("gpu-operator", "cluster-policy", "nvidia-device-plugin-daemonset").remember_pod(obj)


def _same(raw: bytes, whole: dict[str, Any]) -> None:
    head = pod_head(raw)
    assert head is not None
    assert len(orjson.dumps(head)) < len(raw)  # pruned, not the whole pod again
    assert _remembered(head) == _remembered(whole)


def test_every_pod_of_a_twin_is_remembered_the_same_from_its_head() -> None:
    with ClusterTwin.synthetic(6, owned_fraction=0.5, tls=False) as twin:
        twin.settle()
        pods = list(twin.store.each_lazy("pods"))
        assert len(pods) > 20
        apps = set()
        for raw, whole in pods:
            obj = whole()
            assert orjson.loads(raw) == {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
            apps.add((obj["metadata"].get("labels") or {}).get("app"))
            _same(raw, obj)
        assert len(apps) >= 3  # daemon pods and the partitions' pods


def _pod(**over: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"app": "a", "pod-template-generation": "3"},
            "uid": "u-1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": "c1", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}},
                {"name": "c2", "resources": {"requests": {"nvidia.com/mig-1g.18gb": "1"}}},
            ],
            "volumes": [{"name": "v"}],
        },
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    }
    for path, value in over.items():
        *parents, last = path.split("__")
        cur = pod
        for part in parents:
            cur = cur[part]
        if value is _DROP:
            cur.pop(last, None)
        else:
            cur[last] = value
    return pod


_DROP = object()
EDGES = [
    {},
    {"metadata__labels": _DROP},
    {"metadata__labels": None},
    {"metadata__namespace": _DROP},
    {"metadata__uid": _DROP},
    {"metadata__deletionTimestamp": "2026-01-01T00:01:00Z"},
    {"spec__nodeName": _DROP},
    {"spec__nodeName": ""},
    {"spec__containers": _DROP},
    {"spec__containers": []},
    {"status": _DROP},
    {"status__phase": _DROP},
    {
        "status__extendedResourceClaimStatus": {
            "requestMappings": [{"containerName": "c2", "resourceName": "nvidia.com/mig-1g.18gb", "requestName": "r"}]
        }
    },
]


@pytest.mark.parametrize("over", EDGES, ids=range(len(EDGES)))
def test_a_pod_at_the_edges_is_remembered_the_same_from_its_head(over: dict[str, Any]) -> None:
    pod = _pod(**over)
    _same(orjson.dumps(pod), pod)


@pytest.mark.parametrize("raw", [b'{"metadata": {"name": "p"}, "status": null}', b"[]", b"{}", b"not json"])
def test_a_json_of_another_shape_is_decoded_whole(raw: bytes) -> None:
    assert pod_head(raw) is None
