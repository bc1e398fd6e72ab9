"""kube-controller-manager's DaemonSet controller for the operator's two operands: one device-plugin pod and one
mig-manager pod per node matching the template's nodeSelector, and the DaemonSets' status.

A device-plugin pod whose `pod-template-generation` is older than the DaemonSet's generation is replaced (a
ClusterPolicy change, or `kubectl rollout restart`); it is deleted gracefully, which the twin's kubelet finishes at
once except on a node in `stuck_terminating`. Pod names are deterministic "random" suffixes so that two twins fed
the same writes end up with the same names.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from reconciler.twin.fleet import TwinNode
from reconciler.twin.operator.cache import DaemonPod, OperatorCache, PodInfo, PodKey
from reconciler.twin.operator.components.deviceplugin import DevicePlugin
from reconciler.twin.operator.deviceplugin import Advertised
from reconciler.twin.operator.kubeobjects import pod_status, suffix
from reconciler.twin.operator.names import MM_CONTAINER, MM_DS
from reconciler.twin.operator.storeapi import StoreApi
from reconciler.twin.operator.workqueue import Job, NodeWork, WorkQueue

__all__ = ["DaemonSetController"]


def _selects(ds: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """The DaemonSet's template nodeSelector matches the node's labels."""
    selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _owner(ds_name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": ds_name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


class DaemonSetController:
    """Daemon pods of the device-plugin and mig-manager DaemonSets, and their status."""

    def __init__(self, api: StoreApi, cache: OperatorCache, plugin: DevicePlugin, queue: WorkQueue) -> None:
        self.api = api
        self.cache = cache
        self.plugin = plugin
        self.queue = queue
        self._revision: tuple[str, str] = ("", "")  # (template generation, controller-revision-hash)

    def adopt(self, info: PodInfo, pod: Mapping[str, Any], tw: TwinNode | None) -> None:
        """A daemon pod already in the store when the twin starts (its plugin read the GPUs when it started)."""
        node = info.node
        if not node or info.deleting:
            return
        if info.app == MM_DS:
            self.cache.mm_pods[node] = info.name
        if info.app == self.cache.device_plugin_ds_name:
            self.cache.dp_pods[node] = DaemonPod(info.name, info.generation or "")
            if tw is not None and node not in self.cache.dp_state:
                known = self.cache.nodes.get(node)
                self.cache.dp_state[node] = self.plugin.evaluate(tw, pod, known.labels if known is not None else {})

    # ---------------------------------------------------------------- device plugin
    def sync_device_plugin(self, name: str, tw: TwinNode, labels: dict[str, str]) -> None:
        """The node's device-plugin pod: gone when the node is no longer selected or the pod's generation is old,
        created (the plugin starts and reads the GPUs) when selected and missing."""
        ds = self.cache.device_plugin_ds
        desired = ds is not None and _selects(ds, labels)
        gen = str(ds["metadata"].get("generation", 1)) if ds is not None else ""
        have = self.cache.dp_pods.get(name)
        if have is not None and (not desired or have.generation != gen):
            del self.cache.dp_pods[name]
            self.cache.dp_state.pop(name, None)
            # The real DaemonSet controller deletes gracefully; the twin's kubelet finishes at once unless stuck.
            graceful = name in self.cache.stuck_terminating
            self.api.delete_pod(have.name, self.cache.namespace, graceful=graceful)
            have = None
            self.queue.add(Job.DAEMONSET_STATUS)
        if desired and have is None:
            pod = self.render_dp_pod(name)
            if pod is not None:
                self.create_dp_pod(name, pod, self.plugin.evaluate(tw, pod, labels))
            self.queue.add(Job.DAEMONSET_STATUS)

    def render_dp_pod(self, node: str) -> dict[str, Any] | None:
        """The device-plugin pod the DaemonSet controller creates on `node` (None without a DaemonSet)."""
        ds = self.cache.device_plugin_ds
        if ds is None:
            return None
        ds_name = self.cache.device_plugin_ds_name
        gen = str(ds["metadata"].get("generation", 1))
        template = ds["spec"]["template"]
        tmeta = template.get("metadata") or {}
        if self._revision[0] != gen:  # one hash per template generation, not per node
            self._revision = (gen, hashlib.sha1(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10])
        spec = copy.deepcopy(template.get("spec") or {})
        spec["nodeName"] = node
        meta: dict[str, Any] = {
            "name": f"{ds_name}-{suffix(f'{node}/{gen}')}",
            "namespace": self.cache.namespace,
            "labels": {
                **(tmeta.get("labels") or {}),
                "controller-revision-hash": self._revision[1],
                "pod-template-generation": gen,
            },
            "ownerReferences": [_owner(ds_name, ds["metadata"].get("uid", ""))],
        }
        if tmeta.get("annotations"):
            meta["annotations"] = dict(tmeta["annotations"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def create_dp_pod(self, node: str, pod: dict[str, Any], adv: Advertised) -> None:
        """Create the device-plugin pod, its log and its status (Ready, or CrashLoopBackOff with the error)."""
        name = self.api.create_daemon_pod(self.cache.device_plugin_ds_name, node, pod)
        with self.cache.lock:
            self.cache.dp_pods[node] = DaemonPod(name, pod["metadata"]["labels"].get("pod-template-generation", ""))
            self.cache.dp_state[node] = adv
        self.plugin.show(node, name, pod, adv)

    def device_plugin_gone(self, node: str, pod: str) -> None:
        """A device-plugin pod left the store: the node has no plugin until the next one is made."""
        with self.cache.lock:
            again = self.cache.pods.get(PodKey(self.cache.namespace, pod))
        if again is not None and not again.deleting:
            return  # a new pod of the same name (a Terminating one finished late): that one stays
        have = self.cache.dp_pods.get(node)
        if have is not None and have.name == pod:
            del self.cache.dp_pods[node]
            self.cache.dp_state.pop(node, None)
            self.queue.add(NodeWork(node), Job.DAEMONSET_STATUS)

    # ---------------------------------------------------------------- mig-manager
    def sync_mig_manager(self, node: str, labels: Mapping[str, str]) -> None:
        """The mig-manager DaemonSet's pod on `node` (Running; its log is the node's mig_manager_log)."""
        ds = self.cache.mig_manager_ds
        desired = ds is not None and _selects(ds, labels)
        have = self.cache.mm_pods.get(node)
        if have is not None and not desired:
            del self.cache.mm_pods[node]
            self.api.delete_pod(have, self.cache.namespace)
            self.queue.add(Job.DAEMONSET_STATUS)
        elif have is None and desired and ds is not None:
            self.create_mm_pod(node, ds)

    def create_mm_pod(self, node: str, ds: dict[str, Any]) -> None:
        template = ds["spec"]["template"]
        spec = copy.deepcopy(template.get("spec") or {})
        spec["nodeName"] = node
        ns = self.cache.namespace
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{MM_DS}-{suffix(f'{MM_DS}/{node}')}",
                "namespace": ns,
                "labels": {
                    **((template.get("metadata") or {}).get("labels") or {}),
                    "pod-template-generation": str(ds["metadata"].get("generation", 1)),
                },
                "ownerReferences": [_owner(MM_DS, ds["metadata"].get("uid", ""))],
            },
            "spec": spec,
        }
        name = self.api.create_daemon_pod(MM_DS, node, pod)
        with self.cache.lock:
            self.cache.mm_pods[node] = name
        self.queue.add(Job.DAEMONSET_STATUS)
        lines = self.cache.mig_manager_log.get(node)
        if lines:
            self.api.set_pod_log(name, "\n".join(lines) + "\n", container=MM_CONTAINER)
        containers = [c["name"] for c in spec.get("containers") or []]
        self.api.patch_pod_status(name, ns, pod_status(node, containers, ready=True))

    # ---------------------------------------------------------------- nodes leaving, status
    def node_gone(self, name: str) -> None:
        """A node left the store: its daemon pods go with it."""
        mm = self.cache.mm_pods.pop(name, None)
        if mm is not None:
            self.api.delete_pod(mm, self.cache.namespace)
        dp = self.cache.dp_pods.pop(name, None)
        self.cache.dp_state.pop(name, None)
        if dp is not None:
            self.api.delete_pod(dp.name, self.cache.namespace)
        self.queue.add(Job.DAEMONSET_STATUS)

    def write_status(self) -> None:
        """Both DaemonSets' status (the device plugin's counts a crash-looping plugin as not ready)."""
        ds = self.cache.device_plugin_ds
        if ds is not None:
            gen = str(ds["metadata"].get("generation", 1))
            dp_pods = self.cache.dp_pods
            ready = sum(1 for n in dp_pods if (st := self.cache.dp_state.get(n)) is not None and st.ok)
            updated = sum(1 for p in dp_pods.values() if p.generation == gen)
            self._write_status(ds, len(dp_pods), ready, updated)
        mm = self.cache.mig_manager_ds
        if mm is not None:
            n = len(self.cache.mm_pods)
            self._write_status(mm, n, n, n)

    def _write_status(self, ds: dict[str, Any], current: int, ready: int, updated: int) -> None:
        """What the DaemonSet controller reports (kubectl get ds / rollout status read it)."""
        with self.cache.lock:
            nodes = list(self.cache.nodes.values())
        desired = sum(1 for node in nodes if _selects(ds, node.labels))
        status = {
            "currentNumberScheduled": current,
            "desiredNumberScheduled": desired,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": ready,
            "numberUnavailable": max(desired - ready, 0),
            "updatedNumberScheduled": updated,
            "observedGeneration": int(ds["metadata"].get("generation", 1)),
        }
        have = ds.get("status") or {}
        if all(have.get(k) == v for k, v in status.items()):
            return
        if not ready:
            status.pop("numberAvailable")
        ds["status"] = {**have, **status}  # our cached copy, so the ClusterPolicy state below sees it at once
        self.api.store.patch(
            "daemonsets.apps", ds["metadata"]["name"], {"status": status}, self.cache.namespace, subresource="status"
        )
