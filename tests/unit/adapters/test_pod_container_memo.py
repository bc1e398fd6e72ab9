"""Pods sharing a container shape are parsed once per observation (kube/observe.py Shared.containers_of), and what
comes out is what parsing each pod on its own gives: the same containers, the same unreadable quantities, whatever
the other pods of the observation were and in whatever order they came. The hostile shapes are the ones a key
could confuse: 1, 1.0 and True are equal dict keys, "" and a missing name read alike, falsy maps read as empty."""

from __future__ import annotations

import copy
import itertools
import random
from typing import Any

import pytest

from reconciler.adapters.kube import observe as kubeobserve

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.18gb"


def _pod(name: str, containers: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team-a", "labels": {"app": "x"}},
        "spec": {"nodeName": "gpu-1", "containers": containers},
        "status": {"phase": "Running"},
    }


def _c(resources: Any, **extra: Any) -> dict[str, Any]:
    return {"name": "main", "resources": resources, **extra}


SHAPES: list[Any] = [
    [_c({"limits": {GPU: "1"}})],
    [_c({"limits": {GPU: 1}})],  # a JSON number: not a plain string, parsed on its own
    [_c({"limits": {GPU: 1.0}})],
    [_c({"limits": {GPU: True}})],  # unreadable (counted as 1, with a Malformed)
    [_c({"limits": {GPU: "1.5"}})],  # unreadable: fractional
    [_c({"limits": {GPU: "one"}})],
    [_c({"limits": {GPU: ["1"]}})],  # unhashable
    [_c({"limits": {GPU: {"v": "1"}}})],
    [_c({"limits": {GPU: None}})],
    [_c({"requests": {GPU: "2"}, "limits": {GPU: "2"}})],
    [_c({"requests": {MIG: "1", "cpu": "4"}, "limits": {MIG: "1"}})],
    [_c({"limits": {MIG: "1", GPU: "1"}})],
    [_c({"limits": {GPU: "1", MIG: "1"}})],  # the same pairs in another order: another dict order
    [_c({"requests": {"cpu": "1"}})],  # no GPU: not kept
    [_c({"limits": {}})],
    [_c({"limits": None})],
    [_c({"limits": ""})],
    [_c({"limits": 0})],
    [_c({})],
    [_c(None)],
    [{"resources": {"limits": {GPU: "1"}}}],  # no name
    [{"name": "", "resources": {"limits": {GPU: "1"}}}],
    [{"name": 5, "resources": {"limits": {GPU: "1"}}}],  # a name that is not a string
    [{"name": True, "resources": {"limits": {GPU: "x"}}}],
    [{"name": 1, "resources": {"limits": {GPU: "x"}}}],  # equal to True as a key, not in a message
    [_c({"limits": {GPU: "1"}}), {"name": "side", "resources": {"limits": {MIG: "2"}}}],
    [{"name": "side", "resources": {"limits": {MIG: "2"}}}, _c({"limits": {GPU: "1"}})],
    [_c({"limits": {GPU: "1"}}, env=[{"name": "A"}])],  # env is not read here: the same shape
    [],
    None,
]


def _alone(pod: dict[str, Any]) -> Any:
    return kubeobserve.gpu_pod_from_json(copy.deepcopy(pod))


@pytest.mark.parametrize("seed", range(8))
def test_shared_parses_give_each_pod_its_own_parse(seed: int) -> None:
    pods = [_pod(f"p-{i}-{n}", copy.deepcopy(s)) for n in range(3) for i, s in enumerate(SHAPES)]
    random.Random(seed).shuffle(pods)
    shared = kubeobserve.Shared()
    for pod in pods:
        assert kubeobserve.gpu_pod_from_json(pod, shared) == _alone(pod)


def test_one_parse_per_distinct_shape_and_one_object_per_equal_value() -> None:
    shared = kubeobserve.Shared()
    made = [
        kubeobserve.gpu_pod_from_json(_pod(f"p-{i}", [_c({"limits": {GPU: "1"}, "requests": {GPU: "1"}})]), shared)
        for i in range(50)
    ]
    assert all(p is not None for p in made)
    first = made[0].containers if made[0] is not None else None
    assert all(p is not None and p.containers is first for p in made)
    assert len(shared._parsed) == 1
    # An equal value from another raw shape (cpu is not a GPU resource) is still the one object kept.
    other = kubeobserve.gpu_pod_from_json(
        _pod("q", [_c({"limits": {GPU: "1", "cpu": "2"}, "requests": {GPU: "1"}})]), shared
    )
    assert other is not None and other.containers is first and len(shared._parsed) == 2


def test_unreadable_quantities_are_named_on_every_pod_of_the_shape() -> None:
    shared = kubeobserve.Shared()
    pods = [kubeobserve.gpu_pod_from_json(_pod(f"p-{i}", [_c({"limits": {GPU: "1.5"}})]), shared) for i in range(3)]
    for pod in pods:
        assert pod is not None and len(pod.malformed) == 1
        assert pod.malformed[0].field == f"container main resources.limits[{GPU}]"
        assert pod.requested() == {GPU: 1}


def test_a_new_observation_forgets_the_shapes() -> None:
    shared = kubeobserve.Shared()
    kubeobserve.gpu_pod_from_json(_pod("p", [_c({"limits": {GPU: "1"}})]), shared)
    assert shared._parsed
    shared.begin()
    assert not shared._parsed


def test_no_two_shapes_that_parse_differently_share_a_key() -> None:
    keys = [kubeobserve._containers_key({"containers": copy.deepcopy(s)}) for s in SHAPES]
    assert sum(k is None for k in keys) == 9  # the non-strings: parsed on their own
    for a, b in itertools.combinations(range(len(SHAPES)), 2):
        if keys[a] is not None and keys[a] == keys[b]:
            assert _alone(_pod("p", SHAPES[a])) == _alone(_pod("p", SHAPES[b])), (SHAPES[a], SHAPES[b])
