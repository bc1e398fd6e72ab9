"""How the GPU Operator renders its operand DaemonSets from the ClusterPolicy (only the fields the twin needs).

From tests/reference/stack-facts.md §1.6 and NVIDIA/gpu-operator@a22dbf67 `controllers/object_controls.go`:
`applyMIGConfiguration` (~2787) turns `spec.mig.strategy` into the device plugin's `MIG_STRATEGY` /
`NVIDIA_MIG_MONITOR_DEVICES`; `spec.devicePlugin.config` adds `CONFIG_FILE`, the `available-configs` volume and the
config-manager sidecar (`NODE_LABEL`, `DEFAULT_CONFIG`). The mig-manager DaemonSet follows §3.1. Pure: values in,
values out; dsupdate.py decides whether a rendering is written.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from reconciler.twin.operator import dsupdate
from reconciler.twin.operator.names import (
    CONFIG_MANAGER,
    DP_CONFIG_LABEL,
    DP_CONTAINER,
    DP_IMAGE,
    DP_SELECTOR,
    MM_CONTAINER,
    MM_DS,
    MM_IMAGE,
    MM_SELECTOR,
)

__all__ = [
    "device_plugin_daemonset",
    "mig_manager_daemonset",
    "operator_daemonset",
    "operator_mig_manager_daemonset",
    "render_device_plugin_template",
    "set_container_env",
    "update_strategy",
]


def set_container_env(env: list[dict[str, str]], name: str, value: str) -> None:
    """object_controls.go setContainerEnv: replace the value of the first same-named entry, else append."""
    for e in env:
        if e.get("name") == name:
            e["value"] = value
            return
    env.append({"name": name, "value": value})


def update_strategy(cp: Mapping[str, Any]) -> dict[str, Any] | None:
    """object_controls.go applyUpdateStrategyConfig (applyCommonDaemonsetConfig, every operand but the driver):
    `spec.daemonsets.updateStrategy: OnDelete` → OnDelete; otherwise, with `spec.daemonsets.rollingUpdate.
    maxUnavailable` set, RollingUpdate with it ("N%" as a string, else strconv.ParseInt: an error fails the
    DaemonSet step, ValueError here); without it None: the asset's own strategy (none in the device-plugin and
    mig-manager assets, so the API server's default, RollingUpdate with maxUnavailable 1)."""
    ds = (cp.get("spec") or {}).get("daemonsets") or {}
    if not isinstance(ds, Mapping):
        return None
    if ds.get("updateStrategy") == "OnDelete":
        return {"type": "OnDelete"}
    rolling = ds.get("rollingUpdate")
    raw = rolling.get("maxUnavailable") if isinstance(rolling, Mapping) else None
    if raw is None or raw == "":
        return None
    text = str(raw)
    if text.endswith("%"):
        value: int | str = text
    else:
        digits = text[1:] if text[:1] in "+-" else text
        if not digits.isascii() or not digits.isdigit() or not -(2**31) <= int(text) < 2**31:
            raise ValueError(f"failed to apply rolling update config: invalid maxUnavailable {text!r}")
        value = int(text)
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": value}}


def _with_strategy(ds: dict[str, Any], cp: Mapping[str, Any]) -> dict[str, Any]:
    strategy = update_strategy(cp)
    if strategy is not None:
        ds["spec"]["updateStrategy"] = strategy
    return ds


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
        # TransformDevicePlugin applies spec.devicePlugin.env after applyMIGConfiguration, each entry through
        # setContainerEnv (replace the value of a same-named entry, else append): its MIG_STRATEGY wins.
        for e in ((cp.get("spec") or {}).get("devicePlugin") or {}).get("env") or []:
            if not isinstance(e, Mapping) or not isinstance(e.get("name"), str):
                continue
            same = [x for x in env if x.get("name") == e["name"]]
            if same:
                same[0]["value"] = str(e.get("value", ""))
            else:
                env.append({"name": e["name"], "value": str(e.get("value", ""))})
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
                    # object_controls.go TransformDevicePlugin: setContainerEnv(..., "FALLBACK_STRATEGIES", "empty")
                    {"name": "FALLBACK_STRATEGIES", "value": "empty"},
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
            "template": render_device_plugin_template(template, cp),
        },
    }


def operator_daemonset(name: str, namespace: str, cp: Mapping[str, Any]) -> dict[str, Any]:
    """The device-plugin DaemonSet exactly as the operator renders it for `cp` (controller reference included),
    before its hash annotation (dsupdate.apply_rendered adds it)."""
    return dsupdate.with_controller(_with_strategy(device_plugin_daemonset(name, namespace, cp), cp), cp)


def operator_mig_manager_daemonset(namespace: str, cp: Mapping[str, Any]) -> dict[str, Any]:
    """The mig-manager DaemonSet exactly as the operator renders it for `cp` (TransformMIGManager, then
    applyCommonDaemonsetConfig's update strategy, the controller reference), before its hash annotation."""
    return dsupdate.with_controller(_with_strategy(mig_manager_daemonset(namespace, cp), cp), cp)


def mig_manager_daemonset(namespace: str, cp: Mapping[str, Any]) -> dict[str, Any]:
    """The mig-manager DaemonSet (§3.1: nodeSelector nvidia.com/gpu.deploy.mig-manager=true), fields the twin needs,
    as gpu-operator `TransformMIGManager` renders them: the `mig-parted-config` volume names
    `spec.migManager.config.name` (CONFIG_FILE) or `default-mig-parted-config` with `config.yaml` remapped to
    `config-default.yaml` (DEFAULT_CONFIG_FILE); the `gpu-clients` volume names `spec.migManager.gpuClientsConfig.name`
    or `default-gpu-clients`; then each `spec.migManager.env` entry through setContainerEnv. Any change of these is a
    new pod template: the DaemonSet controller rolls the pods (rollingupdate.py)."""
    mm = (cp.get("spec") or {}).get("migManager") or {}
    cfg = str(((mm.get("config") or {}) if isinstance(mm.get("config"), Mapping) else {}).get("name") or "")
    clients_cfg = mm.get("gpuClientsConfig") if isinstance(mm.get("gpuClientsConfig"), Mapping) else {}
    clients = str((clients_cfg or {}).get("name") or "") or "default-gpu-clients"
    env = [{"name": "GPU_CLIENTS_FILE", "value": "/gpu-clients/clients.yaml"}]
    volume: dict[str, Any] = {"name": cfg or "default-mig-parted-config"}
    if cfg:
        set_container_env(env, "CONFIG_FILE", "/mig-parted-config/config.yaml")
    else:
        set_container_env(env, "DEFAULT_CONFIG_FILE", "/mig-parted-config/config-default.yaml")
        volume["items"] = [{"key": "config.yaml", "path": "config-default.yaml"}]
    for e in mm.get("env") or []:
        if isinstance(e, Mapping) and isinstance(e.get("name"), str):
            set_container_env(env, e["name"], str(e.get("value", "")))
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
                        {"name": "mig-parted-config", "configMap": volume},
                        {"name": "gpu-clients", "configMap": {"name": clients}},
                    ],
                },
            },
        },
    }
