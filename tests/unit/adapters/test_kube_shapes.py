"""Hostile node and pod LIST pages read with a shape (kube/shapes.py) give what the full decode gives: the same
items cut to the shape, the same observation, or the same error. Wrong types at every typed level, nulls, huge
strings, non-object items, duplicate keys, numbers and bytes two JSON parsers could read differently."""

from __future__ import annotations

import copy
import functools
import sys
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from helpers import pagerecorder

from reconciler.adapters.kube import cluster as kc
from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube import shapes
from reconciler.model.inventory import GpuOperatorSettings
from reconciler.model.observed import MIRROR_POD_ANNOTATION

MANAGED = [
    {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:unschedulable": {}}}},
    {"manager": "kubelet", "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": {"f:x": {}}}},
]
NODE: dict[str, Any] = {
    "metadata": {
        "name": "gpu-1",
        "uid": "u-n",
        "resourceVersion": "9",
        "labels": {"nvidia.com/mig.config.state": "success", "nvidia.com/gpu.count": "8"},
        "annotations": {"a": "b"},
        "managedFields": MANAGED,
        "creationTimestamp": "2026-01-01T00:00:00Z",
    },
    "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"},
    "status": {
        "capacity": {"nvidia.com/gpu": "8", "cpu": "64"},
        "allocatable": {"nvidia.com/mig-1g.18gb": "7"},
        "conditions": [{"type": "Ready", "status": "True"}],
        "nodeInfo": {"kubeletVersion": "v1.34.0"},
    },
}
POD: dict[str, Any] = {
    "metadata": {
        "name": "vllm-0",
        "namespace": "team-a",
        "uid": "u-p",
        "resourceVersion": "12",
        "labels": {"app": "vllm"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "vllm-7d", "controller": True}],
        "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {
        "nodeName": "gpu-1",
        "nodeSelector": {"nvidia.com/gpu.product": "H200"},
        "containers": [
            {"name": "main", "image": "v:1", "resources": {"limits": {"nvidia.com/mig-1g.18gb": "1"}}, "env": []}
        ],
        "initContainers": [{"name": "warm", "image": "w:1"}],
        "volumes": [{"name": "mig-parted-config", "configMap": {"name": "cfg"}}, {"name": "t", "projected": {}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}],
        "tolerations": [{"operator": "Exists"}],
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c1"}],
        "containerStatuses": [{"name": "main", "ready": True}],
    },
}
MIG_MANAGER: dict[str, Any] = {
    "metadata": {"name": "mm-1", "namespace": "gpu-operator", "labels": {"app": "nvidia-mig-manager"}},
    "spec": {
        "nodeName": "gpu-1",
        "containers": [{"name": "mm", "env": [{"name": "CONFIG_FILE", "value": "/c"}]}],
        "volumes": [{"name": "mig-parted-config", "configMap": {"name": "migplan-cfg"}}],
    },
}
DEVICE_PLUGIN: dict[str, Any] = {
    "metadata": {
        "name": "dp-1",
        "namespace": "gpu-operator",
        "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-device-plugin-daemonset", "controller": True}],
    },
    "spec": {"nodeName": "gpu-1", "containers": [{"name": "nvidia-device-plugin"}]},
    "status": {"conditions": [{"type": "Ready", "status": "False"}]},
}
OPS = GpuOperatorSettings()


def _page(items: list[Any]) -> bytes:
    return orjson.dumps({"kind": "List", "metadata": {"resourceVersion": "1"}, "items": items})


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def _observe_pods(items: list[dict[str, Any]]) -> Any:
    sorter = kubeobserve.PodSorter(
        OPS,
        failed=frozenset({"gpu-1"}),
        daemonset=True,
        device_plugin_log=lambda obj: None,
        mig_manager_log=lambda obj: None,
        max_log_reads=10,
    )
    for item in items:
        sorter.add(item)
    reboot = sorter.reboot.by_node()
    return (
        sorter.gpu_pods,
        sorter.dp_pods,
        sorter.mig_manager_sources,
        reboot,
        {n: t.details() if t.details else None for n, t in reboot.items()},
    )


def _observe_nodes(items: list[dict[str, Any]]) -> Any:
    return [kubeobserve.node_from_json(item) for item in items]


def _same(data: bytes, shape: shapes.PageShape, kind: type[Any], observe: Callable[[list[Any]], Any]) -> None:
    """The page read with the shape and in full: equal items once cut to the shape (or the full items, where the
    typed decode refused the page), equal observations, or the same error (type and message)."""
    full = _outcome(lambda: kc.read_list_page(data, "list x"))
    pruned = _outcome(lambda: kc.read_list_page(data, "list x", shape))
    if full[0] == "error":
        assert pruned == full
        return
    assert pruned[0] == "ok", pruned
    (items, cont), (pruned_items, pruned_cont) = full[1], pruned[1]
    assert pruned_cont == cont
    if shapes.decode_page(data, shape) is None:  # the typed decode refused it: the page was read in full
        assert pruned_items == items
    else:
        assert pruned_items == [pagerecorder.project(i, kind) for i in items]
    assert _outcome(lambda: observe(pruned_items)) == _outcome(lambda: observe(items))


def _pods(*items: Any) -> bytes:
    return _page(list(items))


def test_a_plain_page_is_cut_to_the_shape() -> None:
    items, _ = kc.read_list_page(_pods(POD), "list pods", shapes.PODS)
    (pod,) = items
    assert "managedFields" not in pod["metadata"] and "initContainers" not in pod["spec"]
    assert "containerStatuses" not in pod["status"] and "tolerations" not in pod["spec"]
    assert pod["metadata"]["annotations"] == {}  # only the mirror annotation is read
    assert pod["spec"]["volumes"] == [{"name": "mig-parted-config", "configMap": {"name": "cfg"}}, {"name": "t"}]
    assert pod["metadata"]["labels"] == {"app": "vllm"}
    (node,) = kc.read_list_page(_page([NODE]), "list nodes", shapes.NODES)[0]
    assert node["metadata"]["managedFields"] == [
        {"manager": "kubectl", "fieldsV1": {"f:spec": {"f:unschedulable": {}}}},
        {"manager": "kubelet", "subresource": "status", "fieldsV1": {}},
    ]
    assert node["status"] == {"capacity": NODE["status"]["capacity"], "allocatable": NODE["status"]["allocatable"]}
    _same(_pods(POD, MIG_MANAGER, DEVICE_PLUGIN), shapes.PODS, shapes.Pod, _observe_pods)
    _same(_page([NODE]), shapes.NODES, shapes.Node, _observe_nodes)


def test_the_mirror_annotation_is_kept() -> None:
    pod = copy.deepcopy(POD)
    pod["metadata"]["annotations"][MIRROR_POD_ANNOTATION] = "hash"
    (got,) = kc.read_list_page(_pods(pod), "list pods", shapes.PODS)[0]
    assert got["metadata"]["annotations"] == {MIRROR_POD_ANNOTATION: "hash"}
    _same(_pods(pod), shapes.PODS, shapes.Pod, _observe_pods)


def _typed_paths(kind: type[Any]) -> list[tuple[str, ...]]:
    """Every path of the shape where it has a typed object or a list of them (a wrong type there fails the typed
    decode)."""
    from msgspec import inspect

    out: list[tuple[str, ...]] = []

    def walk(t: inspect.Type, path: tuple[str, ...]) -> None:
        for b in t.types if isinstance(t, inspect.UnionType) else (t,):
            if isinstance(b, inspect.StructType | inspect.TypedDictType):
                if path:
                    out.append(path)
                for f in b.fields:
                    walk(f.type, (*path, f.encode_name))
            elif isinstance(b, inspect.ListType):
                out.append(path)
                walk(b.item_type, (*path, "0"))

    walk(inspect.type_info(kind), ())
    return out


def _set(obj: Any, path: tuple[str, ...], value: Any) -> Any:
    obj = copy.deepcopy(obj)
    here = obj
    for key in path[:-1]:
        here = here[int(key)] if isinstance(here, list) else here.setdefault(key, {})
        if isinstance(here, list) and not here:
            here.append({})
    if isinstance(here, list):
        here[int(path[-1])] = value
    else:
        here[path[-1]] = value
    return obj


WRONG = [None, "x", 5, 1.5, True, [], [1], {}, {"a": None}]
POD_PATHS = _typed_paths(shapes.Pod)
NODE_PATHS = _typed_paths(shapes.Node)


def test_the_typed_levels_are_the_ones_expected() -> None:
    """The parametrisations below cover every typed level (a new typed object in a shape adds its cases by itself)."""
    assert ("spec", "containers", "0") in POD_PATHS and ("metadata", "annotations") in POD_PATHS
    assert ("metadata", "managedFields", "0", "fieldsV1") in NODE_PATHS


@pytest.mark.parametrize("path", POD_PATHS, ids=".".join)
@pytest.mark.parametrize("value", WRONG, ids=repr)
def test_a_wrong_type_at_a_pod_typed_level_reads_as_the_full_decode(path: tuple[str, ...], value: Any) -> None:
    for base in (POD, MIG_MANAGER, DEVICE_PLUGIN):
        _same(_pods(_set(base, path, value), POD), shapes.PODS, shapes.Pod, _observe_pods)


@pytest.mark.parametrize("path", NODE_PATHS, ids=".".join)
@pytest.mark.parametrize("value", WRONG, ids=repr)
def test_a_wrong_type_at_a_node_typed_level_reads_as_the_full_decode(path: tuple[str, ...], value: Any) -> None:
    _same(_page([_set(NODE, path, value), NODE]), shapes.NODES, shapes.Node, _observe_nodes)


@pytest.mark.parametrize(
    "value",
    [None, "x" * 1_000_000, -(2**63), 2**64 - 1, 1e300, [[[[]]]], {"k": {"k": [None]}}, "\u0000", "é😀"],
    ids=lambda v: repr(v)[:20],
)
def test_any_value_below_the_typed_levels_reaches_the_consumers_as_sent(value: Any) -> None:
    for path in (
        ("metadata", "name"),
        ("metadata", "labels"),
        ("metadata", "ownerReferences"),
        ("spec", "nodeName"),
        ("spec", "containers", "0", "resources"),
        ("status", "phase"),
        ("status", "conditions"),
        ("metadata", "annotations", MIRROR_POD_ANNOTATION),
    ):
        _same(_pods(_set(POD, path, value)), shapes.PODS, shapes.Pod, _observe_pods)
    for path in (("metadata", "annotations"), ("status", "capacity"), ("spec", "taints")):
        _same(_page([_set(NODE, path, value)]), shapes.NODES, shapes.Node, _observe_nodes)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"<html>502</html>",
        b'{"items": [',
        b"[]",
        b"null",
        b'{"items": {"a": 1}}',
        b'{"items": [5]}',
        b'{"items": [null]}',
        b'{"items": [[1]]}',
        b'{"items": [], "metadata": {"continue": 12}}',
        b'{"items": [], "metadata": "x"}',
        b'{"items": null}',
        b"{}",
        b'{"items": []} trailing',
        b"\xef\xbb\xbf{}",
    ],
)
def test_a_page_that_is_not_a_list_gives_the_same_error(data: bytes) -> None:
    _same(data, shapes.PODS, shapes.Pod, _observe_pods)
    _same(data, shapes.NODES, shapes.Node, _observe_nodes)


@pytest.mark.parametrize(
    "value",
    [
        b"123456789012345678901234567890",  # past 64 bits: orjson reads a float, msgspec an int
        b"-9223372036854775809",
        b"18446744073709551616",
        b"1e999",  # orjson refuses an infinity; msgspec would skip it where it is dropped
        b"-2.5E+400",
        b"1" + b"0" * 400,
        b"0.12345678901234567890123",
        b'"\xff\xfe"',  # not UTF-8: orjson refuses it; msgspec does not check a string it skips
        b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8
        b'"\\ud800"',  # a lone surrogate escaped
        b"NaN",
        b"[" * 600 + b"]" * 600,
        b'"a\x01b"',
        # JSON that is not: msgspec checks the syntax of what it skips as orjson does of everything
        b'"\\q"',
        b'"\\u12G4"',
        b"1.",
        b"[1,]",
        b'{"a":1,}',
        b"Infinity",
        b'"\t"',
    ],
    ids=lambda v: repr(v)[:24],
)
def test_bytes_two_parsers_could_read_differently_give_the_full_decodes_answer(value: bytes) -> None:
    dropped = _pods(POD).replace(b'"items":[{"metadata":{', b'"items":[{"metadata":{"managedFields":' + value + b",", 1)
    kept = _pods(POD).replace(b'"phase":"Running"', b'"phase":' + value, 1)
    for data in (dropped, kept):
        assert value in data
        _same(data, shapes.PODS, shapes.Pod, _observe_pods)


@pytest.mark.parametrize("limit", [1000, 2500])  # Python's default; what celpy.Environment() sets (dracel, the twin)
def test_nesting_deeper_than_the_full_decoder_goes_is_refused_or_read_without_it(limit: int) -> None:
    """Deeper than orjson's 1,024 levels: orjson refuses the page. msgspec's limit is the interpreter's recursion
    limit, which celpy raises to 2,500 for the whole process, so the typed decode may read such a page. Either way
    no wrong answer: the full decode's error, or the page read as if the deep value were any other hostile value."""
    deep = b"[" * 1100 + b"]" * 1100
    dropped = _pods(POD).replace(b'"items":[{"metadata":{', b'"items":[{"metadata":{"managedFields":' + deep + b",", 1)
    kept = _pods(POD).replace(b'"phase":"Running"', b'"phase":' + deep, 1)
    shallow = {dropped: _pods(POD), kept: _pods(POD).replace(b'"phase":"Running"', b'"phase":[]', 1)}
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        for data, instead in shallow.items():
            full = _outcome(functools.partial(kc.read_list_page, data, "list x"))
            pruned = _outcome(functools.partial(kc.read_list_page, data, "list x", shapes.PODS))
            assert full[0] == "error" and "depth limit exceeded" in full[2]
            if limit == 1000 or pruned[0] == "error":
                assert pruned == full
            else:
                expected = kc.read_list_page(instead, "list x", shapes.PODS)[0]
                assert _outcome(functools.partial(_observe_pods, pruned[1][0])) == _outcome(
                    functools.partial(_observe_pods, expected)
                )
    finally:
        sys.setrecursionlimit(before)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (b'"spec":{"nodeName":"a","nodeName":"b"', "nodeName"),
        (b'"spec":{"containers":[],"containers":[{"name":"x","resources":{"limits":{"nvidia.com/gpu":"1"}}}]', "c"),
        (b'"spec":{"containers":5,"containers":[]', "c"),
        (b'"spec":{"containers":[],"containers":5', "c"),
        (b'"spec":"x","spec":{"nodeName":"b"', "spec"),
        (b'"spec":{"node\\u004eame":"escaped","nodeName":"plain"', "escaped key"),
        (b'"spec":{"nodeName":"plain","node\\u004eame":"escaped"', "escaped key last"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_duplicate_and_escaped_keys_read_as_the_full_decode(raw: bytes, key: str) -> None:
    data = _pods(POD).replace(b'"spec":{', raw + b",", 1)
    assert data != _pods(POD)
    _same(data, shapes.PODS, shapes.Pod, _observe_pods)


def test_a_huge_page_of_pods_is_read_whole() -> None:
    pods = [_set(POD, ("metadata", "name"), f"p-{i}") for i in range(2000)]
    items, _ = kc.read_list_page(_page(pods), "list pods", shapes.PODS)
    assert [p["metadata"]["name"] for p in items] == [f"p-{i}" for i in range(2000)]


def test_decode_page_says_none_rather_than_guess() -> None:
    assert shapes.decode_page(b'{"items": [5]}', shapes.PODS) is None
    assert shapes.decode_page(b'{"items": [{"x": 1e999}]}', shapes.PODS) is None
    assert shapes.decode_page(b'{"items": [{"x": "\xff"}]}', shapes.PODS) is None
    assert shapes.decode_page(b'{"items": [{"x": 1}]}', shapes.PODS) == {"items": [{}]}


def test_every_field_the_consumers_read_of_these_objects_is_kept() -> None:
    """The recorder of tests/integration/test_pruned_pages_twin.py on objects the twin does not make: a Ready
    device-plugin pod (its Ready time is read), a mirror pod, a pod being deleted, a pod without a controller."""
    ready = _set(
        DEVICE_PLUGIN,
        ("status", "conditions"),
        [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    )
    mirror = _set(POD, ("metadata", "annotations"), {MIRROR_POD_ANNOTATION: "h"})
    deleting = _set(POD, ("metadata", "deletionTimestamp"), "2026-01-01T00:00:00Z")
    bare = _set(POD, ("metadata", "ownerReferences"), [])
    pod_log: set[pagerecorder.Path] = set()
    node_log: set[pagerecorder.Path] = set()
    _observe_pods(
        [pagerecorder.record(p, pod_log) for p in (POD, MIG_MANAGER, DEVICE_PLUGIN, ready, mirror, deleting, bare)]
    )
    _observe_nodes([pagerecorder.record(NODE, node_log)])
    assert ("status", "conditions", "[]", "lastTransitionTime") in pod_log
    assert ("spec", "volumes", "[]", "configMap", "name") in pod_log
    assert ("spec", "taints", "[]", "effect") in node_log
    lost = {
        p: where
        for log, shape in ((node_log, shapes.Node), (pod_log, shapes.Pod))
        for p in log
        if (where := pagerecorder.dropped(p, shape)) is not None
    }
    assert not lost
