"""RebootTally.add's fast path (one ownerReference; one tally looked up at a time) tallies exactly what the
straightforward version did (kept here as the reference), over generated pods with hostile values: owner lists of
any length holding non-objects, controller flags that are not true, kinds that are not strings, odd names and
phases, mirror and terminating pods, more pods per node than the names cap."""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.kube import rebootpods
from reconciler.adapters.kube.rebootpods import RebootTally, _Capped
from reconciler.model.observed import MIRROR_POD_ANNOTATION


class _Reference(RebootTally):
    def add(self, obj: Any) -> None:
        """RebootTally.add as it was written first."""
        spec = obj.get("spec")
        meta = obj.get("metadata")
        if type(spec) is not dict or type(meta) is not dict:
            return
        node = spec.get("nodeName")
        if type(node) is not str or not 0 < len(node) <= rebootpods._MAX_NAME:
            return
        status = obj.get("status")
        phase = status.get("phase") if type(status) is dict else None
        if phase in rebootpods._FINISHED:
            return
        annotations = meta.get("annotations")
        if annotations and type(annotations) is dict and MIRROR_POD_ANNOTATION in annotations:
            return
        owner_kind, controlled = "", False
        refs = meta.get("ownerReferences")
        if refs and type(refs) is list:
            first = next((r for r in refs if type(r) is dict), None)
            ref = next((r for r in refs if type(r) is dict and r.get("controller") is True), first)
            if ref is not None:
                kind = ref.get("kind")
                owner_kind, controlled = (kind if type(kind) is str else ""), ref.get("controller") is True
        if controlled and owner_kind == "DaemonSet":
            return
        namespace, name = meta.get("namespace"), meta.get("name")
        if type(namespace) is not str or type(name) is not str:
            return
        if not (0 < len(namespace) <= rebootpods._MAX_NAME and 0 < len(name) <= rebootpods._MAX_NAME):
            return
        key = f"{namespace}/{name}"
        tallies = [self._all.get(node) or self._all.setdefault(node, _Capped())]
        if not controlled:
            tallies.append(self._bare.get(node) or self._bare.setdefault(node, _Capped()))
        entry: Any = None
        for tally in tallies:
            tally.count += 1
            if tally.wants(key):
                if entry is None:
                    terminating = bool(meta.get("deletionTimestamp"))
                    labels = meta.get("labels")
                    entry = (key, labels, sys.intern(owner_kind), controlled, phase, terminating)
                tally.add(entry)


ODD = st.one_of(st.none(), st.integers(-1, 1), st.just([]), st.just({}), st.just("x" * 300))


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`valid` nine times in ten, else a hostile value: most generated pods get far enough to be tallied."""
    return st.integers(0, 9).flatmap(lambda i: valid if i else ODD)


REFS = st.lists(
    mostly(
        st.fixed_dictionaries(
            {},
            optional={
                "kind": mostly(st.sampled_from(["ReplicaSet", "DaemonSet", "Job", "Node", ""])),
                "name": st.sampled_from(["o", ""]),
                "controller": st.one_of(st.booleans(), st.just("true"), st.none(), st.just(1)),
            },
        )
    ),
    max_size=3,
)
PODS = st.fixed_dictionaries(
    {
        "metadata": mostly(
            st.fixed_dictionaries(
                {
                    "name": mostly(st.sampled_from([f"p{i}" for i in range(30)])),
                    "namespace": mostly(st.sampled_from(["a", "b", "kube-system"])),
                },
                optional={
                    "ownerReferences": mostly(REFS),
                    "annotations": st.one_of(
                        st.dictionaries(st.sampled_from([MIRROR_POD_ANNOTATION, "x"]), st.just("v"), max_size=2), ODD
                    ),
                    "labels": st.one_of(st.dictionaries(st.sampled_from(["app", "k"]), st.just("v"), max_size=2), ODD),
                    "deletionTimestamp": st.one_of(st.just("2026-12-04T00:00:00Z"), ODD),
                },
            )
        ),
        "spec": mostly(st.fixed_dictionaries({"nodeName": mostly(st.sampled_from(["n1", "n2", ""]))})),
    },
    optional={
        "status": st.one_of(
            st.fixed_dictionaries(
                {}, optional={"phase": st.sampled_from(["Running", "Pending", "Succeeded", "Failed", "", None])}
            ),
            st.none(),
            st.just([]),
        )
    },
)


def _view(t: RebootTally) -> Any:
    return {
        node: (p.count, p.names, p.unreplicated_names, p.unreplicated_count, p.details())
        for node, p in sorted(t.by_node().items())
    }


@settings(max_examples=400, deadline=None)
@given(st.lists(PODS, max_size=60))
def test_the_tally_is_the_reference_ones(pods: list[dict[str, Any]]) -> None:
    fast, slow = RebootTally(), _Reference()
    for p in pods:
        fast.add(p)
        slow.add(p)
    assert _view(fast) == _view(slow)


def test_one_owner_of_every_kind_is_read_as_before() -> None:
    """The one-owner shapes the fast path reads, each against the reference."""
    refs: list[Any] = [
        {"kind": "Job", "controller": False},
        {"kind": "ReplicaSet", "controller": True},
        {"kind": "DaemonSet", "controller": True},
        {"kind": "DaemonSet"},
        {"kind": 7, "controller": True},
        {"controller": "true"},
        "ReplicaSet",
        None,
    ]
    for ref in refs:
        pod = {"metadata": {"name": "p", "namespace": "a", "ownerReferences": [ref]}, "spec": {"nodeName": "n1"}}
        fast, slow = RebootTally(), _Reference()
        fast.add(pod)
        slow.add(pod)
        assert _view(fast) == _view(slow), ref
