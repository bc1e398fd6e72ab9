"""What a node's device plugin makes of its devices when its config shares them (time-slicing, MPS). Pure.

A MIG node whose device-plugin config shares its devices does not advertise its plan's counts: it advertises
`replicas` x each shared resource, and under `renameByDefault` under another name (`nvidia.com/mig-1g.18gb.shared`).
Demanding the plan's counts from such a node calls it "changed by hand" every cycle and re-applies (and, with
allowDisruption, drains) it every cycle. So the counts migplan expects are the plan's folded through the config that
applies to the node, and where that config cannot be read the counts are not believable at all (a finding, no
re-apply), never a guess.

Which config applies (NVIDIA/gpu-operator@a22dbf67 `controllers/object_controls.go` `TransformDevicePlugin`: the
ClusterPolicy's `spec.devicePlugin.config` {name, default} becomes the config-manager's ConfigMap, `DEFAULT_CONFIG` and
`FALLBACK_STRATEGIES=empty`; NVIDIA/k8s-device-plugin@1b826acc `cmd/config-manager/main.go` `updateConfigName`):
the node label `nvidia.com/device-plugin.config` names the entry, else the default does; a named entry missing from
the ConfigMap is an error (the config-manager stops: what the plugin runs is unknown); neither set: the empty config
(no sharing).

What the entry means (k8s-device-plugin `api/config/v1`): `config.go` `parseConfigFrom` (sigs.k8s.io/yaml: YAML to
JSON, then encoding/json, so the struct-level keys `version`, `sharing`, `timeSlicing`, `mps` match case-insensitively;
`version` empty or `v1`), `replicas.go` `ReplicatedResources.UnmarshalJSON` (`resources` required and non-empty,
`renameByDefault` renames each to `<name>.shared`), `ReplicatedResource.UnmarshalJSON` (`name` and `replicas` >= 2
required, `devices` "all", a count > 0 or a list), `resources.go` `NewResourceName` (`nvidia.com/` prefixed when
absent, at most 63 characters); `config.go` `DisableResourceNamingInConfig`, which `cmd/nvidia-device-plugin/main.go`
`startPlugins` calls on every load: a per-resource `rename` other than the default one is ignored (warned), and
`devices` is forced to all. `sharing.go` `ReplicatedResources`: the MPS block when present, else time-slicing.
`internal/rm/device_map.go` `updateDeviceMapWithReplicas`: each replicated resource's devices become `replicas`
annotated devices under its (re)name, the others are copied as they are; the same name listed twice yields the larger
count (the replicas are keyed by `<id>::<i>`). MPS is refused on MIG devices (`internal/plugin/mps.go`
`getMPSOptions`) and with the mixed strategy (`cmd/nvidia-device-plugin/main.go` `validateFlags`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.model.observed import ConfigMapState, ObservedState

__all__ = [
    "DP_CONFIG_LABEL",
    "SHARED_SUFFIX",
    "Sharing",
    "Unbelievable",
    "fold",
    "node_sharing",
    "parse_entry",
    "profile_of",
    "refusal",
    "sharing_by_node",
]

DP_CONFIG_LABEL = "nvidia.com/device-plugin.config"
SHARED_SUFFIX = ".shared"  # api/config/v1/consts.go DefaultSharedResourceNameSuffix
_PREFIX = "nvidia.com/"
_MAX_NAME = 63  # consts.go MaxResourceNameLength
# No bound in NVIDIA's source; beyond this the plugin would build millions of devices: taken as unbelievable.
_MAX_REPLICAS = 100_000
_MAX_TEXT = 256 * 1024  # a ConfigMap holds at most 1 MiB; an entry beyond this is not read
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_DEVICE_REF = re.compile(rf"^(\d+|\d+:\d+|GPU-{_UUID}|MIG-{_UUID}|MIG-GPU-{_UUID}/\d+/\d+)$")


@dataclass(frozen=True, slots=True)
class Sharing:
    """A config entry that shares devices: what the plugin multiplies, and under which names it advertises."""

    strategy: str  # "time-slicing" | "mps" (sharing.go SharingStrategy)
    replicas: Mapping[str, int]  # full resource name -> replicas (>= 2)
    rename_by_default: bool
    entry: str  # the ConfigMap entry it was read from
    fail_requests_greater_than_one: bool = False

    def advertised_name(self, resource: str) -> str:
        return resource + SHARED_SUFFIX if self.rename_by_default and resource in self.replicas else resource

    def describe(self) -> str:
        parts = ", ".join(f"{self.advertised_name(r)} x{n}" for r, n in sorted(self.replicas.items()))
        return f"{self.strategy} ({parts}; config entry {self.entry!r})"


@dataclass(frozen=True, slots=True)
class Unbelievable:
    """The config that applies to a node cannot be read or its plugin refuses it: what it advertises is unknown."""

    reason: str
    entry: str | None = None


NodeSharing = Sharing | Unbelievable | None  # None: the node's devices are not shared


def _key(doc: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """encoding/json's struct-field match: a key equal to `name` under case folding. Two such keys are each decoded
    into the field in turn (the last wins, and either may fail): taken as unreadable rather than guessed."""
    hits = [k for k in doc if isinstance(k, str) and k.lower() == name.lower()]
    if len(hits) > 1:
        raise ValueError(f"keys {sorted(hits)} are ambiguous for {name!r}")
    return (True, doc[hits[0]]) if hits else (False, None)


def _resource_name(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"resource name {raw!r} is not a string")
    full = raw if raw.startswith(_PREFIX) else _PREFIX + raw
    if len(full) > _MAX_NAME:
        raise ValueError(f"fully-qualified resource name must be {_MAX_NAME} characters or less: {full[:80]}")
    name = full.split("/", 1)[1]
    if not name or len(name) > 253 or not all(_DNS_LABEL.match(p) for p in name.split(".")):
        raise ValueError(f"incorrect format for resource name {full!r}")
    return full


def _replicas(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != int(raw):
        raise ValueError(f"replicas {raw!r} is not an integer")
    n = int(raw)
    if n < 2:
        raise ValueError("number of replicas must be >= 2")
    if n > _MAX_REPLICAS:
        raise ValueError(f"{n} replicas is beyond what migplan believes ({_MAX_REPLICAS})")
    return n


def _check_devices(raw: Any) -> None:
    """ReplicatedDevices.UnmarshalJSON: parsed (and so able to fail) before DisableResourceNamingInConfig drops it."""
    if isinstance(raw, str):
        if raw != "all":
            raise ValueError(f"devices set as {raw!r} but the only valid string input is 'all'")
    elif isinstance(raw, bool):
        raise ValueError(f"unrecognized type for devices spec: {raw!r}")
    elif isinstance(raw, int):
        if raw <= 0:
            raise ValueError(f"devices set as {raw} but a count of devices must be > 0")
    elif isinstance(raw, list):
        for item in raw:
            ok = (isinstance(item, int) and not isinstance(item, bool) and item >= 0) or (
                isinstance(item, str) and _DEVICE_REF.match(item)
            )
            if not ok:
                raise ValueError(f"unsupported type for device in devices list: {str(item)[:80]}")
    else:
        raise ValueError(f"unrecognized type for devices spec: {str(raw)[:80]}")


def _replicated(raw: Any, where: str) -> tuple[dict[str, int], bool, bool | None]:
    """ReplicatedResources: (resource -> replicas, renameByDefault, failRequestsGreaterThanOne)."""
    if not isinstance(raw, dict):
        raise ValueError(f"sharing.{where} is not a mapping")
    rename = raw.get("renameByDefault", False)
    if not isinstance(rename, bool):
        raise ValueError(f"sharing.{where}.renameByDefault is not a boolean")
    fail = raw.get("failRequestsGreaterThanOne")
    if fail is not None and not isinstance(fail, bool):
        raise ValueError(f"sharing.{where}.failRequestsGreaterThanOne is not a boolean")
    resources = raw.get("resources")
    if not isinstance(resources, list) or not resources:
        raise ValueError(f"sharing.{where}: no resources specified")
    out: dict[str, int] = {}
    for r in resources:
        if not isinstance(r, dict) or "name" not in r:
            raise ValueError(f"sharing.{where}.resources: no resource name specified")
        name = _resource_name(r["name"])
        _check_devices(r.get("devices", "all"))
        if "replicas" not in r:
            raise ValueError(f"sharing.{where}.resources[{name}]: no replicas specified")
        n = _replicas(r["replicas"])
        if "rename" in r and r["rename"] is not None:
            _resource_name(r["rename"])  # parsed, then ignored (DisableResourceNamingInConfig)
        out[name] = max(n, out.get(name, 0))
    return out, rename, fail


def parse_entry(text: str, entry: str) -> Sharing | Unbelievable | None:
    """One device-plugin config file: its sharing, None when it shares nothing, or why it cannot be believed."""
    if len(text) > _MAX_TEXT:
        return Unbelievable(f"entry {entry!r} is larger than {_MAX_TEXT} bytes", entry)
    try:
        doc = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as e:
        return Unbelievable(f"entry {entry!r} is not YAML ({str(e).splitlines()[0][:120]})", entry)
    if doc is None:
        return None
    try:
        if not isinstance(doc, dict):
            raise ValueError("the config is not a mapping")
        _, version = _key(doc, "version")
        if version not in (None, "", "v1"):
            raise ValueError(f"unknown version: {str(version)[:40]}")
        present, sharing = _key(doc, "sharing")
        if not present or sharing is None:
            return None
        if not isinstance(sharing, dict):
            raise ValueError("sharing is not a mapping")
        has_ts, ts = _key(sharing, "timeSlicing")
        has_mps, mps = _key(sharing, "mps")
        ts_parsed = _replicated(ts, "timeSlicing") if has_ts and ts is not None else None
        mps_parsed = _replicated(mps, "mps") if has_mps and mps is not None else None
    except ValueError as e:
        return Unbelievable(f"entry {entry!r}: {e}", entry)
    # sharing.go ReplicatedResources: MPS when the block is there, else time-slicing.
    chosen, strategy = (mps_parsed, "mps") if mps_parsed is not None else (ts_parsed, "time-slicing")
    if chosen is None:
        return None
    replicas, rename, fail = chosen
    # config.go NewConfig: MPS keeps failing requests of more than one unless the config relaxes it.
    fail_gt1 = fail if fail is not None else strategy == "mps"
    return Sharing(strategy, replicas, rename, entry, fail_gt1)


def _entry_for(labels: Mapping[str, str], default: str | None) -> str | None:
    """The config-manager's choice (updateConfigName): the label, else the default, else the empty config."""
    return labels.get(DP_CONFIG_LABEL) or default or None


def node_sharing(
    cm: ConfigMapState | None, cm_name: str | None, entry: str | None, cache: dict[str, NodeSharing]
) -> NodeSharing:
    """The sharing of entry `entry` of ConfigMap `cm_name` (`cm` as observed); `cache` parses each entry once."""
    if not cm_name or entry is None:
        return None  # no config (or the empty one): nothing is shared
    if cm is None:
        return Unbelievable(f"ConfigMap {cm_name} named by spec.devicePlugin.config does not exist", entry)
    if entry in cache:
        return cache[entry]
    text = cm.data.get(entry)
    found: NodeSharing = (
        Unbelievable(f"specified config {entry} does not exist in ConfigMap {cm_name}", entry)
        if text is None
        else parse_entry(text, entry)
    )
    cache[entry] = found
    return found


def sharing_by_node(observed: ObservedState, names: Mapping[str, object] | None = None) -> dict[str, NodeSharing]:
    """Per node (of `names`, default every observed node) whose devices are shared or cannot be judged: its
    sharing. Nodes without sharing are left out, so a cluster without a device-plugin config costs one check."""
    cp = observed.cluster_policy
    if cp is None or not cp.device_plugin_config_name:
        return {}
    cache: dict[str, NodeSharing] = {}
    out: dict[str, NodeSharing] = {}
    for name in names if names is not None else observed.nodes:
        node = observed.nodes.get(name)
        if node is None:
            continue
        entry = _entry_for(node.labels, cp.device_plugin_config_default)
        found = node_sharing(observed.device_plugin_config_map, cp.device_plugin_config_name, entry, cache)
        if found is not None:
            out[name] = found
    return out


def fold(expected: Mapping[str, int], sharing: Sharing) -> dict[str, int]:
    """What the plugin advertises for devices that would advertise `expected` unshared (updateDeviceMapWithReplicas):
    a replicated resource's devices become `replicas` devices each, under `<name>.shared` with renameByDefault."""
    out: dict[str, int] = {}
    for res, n in expected.items():
        replicas = sharing.replicas.get(res)
        if replicas is None or n <= 0:
            out[res] = out.get(res, 0) + n
            continue
        name = sharing.advertised_name(res)
        out[name] = out.get(name, 0) + n * replicas
    return out


def refusal(sharing: Sharing, strategy: str, has_mig_devices: bool) -> str | None:
    """Why the plugin refuses this sharing on the node (it then advertises nothing), or None."""
    if sharing.strategy != "mps":
        return None
    if strategy == "mixed":
        return "using --mig-strategy=mixed is not supported with MPS"  # main.go validateFlags
    if strategy == "single" and has_mig_devices:
        return "sharing using MPS is not supported for MIG devices"  # internal/plugin/mps.go getMPSOptions
    return None


def profile_of(resource: str) -> str:
    """The resource a shared name stands for: `nvidia.com/mig-1g.18gb.shared` -> `nvidia.com/mig-1g.18gb`."""
    return resource.removesuffix(SHARED_SUFFIX)
