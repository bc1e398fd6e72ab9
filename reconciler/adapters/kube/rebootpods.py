"""Per node, the pods a reboot would end, tallied from the cluster-wide pod list one pod at a time.

mig-manager with WITH_REBOOT reboots the node when its MIG mode step fails (mig-parted
pkg/mig/reconfigure/reconfigure.go `Run`): every pod on it ends. Which of them are worth counting follows what
comes back by itself after a reboot and what kubectl drain can remove (k8s.io/kubectl/pkg/drain/filters.go):
- a finished pod (status.phase Succeeded or Failed) holds nothing and is not counted;
- a DaemonSet-managed pod (controlling ownerReference of kind DaemonSet) is recreated on the node by its
  controller, and drain never evicts it (`daemonSetFilter`): not counted;
- a mirror pod (annotation kubernetes.io/config.mirror) stands for a static pod the kubelet restarts from its
  manifest, and the API cannot delete it (`mirrorPodFilter`): not counted;
- every other bound pod is counted, terminating ones included (they run until their grace period ends).
A pod without a controlling owner is also tallied apart (`unreplicatedFilter`: drain refuses it without --force).

Cheap at 5,000 nodes: per node a count and at most REBOOT_NAMES_CAP light pods (the first by key), kept sorted
as pods arrive; a pod past the cap costs a comparison and a counter. Pure apart from being fed raw JSON.
"""

from __future__ import annotations

import bisect
import functools
import sys
from collections.abc import Mapping
from typing import Any

from reconciler.model.observed import MIRROR_POD_ANNOTATION, REBOOT_NAMES_CAP, NodePods, ObservedPod, OwnerRef

_FINISHED = frozenset({"Succeeded", "Failed"})
_MAX_NAME = 253  # a DNS subdomain: the longest name or namespace the API server accepts


# A named pod as the tally keeps it: (key, labels, owner kind, controlled, phase, terminating), the labels being the
# listed object's own mapping (a PodDisruptionBudget selects on them; the rest of the raw pod is not kept). The owner
# is its kind alone (interned: a handful of kinds for 100,000 pods), what drain decides on; its name is not kept.
# Made into a light ObservedPod only when the planner asks (NodePods.details).
_Entry = tuple[str, Any, str, bool, Any, bool]


class _Capped:
    """The first REBOOT_NAMES_CAP pods of a node by key, and how many there were in all."""

    __slots__ = ("count", "entries", "keys")

    def __init__(self) -> None:
        self.count = 0
        self.keys: list[str] = []
        self.entries: list[_Entry] = []

    def wants(self, key: str) -> bool:
        return len(self.keys) < REBOOT_NAMES_CAP or key < self.keys[-1]

    def add(self, entry: _Entry) -> None:
        key = entry[0]
        at = bisect.bisect_left(self.keys, key)
        if at < len(self.keys) and self.keys[at] == key:
            return  # listed twice (a page boundary moved): named once, counted twice (the safe side)
        self.keys.insert(at, key)
        self.entries.insert(at, entry)
        if len(self.keys) > REBOOT_NAMES_CAP:
            self.keys.pop()
            self.entries.pop()


class RebootTally:
    """Feed it every listed pod (`add`); `by_node()` is what ObservedState.node_pods carries.

    `add` runs for every pod of the cluster each cycle, so it asks the least it can: plain dict checks (the API's
    JSON decodes to dicts; anything else is not a pod) and one tuple per counted pod (tally_entry). `add_entry`
    counts such a tuple made earlier (a watch-fed cache keeps one per pod: kube/informer.py). The checks are
    isinstance, not `type(...) is dict`, so a dict subclass that records the keys read (test_pruned_pages_twin.py)
    is read alike."""

    def __init__(self) -> None:
        self._all: dict[str, _Capped] = {}
        self._bare: dict[str, _Capped] = {}

    def add(self, obj: Mapping[str, Any]) -> None:
        tallied = tally_entry(obj)
        if tallied is not None:
            self.add_entry(*tallied)

    def add_entry(self, node: str, entry: _Entry) -> None:
        """Count one pod of `node` as tally_entry made it (a listed pod, or one a watch-fed cache kept)."""
        key = entry[0]
        tally = self._all.get(node)
        if tally is None:
            tally = self._all[node] = _Capped()
        tally.count += 1
        if len(tally.keys) < REBOOT_NAMES_CAP or key < tally.keys[-1]:  # _Capped.wants, inlined: once per pod
            tally.add(entry)
        if not entry[3]:  # no controlling owner: drain refuses it without --force
            bare = self._bare.get(node)
            if bare is None:
                bare = self._bare[node] = _Capped()
            bare.count += 1
            if bare.wants(key):
                bare.add(entry)

    def by_node(self) -> dict[str, NodePods]:
        out: dict[str, NodePods] = {}
        for node, t in self._all.items():
            bare = self._bare.get(node)
            named, refused = tuple(t.entries), tuple(bare.entries) if bare is not None else ()
            out[node] = NodePods(
                count=t.count,
                names=tuple(t.keys),
                unreplicated_names=tuple(bare.keys) if bare is not None else (),
                unreplicated_count=bare.count if bare is not None else 0,
                details=functools.partial(self._details, node, named, refused),
            )
        return out

    def _details(
        self, node: str, named: tuple[_Entry, ...], refused: tuple[_Entry, ...]
    ) -> tuple[tuple[ObservedPod, ...], tuple[ObservedPod, ...]]:
        return tuple(_light_pod(e, node) for e in named), tuple(_light_pod(e, node) for e in refused)


def tally_entry(obj: Mapping[str, Any]) -> tuple[str, _Entry] | None:
    """The node a pod runs on and what the tally keeps of it, or None for a pod a reboot would not end (see the
    module docstring). Plain dict checks: the API's JSON decodes to dicts; anything else is not a pod."""
    spec = obj.get("spec")
    meta = obj.get("metadata")
    if not isinstance(spec, dict) or not isinstance(meta, dict):
        return None
    node = spec.get("nodeName")
    if type(node) is not str or not 0 < len(node) <= _MAX_NAME:
        return None  # not bound: a reboot of no node ends it
    status = obj.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    if type(phase) is not str:
        phase = None  # what no API server sends (a list, a map, a number): counted as a pod without a phase is
    elif phase in _FINISHED:
        return None
    annotations = meta.get("annotations")
    if annotations and isinstance(annotations, dict) and MIRROR_POD_ANNOTATION in annotations:
        return None
    # The controlling owner's kind (the first reference with controller: true), else the first owner's, as the
    # kube adapter's controller_of reads them.
    owner_kind, controlled = "", False
    refs = meta.get("ownerReferences")
    if refs and isinstance(refs, list):
        if len(refs) == 1:  # the common shape, one owner: it is both the first and the controlling one
            ref = refs[0] if isinstance(refs[0], dict) else None
        else:
            first = next((r for r in refs if isinstance(r, dict)), None)
            ref = next((r for r in refs if isinstance(r, dict) and r.get("controller") is True), first)
        if ref is not None:
            kind = ref.get("kind")
            owner_kind, controlled = (kind if type(kind) is str else ""), ref.get("controller") is True
    if controlled and owner_kind == "DaemonSet":
        return None
    namespace, name = meta.get("namespace"), meta.get("name")
    if type(namespace) is not str or type(name) is not str:
        return None  # never from a real API server; a pod that cannot be named cannot be evicted either
    if not (0 < len(namespace) <= _MAX_NAME and 0 < len(name) <= _MAX_NAME):
        return None
    terminating = bool(meta.get("deletionTimestamp"))
    entry = (f"{namespace}/{name}", meta.get("labels"), sys.intern(owner_kind), controlled, phase, terminating)
    return node, entry


def _light_pod(entry: _Entry, node: str) -> ObservedPod:
    """What drain needs of a pod it may evict: its name, labels (PodDisruptionBudget selectors), owner kind and
    whether it is terminating already; no requests (it may hold no GPU at all)."""
    key, raw_labels, owner_kind, controlled, phase, terminating = entry
    namespace, _, name = key.partition("/")
    labels = (
        {k: v for k, v in raw_labels.items() if type(k) is str and type(v) is str}
        if isinstance(raw_labels, dict)
        else {}
    )
    return ObservedPod(
        namespace=namespace,
        name=name,
        node=node,
        phase=phase if type(phase) is str and phase else "Pending",
        labels=labels,
        owner=OwnerRef(owner_kind, "", controller=controlled) if owner_kind or controlled else None,
        terminating=terminating,
    )
