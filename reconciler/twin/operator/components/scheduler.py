"""kube-scheduler on the twin: binds pending pods to a node that fits, or records why none does.

Which node fits, and the FailedScheduling text, are the pure reconciler/twin/operator/scheduler.py; this component
builds each node's view (the free units its kubelet has, less what pods bound but not yet admitted requested),
binds through the pods/binding subresource and writes the PodScheduled=False condition and one FailedScheduling
Event per distinct message (ASSUMPTIONS-operator.md "Scheduler and kubelet").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.twin.fleet import Fleet
from reconciler.twin.operator.cache import OperatorCache, PodInfo
from reconciler.twin.operator.components.kubelet import Kubelet
from reconciler.twin.operator.kubeobjects import now, suffix
from reconciler.twin.operator.names import MM_DS
from reconciler.twin.operator.scheduler import NodeView, fit, unschedulable_message
from reconciler.twin.operator.storeapi import StoreApi

__all__ = ["Scheduler"]


def _failed_scheduling_event(info: PodInfo, obj: dict[str, Any], msg: str, at: str) -> dict[str, Any]:
    """The core/v1 Event the default scheduler records for a pod it cannot place."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{info.name}.{suffix(info.uid + msg, 16)}", "namespace": info.namespace},
        "involvedObject": {
            "kind": "Pod",
            "namespace": info.namespace,
            "name": info.name,
            "uid": info.uid,
            "apiVersion": "v1",
            "resourceVersion": obj["metadata"].get("resourceVersion", ""),
        },
        "reason": "FailedScheduling",
        "message": msg,
        "source": {"component": "default-scheduler"},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
        "type": "Warning",
        "reportingComponent": "default-scheduler",
        "reportingInstance": "",
    }


def _after_binding(views: list[NodeView], chosen: str, requests: dict[str, int]) -> list[NodeView]:
    """The views once a pod asking for `requests` is bound to `chosen`."""
    return [
        NodeView(
            v.name,
            v.labels,
            v.unschedulable,
            {r: k - requests.get(r, 0) for r, k in v.free.items()} if v.name == chosen else v.free,
        )
        for v in views
    ]


class Scheduler:
    """One scheduling pass over the unbound Pending pods, oldest first."""

    def __init__(self, api: StoreApi, cache: OperatorCache, fleet: Fleet, kubelet: Kubelet) -> None:
        self.api = api
        self.cache = cache
        self.fleet = fleet
        self.kubelet = kubelet
        # The DRA extended-resource path (reconciler/twin/draextended.py), set by the ClusterTwin that runs the DRA
        # side: the pod's node when it placed the pod through a special ResourceClaim, None when it did not.
        self.extended: Callable[[dict[str, Any]], str | None] | None = None

    def schedule(self) -> None:
        pending = sorted(
            (p for p in self.cache.pods_on(None) if p.phase == "Pending" and not p.deleting),
            key=lambda p: (p.created, str(p.key)),
        )
        if not pending:
            return
        views = self._node_views()
        for info in pending:
            obj = self.api.get("pods", info.name, info.namespace)
            if obj is None:
                continue
            if self.extended is not None and self.extended(obj) is not None:
                continue  # bound through the DRA extended-resource path
            chosen, reasons = fit(obj, views)
            if chosen is not None:
                # The pods/binding subresource, as the real scheduler binds (spec.nodeName is immutable otherwise).
                self.api.store.bind(info.namespace, info.name, chosen)
                views = _after_binding(views, chosen, info.requests)
                continue
            msg = unschedulable_message(len(views), reasons)
            if info.sched_msg == msg:
                continue
            info.sched_msg = msg
            self._record_unschedulable(info, obj, msg)

    def _node_views(self) -> list[NodeView]:
        """Every node as the scheduler sees it; pods bound here but not yet admitted hold their request already."""
        with self.cache.lock:
            nodes = sorted(self.cache.nodes.items())
        views: list[NodeView] = []
        daemons = (self.cache.device_plugin_ds_name, MM_DS)
        for name, node in nodes:
            tw = self.fleet.nodes.get(name)
            free: dict[str, int] = {}
            if tw is not None:
                with tw.lock:
                    free = {r: len(u) for r, u in self.kubelet.free_units(name, tw).items()}
                for p in self.cache.pods_on(name):
                    if p.phase == "Pending" and p.app not in daemons:
                        for r, k in p.requests.items():
                            free[r] = free.get(r, 0) - k
            views.append(NodeView(name, node.labels, node.unschedulable, free))
        return views

    def _record_unschedulable(self, info: PodInfo, obj: dict[str, Any], msg: str) -> None:
        at = now()
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": msg,
            "lastProbeTime": None,
            "lastTransitionTime": at,
        }
        self.api.store.patch(
            "pods", info.name, {"status": {"conditions": [cond]}}, info.namespace, subresource="status"
        )
        self.api.store.create("events", _failed_scheduling_event(info, obj, msg, at), info.namespace)
