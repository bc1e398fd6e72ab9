"""The twin's write path remembers and shares what it can (FieldsV1 codec, node resource validation, one copy per
subscriber), and none of it may show: each answer is a fresh object, types still count, subscribers still get
their own copies, and a merge patch leaves the caller's patch and the stored object untouched."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.twin.apiserver import Store, fieldpaths
from reconciler.twin.apiserver.fieldschema import root_shape
from reconciler.twin.apiserver.resources import BUILTINS
from reconciler.twin.apiserver.strategies import node_resources

NODE_SHAPE = root_shape(next(rt for rt in BUILTINS if rt.key == "nodes").schema)


@pytest.fixture
def store() -> Store:
    s = Store()
    s.ensure_namespaces(["default"])
    return s


def test_fieldsv1_answers_are_fresh_objects_every_time() -> None:
    paths = {("f:metadata",), ("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:a")}
    encoded = {"f:metadata": {".": {}, "f:labels": {".": {}, "f:a": {}}}}
    first = fieldpaths.encode(paths)
    assert first == encoded
    first["f:metadata"]["f:labels"]["f:b"] = {}  # a caller changing its answer changes no later answer
    assert fieldpaths.encode(set(paths)) == encoded

    decoded = fieldpaths.decode({"f:metadata": {"f:labels": {"f:a": {}}}})
    assert decoded == {("f:metadata", "f:labels", "f:a")}
    decoded.add(("f:spec",))
    assert fieldpaths.decode({"f:metadata": {"f:labels": {"f:a": {}}}}) == {("f:metadata", "f:labels", "f:a")}


def test_fieldsv1_garbage_is_refused_every_time() -> None:
    for _ in range(2):  # a refusal is never remembered as an answer
        with pytest.raises(ValueError, match="invalid path element"):
            fieldpaths.decode({"x:metadata": {}})
        with pytest.raises(ValueError, match="invalid path element"):
            fieldpaths.decode({"f:metadata": 1})


def test_the_comparison_still_tells_json_types_apart() -> None:
    # unchanged leaves and subtrees are skipped, but true is not 1 (1 and 1.0 are one number, as in
    # typed/compare.go's value.Equals)
    old = {"metadata": {"labels": {"a": "x"}}, "spec": {"unschedulable": True, "n": 1}}
    new = {"metadata": {"labels": {"a": "x"}}, "spec": {"unschedulable": 1, "n": 1.0}}
    added, modified, removed = fieldpaths.compare(old, new, NODE_SHAPE)
    assert modified == {("f:spec", "f:unschedulable")}
    assert not added and not removed
    # the same JSON with its keys in another order is no change at all
    reordered = {"spec": {"n": 1, "unschedulable": True}, "metadata": {"labels": {"a": "x"}}}
    assert fieldpaths.compare(old, reordered, NODE_SHAPE) == (set(), set(), set())


def test_node_resource_findings_are_fresh_and_typed() -> None:
    bad = {"status": {"capacity": {"nvidia.com/gpu": "1500m", "cpu": "-1"}}}
    first = node_resources(bad)
    assert [(e.field, e.detail) for e in first] == [
        ("status.capacity.cpu", "must be greater than or equal to 0"),
        ("status.capacity.nvidia.com/gpu", "must be an integer"),
    ]
    first.clear()
    assert len(node_resources(bad)) == 2
    # the same amounts written as numbers are other JSON, validated on their own (and reported with their text)
    numbers = node_resources({"status": {"capacity": {"nvidia.com/gpu": 1.5, "cpu": -1}}})
    assert [e.value for e in numbers] == ["-1", "1.5"]
    assert node_resources({"status": {"capacity": {"nvidia.com/gpu": "8"}}}) == []


def test_subscribers_get_their_own_copy_and_only_the_kinds_they_asked_for(store: Store) -> None:
    every: list[dict[str, Any]] = []
    pods_only: list[dict[str, Any]] = []

    def vandal(event: str, obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"] = {"changed": "by-a-subscriber"}  # a subscriber may change its copy
        every.append(obj)

    store.subscribe(vandal)
    store.subscribe(lambda event, obj: pods_only.append(obj), kinds=("Pod",))
    store.create("nodes", {"metadata": {"name": "n1", "labels": {"a": "1"}}})
    store.create("configmaps", {"metadata": {"name": "cm"}, "data": {"k": "v"}}, "default")
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    store.create("pods", pod, "default")
    assert {o["kind"] for o in every} == {"Node", "ConfigMap", "Pod"}
    assert [o["kind"] for o in pods_only] == ["Pod"]
    assert pods_only[0]["metadata"].get("labels") is None  # not the vandal's copy
    assert store.get("nodes", "n1")["metadata"]["labels"] == {"a": "1"}  # nor the stored object


def test_a_merge_patch_leaves_the_callers_patch_and_the_stored_object_alone(store: Store) -> None:
    store.create("nodes", {"metadata": {"name": "n1", "labels": {"a": "1"}}})
    patch = {"metadata": {"labels": {"b": "2"}}}
    result = store.patch("nodes", "n1", patch, field_manager="me")
    assert patch == {"metadata": {"labels": {"b": "2"}}}
    result["metadata"]["labels"]["c"] = "3"  # the answer is the caller's own
    stored = store.get("nodes", "n1")
    assert stored["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert result["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    managers = {m["manager"]: m for m in stored["metadata"]["managedFields"]}
    assert managers["me"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:b": {}}}}
    again = store.patch("nodes", "n1", {"metadata": {"labels": {"b": "2"}}}, field_manager="me")
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]  # a no-op write
