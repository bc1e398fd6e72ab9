"""kube-controller-manager's DaemonSet controller for the operator's two operands: one device-plugin pod and one
mig-manager pod per node matching the template's nodeSelector, and the DaemonSets' status.

A daemon pod whose `pod-template-generation` is older than its DaemonSet's generation (a ClusterPolicy change, or
`kubectl rollout restart`) is replaced by the rolling update (`roll`, rollingupdate.py: kubernetes
`pkg/controller/daemon/update.go` `rollingUpdate`, maxUnavailable 1 by default): at most that many nodes are
without an available pod at once. A new pod is Ready `ready_seconds` after it is created, on the twin's clock
([assumption] one figure for the DaemonSet controller's create, the kubelet's image/volume/container start and the
status update; the operands have no readiness probe, so Ready is their container started): until then the device
plugin serves nothing and mig-manager's process is not running. A device-plugin pod is deleted gracefully, which the
twin's kubelet finishes at once except on a node in `stuck_terminating`. Pod names are deterministic "random"
suffixes so that two twins fed the same writes end up with the same names.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.twin.fleet import TwinNode
from reconciler.twin.operator import rollingupdate
from reconciler.twin.operator.cache import DaemonPod, OperatorCache, PodInfo, PodKey
from reconciler.twin.operator.components.deviceplugin import DevicePlugin
from reconciler.twin.operator.deviceplugin import Advertised
from reconciler.twin.operator.kubeobjects import now, pod_status, suffix
from reconciler.twin.operator.names import MM_CONTAINER, MM_DS
from reconciler.twin.operator.storeapi import StoreApi
from reconciler.twin.operator.workqueue import Job, NodeWork, WorkQueue

__all__ = ["DaemonSetController"]


def _selects(ds: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """The DaemonSet's template nodeSelector matches the node's labels."""
    selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _mig_manager_mount(pod: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What a mig-manager pod's container was started with: the ConfigMap behind its `mig-parted-config` volume and
    its literal env (TransformMIGManager writes both into the template; a pod keeps them for its life)."""
    spec = pod.get("spec") or {}
    cm = ""
    for v in spec.get("volumes") or []:
        if v.get("name") == "mig-parted-config":
            cm = str((v.get("configMap") or {}).get("name") or "")
    env: tuple[tuple[str, str], ...] = ()
    for c in spec.get("containers") or []:
        if c.get("name") == MM_CONTAINER:
            env = tuple((str(e["name"]), str(e.get("value", ""))) for e in c.get("env") or [] if "name" in e)
    return cm, env


def _pending_status(node: str) -> dict[str, Any]:
    """A daemon pod bound to its node whose containers are not started yet (ContainerCreating)."""
    at = now()
    reason = {"reason": "ContainersNotReady", "message": "containers with unready status"}
    return {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": at, "lastProbeTime": None},
            {"type": "Ready", "status": "False", "lastTransitionTime": at, "lastProbeTime": None, **reason},
        ],
        "hostIP": "10.0.0.1",
        "startTime": at,
    }


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

    def __init__(
        self,
        api: StoreApi,
        cache: OperatorCache,
        plugin: DevicePlugin,
        queue: WorkQueue,
        *,
        clock: Callable[[], float] = time.monotonic,
        ready_seconds: float = 0.0,
    ) -> None:
        self.api = api
        self.cache = cache
        self.plugin = plugin
        self.queue = queue
        self.clock = clock
        self.ready_seconds = ready_seconds
        self._revision: tuple[str, str] = ("", "")  # (template generation, controller-revision-hash)
        self._mm_shown: set[str] = set()  # mig-manager pods whose Ready status is written
        self._selected_memo: dict[str, tuple[int, dict[str, Any], list[str]]] = {}

    def adopt(self, info: PodInfo, pod: Mapping[str, Any], tw: TwinNode | None) -> None:
        """A daemon pod already in the store when the twin starts (its plugin read the GPUs when it started)."""
        node = info.node
        if not node or info.deleting:
            return
        if info.app == MM_DS:
            cm, env = _mig_manager_mount(pod)
            self.cache.mm_pods[node] = DaemonPod(info.name, info.generation or "", config_map=cm, env=env)
            self._mm_shown.add(info.name)
        if info.app == self.cache.device_plugin_ds_name:
            self.cache.dp_pods[node] = DaemonPod(info.name, info.generation or "")
            if tw is not None and node not in self.cache.dp_state:
                known = self.cache.nodes.get(node)
                self.cache.dp_state[node] = self.plugin.evaluate(tw, pod, known.labels if known is not None else {})

    # ---------------------------------------------------------------- device plugin
    def sync_device_plugin(self, name: str, tw: TwinNode, labels: dict[str, str]) -> None:
        """The node's device-plugin pod: gone when the node is no longer selected, created when selected and
        missing (Pending for ready_seconds), started (the plugin reads the GPUs) once its time has come. An old
        generation's pod is the rolling update's to replace (`roll`)."""
        ds = self.cache.device_plugin_ds
        desired = ds is not None and _selects(ds, labels)
        have = self.cache.dp_pods.get(name)
        if have is not None and not desired:
            self._delete_dp(name, have)
            have = None
        if desired and have is None:
            pod = self.render_dp_pod(name)
            if pod is not None:
                if self.ready_seconds > 0:
                    self._create_pending_dp(name, pod)
                else:
                    self.create_dp_pod(name, pod, self.plugin.evaluate(tw, pod, labels))
            self.queue.add(Job.DAEMONSET_STATUS)
        elif have is not None and name not in self.cache.dp_state and have.started(self.clock()):
            pod = self.api.get("pods", have.name, self.cache.namespace)
            if pod is not None:  # the container starts: the plugin reads the GPUs now (like the real one)
                adv = self.plugin.evaluate(tw, pod, labels)
                with self.cache.lock:
                    self.cache.dp_state[name] = adv
                self.plugin.show(name, have.name, pod, adv)
                self.queue.add(Job.DAEMONSET_STATUS)

    def _delete_dp(self, name: str, have: DaemonPod) -> None:
        del self.cache.dp_pods[name]
        self.cache.dp_state.pop(name, None)
        # The real DaemonSet controller deletes gracefully; the twin's kubelet finishes at once unless stuck.
        graceful = name in self.cache.stuck_terminating
        self.api.delete_pod(have.name, self.cache.namespace, graceful=graceful)
        self.queue.add(Job.DAEMONSET_STATUS)

    def _create_pending_dp(self, node: str, pod: dict[str, Any]) -> None:
        """A device-plugin pod whose container starts ready_seconds from now (no plugin serves until then)."""
        name = self.api.create_daemon_pod(self.cache.device_plugin_ds_name, node, pod)
        ready_at = self.clock() + self.ready_seconds
        with self.cache.lock:
            gen = pod["metadata"]["labels"].get("pod-template-generation", "")
            self.cache.dp_pods[node] = DaemonPod(name, gen, ready_at)
        self.api.patch_pod_status(name, self.cache.namespace, _pending_status(node))

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
        """The mig-manager DaemonSet's pod on `node` (its log is the node's mig_manager_log): gone when the node is
        no longer selected, created when selected and missing, shown Ready once started. An old generation's pod is
        the rolling update's to replace (`roll`)."""
        ds = self.cache.mig_manager_ds
        desired = ds is not None and _selects(ds, labels)
        have = self.cache.mm_pods.get(node)
        if have is not None and not desired:
            del self.cache.mm_pods[node]
            self.api.delete_pod(have.name, self.cache.namespace)
            self.queue.add(Job.DAEMONSET_STATUS)
        elif have is None and desired and ds is not None:
            self.create_mm_pod(node, ds, at_start=False)
        elif have is not None and have.name not in self._mm_shown and have.started(self.clock()):
            self._show_mm(node, have.name)
            self.queue.add(NodeWork(node), Job.DAEMONSET_STATUS)  # its process starts: mig-manager's turn

    def create_mm_pod(self, node: str, ds: dict[str, Any], *, at_start: bool = True) -> None:
        """The node's mig-manager pod from the DaemonSet's template; started at once when the twin is populated
        (`at_start`), else ready_seconds from now."""
        pod = self.render_mm_pod(node, ds)
        name = self.api.create_daemon_pod(MM_DS, node, pod)
        t = self.clock()
        ready_at = float("-inf") if at_start else t + max(self.ready_seconds, 0.0)
        self._record_mm(node, name, pod, ready_at)
        if ready_at <= t:
            self._show_mm(node, name)
            self.queue.add(NodeWork(node))  # a new process: mig-manager runs the node's current label once
        else:
            self.api.patch_pod_status(name, self.cache.namespace, _pending_status(node))

    def _record_mm(self, node: str, name: str, pod: dict[str, Any], ready_at: float) -> None:
        cm, env = _mig_manager_mount(pod)
        gen = str(pod["metadata"]["labels"].get("pod-template-generation", ""))
        with self.cache.lock:
            self.cache.mm_pods[node] = DaemonPod(name, gen, ready_at, cm, env)
        self.queue.add(Job.DAEMONSET_STATUS)

    def started_mm_pod(self, node: str, name: str, pod: dict[str, Any]) -> dict[str, Any]:
        """A mig-manager pod the twin loads in bulk as it starts (ClusterTwin): recorded and queued as
        create_mm_pod(at_start=True) does; returns the status `_show_mm` would write."""
        self._record_mm(node, name, pod, float("-inf"))
        status = self._shown_mm_status(node, name)
        self.queue.add(NodeWork(node))  # a new process: mig-manager runs the node's current label once
        return status

    def started_dp_pod(self, node: str, name: str, pod: dict[str, Any], adv: Advertised) -> dict[str, Any]:
        """A device-plugin pod the twin loads in bulk as it starts (ClusterTwin): recorded as create_dp_pod does,
        its log set; returns the status `DevicePlugin.show` would write."""
        with self.cache.lock:
            self.cache.dp_pods[node] = DaemonPod(name, pod["metadata"]["labels"].get("pod-template-generation", ""))
            self.cache.dp_state[node] = adv
        return self.plugin.shown(name, pod, node, adv)

    def render_mm_pod(self, node: str, ds: dict[str, Any]) -> dict[str, Any]:
        """The mig-manager pod the DaemonSet controller creates on `node`."""
        template = ds["spec"]["template"]
        spec = copy.deepcopy(template.get("spec") or {})
        spec["nodeName"] = node
        ns = self.cache.namespace
        gen = str(ds["metadata"].get("generation", 1))
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                # The first generation keeps the name pods have always had; later ones differ, as generateName's do.
                "name": f"{MM_DS}-{suffix(f'{MM_DS}/{node}' if gen == '1' else f'{MM_DS}/{node}/{gen}')}",
                "namespace": ns,
                "labels": {
                    **((template.get("metadata") or {}).get("labels") or {}),
                    "pod-template-generation": gen,
                },
                "ownerReferences": [_owner(MM_DS, ds["metadata"].get("uid", ""))],
            },
            "spec": spec,
        }
        return pod

    def _show_mm(self, node: str, name: str) -> None:
        """The mig-manager pod's log so far and its Running, Ready status."""
        self.api.patch_pod_status(name, self.cache.namespace, self._shown_mm_status(node, name))

    def _shown_mm_status(self, node: str, name: str) -> dict[str, Any]:
        """Record the mig-manager pod as shown, write its log so far; its Running, Ready status."""
        self._mm_shown.add(name)
        lines = self.cache.mig_manager_log.get(node)
        if lines:
            self.api.set_pod_log(name, "\n".join(lines) + "\n", container=MM_CONTAINER)
        ds = self.cache.mig_manager_ds
        containers = [MM_CONTAINER]
        if ds is not None:
            containers = [c["name"] for c in ds["spec"]["template"]["spec"].get("containers") or []] or containers
        return pod_status(node, containers, ready=True)

    # ---------------------------------------------------------------- rolling update
    def starting_nodes(self) -> list[str]:
        """Nodes with a daemon pod created but not started yet (they look at the clock again on tick)."""
        with self.cache.lock:
            state = self.cache.dp_state
            dp = [n for n, p in self.cache.dp_pods.items() if n not in state and p.ready_at != float("-inf")]
            mm = [n for n, p in self.cache.mm_pods.items() if p.name not in self._mm_shown]
        return sorted(set(dp) | set(mm))

    def roll(self) -> None:
        """Both DaemonSets' rolling update (rollingupdate.py): delete the old pods the budget allows now; the
        nodes' work then creates the new ones (the DaemonSet controller's manage)."""
        t = self.clock()
        dp_ds = self.cache.device_plugin_ds
        if dp_ds is not None and not rollingupdate.on_delete(dp_ds) and self._any_old(dp_ds, self.cache.dp_pods):
            gen = str(dp_ds["metadata"].get("generation", 1))
            state = self.cache.dp_state
            nodes = self._selected(dp_ds)
            pods = [
                rollingupdate.NodePods(
                    n,
                    (p := self.cache.dp_pods.get(n)) is not None,
                    p is not None and p.generation == gen,
                    p is not None and p.started(t) and (st := state.get(n)) is not None and st.ok,
                )
                for n in nodes
            ]
            for n in rollingupdate.to_replace(pods, rollingupdate.max_unavailable(dp_ds, len(nodes))):
                have = self.cache.dp_pods.get(n)
                if have is not None:
                    self._delete_dp(n, have)
                    self.queue.add(NodeWork(n))
        mm_ds = self.cache.mig_manager_ds
        if mm_ds is not None and not rollingupdate.on_delete(mm_ds) and self._any_old(mm_ds, self.cache.mm_pods):
            gen = str(mm_ds["metadata"].get("generation", 1))
            nodes = self._selected(mm_ds)
            pods = [
                rollingupdate.NodePods(
                    n,
                    (q := self.cache.mm_pods.get(n)) is not None,
                    q is not None and q.generation == gen,
                    q is not None and q.started(t),
                )
                for n in nodes
            ]
            for n in rollingupdate.to_replace(pods, rollingupdate.max_unavailable(mm_ds, len(nodes))):
                old = self.cache.mm_pods.get(n)
                if old is not None:
                    # Left in mm_pods: its DELETED event tells mig-manager that the process died (pod_gone).
                    self.api.delete_pod(old.name, self.cache.namespace)

    @staticmethod
    def _any_old(ds: Mapping[str, Any], pods: Mapping[str, DaemonPod]) -> bool:
        """Some pod is of an older template (else the rolling update has nothing to do)."""
        gen = str(ds["metadata"].get("generation", 1))
        return any(p.generation != gen for p in pods.values())

    def _selected(self, ds: Mapping[str, Any]) -> list[str]:
        """The nodes the DaemonSet selects, memoised until a node's labels or the nodeSelector change (every
        rollout step asks twice, over every node)."""
        selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
        key = str(ds["metadata"].get("name", ""))
        with self.cache.lock:
            version = self.cache.node_labels_version
            memo = self._selected_memo.get(key)
            if memo is not None and memo[0] == version and memo[1] == selector:
                return memo[2]
            nodes = [n for n, node in self.cache.nodes.items() if _selects(ds, node.labels)]
            self._selected_memo[key] = (version, dict(selector), nodes)
            return nodes

    # ---------------------------------------------------------------- nodes leaving, status
    def node_gone(self, name: str) -> None:
        """A node left the store: its daemon pods go with it."""
        mm = self.cache.mm_pods.pop(name, None)
        if mm is not None:
            self.api.delete_pod(mm.name, self.cache.namespace)
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
            gen = str(mm["metadata"].get("generation", 1))
            t = self.clock()
            mm_pods = self.cache.mm_pods
            ready = sum(1 for p in mm_pods.values() if p.name in self._mm_shown and p.started(t))
            updated = sum(1 for p in mm_pods.values() if p.generation == gen)
            self._write_status(mm, len(mm_pods), ready, updated)

    def _write_status(self, ds: dict[str, Any], current: int, ready: int, updated: int) -> None:
        """What the DaemonSet controller reports (kubectl get ds / rollout status read it)."""
        desired = len(self._selected(ds))
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
