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
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.model.observed import MIRROR_POD_ANNOTATION, REBOOT_NAMES_CAP, NodePods, ObservedPod, OwnerRef

_FINISHED = frozenset({"Succeeded", "Failed"})


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 253 else None


class _Capped:
    """The first REBOOT_NAMES_CAP pods of a node by key, and how many there were in all."""

    __slots__ = ("count", "keys", "pods")

    def __init__(self) -> None:
        self.count = 0
        self.keys: list[str] = []
        self.pods: list[ObservedPod] = []

    def wants(self, key: str) -> bool:
        return len(self.keys) < REBOOT_NAMES_CAP or key < self.keys[-1]

    def add(self, pod: ObservedPod) -> None:
        at = bisect.bisect_left(self.keys, pod.key)
        if at < len(self.keys) and self.keys[at] == pod.key:
            return  # listed twice (a page boundary moved): named once, counted twice (the safe side)
        self.keys.insert(at, pod.key)
        self.pods.insert(at, pod)
        if len(self.keys) > REBOOT_NAMES_CAP:
            self.keys.pop()
            self.pods.pop()


class RebootTally:
    """Feed it every listed pod (`add`); `by_node()` is what ObservedState.node_pods carries. `owner_of` reads a
    pod's metadata into its controlling owner (the kube adapter's one reader, controller_of)."""

    def __init__(self, owner_of: Callable[[Mapping[str, Any]], OwnerRef | None]) -> None:
        self._owner_of = owner_of
        self._all: dict[str, _Capped] = {}
        self._bare: dict[str, _Capped] = {}

    def add(self, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec")
        meta = obj.get("metadata")
        if not isinstance(spec, Mapping) or not isinstance(meta, Mapping):
            return
        node = _str(spec.get("nodeName"))
        if node is None:
            return  # not bound: a reboot of no node ends it
        status = obj.get("status")
        if isinstance(status, Mapping) and status.get("phase") in _FINISHED:
            return
        annotations = meta.get("annotations")
        if isinstance(annotations, Mapping) and MIRROR_POD_ANNOTATION in annotations:
            return
        owner = self._owner_of(meta)
        if owner is not None and owner.controller and owner.kind == "DaemonSet":
            return
        bare = owner is None or not owner.controller
        namespace, name = _str(meta.get("namespace")), _str(meta.get("name"))
        if namespace is None or name is None:
            return  # never from a real API server; a pod that cannot be named cannot be evicted either
        key = f"{namespace}/{name}"
        tallies = [self._all.setdefault(node, _Capped())]
        if bare:
            tallies.append(self._bare.setdefault(node, _Capped()))
        pod: ObservedPod | None = None
        for t in tallies:
            t.count += 1
            if not t.wants(key):
                continue  # past the cap: counted only
            if pod is None:
                pod = _light_pod(meta, namespace, name, node, status, owner)
            t.add(pod)

    def by_node(self) -> dict[str, NodePods]:
        out: dict[str, NodePods] = {}
        for node, t in self._all.items():
            bare = self._bare.get(node)
            out[node] = NodePods(
                count=t.count,
                pods=tuple(t.pods),
                unreplicated=tuple(bare.pods) if bare is not None else (),
                unreplicated_count=bare.count if bare is not None else 0,
            )
        return out


def _light_pod(
    meta: Mapping[str, Any], namespace: str, name: str, node: str, status: Any, owner: OwnerRef | None
) -> ObservedPod:
    """What drain needs of a pod it may evict: its name, labels (PodDisruptionBudget selectors), owner and
    whether it is terminating already; no requests (it may hold no GPU at all)."""
    raw_labels = meta.get("labels")
    labels = (
        {k: v for k, v in raw_labels.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(raw_labels, Mapping)
        else {}
    )
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return ObservedPod(
        namespace=namespace,
        name=name,
        node=node,
        phase=phase if isinstance(phase, str) and phase else "Pending",
        labels=labels,
        owner=owner,
        terminating=bool(meta.get("deletionTimestamp")),
    )
