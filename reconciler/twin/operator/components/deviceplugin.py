"""nvidia-device-plugin running in its pod on a node, with the config-manager sidecar beside it.

What the plugin advertises is the pure reconciler/twin/operator/deviceplugin.py `evaluate`; this component decides
which strategy it runs with (stack-facts §1.2: env `MIG_STRATEGY` beats the config file's `flags.migStrategy`,
the entry chosen by node label `nvidia.com/device-plugin.config` or `DEFAULT_CONFIG`), writes what a started
plugin shows (its log, its pod's status: Ready, or CrashLoopBackOff with the error) and, for the sidecar (§1.6),
re-evaluates in place when the node label changes (SIGHUP; same pod, no restart count).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from reconciler.twin.fleet import TwinNode
from reconciler.twin.operator.cache import OperatorCache
from reconciler.twin.operator.deviceplugin import NO_DEVICES, Advertised, config_failure, evaluate, replicate
from reconciler.twin.operator.kubeobjects import config_map_name, container_env, pod_status
from reconciler.twin.operator.names import CONFIG_MANAGER, DP_CONFIG_LABEL, DP_CONTAINER
from reconciler.twin.operator.sharing import ConfigError, load_sharing
from reconciler.twin.operator.storeapi import StoreApi
from reconciler.twin.operator.workqueue import Job, WorkQueue

__all__ = ["DevicePlugin", "plugin_log"]


def plugin_log(adv: Advertised) -> str:
    """The plugin container's log: the error alone, or its warnings and one line per registered resource."""
    if not adv.ok:
        return f"{adv.error}\n"
    lines = list(adv.warnings)
    lines += [f"Registered device plugin for '{r}' with Kubelet" for r in sorted(adv.resources)]
    if not adv.resources:
        lines.append(NO_DEVICES)  # main.go startPlugins: no plugin had a device to serve
    return "\n".join(lines) + "\n"


class DevicePlugin:
    """The device plugin of every GPU node: its strategy, its start, its config-manager sidecar."""

    def __init__(self, api: StoreApi, cache: OperatorCache, queue: WorkQueue) -> None:
        self.api = api
        self.cache = cache
        self.queue = queue
        self._seen_label: dict[str, str] = {}  # node → nvidia.com/device-plugin.config seen by its config-manager

    def strategy(self, pod: Mapping[str, Any], labels: Mapping[str, str]) -> str:
        """§1.2: env MIG_STRATEGY beats the config file's flags.migStrategy; default none."""
        env = container_env(pod, DP_CONTAINER)
        if "MIG_STRATEGY" in env:
            return env["MIG_STRATEGY"]
        if env.get("CONFIG_FILE"):
            flags = self.config_flags(config_map_name(pod), container_env(pod, CONFIG_MANAGER), labels)
            if flags.get("migStrategy"):
                return str(flags["migStrategy"])
        return "none"

    def config_text(self, cm_name: str | None, cm_env: Mapping[str, str], labels: Mapping[str, str]) -> str | None:
        """The config file entry the plugin reads (k8s-device-plugin cmd/config-manager/main.go `updateConfigName`):
        node label, else DEFAULT_CONFIG, else the FALLBACK_STRATEGIES in order (`named`: the entry `default`,
        `single`: the only entry, `empty`: no config; the operator sets `empty`). None when none is selected or the
        ConfigMap or the entry is missing."""
        cm = self.cache.configmaps.get(cm_name or "")
        data = (cm or {}).get("data") or {}
        entry = labels.get(DP_CONFIG_LABEL) or cm_env.get("DEFAULT_CONFIG") or ""
        fallbacks = [f for f in cm_env.get("FALLBACK_STRATEGIES", "single").split(",") if f]
        for fallback in fallbacks if not entry else ():
            if fallback == "named" and "default" in data:
                entry = "default"
            elif fallback == "single" and len(data) == 1:
                entry = next(iter(data))
            elif fallback != "empty":
                continue
            break
        text = data.get(entry) if entry else None
        return text if isinstance(text, str) else None

    def config_flags(self, cm_name: str | None, cm_env: Mapping[str, str], labels: Mapping[str, str]) -> dict[str, Any]:
        """`flags` of the config file entry the plugin reads; {} when it, or its flags, are missing or unreadable."""
        text = self.config_text(cm_name, cm_env, labels)
        if not text:
            return {}
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            return {}
        flags = doc.get("flags") if isinstance(doc, dict) else None
        return dict(flags) if isinstance(flags, dict) else {}

    def evaluate(self, tw: TwinNode, pod: Mapping[str, Any], labels: Mapping[str, str]) -> Advertised:
        """What the plugin in `pod` advertises for the node's GPUs now: its strategy's devices, then the sharing of
        the config file it mounts (sharing.py; a file it cannot load stops it)."""
        strategy = self.strategy(pod, labels)
        text = None
        if container_env(pod, DP_CONTAINER).get("CONFIG_FILE"):
            text = self.config_text(config_map_name(pod), container_env(pod, CONFIG_MANAGER), labels)
        try:
            shared = load_sharing(text)
        except ConfigError as e:
            return config_failure(strategy, e)
        return replicate(evaluate(tw.gpus, strategy), shared)

    def show(self, node: str, pod_name: str, pod: Mapping[str, Any], adv: Advertised) -> None:
        """The log and the pod status of a plugin that (re)read the GPUs: Ready, or CrashLoopBackOff."""
        self.api.patch_pod_status(pod_name, self.cache.namespace, self.shown(pod_name, pod, node, adv))

    def shown(self, pod_name: str, pod: Mapping[str, Any], node: str, adv: Advertised) -> dict[str, Any]:
        """Write the log of a plugin that (re)read the GPUs; its pod status: Ready, or CrashLoopBackOff."""
        self.api.set_pod_log(pod_name, plugin_log(adv), container=DP_CONTAINER)
        containers = [c["name"] for c in pod["spec"].get("containers") or []]
        return pod_status(node, containers, ready=adv.ok, failing=None if adv.ok else DP_CONTAINER)

    def config_manager(self, node: str, tw: TwinNode, labels: Mapping[str, str]) -> None:
        """§1.6: the config-manager sidecar follows node label nvidia.com/device-plugin.config and SIGHUPs the
        plugin, which re-reads its config and the GPUs in place (same pod, no restart count)."""
        current = labels.get(DP_CONFIG_LABEL, "")
        seen = self._seen_label.get(node)
        self._seen_label[node] = current
        have = self.cache.dp_pods.get(node)
        if have is None or seen is None or seen == current:
            return
        pod = self.api.get("pods", have.name, self.cache.namespace)
        if pod is None:
            return
        if not container_env(pod, CONFIG_MANAGER):
            return  # no config-manager sidecar: nobody watches the label
        adv = self.evaluate(tw, pod, labels)
        with self.cache.lock:
            self.cache.dp_state[node] = adv
        self.show(node, have.name, pod, adv)
        self.queue.add(Job.DAEMONSET_STATUS)
