"""The operator's informers: the store's committed writes → the shared cache, and → the work they make dirty.

One callback for every event the store commits (subscribed by GpuOperator.start), and one initial list
(`load`). Each kind of object has its handler; each returns the work keys its event makes dirty, marked under
the cache lock in the same breath as the cache update. What makes what dirty:

* a Node: that node (and, when its scheduling properties change, a scheduling pass: kube-scheduler
  `pkg/scheduler/eventhandlers.go` `nodeSchedulingPropertiesChange`, spec.unschedulable and labels);
* a Pod: its node, or a scheduling pass when unbound; when it is deleted, the release of its devices and, for a
  daemon pod, the bookkeeping of its DaemonSet's component;
* the ClusterPolicy's spec, or the device-plugin DaemonSet's generation or annotations (the operator watches the
  DaemonSets it owns): the operator's rendering, every node and the rolling update; likewise the mig-manager
  DaemonSet's (any other change of it: every node);
* a ConfigMap of the operator's namespace: a new version for the kubelet's mounts (configmounts.py) and, for the
  device plugin's config (read continuously by GFD), every node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reconciler.twin.fleet import Fleet
from reconciler.twin.operator.cache import OperatorCache, PodInfo, PodKey, pod_head
from reconciler.twin.operator.components.configmounts import ConfigMapMounts
from reconciler.twin.operator.names import MM_DS
from reconciler.twin.operator.storeapi import StoreApi
from reconciler.twin.operator.workqueue import (
    DevicePluginPodGone,
    Job,
    MigManagerPodGone,
    NodeWork,
    ReleasePod,
    Work,
    WorkQueue,
)

__all__ = ["Informer"]

_Handler = Callable[[str, dict[str, Any], Mapping[str, Any]], list[Work]]


class Informer:
    """Keeps `cache` in step with the store and marks the work on `queue`."""

    def __init__(self, cache: OperatorCache, fleet: Fleet, mounts: ConfigMapMounts, queue: WorkQueue) -> None:
        self.cache = cache
        self.fleet = fleet
        self.mounts = mounts
        self.queue = queue
        self._handlers: dict[str, _Handler] = {
            "Node": self._node,
            "Pod": self._pod,
            "ClusterPolicy": self._cluster_policy,
            "DaemonSet": self._daemonset,
            "ConfigMap": self._configmap,
            # kube-scheduler's DRA plugin requeues Pending pods when devices or classes appear or change
            # (dynamicresources.go EventsToRegister: ResourceSlice and DeviceClass add/update): a pod waiting for
            # a MIG device (the extended-resource path, reconciler/twin/draextended.py) is tried again.
            "ResourceSlice": self._dra_event,
            "DeviceClass": self._dra_event,
        }

    def load(self, api: StoreApi) -> list[tuple[PodInfo, dict[str, Any]]]:
        """Read the operator's view of the cluster from the store; returns the DaemonSets' pods with their objects
        (the other pods' objects are read one at a time and not kept: a fleet has 100,000s)."""
        c = self.cache
        store = api.store
        c.cluster_policy = api.get("clusterpolicies.nvidia.com", c.cluster_policy_name)
        c.device_plugin_ds = api.get("daemonsets.apps", c.device_plugin_ds_name, c.namespace)
        c.mig_manager_ds = api.get("daemonsets.apps", MM_DS, c.namespace)
        for cm in store.list("configmaps", c.namespace):
            c.configmaps[cm["metadata"]["name"]] = cm
            self.mounts.loaded(cm["metadata"]["name"], (cm.get("data") or {}).get("config.yaml"))
        for n in store.list("nodes"):
            c.remember_node(n)
        daemons = (MM_DS, c.device_plugin_ds_name)
        out = []
        for raw, whole in store.each_lazy("pods"):
            head = pod_head(raw)  # most pods are read for a few fields: only those are decoded
            if head is not None and (head["metadata"].get("labels") or {}).get("app") not in daemons:
                c.remember_pod(head)
                continue
            p = whole()
            info = c.remember_pod(p)
            if info.app in daemons:
                out.append((info, p))
        return out

    def on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        """The store's committed-write callback (ADDED, MODIFIED, DELETED)."""
        handler = self._handlers.get(str(obj.get("kind")))
        meta = obj.get("metadata") or {}
        with self.cache.lock:
            keys = handler(event_type, obj, meta) if handler is not None else []
            self.queue.add(*keys)

    def _dra_event(self, event_type: str, obj: dict[str, Any], meta: Mapping[str, Any]) -> list[Work]:
        return [Job.SCHEDULE] if event_type != "DELETED" else []

    def _every_node(self) -> list[Work]:
        return [NodeWork(n) for n in self.fleet.nodes]

    def _node(self, event_type: str, obj: dict[str, Any], meta: Mapping[str, Any]) -> list[Work]:
        name = meta.get("name", "")
        if event_type == "DELETED":
            self.cache.forget_node(name)
            return [NodeWork(name), Job.SCHEDULE, Job.DAEMONSET_STATUS]
        before = self.cache.nodes.get(name)
        after = self.cache.remember_node(obj)
        if before is not None and before != after:
            # kube-scheduler moves unschedulable pods back to its active queue when a node's scheduling
            # properties change (pkg/scheduler/eventhandlers.go, nodeSchedulingPropertiesChange:
            # spec.unschedulable, labels): an uncordon lets a Pending replacement in.
            return [NodeWork(name), Job.SCHEDULE]
        return [NodeWork(name)]

    def _pod(self, event_type: str, obj: dict[str, Any], meta: Mapping[str, Any]) -> list[Work]:
        if event_type != "DELETED":
            info = self.cache.remember_pod(obj)
            if info.node:
                return [NodeWork(info.node)]
            return [Job.SCHEDULE] if info.phase == "Pending" else []
        key = PodKey(meta.get("namespace", ""), meta.get("name", ""))
        gone = self.cache.forget_pod(key)
        keys: list[Work] = [ReleasePod(key), Job.SCHEDULE]
        if gone is not None and gone.node:
            if gone.app == self.cache.device_plugin_ds_name:
                keys.append(DevicePluginPodGone(gone.node, gone.name))
            if gone.app == MM_DS:
                keys.append(MigManagerPodGone(gone.node, gone.name))
            keys.append(NodeWork(gone.node))
        return keys

    def _cluster_policy(self, event_type: str, obj: dict[str, Any], meta: Mapping[str, Any]) -> list[Work]:
        if meta.get("name", "") != self.cache.cluster_policy_name:
            return []
        old_spec = (self.cache.cluster_policy or {}).get("spec")
        self.cache.cluster_policy = obj if event_type != "DELETED" else None
        if event_type == "DELETED" or obj.get("spec") != old_spec:  # status-only writes change nothing
            return [Job.OPERATOR, *self._every_node()]
        return []

    def _daemonset(self, event_type: str, obj: dict[str, Any], meta: Mapping[str, Any]) -> list[Work]:
        name = meta.get("name", "")
        if meta.get("namespace") != self.cache.namespace:
            return []
        if name == self.cache.device_plugin_ds_name:
            old_meta = (self.cache.device_plugin_ds or {}).get("metadata", {})
            self.cache.device_plugin_ds = obj if event_type != "DELETED" else None
            # The operator watches the DaemonSets it owns: a spec or annotation change (its hash) re-renders.
            if (
                event_type == "DELETED"
                or meta.get("generation") != old_meta.get("generation")
                or meta.get("annotations") != old_meta.get("annotations")
            ):
                return [Job.OPERATOR, *self._every_node(), Job.DAEMONSET_STATUS]
            return []
        if name == MM_DS:
            old_meta = (self.cache.mig_manager_ds or {}).get("metadata", {})
            self.cache.mig_manager_ds = obj if event_type != "DELETED" else None
            if meta.get("generation") != old_meta.get("generation") or meta.get("annotations") != old_meta.get(
                "annotations"
            ):
                # a new template: the rolling update (DAEMONSET_STATUS) replaces the old pods; an edit the operator
                # did not render is overwritten (OPERATOR)
                return [Job.OPERATOR, *self._every_node(), Job.DAEMONSET_STATUS]
            return self._every_node()
        return []

    def _configmap(self, event_type: str, obj: dict[str, Any], meta: Mapping[str, Any]) -> list[Work]:
        name = meta.get("name", "")
        if meta.get("namespace") != self.cache.namespace:
            return []
        if event_type == "DELETED":
            self.cache.configmaps.pop(name, None)
        else:
            self.cache.configmaps[name] = obj
        self.mounts.written(name, None if event_type == "DELETED" else (obj.get("data") or {}).get("config.yaml"))
        # Only the device-plugin/GFD config is read continuously (by GFD); mig-manager reads its
        # ConfigMap when a run starts and the device plugin when its pod starts.
        if self.cache.cluster_policy_spec("devicePlugin", "config").get("name") == name:
            return self._every_node()
        return []
