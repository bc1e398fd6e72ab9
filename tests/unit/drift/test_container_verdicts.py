"""MP512/MP560 judge a fleet's pods once per distinct container tuple (drift._invalid_request_findings): pods sharing
one tuple object get exactly the findings they get when each holds its own copy, and a pod is never given another
tuple's verdict."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic.drift import drift
from reconciler.model.observed import GPU_RESOURCE, ContainerResources, ObservedPod, ObservedState

RESOURCES = st.sampled_from([GPU_RESOURCE, "nvidia.com/mig-1g.18gb", "nvidia.com/mig-3g.71gb", "example.com/fpga"])
CONTAINERS = st.lists(
    st.builds(
        ContainerResources,
        name=st.sampled_from(["main", "side", "", "a b"]),
        requests=st.dictionaries(RESOURCES, st.integers(-1, 3), max_size=3),
        limits=st.dictionaries(RESOURCES, st.integers(-1, 3), max_size=3),
    ),
    max_size=3,
).map(tuple)


def _findings(pods: list[ObservedPod]) -> list[tuple[str, str, str | None, tuple[str, ...]]]:
    found = drift._invalid_request_findings(ObservedState(nodes={}, pods=tuple(pods)))
    return [(f.code, f.message, f.node, f.pods) for f in found]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(CONTAINERS, min_size=1, max_size=4),
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["Running", "Pending", "Succeeded", "Failed"])),
        max_size=12,
    ),
)
def test_shared_tuples_get_the_findings_of_private_copies(
    shapes: list[tuple[ContainerResources, ...]], pods: list[tuple[int, str]]
) -> None:
    shared = [
        ObservedPod("ns", f"p{i}", f"n{i % 3}", phase, containers=shapes[which % len(shapes)])
        for i, (which, phase) in enumerate(pods)
    ]
    private = [
        ObservedPod(p.namespace, p.name, p.node, p.phase, containers=copy.deepcopy(p.containers)) for p in shared
    ]
    assert _findings(shared) == _findings(private)


def test_two_pods_with_different_tuples_keep_their_own_verdicts() -> None:
    good = (ContainerResources("main", requests={"nvidia.com/mig-1g.18gb": 1}, limits={"nvidia.com/mig-1g.18gb": 1}),)
    two = (ContainerResources("main", requests={"nvidia.com/mig-1g.18gb": 2}, limits={"nvidia.com/mig-1g.18gb": 2}),)
    pods = [
        ObservedPod("ns", "a", "n", "Running", containers=good),
        ObservedPod("ns", "b", "n", "Running", containers=two),
        ObservedPod("ns", "c", "n", "Running", containers=good),
        ObservedPod("ns", "d", "n", "Running", containers=two),
    ]
    assert [(code, pods_) for code, _, _, pods_ in _findings(pods)] == [("MP560", ("ns/b",)), ("MP560", ("ns/d",))]
