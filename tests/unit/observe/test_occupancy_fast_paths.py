"""The fast paths of occupancy's partition assignment and of workload_issues give exactly what the straightforward
versions give (kept here as the reference), over generated plans and pods: owners that several pods or none match,
identities that name several owners at once, more holders than partitions, whole GPUs, pins, strategies."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic.observe import owners, podrules
from reconciler.logic.observe.occupancy import _assign, pod_identities, resource_of
from reconciler.model.inventory import GpuSpec, MigStrategy, NodeSpec, Partition
from reconciler.model.observed import GPU_RESOURCE, ContainerResources, ObservedPod, OwnerRef

PROFILES = ["1g.18gb", "3g.71gb", "2g.35gb"]
# Owner names that also are namespaces, pod names, label values or a ReplicaSet's Deployment: a pod's identities
# may name one owner, several or none.
NAMES = ["ml", "vllm", "rr", "a", "vllm-5d9f7c", "ml/a"]


def _reference_assign(
    plan: NodeSpec, resource: str, pods: list[tuple[ObservedPod, int]], owner_of: dict[tuple[str, str], str | None]
) -> dict[tuple[int, int], str]:
    """occupancy._assign as it was written first: every slot scanned for every pod."""
    slots = [
        (g.index, i, p.owner)
        for g in sorted(plan.gpus, key=lambda g: g.index)
        if g.mig_enabled
        for i, p in enumerate(g.partitions)
        if resource_of(p.profile) == resource
    ]
    taken: dict[tuple[int, int], str] = {}
    remaining: list[tuple[ObservedPod, int]] = []
    for pod, n in pods:
        ids = pod_identities(pod)
        mine = [s for s in slots if s[2] is not None and s[2] in ids and (s[0], s[1]) not in taken]
        for s in mine[:n]:
            taken[(s[0], s[1])] = pod.key
            owner_of[(resource, pod.key)] = s[2]
        if len(mine) < n:
            remaining.append((pod, n - len(mine)))
    for pod, n in remaining:
        free = [s for s in slots if (s[0], s[1]) not in taken]
        free.sort(key=lambda s: s[2] is not None)
        for s in free[:n]:
            taken[(s[0], s[1])] = pod.key
    return taken


partitions = st.lists(
    st.builds(Partition, st.sampled_from(PROFILES), st.none(), st.one_of(st.none(), st.sampled_from(NAMES))),
    max_size=7,
).map(tuple)
gpus = st.lists(st.tuples(st.booleans(), partitions), min_size=1, max_size=4).map(
    lambda gs: tuple(
        GpuSpec(index=len(gs) - 1 - i, model="H200-141GB", mig_enabled=on, partitions=ps)
        for i, (on, ps) in enumerate(gs)
    )
)
plans = gpus.map(lambda g: NodeSpec(name="n", gpus=g))
owner_refs = st.one_of(
    st.none(),
    st.builds(OwnerRef, st.sampled_from(["ReplicaSet", "StatefulSet", "Job"]), st.sampled_from([*NAMES, "x-5d9f7c"])),
)
pods = st.builds(
    ObservedPod,
    namespace=st.sampled_from(["ml", "default", "a"]),
    name=st.sampled_from([*NAMES, "p1", "p2", "vllm-5d9f7c-x1"]),
    node=st.one_of(st.none(), st.just("n"), st.just("m")),
    phase=st.sampled_from(["Running", "Pending", "Succeeded"]),
    labels=st.dictionaries(
        st.sampled_from(["app", "app.kubernetes.io/name", "tier"]), st.sampled_from(NAMES), max_size=2
    ),
    owner=owner_refs,
    node_selector=st.dictionaries(
        st.sampled_from(["kubernetes.io/hostname", "nvidia.com/gpu.uuid", "zone", "x.uuid"]),
        st.sampled_from(["n", "m", "GPU-1234", " MIG-9", "eu"]),
        max_size=2,
    ),
    containers=st.lists(
        st.builds(
            ContainerResources,
            name=st.just("c"),
            requests=st.dictionaries(
                st.sampled_from([GPU_RESOURCE, *(resource_of(p) for p in PROFILES)]), st.integers(-1, 3), max_size=2
            ),
            limits=st.dictionaries(
                st.sampled_from([GPU_RESOURCE, *(resource_of(p) for p in PROFILES)]), st.integers(-1, 3), max_size=2
            ),
        ),
        max_size=2,
    ).map(tuple),
)


@settings(max_examples=400, deadline=None)
@given(plans, st.sampled_from(PROFILES), st.lists(st.tuples(pods, st.integers(1, 4)), max_size=8))
def test_assignment_is_the_reference_ones(plan: NodeSpec, profile: str, holders: list[tuple[ObservedPod, int]]) -> None:
    resource = resource_of(profile)
    fast_owners: dict[tuple[str, str], str | None] = {}
    slow_owners: dict[tuple[str, str], str | None] = {}
    fast = _assign(plan, resource, holders, fast_owners)
    slow = _reference_assign(plan, resource, holders, slow_owners)
    assert fast == slow
    assert list(fast) == list(slow)  # the same order too: the assignment is rendered as it is built
    assert fast_owners == slow_owners


def _reference_issues(
    pod: ObservedPod, plans: Mapping[str, NodeSpec], strategy: MigStrategy
) -> tuple[owners.WorkloadIssue, ...]:
    """owners.workload_issues as it was written first: every input computed for every pod."""
    out: list[owners.WorkloadIssue] = []
    requested = pod.requested()
    target = pod.node or pod.node_selector.get(owners.HOSTNAME_LABEL)
    plan = plans.get(target) if target is not None else None
    mig_node = plan is not None and any(g.mig_enabled for g in plan.gpus)
    asks_whole = requested.get(GPU_RESOURCE, 0) > 0
    if asks_whole and mig_node and strategy is MigStrategy.MIXED and plan is not None:
        profiles = sorted({p.profile for g in plan.gpus if g.mig_enabled for p in g.partitions})
        offer = ", ".join(resource_of(p) for p in profiles[:3]) or "nvidia.com/mig-<profile>"
        out.append(
            owners.WorkloadIssue(
                "MP549",
                f"pod {pod.key} asks for nvidia.com/gpu on {target}, whose plan cuts its GPUs into MIG partitions: "
                f"ask for a partition of a profile instead ({offer})",
            )
        )
    pins = [f"nodeSelector {k}={v}" for k, v in podrules.selector_pins(pod.node_selector)]
    if pins and any(n > 0 for n in requested.values()):
        out.append(
            owners.WorkloadIssue(
                "MP548",
                f"pod {pod.key} pins a node or GPU ({'; '.join(pins)}) instead of a profile: drop the selector and "
                "ask for nvidia.com/mig-<profile>, the scheduler then finds a node with a free partition",
            )
        )
    return tuple(out)


@settings(max_examples=400, deadline=None)
@given(pods, plans, plans, st.sampled_from(list(MigStrategy)))
def test_workload_issues_are_the_reference_ones(
    pod: ObservedPod, n: NodeSpec, m: NodeSpec, strategy: MigStrategy
) -> None:
    plans_by_node = {"n": n, "m": m}
    assert owners.workload_issues(pod, plans_by_node, strategy) == _reference_issues(pod, plans_by_node, strategy)
    assert owners.workload_issues(pod, {}, strategy) == _reference_issues(pod, {}, strategy)
