"""observation.holder_owner gives what its straightforward version gives (kept here as the reference: every owner of
the inventory in name order, the first the pod's identities name): listed pods whose namespace, name, labels or
controlling owner name one owner, several or none, and holders the listing does not have."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic.observe.observation import holder_owner
from reconciler.logic.observe.occupancy import pod_identities
from reconciler.model.observed import ObservedPod, OwnerRef

# Owner names that are also namespaces, pod names, label values or a ReplicaSet's Deployment.
NAMES = ["ml", "vllm", "a", "b", "vllm-5d9f7c", "ml/a", "team-b", ""]


def _reference(pod_key: str, owners: set[str], pods: dict[str, ObservedPod]) -> str | None:
    pod = pods.get(pod_key)
    if pod is not None:
        ids = pod_identities(pod)
    else:
        ns, _, name = pod_key.partition("/")
        ids = frozenset({ns, name, pod_key})
    for owner in sorted(owners):
        if owner in ids:
            return owner
    return None


pods = st.builds(
    ObservedPod,
    namespace=st.sampled_from(["ml", "a", "team-b"]),
    name=st.sampled_from([*NAMES[:-1], "p1", "vllm-5d9f7c-x1"]),
    node=st.just("n"),
    phase=st.just("Running"),
    labels=st.dictionaries(
        st.sampled_from(["app", "app.kubernetes.io/name", "app.kubernetes.io/instance", "tier"]),
        st.sampled_from(NAMES),
        max_size=3,
    ),
    owner=st.one_of(
        st.none(), st.builds(OwnerRef, st.sampled_from(["ReplicaSet", "Job"]), st.sampled_from(["vllm-5d9f7c", "b"]))
    ),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(pods, max_size=6), st.sets(st.sampled_from(NAMES)), st.sampled_from(["ml/p1", "x/ml", "a/b", "ml/a"]))
def test_holder_owner_is_the_reference_one(listed: list[ObservedPod], owners: set[str], unlisted: str) -> None:
    by_key = {p.key: p for p in listed}
    for key in [*by_key, unlisted]:
        assert holder_owner(key, owners, by_key) == _reference(key, owners, by_key)
        assert holder_owner(key, sorted(owners), by_key) == _reference(key, owners, by_key)  # any iterable of owners
