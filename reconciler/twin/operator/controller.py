"""The GPU Operator's behaviour on the twin: controllers subscribed to the API store, settling deterministically.

One worker thread takes "dirty" keys (a node, the scheduler, the operator's global state) from an ordered
queue fed by the store's committed-write callbacks, and runs level-triggered reconcilers; `settle()` waits until
the queue is empty and no write is in flight. Components and their sources (tests/reference/stack-facts.md):

* operator (§1.6): renders ClusterPolicy `spec.mig.strategy` into the device-plugin DaemonSet's env
  (`MIG_STRATEGY`, `NVIDIA_MIG_MONITOR_DEVICES`) and `spec.devicePlugin.config` into `CONFIG_FILE`, the
  `available-configs` volume and the config-manager sidecar (`DEFAULT_CONFIG`, `NODE_LABEL`); sets the default
  `nvidia.com/mig.config=all-disabled` label (§3.1).
* DaemonSet controller: one device-plugin pod per node matching the template's nodeSelector
  (`nvidia.com/gpu.deploy.device-plugin=true`); a pod whose `pod-template-generation` is older than the
  DaemonSet's generation is replaced (a ClusterPolicy change, or `kubectl rollout restart`).
* device plugin (§1.3/1.4): evaluates the node's GPUs once, when its pod starts (like the real plugin), with
  the strategy of its env or, without `MIG_STRATEGY`, of its config file (`flags.migStrategy`, entry chosen by
  node label `nvidia.com/device-plugin.config` or `DEFAULT_CONFIG`) — env wins (§1.2). It advertises into node
  capacity/allocatable; it registers a resource only where it has a device for it, and resources once
  advertised and no longer are kept at 0 (kubelet nodestatus/setters.go MachineInfo keeps registered names).
  On error: pod Running but not Ready (CrashLoopBackOff) and the error in its log.
* GFD (§2, §1.5): labels recomputed from the GPUs whenever the node is reconciled (GFD relabels
  periodically), unless paused.
* config-manager sidecar (§1.6): a change of node label `nvidia.com/device-plugin.config` makes the plugin re-read
  its config and the GPUs in place (SIGHUP).
* mig-manager (§3.3): on a new `nvidia.com/mig.config` value: assert → `success` without disruption; else
  `pending`, pause `nvidia.com/gpu.deploy.*`, wait for the device-plugin pod to leave, apply the mig-parted
  config (reconciler/twin/operator/migparted.py), re-enable the labels and write `success` or `failed`. A value
  is processed once: `failed` stays until the label changes. Its DaemonSet `nvidia-mig-manager` has a pod per GPU
  node whose log is the run's log (the failure reason included).
* kubelet: admits pods bound to a node (allocating free devices of the advertised resources, which the pods
  then hold: NVML processes, IN_USE on destroy), finishes graceful deletions, releases devices.
* scheduler (reconciler/twin/operator/scheduler.py): binds pending pods or records FailedScheduling.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from reconciler.twin.fleet import Fleet, TwinNode
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.operator import deviceplugin, gfd, migparted, scheduler
from reconciler.twin.operator.deviceplugin import Advertised, Unit

__all__ = [
    "DEPLOY_LABELS",
    "MIG_CONFIG",
    "MIG_CONFIG_STATE",
    "PAUSED",
    "GpuOperator",
    "device_plugin_daemonset",
    "render_device_plugin_template",
]

log = logging.getLogger(__name__)

MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
PAUSED = "paused-for-mig-change"
DEPLOY_LABELS = (
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
    "nvidia.com/gpu.deploy.client",
)
CLIENT_LABEL = "nvidia.com/gpu.deploy.client"
DP_SELECTOR = "nvidia.com/gpu.deploy.device-plugin"
MM_DS = "nvidia-mig-manager"  # stack-facts §3.1
MM_SELECTOR = "nvidia.com/gpu.deploy.mig-manager"
MM_CONTAINER = "nvidia-mig-manager"
MM_IMAGE = "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0"
DP_CONTAINER = "nvidia-device-plugin"
DP_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
CONFIG_MANAGER = "config-manager"
DP_CONFIG_LABEL = "nvidia.com/device-plugin.config"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s rand.SafeEncodeString alphabet


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _suffix(text: str, n: int = 5) -> str:
    digest = hashlib.sha1(text.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:n])


# ------------------------------------------------------------------------------------------- rendering
def _strategy_env(cp: Mapping[str, Any]) -> list[dict[str, str]]:
    """applyMIGConfiguration (object_controls.go ~2787)."""
    strategy = ((cp.get("spec") or {}).get("mig") or {}).get("strategy") or ""
    if not strategy:
        return [{"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"}]
    env = [{"name": "MIG_STRATEGY", "value": strategy}]
    if strategy != "none":
        env.append({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"})
    return env


def render_device_plugin_template(template: Mapping[str, Any], cp: Mapping[str, Any]) -> dict[str, Any]:
    """The DaemonSet pod template with the ClusterPolicy's strategy and devicePlugin.config applied."""
    out = copy.deepcopy(dict(template))
    spec = out.setdefault("spec", {})
    dp_cfg = ((cp.get("spec") or {}).get("devicePlugin") or {}).get("config") or {}
    cfg_name = str(dp_cfg.get("name") or "")
    containers = [c for c in spec.get("containers") or [] if c.get("name") != CONFIG_MANAGER]
    for c in containers:
        if c.get("name") != DP_CONTAINER:
            continue
        managed = {"MIG_STRATEGY", "NVIDIA_MIG_MONITOR_DEVICES", "CONFIG_FILE"}
        env = [e for e in c.get("env") or [] if e.get("name") not in managed]
        env += _strategy_env(cp)
        if cfg_name:
            env.append({"name": "CONFIG_FILE", "value": "/config/config.yaml"})
        c["env"] = env
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != "available-configs"]
    if cfg_name:
        containers.append(
            {
                "name": CONFIG_MANAGER,
                "image": DP_IMAGE,
                "command": ["config-manager"],
                "env": [
                    {"name": "NODE_LABEL", "value": DP_CONFIG_LABEL},
                    {"name": "DEFAULT_CONFIG", "value": str(dp_cfg.get("default") or "")},
                    {"name": "SIGNAL", "value": "1"},
                ],
            }
        )
        volumes.append({"name": "available-configs", "configMap": {"name": cfg_name}})
    spec["containers"] = containers
    if volumes:
        spec["volumes"] = volumes
    else:
        spec.pop("volumes", None)
    return out


def device_plugin_daemonset(name: str, namespace: str, cp: Mapping[str, Any]) -> dict[str, Any]:
    """The device-plugin DaemonSet as the operator creates it (only the fields the twin needs)."""
    labels = {"app": name}
    template = {
        "metadata": {"labels": dict(labels)},
        "spec": {
            "nodeSelector": {DP_SELECTOR: "true"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "system-node-critical",
            "containers": [
                {
                    "name": DP_CONTAINER,
                    "image": DP_IMAGE,
                    "command": ["nvidia-device-plugin"],
                    "env": [{"name": "PASS_DEVICE_SPECS", "value": "true"}],
                    "securityContext": {"privileged": True},
                }
            ],
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": render_device_plugin_template(template, cp),
        },
    }


def mig_manager_daemonset(namespace: str, cp: Mapping[str, Any]) -> dict[str, Any]:
    """The mig-manager DaemonSet (§3.1: nodeSelector nvidia.com/gpu.deploy.mig-manager=true), fields the twin needs."""
    mm = (cp.get("spec") or {}).get("migManager") or {}
    cfg = (mm.get("config") or {}).get("name") or ""
    env = [{"name": "GPU_CLIENTS_FILE", "value": "/gpu-clients/clients.yaml"}]
    if cfg:
        env.append({"name": "CONFIG_FILE", "value": "/mig-parted-config/config.yaml"})
    else:
        env.append({"name": "DEFAULT_CONFIG_FILE", "value": "/mig-parted-config/config-default.yaml"})
    labels = {"app": MM_DS}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": MM_DS, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "nodeSelector": {MM_SELECTOR: "true"},
                    "hostPID": True,
                    "hostIPC": True,
                    "containers": [
                        {
                            "name": MM_CONTAINER,
                            "image": MM_IMAGE,
                            "command": ["nvidia-mig-manager"],
                            "env": env,
                            "securityContext": {"privileged": True},
                        }
                    ],
                    "volumes": [
                        {"name": "mig-parted-config", "configMap": {"name": cfg or "default-mig-parted-config"}},
                        {"name": "gpu-clients", "configMap": {"name": "default-gpu-clients"}},
                    ],
                },
            },
        },
    }


def _env(pod: Mapping[str, Any], container: str) -> dict[str, str]:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            return {e["name"]: str(e.get("value", "")) for e in c.get("env") or [] if "name" in e}
    return {}


def _config_map_name(pod: Mapping[str, Any]) -> str | None:
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if v.get("name") == "available-configs":
            name = (v.get("configMap") or {}).get("name")
            return str(name) if name else None
    return None


@dataclass(slots=True)
class _Pod:
    key: str
    name: str
    namespace: str
    node: str | None
    phase: str
    uid: str
    created: str
    requests: dict[str, int]
    app: str | None
    generation: str | None
    deleting: bool
    sched_msg: str | None = None
    containers: tuple[str, ...] = ()  # spec.containers[].name, in order (the kubelet's PodResources lists them)


@dataclass(slots=True)
class _MigRun:
    value: str
    captured: dict[str, str] = field(default_factory=dict)  # deploy labels when the run started


class GpuOperator:
    """All GPU Operator controllers of one twin cluster; thread-safe; start() / settle() / stop()."""

    def __init__(
        self,
        store: Any,
        fleet: Fleet,
        *,
        config_propagation_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.fleet = fleet
        # kubelet: a ConfigMap volume is refreshed on the pod's periodic sync (syncFrequency, 1m by default) from
        # its ConfigMap manager's cache (Watch, or a TTL cache of 1m), so mig-manager's mounted config.yaml lags
        # the API object by up to "sync period + cache propagation delay" (kubernetes.io, "Mounted ConfigMaps are
        # updated automatically"). The twin projects the newest version at least this old.
        self.config_propagation_seconds = config_propagation_seconds
        self.clock = clock
        self._cm_versions: dict[str, list[tuple[float, str | None]]] = {}
        s = fleet.settings
        self.ns = s.namespace
        self.cp_name = s.cluster_policy
        self.ds_name = s.device_plugin_daemonset
        self._cv = threading.Condition()
        self._dirty: dict[str, None] = {}
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        # caches fed by events (touched by the worker and the callback; guarded by _cv)
        self._cp: dict[str, Any] | None = None
        self._ds: dict[str, Any] | None = None
        self._mm_ds: dict[str, Any] | None = None
        self._mm_pods: dict[str, str] = {}  # node → mig-manager pod name
        self._dp_label: dict[str, str] = {}  # node → nvidia.com/device-plugin.config seen by its config-manager
        self._configmaps: dict[str, dict[str, Any]] = {}
        self._nodes: dict[str, tuple[dict[str, str], bool]] = {}  # name → (labels, unschedulable)
        self._pods: dict[str, _Pod] = {}
        self._by_node: dict[str | None, dict[str, _Pod]] = {}  # nodeName (None: unbound) → pods, for O(pods on node)
        # worker-only state
        self._dp_pods: dict[str, tuple[str, str]] = {}  # node → (pod name, template generation)
        self._dp_state: dict[str, Advertised] = {}
        self._allocations: dict[str, list[tuple[str, Unit]]] = {}  # pod key → [(node, unit)]
        # the kubelet's device manager checkpoint: pod key → [(container, resource, device ID)], IDs fixed at
        # allocation (a device destroyed later keeps its ID here, as the kubelet's checkpoint does)
        self._devices: dict[str, list[tuple[str, str, str]]] = {}
        self._mm_done: dict[str, str] = {}
        self._mm_run: dict[str, _MigRun] = {}
        self.mig_manager_log: dict[str, list[str]] = {}
        self._revision: tuple[str, str] = ("", "")
        self.errors: list[str] = []

    # ================================================================ lifecycle
    def load_caches(self) -> None:
        """Read the operator's view of the cluster from the store (also used to populate a new twin)."""
        st = self.store
        try:
            self._cp = st.get("clusterpolicies.nvidia.com", self.cp_name)
        except Exception:
            self._cp = None
        try:
            self._ds = st.get("daemonsets.apps", self.ds_name, self.ns)
        except Exception:
            self._ds = None
        try:
            self._mm_ds = st.get("daemonsets.apps", MM_DS, self.ns)
        except Exception:
            self._mm_ds = None
        for cm in st.list("configmaps", self.ns):
            self._configmaps[cm["metadata"]["name"]] = cm
            # Already projected into every pod when the twin starts.
            self._cm_versions[cm["metadata"]["name"]] = [(float("-inf"), (cm.get("data") or {}).get("config.yaml"))]
        for n in st.list("nodes"):
            self._remember_node(n)
            self._mm_done[n["metadata"]["name"]] = (n["metadata"].get("labels") or {}).get(MIG_CONFIG, "")
        for p in st.list("pods"):
            info = self._remember_pod(p)
            if info.app == MM_DS and info.node and not info.deleting:
                self._mm_pods[info.node] = info.name
            if info.app == self.ds_name and info.node and not info.deleting:
                self._dp_pods[info.node] = (info.name, info.generation or "")
                tw = self.fleet.nodes.get(info.node)
                if tw is not None and info.node not in self._dp_state:
                    labels = self._nodes.get(info.node, ({}, False))[0]
                    self._dp_state[info.node] = deviceplugin.evaluate(tw.gpus, self.dp_strategy(p, labels))
        for seed in self.fleet.pods:
            key = f"{seed.namespace}/{seed.name}"
            if key in self._pods:
                unit = Unit(seed.gpu_index, seed.gi_id, seed.ci_id)
                self._allocations[key] = [(seed.node, unit)]
                tw = self.fleet.nodes.get(seed.node)
                did = deviceplugin.device_id(tw.gpus[seed.gpu_index], unit) if tw is not None else None
                containers = self._pods[key].containers
                if did is not None and containers:
                    self._devices[key] = [(containers[0], seed.resource, did)]

    def start(self) -> None:
        self.load_caches()
        self._unsubscribe = self.store.subscribe(self._on_event)
        self._thread = threading.Thread(target=self._run, name="twin-gpu-operator", daemon=True)
        self._thread.start()
        # Anything left pending at start (user pods without a node) gets a scheduling pass.
        self.mark("sched", "dsstatus")

    # ---------------------------------------------------------------- hooks for ClusterTwin
    @property
    def mig_manager_ds(self) -> dict[str, Any] | None:
        return self._mm_ds

    def processed(self, node: str, value: str) -> None:
        """Make mig-manager consider `value` already handled on `node` (drift injection writes states itself)."""
        with self._cv:
            self._mm_done[node] = value

    def holders_on(self, node: str, gpu_index: int) -> dict[str, list[Unit]]:
        with self._cv:
            return {
                k: [u for n, u in units if n == node and u.gpu_index == gpu_index]
                for k, units in self._allocations.items()
                if any(n == node and u.gpu_index == gpu_index for n, u in units)
            }

    def pods_on(self, node: str) -> dict[str, str]:
        with self._cv:
            return {k: node for k in self._by_node.get(node, {})}

    def restart_device_plugin(self, node: str) -> None:
        with self._cv:
            have = self._dp_pods.get(node)
        if have is not None:
            self._delete_pod(have[0], self.ns)

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def mark(self, *keys: str) -> None:
        with self._cv:
            for k in keys:
                self._dirty[k] = None
            self._cv.notify_all()

    def mark_node(self, node: str) -> None:
        self.mark(f"node:{node}")

    def settle(self, timeout: float = 30.0) -> None:
        """Block until every controller is quiescent (no queued work, no write in flight)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._cv:
                while self._dirty or self._busy:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(
                            f"twin controllers did not settle within {timeout}s: {list(self._dirty)[:5]}"
                        )
                    self._cv.wait(left)
            rv = self.store.resource_version
            time.sleep(0.005)  # writes dispatched by another thread may still be on their way to us
            with self._cv:
                if not self._dirty and not self._busy and self.store.resource_version == rv:
                    return

    # ================================================================ events → dirty keys
    def _remember_node(self, obj: Mapping[str, Any]) -> None:
        meta = obj["metadata"]
        self._nodes[meta["name"]] = (dict(meta.get("labels") or {}), bool((obj.get("spec") or {}).get("unschedulable")))

    def _remember_pod(self, obj: Mapping[str, Any]) -> _Pod:
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        old = self._pods.get(key)
        labels = meta.get("labels") or {}
        info = _Pod(
            key=key,
            name=meta["name"],
            namespace=meta.get("namespace", ""),
            node=(obj.get("spec") or {}).get("nodeName") or None,
            phase=(obj.get("status") or {}).get("phase", "Pending"),
            uid=meta.get("uid", ""),
            created=meta.get("creationTimestamp", ""),
            requests=scheduler.gpu_requests(obj),
            app=labels.get("app"),
            generation=labels.get("pod-template-generation"),
            deleting=bool(meta.get("deletionTimestamp")),
            sched_msg=old.sched_msg if old is not None and old.uid == meta.get("uid") else None,
            containers=tuple(str(c.get("name", "")) for c in (obj.get("spec") or {}).get("containers") or []),
        )
        if old is not None and old.node != info.node:
            self._by_node.get(old.node, {}).pop(key, None)
        self._pods[key] = info
        self._by_node.setdefault(info.node, {})[key] = info
        return info

    def _on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        keys: list[str] = []
        with self._cv:
            if kind == "Node":
                if event_type == "DELETED":
                    self._nodes.pop(name, None)
                    keys += [f"node:{name}", "sched", "dsstatus"]
                else:
                    self._remember_node(obj)
                    keys.append(f"node:{name}")
            elif kind == "Pod":
                key = f"{meta.get('namespace', '')}/{name}"
                if event_type == "DELETED":
                    info = self._pods.pop(key, None)
                    if info is not None:
                        self._by_node.get(info.node, {}).pop(key, None)
                    keys += ["release:" + key, "sched"]
                    if info is not None and info.node:
                        if info.app == self.ds_name:
                            keys.append(f"dpgone:{info.node}:{info.name}")
                        if info.app == MM_DS:
                            keys.append(f"mmgone:{info.node}:{info.name}")
                        keys.append(f"node:{info.node}")
                else:
                    info = self._remember_pod(obj)
                    if info.node:
                        keys.append(f"node:{info.node}")
                    elif info.phase == "Pending":
                        keys.append("sched")
            elif kind == "ClusterPolicy" and name == self.cp_name:
                old_spec = (self._cp or {}).get("spec")
                self._cp = obj if event_type != "DELETED" else None
                if event_type == "DELETED" or obj.get("spec") != old_spec:  # status-only writes change nothing
                    keys.append("global")
                    keys += [f"node:{n}" for n in self.fleet.nodes]
            elif kind == "DaemonSet" and name == self.ds_name and meta.get("namespace") == self.ns:
                old_gen = (self._ds or {}).get("metadata", {}).get("generation")
                self._ds = obj if event_type != "DELETED" else None
                if event_type == "DELETED" or meta.get("generation") != old_gen:
                    keys.append("global")
                    keys += [f"node:{n}" for n in self.fleet.nodes]
            elif kind == "DaemonSet" and name == MM_DS and meta.get("namespace") == self.ns:
                self._mm_ds = obj if event_type != "DELETED" else None
                keys += [f"node:{n}" for n in self.fleet.nodes]
            elif kind == "ConfigMap" and meta.get("namespace") == self.ns:
                if event_type == "DELETED":
                    self._configmaps.pop(name, None)
                else:
                    self._configmaps[name] = obj
                text = None if event_type == "DELETED" else (obj.get("data") or {}).get("config.yaml")
                versions = self._cm_versions.setdefault(name, [])
                if not versions or versions[-1][1] != text:
                    versions.append((self.clock(), text))
                    del versions[:-16]  # older versions are long projected
                # Only the device-plugin/GFD config is read continuously (by GFD); mig-manager reads its
                # ConfigMap when a run starts and the device plugin when its pod starts.
                dp_cfg = (((self._cp or {}).get("spec") or {}).get("devicePlugin") or {}).get("config") or {}
                if dp_cfg.get("name") == name:
                    keys += [f"node:{n}" for n in self.fleet.nodes]
            for k in keys:
                self._dirty[k] = None
            if keys:
                self._cv.notify_all()

    # ================================================================ worker
    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._dirty and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                # Global work first (it changes what every node wants), then in arrival order.
                key = next((k for k in ("global",) if k in self._dirty), None) or next(iter(self._dirty))
                del self._dirty[key]
                self._busy = True
            try:
                self._dispatch(key)
            except Exception as exc:  # a controller bug must not kill the twin; tests assert errors == []
                log.exception("twin controller %s failed", key)
                self.errors.append(f"{key}: {type(exc).__name__}: {exc}")
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _dispatch(self, key: str) -> None:
        if key == "global":
            self._reconcile_operator()
            self.mark("dsstatus")
        elif key == "dsstatus":
            self._daemonset_status()
        elif key == "sched":
            self._schedule()
        elif key.startswith("mmgone:"):
            _, node, pod = key.split(":", 2)
            if self._mm_pods.get(node) == pod:
                del self._mm_pods[node]
                self.mark(f"node:{node}")
        elif key.startswith("dpgone:"):
            _, node, pod = key.split(":", 2)
            if self._dp_pods.get(node, ("",))[0] == pod:
                del self._dp_pods[node]
                self._dp_state.pop(node, None)
                self.mark(f"node:{node}", "dsstatus")
        elif key.startswith("release:"):
            self._release(key.split(":", 1)[1])
        elif key.startswith("node:"):
            self._reconcile_node(key.split(":", 1)[1])

    # ================================================================ operator: ClusterPolicy → DaemonSet
    def _reconcile_operator(self) -> None:
        cp, ds = self._cp, self._ds
        if cp is None or ds is None:
            return
        template = ds["spec"]["template"]
        wanted = render_device_plugin_template(template, cp)
        if wanted == template:
            return
        fresh = self.store.get("daemonsets.apps", self.ds_name, self.ns)
        fresh["spec"]["template"] = render_device_plugin_template(fresh["spec"]["template"], cp)
        self.store.update("daemonsets.apps", fresh, self.ns)

    def _daemonset_status(self) -> None:
        ds = self._ds
        if ds is not None:
            gen = str(ds["metadata"].get("generation", 1))
            ready = sum(1 for n in self._dp_pods if (st := self._dp_state.get(n)) is not None and st.ok)
            updated = sum(1 for _, g in self._dp_pods.values() if g == gen)
            self._write_ds_status(ds, len(self._dp_pods), ready, updated)
        mm = self._mm_ds
        if mm is not None:
            n = len(self._mm_pods)
            self._write_ds_status(mm, n, n, n)
        self._cluster_policy_status()

    def _cluster_policy_status(self) -> None:
        """ClusterPolicy status.state (CRD enum ignored|ready|notReady): `notReady` while an operand DaemonSet has
        unavailable pods (e.g. the device plugin crash-looping under `single`) [assumption: the twin models only
        the device plugin and mig-manager operands]."""
        cp = self._cp
        if cp is None:
            return
        unavailable = 0
        for ds in (self._ds, self._mm_ds):
            if ds is None:
                continue
            st = ds.get("status") or {}
            unavailable += int(st.get("numberUnavailable") or 0)
        state = "ready" if unavailable == 0 else "notReady"
        have = cp.get("status") or {}
        if have.get("state") == state and have.get("namespace") == self.ns:
            return
        self.store.patch(
            "clusterpolicies.nvidia.com",
            self.cp_name,
            {"status": {"state": state, "namespace": self.ns}},
            subresource="status",
        )

    def _write_ds_status(self, ds: dict[str, Any], current: int, ready: int, updated: int) -> None:
        """What the DaemonSet controller reports (kubectl get ds / rollout status read it)."""
        selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
        desired = sum(1 for labels, _ in self._nodes.values() if all(labels.get(k) == v for k, v in selector.items()))
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
        name = ds["metadata"]["name"]
        ds["status"] = {**have, **status}  # our cached copy, so the ClusterPolicy state below sees it at once
        self.store.patch("daemonsets.apps", name, {"status": status}, self.ns, subresource="status")

    # ================================================================ per node
    def _reconcile_node(self, name: str) -> None:
        tw = self.fleet.nodes.get(name)
        try:
            node = self.store.get("nodes", name)
        except Exception:
            node = None
        if node is None:
            self._node_gone(name)
            return
        if tw is None:
            return  # not a GPU node of this fleet
        labels = dict(node["metadata"].get("labels") or {})
        with tw.lock:
            if self._mig_manager(node, tw, labels):
                return  # it wrote the node; the MODIFIED event brings us back with fresh labels
            self._kubelet_finish_deletions(name)
            self._daemonset_node(node, tw, labels)
            self._config_manager(name, tw, labels)
            self._mig_manager_pod(name, labels)
            self._node_status(node)
            self._gfd(node, tw, labels)
            self._kubelet_admit(name, tw)

    def _node_gone(self, name: str) -> None:
        mm = self._mm_pods.pop(name, None)
        if mm is not None:
            self._delete_pod(mm, self.ns)
        dp = self._dp_pods.pop(name, None)
        self._dp_state.pop(name, None)
        if dp is not None:
            self._delete_pod(dp[0], self.ns)
        self.mark("dsstatus")

    def _delete_pod(self, name: str, namespace: str) -> None:
        try:
            self.store.delete("pods", name, namespace, grace_period_seconds=0)
        except Exception as exc:
            if getattr(exc, "code", None) != 404:
                raise

    # ---------------------------------------------------------------- mig-manager
    def _mig_manager(self, node: dict[str, Any], tw: TwinNode, labels: dict[str, str]) -> bool:
        """One mig-manager run per new label value (mig-parted pkg/mig/reconfigure/reconfigure.go Run)."""
        name = node["metadata"]["name"]
        value = labels.get(MIG_CONFIG, "")
        run = self._mm_run.get(name)
        if run is None:
            if not value:
                # main.go SyncableMigConfig.Set: an empty (or absent) value wakes nobody; a later non-empty
                # value is a change again, even the one before it (Get only compares with the last value read).
                if self._mm_done.get(name):
                    self._mm_done[name] = ""
                return self._default_mig_config(name, tw, labels)
            if self._mm_done.get(name) == value:
                return False
            # getCurrentNodeLabels: the deploy labels as they are now are what setState restores from.
            captured = {k: labels.get(k, "") for k in DEPLOY_LABELS}
            entries, lines = self._mig_config(name, tw, value)
            if lines or entries is None:
                return self._mig_finish(name, value, captured, labels, lines)
            if migparted.assert_applied(entries, tw.gpus):
                return self._mig_finish(name, value, captured, labels, [])
            # shutdownKubernetesGPUClients: pending, then every GPU client label maybeSetPaused.
            patch: dict[str, str | None] = {MIG_CONFIG_STATE: "pending"}
            for key in DEPLOY_LABELS:
                if key == CLIENT_LABEL and not captured[key]:
                    continue  # gpu.deploy.client is only touched when it has a value
                patch[key] = "false" if captured[key] == "false" else PAUSED
            self._mm_run[name] = _MigRun(value, captured)
            self._log_mm(name, f"Updating to MIG config: {value}")
            self._log_mm(name, "Changing the 'nvidia.com/mig.config.state' node label to 'pending'")
            self._patch_labels(name, patch)
            return True
        # waitForPodsToBeDeleted: wait for the device-plugin pod to leave the node (the DaemonSet step removes it).
        if name in self._dp_pods:
            return False
        entries, lines = self._mig_config(name, tw, value or run.value)
        if not lines:
            assert entries is not None
            try:
                migparted.apply(entries, tw.gpus)
            except migparted.ModeChangeNotEffective as exc:
                if not self._with_reboot():
                    lines = self._mig_parted_failed(exc, "apply")  # 9. → 10.: without WITH_REBOOT the apply fails
                else:
                    # 9.: state `rebooting`, the node reboots; after it the pending mode is current and mig-manager
                    # (restarted) applies the config again.
                    self._log_mm(name, "Changing the 'nvidia.com/mig.config.state' node label to 'rebooting'")
                    self._patch_labels(name, {MIG_CONFIG_STATE: "rebooting"})
                    for gpu in tw.gpus:
                        gpu.reboot()
                    try:
                        migparted.apply(entries, tw.gpus)
                    except migparted.MigPartedError:
                        lines = [
                            "Error: failed to check if a MIG mode change is required: "
                            "MIG mode change did not take effect after rebooting"
                        ]
            except migparted.MigPartedError as exc:
                lines = self._mig_parted_failed(exc, "apply")
        del self._mm_run[name]
        return self._mig_finish(name, value or run.value, run.captured, labels, lines)

    @staticmethod
    def _mig_parted_failed(exc: migparted.MigPartedError, step: str) -> list[str]:
        """What a failed nvidia-mig-parted run leaves in mig-manager's log: the errors mig-parted logged, its
        fatal line (main.go: log.Fatal(util.Capitalize(err))), then mig-manager's own line for the step
        (reconfigure.go Run: "failed to validate/apply MIG configuration: exit status 1", main.go "Error: %s")."""
        what = {"validate": "failed to validate MIG configuration", "apply": "failed to apply MIG configuration"}
        return [*exc.details, migparted.capitalize(str(exc)), f"Error: {what[step]}: exit status 1"]

    def _mig_finish(
        self,
        name: str,
        value: str,
        captured: Mapping[str, str],
        labels: dict[str, str],
        lines: list[str] | None,
    ) -> bool:
        """reconfigure.go setState: re-enable every GPU client label (maybeSetTrue of the value read when the run
        started: "false" stays, anything else becomes "true"; gpu.deploy.client only if it had a value), then
        write the final state. Also on failure, and also when nothing was paused."""
        self._mm_done[name] = value
        state = "failed" if lines else "success"
        for line in lines or []:
            self._log_mm(name, line)
        self._log_mm(name, f"Changing the 'nvidia.com/mig.config.state' node label to '{state}'")
        patch: dict[str, str | None] = {}
        for key in DEPLOY_LABELS:
            if key == CLIENT_LABEL and not captured.get(key):
                continue
            want = "false" if captured.get(key) == "false" else "true"
            if labels.get(key) != want:
                patch[key] = want
        if labels.get(MIG_CONFIG_STATE) != state:
            patch[MIG_CONFIG_STATE] = state
        if not patch:
            return False
        self._patch_labels(name, patch)
        return True

    def _with_reboot(self) -> bool:
        """WITH_REBOOT=true in ClusterPolicy spec.migManager.env (§3.3: default false)."""
        env = (((self._cp or {}).get("spec") or {}).get("migManager") or {}).get("env") or []
        return any(e.get("name") == "WITH_REBOOT" and str(e.get("value", "")).lower() == "true" for e in env)

    def _default_mig_config(self, name: str, tw: TwinNode, labels: dict[str, str]) -> bool:
        """gpu-operator controllers/nodelabeling_controller.go: a MIG-capable node (state_manager.go
        hasMIGCapableGPU: label nvidia.com/mig.capable=true) whose nvidia.com/mig.config is absent OR empty
        (hasMIGConfigLabel) gets spec.migManager.config.default when that is all-disabled. The default comes
        from spec.migManager.config: without a config object there is no default (the CRD default sits on
        config.default only)."""
        mm = ((self._cp or {}).get("spec") or {}).get("migManager") or {}
        if self._cp is None or mm.get("enabled", True) is False or not tw.gpus:
            return False
        if labels.get("nvidia.com/mig.capable") != "true":
            return False
        config = mm.get("config")
        if not isinstance(config, dict) or config.get("default", "all-disabled") != "all-disabled":
            return False
        self._patch_labels(name, {MIG_CONFIG: "all-disabled"})
        return True

    def _mig_config(
        self, node: str, tw: TwinNode, value: str
    ) -> tuple[tuple[migparted.ConfigEntry, ...] | None, list[str]]:
        """validateMigConfig (`nvidia-mig-parted assert --valid-config -f <mounted file> -c <value>`): the entries
        of the selected config, or the log lines of the failure. The file is the ConfigMap as the kubelet has
        projected it into the mig-manager pod (see mounted_config_text), not the API object."""
        mm = ((self._cp or {}).get("spec") or {}).get("migManager") or {}
        cm_name = (mm.get("config") or {}).get("name") or ""
        try:
            if not cm_name:
                configs = migparted.generated_configs(tw.gpus)
            else:
                text = self.mounted_config_text(cm_name)
                if text is None:
                    if cm_name not in self._configmaps:
                        return None, [f'Error: configmaps "{cm_name}" not found']
                    return None, [f"Error: configmap {cm_name} has no key config.yaml"]
                configs = migparted.parse(text)
            return migparted.select(configs, value), []
        except migparted.MigPartedError as exc:
            return None, self._mig_parted_failed(exc, "validate")

    def mounted_config_text(self, cm_name: str) -> str | None:
        """config.yaml as the kubelet has projected ConfigMap `cm_name` into the mig-manager pod: the newest
        version written at least config_propagation_seconds ago (the oldest one known if none is that old yet;
        None when the ConfigMap or its key is missing in that version)."""
        with self._cv:
            versions = list(self._cm_versions.get(cm_name, ()))
        if not versions:
            return None
        cutoff = self.clock() - self.config_propagation_seconds
        seen = [text for t, text in versions if t <= cutoff]
        return seen[-1] if seen else versions[0][1]

    def _log_mm(self, node: str, line: str) -> None:
        lines = self.mig_manager_log.setdefault(node, [])
        lines.append(line)
        pod = self._mm_pods.get(node)
        if pod is not None:
            self.store.set_pod_log(self.ns, pod, "\n".join(lines) + "\n", container=MM_CONTAINER)

    def _mig_manager_pod(self, node: str, labels: Mapping[str, str]) -> None:
        """The mig-manager DaemonSet's pod on `node` (Running; its log is mig_manager_log[node])."""
        ds = self._mm_ds
        desired = ds is not None and all(
            labels.get(k) == v for k, v in (ds["spec"]["template"]["spec"].get("nodeSelector") or {}).items()
        )
        have = self._mm_pods.get(node)
        if have is not None and not desired:
            del self._mm_pods[node]
            self._delete_pod(have, self.ns)
            self.mark("dsstatus")
        elif have is None and desired and ds is not None:
            self.create_mm_pod(node, ds)

    def create_mm_pod(self, node: str, ds: dict[str, Any]) -> None:
        template = ds["spec"]["template"]
        spec = copy.deepcopy(template.get("spec") or {})
        spec["nodeName"] = node
        uid = ds["metadata"].get("uid", "")
        # Deterministic "random" suffixes: two twins fed the same writes end up with the same names.
        name = f"{MM_DS}-{_suffix(f'{MM_DS}/{node}')}"
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.ns,
                "labels": {
                    **((template.get("metadata") or {}).get("labels") or {}),
                    "pod-template-generation": str(ds["metadata"].get("generation", 1)),
                },
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": MM_DS,
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
        }
        name = self._create_daemon_pod(MM_DS, node, pod)
        with self._cv:
            self._mm_pods[node] = name
        self.mark("dsstatus")
        lines = self.mig_manager_log.get(node)
        if lines:
            self.store.set_pod_log(self.ns, name, "\n".join(lines) + "\n", container=MM_CONTAINER)
        containers = [c["name"] for c in spec.get("containers") or []]
        self.store.patch(
            "pods", name, {"status": _pod_status(node, containers, ready=True)}, self.ns, subresource="status"
        )

    def _patch_labels(self, node: str, labels: Mapping[str, str | None]) -> None:
        self.store.patch("nodes", node, {"metadata": {"labels": dict(labels)}})

    # ---------------------------------------------------------------- DaemonSet controller + device plugin
    def _daemonset_node(self, node: dict[str, Any], tw: TwinNode, labels: dict[str, str]) -> None:
        name = node["metadata"]["name"]
        ds = self._ds
        desired = False
        gen = ""
        if ds is not None:
            selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
            desired = all(labels.get(k) == v for k, v in selector.items())
            gen = str(ds["metadata"].get("generation", 1))
        have = self._dp_pods.get(name)
        if have is not None and (not desired or have[1] != gen):
            del self._dp_pods[name]
            self._dp_state.pop(name, None)
            self._delete_pod(have[0], self.ns)
            have = None
            self.mark("dsstatus")
        if desired and have is None and ds is not None:
            self._create_dp_pod(ds, name, tw, labels, gen)
            self.mark("dsstatus")

    def _create_dp_pod(self, ds: dict[str, Any], node: str, tw: TwinNode, labels: dict[str, str], gen: str) -> None:
        pod = self.render_dp_pod(node)
        if pod is None:
            return
        self.create_dp_pod(node, pod, deviceplugin.evaluate(tw.gpus, self.dp_strategy(pod, labels)))

    def render_dp_pod(self, node: str) -> dict[str, Any] | None:
        """The device-plugin pod the DaemonSet controller creates on `node` (None without a DaemonSet)."""
        ds = self._ds
        if ds is None:
            return None
        gen = str(ds["metadata"].get("generation", 1))
        template = ds["spec"]["template"]
        tmeta = template.get("metadata") or {}
        pod_name = f"{self.ds_name}-{_suffix(f'{node}/{gen}')}"
        if self._revision[0] != gen:  # one hash per template generation, not per node
            self._revision = (gen, hashlib.sha1(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10])
        revision = self._revision[1]
        spec = copy.deepcopy(template.get("spec") or {})
        spec["nodeName"] = node
        meta: dict[str, Any] = {
            "name": pod_name,
            "namespace": self.ns,
            "labels": {
                **(tmeta.get("labels") or {}),
                "controller-revision-hash": revision,
                "pod-template-generation": gen,
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": self.ds_name,
                    "uid": ds["metadata"].get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if tmeta.get("annotations"):
            meta["annotations"] = dict(tmeta["annotations"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def _create_daemon_pod(self, ds: str, node: str, pod: dict[str, Any]) -> str:
        """Create a DaemonSet's pod for `node`; returns the name it got.

        Like generateName: five random characters collide now and then in a big fleet; pick others."""
        name: str = pod["metadata"]["name"]
        for salt in range(1, 100):
            try:
                self.store.create("pods", pod, self.ns)
                return name
            except Exception as exc:
                if getattr(exc, "code", None) != 409:
                    raise
                name = f"{ds}-{_suffix(f'{node}/{salt}/{name}')}"
                pod["metadata"]["name"] = name
        raise RuntimeError(f"no free pod name for {ds} on {node}")

    def create_dp_pod(self, node: str, pod: dict[str, Any], adv: Advertised) -> None:
        """Create the device-plugin pod, its log and its status (Ready, or CrashLoopBackOff with the error)."""
        name = self._create_daemon_pod(self.ds_name, node, pod)
        with self._cv:
            self._dp_pods[node] = (name, pod["metadata"]["labels"].get("pod-template-generation", ""))
            self._dp_state[node] = adv
        self.store.set_pod_log(self.ns, name, self._dp_log(adv), container=DP_CONTAINER)
        containers = [c["name"] for c in pod["spec"].get("containers") or []]
        status = _pod_status(node, containers, ready=adv.ok, failing=None if adv.ok else DP_CONTAINER)
        self.store.patch("pods", name, {"status": status}, self.ns, subresource="status")

    def dp_strategy(self, pod: Mapping[str, Any], labels: Mapping[str, str]) -> str:
        """§1.2: env MIG_STRATEGY beats the config file's flags.migStrategy; default none."""
        env = _env(pod, DP_CONTAINER)
        if "MIG_STRATEGY" in env:
            return env["MIG_STRATEGY"]
        if env.get("CONFIG_FILE"):
            flags = self._dp_config_flags(_config_map_name(pod), _env(pod, CONFIG_MANAGER), labels)
            if flags.get("migStrategy"):
                return str(flags["migStrategy"])
        return "none"

    def _config_manager(self, node: str, tw: TwinNode, labels: Mapping[str, str]) -> None:
        """§1.6: the config-manager sidecar follows node label nvidia.com/device-plugin.config and SIGHUPs the
        plugin, which re-reads its config and the GPUs in place (same pod, no restart count)."""
        current = labels.get(DP_CONFIG_LABEL, "")
        seen = self._dp_label.get(node)
        self._dp_label[node] = current
        have = self._dp_pods.get(node)
        if have is None or seen is None or seen == current:
            return
        try:
            pod = self.store.get("pods", have[0], self.ns)
        except Exception:
            return
        if not _env(pod, CONFIG_MANAGER):
            return  # no config-manager sidecar: nobody watches the label
        adv = deviceplugin.evaluate(tw.gpus, self.dp_strategy(pod, labels))
        with self._cv:
            self._dp_state[node] = adv
        self.store.set_pod_log(self.ns, have[0], self._dp_log(adv), container=DP_CONTAINER)
        containers = [c["name"] for c in pod["spec"].get("containers") or []]
        status = _pod_status(node, containers, ready=adv.ok, failing=None if adv.ok else DP_CONTAINER)
        self.store.patch("pods", have[0], {"status": status}, self.ns, subresource="status")
        self.mark("dsstatus")

    def _dp_config_flags(
        self, cm_name: str | None, cm_env: Mapping[str, str], labels: Mapping[str, str]
    ) -> dict[str, Any]:
        cm = self._configmaps.get(cm_name or "")
        data = (cm or {}).get("data") or {}
        entry = labels.get(DP_CONFIG_LABEL) or cm_env.get("DEFAULT_CONFIG") or ""
        if not entry and len(data) == 1:
            entry = next(iter(data))  # [assumption] a single-entry ConfigMap needs no selection
        text = data.get(entry)
        if not text:
            return {}
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            return {}
        flags = doc.get("flags") if isinstance(doc, dict) else None
        return dict(flags) if isinstance(flags, dict) else {}

    def gfd_strategy(self, pod_labels: Mapping[str, str]) -> str:
        """GFD gets the same env and config file as the device plugin (§1.6)."""
        cp = self._cp or {}
        strategy = ((cp.get("spec") or {}).get("mig") or {}).get("strategy") or ""
        if strategy:
            return str(strategy)
        dp_cfg = ((cp.get("spec") or {}).get("devicePlugin") or {}).get("config") or {}
        if dp_cfg.get("name"):
            flags = self._dp_config_flags(
                str(dp_cfg["name"]), {"DEFAULT_CONFIG": str(dp_cfg.get("default") or "")}, pod_labels
            )
            if flags.get("migStrategy"):
                return str(flags["migStrategy"])
        return "none"

    @staticmethod
    def _dp_log(adv: Advertised) -> str:
        if not adv.ok:
            return f"{adv.error}\n"
        lines = list(adv.warnings)
        lines += [f"Registered device plugin for '{r}' with Kubelet" for r in sorted(adv.resources)]
        if not adv.resources:
            lines.append(deviceplugin.NO_DEVICES)  # main.go startPlugins: no plugin had a device to serve
        return "\n".join(lines) + "\n"

    def _node_status(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        status = node.get("status") or {}
        cap = status.get("capacity") or {}
        alloc = status.get("allocatable") or {}
        want = {k: "0" for k in {*cap, *alloc} if k.startswith("nvidia.com/")}
        adv = self._dp_state.get(name) if name in self._dp_pods else None
        if adv is not None and adv.ok:
            want.update({k: str(v) for k, v in adv.resources.items()})
        if all(cap.get(k) == v and alloc.get(k) == v for k, v in want.items()):
            return
        self.store.patch("nodes", name, {"status": {"capacity": want, "allocatable": want}}, subresource="status")

    # ---------------------------------------------------------------- GFD
    def _gfd(self, node: dict[str, Any], tw: TwinNode, labels: dict[str, str]) -> None:
        if labels.get("nvidia.com/gpu.deploy.gpu-feature-discovery") == PAUSED:
            return
        strategy = self.gfd_strategy(labels)
        if strategy not in deviceplugin.STRATEGIES:
            return  # GFD exits at startup too; old labels stay
        patch = gfd.diff_labels(labels, gfd.gfd_labels(tw.gpus, strategy))
        if patch:
            self._patch_labels(node["metadata"]["name"], patch)

    # ---------------------------------------------------------------- kubelet
    def _on(self, node: str | None) -> list[_Pod]:
        """Pods bound to `node` (None: not bound), a snapshot taken under the lock the event callback uses."""
        with self._cv:
            return list(self._by_node.get(node, {}).values())

    def _kubelet_finish_deletions(self, node: str) -> None:
        for info in [p for p in self._on(node) if p.deleting]:
            self._release(info.key)
            self._delete_pod(info.name, info.namespace)

    def _release(self, key: str) -> None:
        with self._cv:
            self._devices.pop(key, None)
        for node, unit in self._allocations.pop(key, []):
            tw = self.fleet.nodes.get(node)
            if tw is None:
                continue
            with tw.lock:
                if unit.gpu_index >= len(tw.gpus):
                    continue
                gpu = tw.gpus[unit.gpu_index]
                if unit.gi_id is None:
                    if gpu.holder == key:
                        gpu.holder = None
                    continue
                gi = gpu.gpu_instances.get(unit.gi_id)
                ci = gi.compute_instances.get(unit.ci_id or 0) if gi is not None else None
                if ci is not None and ci.holder == key:
                    ci.holder = None
            self.mark("sched")

    @staticmethod
    def _unit_free(gpu: TwinGpu, unit: Unit) -> bool:
        if unit.gi_id is None:
            return gpu.holder is None and not any(ci.holder for _, ci in gpu.iter_cis())
        gi = gpu.gpu_instances.get(unit.gi_id)
        ci = gi.compute_instances.get(unit.ci_id or 0) if gi is not None else None
        return ci is not None and ci.holder is None and gpu.holder is None

    def _free_units(self, node: str, tw: TwinNode) -> dict[str, list[Unit]]:
        adv = self._dp_state.get(node) if node in self._dp_pods else None
        if adv is None or not adv.ok:
            return {}
        return {r: [u for u in units if self._unit_free(tw.gpus[u.gpu_index], u)] for r, units in adv.units.items()}

    def _kubelet_admit(self, node: str, tw: TwinNode) -> None:
        pending = sorted(
            (p for p in self._on(node) if p.phase == "Pending" and not p.deleting),
            key=lambda p: (p.created, p.key),
        )
        for info in pending:
            if info.app in (self.ds_name, MM_DS):
                continue
            free = self._free_units(node, tw)
            short = None
            for res, n in sorted(info.requests.items()):
                avail = free.get(res, [])
                if len(avail) < n:
                    short = (res, n, len(avail))
                    break
            containers = [c for c in self._containers(info)]
            if short is not None:
                res, n, have = short
                msg = (
                    f"Allocate failed due to requested number of devices unavailable for {res}. "
                    f"Requested: {n}, Available: {have}, which is unexpected"
                )
                status = {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": msg, "startTime": _now()}
                self.store.patch("pods", info.name, {"status": status}, info.namespace, subresource="status")
                continue
            # The device manager allocates per container, in spec order (kubelet cm/devicemanager
            # `Allocate(pod, container)`), each from what is still free; the plugin's IDs are recorded then.
            take: list[Unit] = []
            devices: list[tuple[str, str, str]] = []
            for cname, wanted in self._container_requests(info):
                for res, n in sorted(wanted.items()):
                    units, free[res] = free.get(res, [])[:n], free.get(res, [])[n:]
                    for u in units:
                        did = deviceplugin.device_id(tw.gpus[u.gpu_index], u)
                        if did is not None:
                            devices.append((cname, res, did))
                    take += units
            for u in take:
                gpu = tw.gpus[u.gpu_index]
                if u.gi_id is None:
                    gpu.holder = info.key
                else:
                    gpu.gpu_instances[u.gi_id].compute_instances[u.ci_id or 0].holder = info.key
            self._allocations[info.key] = [(node, u) for u in take]
            with self._cv:
                self._devices[info.key] = devices
            self.store.patch(
                "pods",
                info.name,
                {"status": _pod_status(node, containers, ready=True)},
                info.namespace,
                subresource="status",
            )

    def _container_requests(self, info: _Pod) -> list[tuple[str, dict[str, int]]]:
        try:
            pod = self.store.get("pods", info.name, info.namespace)
        except Exception:
            return []
        return scheduler.container_requests(pod)

    def pod_resources(self, node: str) -> list[tuple[str, str, list[tuple[str, list[tuple[str, list[str]]]]]]]:
        """What the node's kubelet answers to PodResources `List` (kubernetes pkg/kubelet/apis/podresources
        server_v1.go `List`): every pod bound to the node, every container of its spec in order, with the
        devices the device manager allocated to it grouped by resource. (namespace, name, containers)."""
        out = []
        with self._cv:
            for key, info in sorted(self._by_node.get(node, {}).items()):
                got = self._devices.get(key, [])
                containers = []
                for cname in info.containers:
                    by_res: dict[str, list[str]] = {}
                    for c, res, did in got:
                        if c == cname:
                            by_res.setdefault(res, []).append(did)
                    containers.append((cname, sorted(by_res.items())))
                out.append((info.namespace, info.name, containers))
        return out

    def _containers(self, info: _Pod) -> list[str]:
        try:
            pod = self.store.get("pods", info.name, info.namespace)
        except Exception:
            return []
        return [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]

    # ---------------------------------------------------------------- scheduler
    def _schedule(self) -> None:
        pending = sorted(
            (p for p in self._on(None) if p.phase == "Pending" and not p.deleting),
            key=lambda p: (p.created, p.key),
        )
        if not pending:
            return
        views: list[scheduler.NodeView] = []
        for name in sorted(self._nodes):
            labels, unschedulable = self._nodes[name]
            tw = self.fleet.nodes.get(name)
            free: dict[str, int] = {}
            if tw is not None:
                with tw.lock:
                    free = {r: len(u) for r, u in self._free_units(name, tw).items()}
                # pods bound here but not yet admitted hold their request already
                for p in self._on(name):
                    if p.phase == "Pending" and p.app not in (self.ds_name, MM_DS):
                        for r, k in p.requests.items():
                            free[r] = free.get(r, 0) - k
            views.append(scheduler.NodeView(name, labels, unschedulable, free))
        for info in pending:
            obj = self._pod_obj(info)
            if obj is None:
                continue
            chosen, reasons = scheduler.fit(obj, views)
            if chosen is not None:
                self._bind(info, obj, chosen)
                views = [
                    scheduler.NodeView(
                        v.name,
                        v.labels,
                        v.unschedulable,
                        {r: k - info.requests.get(r, 0) for r, k in v.free.items()} if v.name == chosen else v.free,
                    )
                    for v in views
                ]
                continue
            msg = scheduler.unschedulable_message(len(views), reasons)
            if info.sched_msg == msg:
                continue
            info.sched_msg = msg
            self._record_unschedulable(info, obj, msg)

    def _pod_obj(self, info: _Pod) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.store.get("pods", info.name, info.namespace)
        except Exception:
            return None
        return obj

    def _bind(self, info: _Pod, obj: dict[str, Any], node: str) -> None:
        # The pods/binding subresource, as the real scheduler binds (spec.nodeName is immutable otherwise).
        self.store.bind(info.namespace, info.name, node)

    def _record_unschedulable(self, info: _Pod, obj: dict[str, Any], msg: str) -> None:
        now = _now()
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": msg,
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
        self.store.patch("pods", info.name, {"status": {"conditions": [cond]}}, info.namespace, subresource="status")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{info.name}.{_suffix(info.uid + msg, 16)}", "namespace": info.namespace},
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
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": "Warning",
            "reportingComponent": "default-scheduler",
            "reportingInstance": "",
        }
        self.store.create("events", event, info.namespace)


def _pod_status(node: str, containers: list[str], *, ready: bool, failing: str | None = None) -> dict[str, Any]:
    now = _now()
    state = "True" if ready else "False"
    statuses = []
    for c in containers:
        ok = c != failing
        cs: dict[str, Any] = {
            "name": c,
            "ready": ok,
            "restartCount": 0 if ok else 1,
            "started": ok,
            "image": DP_IMAGE if c in (DP_CONTAINER, CONFIG_MANAGER) else "",
            "imageID": "",
        }
        if ok:
            cs["state"] = {"running": {"startedAt": now}}
        else:
            cs["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off 10s restarting failed container={c}",
                }
            }
            cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}}
        statuses.append(cs)
    reason = (
        {} if ready else {"reason": "ContainersNotReady", "message": f"containers with unready status: [{failing}]"}
    )
    return {
        "phase": "Running",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": now, "lastProbeTime": None},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now, "lastProbeTime": None},
            {"type": "Ready", "status": state, "lastTransitionTime": now, "lastProbeTime": None, **reason},
            {"type": "ContainersReady", "status": state, "lastTransitionTime": now, "lastProbeTime": None, **reason},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now, "lastProbeTime": None},
        ],
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.10",
        "startTime": now,
        "containerStatuses": statuses,
    }
