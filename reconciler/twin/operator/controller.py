"""The GPU Operator's behaviour on the twin: controllers subscribed to the API store, settling deterministically.

`GpuOperator` is the coordinator: one informer (informer.py) turns the store's committed writes into the shared
cache (cache.py) and dirty work keys, one worker thread (workqueue.py) takes the keys in order and runs the
components, each a class with one job in reconciler/twin/operator/components/; `settle()` waits until the queue
is empty and no write is in flight. Components and their sources (tests/reference/stack-facts.md):

* operator (§1.6, components/clusterpolicy.py): renders `spec.migManager` (config name, env) into the mig-manager
  DaemonSet (TransformMIGManager) and ClusterPolicy `spec.mig.strategy` into the device-plugin
  DaemonSet's env (`MIG_STRATEGY`, `NVIDIA_MIG_MONITOR_DEVICES`) and `spec.devicePlugin.config` into `CONFIG_FILE`,
  the `available-configs` volume and the config-manager sidecar (`DEFAULT_CONFIG`, `NODE_LABEL`) (rendering.py);
  sets the default `nvidia.com/mig.config=all-disabled` label (§3.1); writes the ClusterPolicy status.
* DaemonSet controller (components/daemonsets.py): one device-plugin pod per node matching the template's
  nodeSelector (`nvidia.com/gpu.deploy.device-plugin=true`); pods whose `pod-template-generation` is older than
  the DaemonSet's generation (a ClusterPolicy change, or `kubectl rollout restart`) are replaced by the rolling
  update, `maxUnavailable` (1 by default) nodes at a time (rollingupdate.py), a new pod Ready
  `operand_ready_seconds` after it is created. Likewise one mig-manager pod per node.
* device plugin (§1.3/1.4, components/deviceplugin.py): evaluates the node's GPUs once, when its pod starts (like
  the real plugin), with the strategy of its env or, without `MIG_STRATEGY`, of its config file
  (`flags.migStrategy`, entry chosen by node label `nvidia.com/device-plugin.config` or `DEFAULT_CONFIG`) — env
  wins (§1.2). It advertises into node capacity/allocatable; it registers a resource only where it has a device
  for it, and resources once advertised and no longer are kept at 0 (kubelet nodestatus/setters.go MachineInfo
  keeps registered names). On error: pod Running but not Ready (CrashLoopBackOff) and the error in its log.
* GFD (§2, §1.5, components/gfd.py): labels recomputed from the GPUs whenever the node is reconciled (GFD
  relabels periodically), unless paused.
* config-manager sidecar (§1.6, components/deviceplugin.py): a change of node label
  `nvidia.com/device-plugin.config` makes the plugin re-read its config and the GPUs in place (SIGHUP).
* mig-manager (§3.3, components/migmanager.py): on a new `nvidia.com/mig.config` value: assert → `success`
  without disruption; else `pending`, pause `nvidia.com/gpu.deploy.*`, wait for the device-plugin pod to leave,
  apply the mig-parted config (reconciler/twin/operator/migparted.py), re-enable the labels and write `success` or
  `failed`. A value is processed once: `failed` stays until the label changes. Its DaemonSet `nvidia-mig-manager`
  has a pod per GPU node whose log is the run's log (the failure reason included). It reads its config from the
  ConfigMap as the kubelet has mounted it (components/configmounts.py).
* kubelet (components/kubelet.py): admits pods bound to a node (allocating free devices of the advertised
  resources, which the pods then hold: NVML processes, IN_USE on destroy), finishes graceful deletions, releases
  devices, answers PodResources `List`.
* scheduler (components/scheduler.py over reconciler/twin/operator/scheduler.py): binds pending pods or records
  FailedScheduling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.twin.fleet import Fleet
from reconciler.twin.operator.cache import OperatorCache
from reconciler.twin.operator.components.clusterpolicy import ClusterPolicyController
from reconciler.twin.operator.components.configmounts import ConfigMapMounts
from reconciler.twin.operator.components.daemonsets import DaemonSetController
from reconciler.twin.operator.components.deviceplugin import DevicePlugin
from reconciler.twin.operator.components.gfd import FeatureDiscovery
from reconciler.twin.operator.components.kubelet import Kubelet, PodResources
from reconciler.twin.operator.components.migmanager import MigManager
from reconciler.twin.operator.components.scheduler import Scheduler
from reconciler.twin.operator.deviceplugin import Advertised, Unit
from reconciler.twin.operator.informer import Informer
from reconciler.twin.operator.names import DEPLOY_LABELS, MIG_CONFIG, MIG_CONFIG_STATE, PAUSED
from reconciler.twin.operator.rendering import (
    device_plugin_daemonset,
    mig_manager_daemonset,
    operator_daemonset,
    render_device_plugin_template,
)
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

__all__ = [
    "DEPLOY_LABELS",
    "MIG_CONFIG",
    "MIG_CONFIG_STATE",
    "PAUSED",
    "GpuOperator",
    "device_plugin_daemonset",
    "mig_manager_daemonset",
    "operator_daemonset",
    "render_device_plugin_template",
]


class GpuOperator:
    """All GPU Operator controllers of one twin cluster; thread-safe; start() / settle() / stop()."""

    def __init__(
        self,
        store: Any,
        fleet: Fleet,
        *,
        config_propagation_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        operand_ready_seconds: float = 0.0,
    ) -> None:
        self.store = store
        self.fleet = fleet
        self.clock = clock
        s = fleet.settings
        self.cache = OperatorCache(s.namespace, s.cluster_policy, s.device_plugin_daemonset)
        self.errors: list[str] = []
        self.queue = WorkQueue(self.cache.lock)
        self._unsubscribe: Callable[[], None] | None = None
        self.api = api = StoreApi(store, s.namespace)
        # kubelet: a mounted ConfigMap lags the API object by up to config_propagation_seconds (configmounts.py)
        self.mounts = ConfigMapMounts(self.cache, clock, config_propagation_seconds)
        self.informer = Informer(self.cache, fleet, self.mounts, self.queue)
        self.policy = ClusterPolicyController(api, self.cache)
        self.plugin = DevicePlugin(api, self.cache, self.queue)
        # a new operand pod is Ready this long after it is created (the rolling update's pace; 0: at once)
        self.daemonsets = DaemonSetController(
            api, self.cache, self.plugin, self.queue, clock=clock, ready_seconds=operand_ready_seconds
        )
        self.gfd = FeatureDiscovery(api, self.cache, self.plugin)
        self.kubelet = Kubelet(api, self.cache, fleet, self.queue)
        self.scheduler = Scheduler(api, self.cache, fleet, self.kubelet)
        self.mig_manager = MigManager(api, self.cache, self.mounts, self.policy.default_mig_config, self.queue, clock)
        self.mig_manager.on_reboot = self._node_rebooted

    # ================================================================ reboots
    def _node_rebooted(self, node: str) -> None:
        """mig-manager ran `reboot` on the node (mig-parted reconfigure.go `Run`, WITH_REBOOT): the kubelet's graceful
        node shutdown ends every pod on it (kubernetes pkg/kubelet/nodeshutdown nodeshutdown_manager_linux.go: phase
        Failed, reason `Terminated`, message `Pod was terminated in response to imminent node shutdown.`) and their
        devices are freed. [assumption] DaemonSet pods (the operator's operands) are left Running: their controller
        brings them back after the reboot, which the twin does not replay."""
        for info in self.cache.pods_on(node):
            obj = self.api.get("pods", info.name, info.namespace)
            owners = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
            if any(o.get("kind") == "DaemonSet" for o in owners) or info.phase in ("Succeeded", "Failed"):
                continue
            self.kubelet.release(info.key)
            self.api.patch_pod_status(
                info.name,
                info.namespace,
                {
                    "phase": "Failed",
                    "reason": "Terminated",
                    "message": "Pod was terminated in response to imminent node shutdown.",
                },
            )

    # ================================================================ lifecycle
    def load_caches(self) -> None:
        """Read the operator's view of the cluster from the store (also used to populate a new twin)."""
        pods = self.informer.load(self.api)
        for name, node in self.cache.nodes.items():
            self.mig_manager.adopt(name, node.labels)
        for info, obj in pods:
            self.daemonsets.adopt(info, obj, self.fleet.nodes.get(info.node or ""))
        self.kubelet.adopt(self.fleet.pods)

    def start(self) -> None:
        self.load_caches()
        self._unsubscribe = self.store.subscribe(self.informer.on_event)
        self.queue.start(self._work, self.errors)
        # Anything left pending at start (user pods without a node) gets a scheduling pass.
        self.mark(Job.SCHEDULE, Job.DAEMONSET_STATUS)

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.queue.stop()

    def mark(self, *keys: Work | str) -> None:
        """Queue work; a plain string is a cluster-wide job by its value ("global", "dsstatus", "sched")."""
        self.queue.add(*(Job(k) if isinstance(k, str) else k for k in keys))

    def mark_node(self, node: str) -> None:
        self.mark(NodeWork(node))

    def settle(self, timeout: float = 30.0) -> None:
        """Block until every controller is quiescent (no queued work, no write in flight)."""
        self.queue.settle(lambda: self.store.resource_version, timeout)

    def tick(self) -> None:
        """Look at the clock again: nodes whose mig-manager is waiting re-check their timeout."""
        self.mark(*(NodeWork(n) for n in self.mig_manager.waiting_nodes()))
        # daemon pods whose container start time has come, then the rolling update's next step
        self.mark(*(NodeWork(n) for n in self.daemonsets.starting_nodes()), Job.DAEMONSET_STATUS)

    # ================================================================ hooks for ClusterTwin
    @property
    def mig_manager_ds(self) -> dict[str, Any] | None:
        return self.cache.mig_manager_ds

    @property
    def mig_manager_log(self) -> dict[str, list[str]]:
        """node → the lines of its mig-manager runs (also its pod's log)."""
        return self.cache.mig_manager_log

    @property
    def stuck_terminating(self) -> set[str]:
        """Nodes whose kubelet cannot finish the device-plugin pod's deletion (drift case mig-manager-wedged)."""
        return self.cache.stuck_terminating

    def processed(self, node: str, value: str) -> None:
        """Make mig-manager consider `value` already handled on `node` (drift injection writes states itself)."""
        self.mig_manager.processed(node, value)

    def expire_client_waits(self, node: str) -> None:
        """Let mig-manager's wait for the GPU clients on `node` run out now (the 5 minutes skipped)."""
        self.mig_manager.expire_client_waits(node)

    def projected(self, cm_name: str) -> None:
        """Drift injection: the ConfigMap's current content counts as projected into every pod already."""
        self.mounts.projected(cm_name)

    def mounted_config_text(self, cm_name: str) -> str | None:
        """config.yaml as the kubelet has projected ConfigMap `cm_name` into the mig-manager pod."""
        return self.mounts.mounted_text(cm_name)

    def holders_on(self, node: str, gpu_index: int) -> dict[str, list[Unit]]:
        return self.kubelet.holders_on(node, gpu_index)

    def pods_on(self, node: str) -> dict[str, str]:
        with self.cache.lock:
            return {str(k): node for k in self.cache.by_node.get(node, {})}

    def pod_resources(self, node: str) -> PodResources:
        """What the node's kubelet answers to PodResources `List` (components/kubelet.py)."""
        return self.kubelet.pod_resources(node)

    def restart_device_plugin(self, node: str) -> None:
        with self.cache.lock:
            have = self.cache.dp_pods.get(node)
        if have is not None:
            self.api.delete_pod(have.name, self.cache.namespace)

    def gfd_strategy(self, pod_labels: Mapping[str, str]) -> str:
        return self.gfd.strategy(pod_labels)

    def dp_strategy(self, pod: Mapping[str, Any], labels: Mapping[str, str]) -> str:
        return self.plugin.strategy(pod, labels)

    def render_dp_pod(self, node: str) -> dict[str, Any] | None:
        return self.daemonsets.render_dp_pod(node)

    def create_dp_pod(self, node: str, pod: dict[str, Any], adv: Advertised) -> None:
        self.daemonsets.create_dp_pod(node, pod, adv)

    def create_mm_pod(self, node: str, ds: dict[str, Any]) -> None:
        self.daemonsets.create_mm_pod(node, ds, at_start=True)

    # A bulk load of the starting fleet (ClusterTwin): the pods rendered, named, recorded and shown as the calls
    # above do it, but written by the caller in one Store.load.
    def render_mm_pod(self, node: str, ds: dict[str, Any]) -> dict[str, Any]:
        return self.daemonsets.render_mm_pod(node, ds)

    def free_daemon_pod_name(self, ds: str, node: str, name: str, taken: set[str]) -> str:
        return self.api.free_daemon_pod_name(ds, node, name, taken)

    def started_dp_pod(self, node: str, name: str, pod: dict[str, Any], adv: Advertised) -> dict[str, Any]:
        return self.daemonsets.started_dp_pod(node, name, pod, adv)

    def started_mm_pod(self, node: str, name: str, pod: dict[str, Any]) -> dict[str, Any]:
        return self.daemonsets.started_mm_pod(node, name, pod)

    # ================================================================ worker
    def _work(self, key: Work) -> None:
        if key is Job.OPERATOR:
            self.policy.reconcile()
            self.mark(Job.DAEMONSET_STATUS)
        elif key is Job.DAEMONSET_STATUS:
            self.daemonsets.roll()
            self.daemonsets.write_status()
            self.policy.write_status()
        elif key is Job.SCHEDULE:
            self.scheduler.schedule()
        elif isinstance(key, MigManagerPodGone):
            self.mig_manager.pod_gone(key.node, key.pod)
        elif isinstance(key, DevicePluginPodGone):
            self.daemonsets.device_plugin_gone(key.node, key.pod)
        elif isinstance(key, ReleasePod):
            self.kubelet.release(key.pod)
        elif isinstance(key, NodeWork):
            self._reconcile_node(key.node)

    def _reconcile_node(self, name: str) -> None:
        """Every per-node component, in order; mig-manager first, and alone when it wrote the node (the MODIFIED
        event brings the node back with fresh labels)."""
        tw = self.fleet.nodes.get(name)
        node = self.api.get("nodes", name)
        if node is None:
            self.daemonsets.node_gone(name)
            return
        if tw is None:
            return  # not a GPU node of this fleet
        labels = dict(node["metadata"].get("labels") or {})
        with tw.lock:
            if self.mig_manager.reconcile(name, tw, labels):
                return
            self.kubelet.finish_deletions(name)
            self.daemonsets.sync_device_plugin(name, tw, labels)
            self.plugin.config_manager(name, tw, labels)
            self.daemonsets.sync_mig_manager(name, labels)
            self.kubelet.node_status(node)
            self.gfd.relabel(name, tw, labels)
            self.kubelet.admit(name, tw)
