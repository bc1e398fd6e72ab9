"""ObservedPod.requested() is remembered per container tuple (model/observed.py requested_by) and ObservedPod.key once
per pod: the remembered answers must be exactly the computed ones, never another pod's, and never writable."""

from __future__ import annotations

import dataclasses
import gc
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import observed
from reconciler.model.observed import ContainerResources, ObservedPod, requested_by

RESOURCES = st.sampled_from(
    ["nvidia.com/gpu", "nvidia.com/mig-1g.18gb", "nvidia.com/mig-3g.71gb", "nvidia.com/mig-1g.18gb.shared", "x/y", ""]
)
COUNTS = st.integers(min_value=-(2**40), max_value=2**40)
CONTAINERS = st.lists(
    st.builds(
        ContainerResources,
        name=st.text(max_size=8),
        requests=st.dictionaries(RESOURCES, COUNTS, max_size=4),
        limits=st.dictionaries(RESOURCES, COUNTS, max_size=4),
    ),
    max_size=4,
).map(tuple)


def _computed(containers: tuple[ContainerResources, ...]) -> dict[str, int]:
    """The sum as ObservedPod.requested() made it before it was remembered."""
    total: dict[str, int] = {}
    for c in containers:
        for k, v in c.effective.items():
            total[k] = total.get(k, 0) + v
    return total


@settings(max_examples=300, deadline=None)
@given(CONTAINERS)
def test_the_remembered_sum_is_the_computed_one(containers: tuple[ContainerResources, ...]) -> None:
    pod = ObservedPod("ns", "p", "n", "Running", containers=containers)
    assert dict(pod.requested()) == _computed(containers)
    assert dict(pod.requested()) == _computed(containers)  # asked again: from the memo
    # an equal tuple that is another object, and a pod sharing the tuple, get the same answer
    assert dict(requested_by(tuple(containers))) == _computed(containers)
    other = ObservedPod("ns", "q", "n", "Running", containers=containers)
    assert dict(other.requested()) == _computed(containers)


def test_the_answer_cannot_be_changed_by_a_caller() -> None:
    containers = (ContainerResources("c", limits={"nvidia.com/mig-1g.18gb": 1}),)
    pod = ObservedPod("ns", "p", "n", "Running", containers=containers)
    with pytest.raises(TypeError):
        pod.requested()["nvidia.com/mig-1g.18gb"] = 7  # type: ignore[index]
    assert pod.requested() == {"nvidia.com/mig-1g.18gb": 1}


def test_a_reused_id_never_gives_another_tuples_answer() -> None:
    """Tuples made and dropped in turn often get the same id: the memo compares the object itself."""
    seen: set[int] = set()
    for n in range(1, 400):
        containers = (ContainerResources("c", limits={"nvidia.com/mig-1g.18gb": n}),)
        seen.add(id(containers))
        assert requested_by(containers) == {"nvidia.com/mig-1g.18gb": n}
        del containers
        if n % 50 == 0:
            observed._REQUESTED.clear()  # what fills the memo up does: the tuples are freed, their ids reused
            gc.collect()
    assert len(seen) < 399  # ids were reused along the way, so the identity check was exercised


def test_the_memo_is_bounded() -> None:
    keep = [(ContainerResources("c", limits={"nvidia.com/gpu": i}),) for i in range(observed._REQUESTED_LIMIT + 10)]
    for c in keep:
        requested_by(c)
    assert len(observed._REQUESTED) <= observed._REQUESTED_LIMIT
    assert all(requested_by(c) == {"nvidia.com/gpu": i} for i, c in enumerate(keep))


def test_the_key_is_kept_once_and_is_no_part_of_the_value() -> None:
    a = ObservedPod("ml", "vllm-0", "n", "Running")
    assert "_key" not in repr(a)
    b = ObservedPod("ml", "vllm-0", "n", "Running")
    assert a.key == "ml/vllm-0"
    assert a == b  # one asked for its key, the other not: still equal
    assert repr(a) == repr(b)
    renamed = dataclasses.replace(a, name="vllm-1")
    assert renamed.key == "ml/vllm-1"
    assert a.key == "ml/vllm-0"
    copied = pickle.loads(pickle.dumps(a))
    assert copied == a and copied.key == "ml/vllm-0"
    with pytest.raises(TypeError):
        ObservedPod("ml", "x", "n", "Running", _key="other/pod")  # type: ignore[call-arg]
