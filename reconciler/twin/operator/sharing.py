"""The device plugin's `sharing` (time-slicing, MPS) of the config file it mounts, as NVIDIA's plugin reads and
applies it. Pure. Written from NVIDIA/k8s-device-plugin@1b826acc (ASSUMPTIONS-operator.md "Device plugin: sharing"):

* `api/config/v1/config.go` `parseConfigFrom`: sigs.k8s.io/yaml turns the file into JSON and encoding/json decodes
  it, so the `Config`/`Sharing` struct keys match case-insensitively; `version` empty means `v1`, another value fails
  (`unknown version: <v>`). `NewConfig` sets MPS's `failRequestsGreaterThanOne` to true when unset.
* `api/config/v1/replicas.go`: `ReplicatedResources.UnmarshalJSON` (`resources` required and non-empty, else
  `no resources specified`; `renameByDefault` sets each `rename` to `<name>.shared`), `ReplicatedResource.UnmarshalJSON`
  (`name` required: `no resource name specified`; `replicas` required: `no replicas specified`, and `number of replicas
  must be >= 2`), `ReplicatedDevices.UnmarshalJSON` ("all", a count > 0, or a list), `disableResoureRenaming`.
* `api/config/v1/resources.go` `NewResourceName`: `nvidia.com/` is prefixed when absent.
* `config.go` `DisableResourceNamingInConfig` (called by `cmd/nvidia-device-plugin/main.go` `startPlugins` on every
  load): rename only as renameByDefault says, `devices` always all.
* `api/config/v1/sharing.go` `ReplicatedResources` (MPS block if present, else timeSlicing) and `SharingStrategy`.
* `internal/rm/device_map.go` `updateDeviceMapWithReplicas` (replicas of each device of a replicated resource, under
  the rename; other resources as they are), `internal/rm/device_map.go` `NewAnnotatedID` (`<id>::<i>`).
* `cmd/nvidia-device-plugin/main.go` `validateFlags` (MPS with the mixed strategy) and `internal/plugin/mps.go`
  `getMPSOptions` (MPS on a MIG device), both fatal for the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["ConfigError", "Replicated", "load_sharing"]


class ConfigError(ValueError):
    """The config file cannot be loaded: the plugin exits with it."""


@dataclass(frozen=True, slots=True)
class Replicated:
    """ReplicatedResources after DisableResourceNamingInConfig: name -> (replicas, rename or "")."""

    strategy: str  # "mps" | "time-slicing" | "none"
    resources: tuple[tuple[str, int, str], ...]  # (name, replicas, rename) in the file's order

    def is_replicated(self) -> bool:
        return any(n > 1 for _, n, _ in self.resources)


def _field(obj: dict[str, Any], name: str) -> Any:
    """encoding/json's field lookup for a struct: exact name, else a case-insensitive match (the last one wins
    as the decoder assigns fields in input order)."""
    found = None
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == name.lower():
            found = v
    return obj.get(name, found)


def _name(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ConfigError("json: cannot unmarshal into Go value of type string")
    return raw if raw.startswith("nvidia.com/") else "nvidia.com/" + raw


def _devices(raw: Any) -> None:
    if raw == "all":
        return
    if isinstance(raw, str):
        raise ConfigError(f"devices set as '{raw}' but the only valid string input is 'all'")
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw <= 0:
            raise ConfigError(f"devices set as '{raw}' but a count of devices must be > 0")
        return
    if isinstance(raw, list):
        return  # a list is accepted, then dropped by disableResoureRenaming
    raise ConfigError(f"unrecognized type for devices spec: {raw}")


def _resources(raw: Any, rename_by_default: bool) -> list[tuple[str, int, str]]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError("no resources specified")
    out: list[tuple[str, int, str]] = []
    for r in raw:
        if not isinstance(r, dict):
            raise ConfigError("json: cannot unmarshal into Go value of type v1.ReplicatedResource")
        if "name" not in r:
            raise ConfigError("no resource name specified")
        name = _name(r["name"])
        _devices(r.get("devices", "all"))
        if "replicas" not in r:
            raise ConfigError("no replicas specified")
        replicas = r["replicas"]
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise ConfigError("json: cannot unmarshal into Go value of type int")
        if replicas < 2:
            raise ConfigError("number of replicas must be >= 2")
        # disableResoureRenaming: the rename is the default one under renameByDefault, none otherwise
        out.append((name, replicas, name + ".shared" if rename_by_default else ""))
    return out


def _replicated(raw: Any) -> list[tuple[str, int, str]] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError("json: cannot unmarshal into Go value of type v1.ReplicatedResources")
    rename = raw.get("renameByDefault", False)
    if not isinstance(rename, bool):
        raise ConfigError("json: cannot unmarshal into Go value of type bool")
    return _resources(raw.get("resources"), rename)


def load_sharing(text: str | None) -> Replicated:
    """The sharing of a config file (None or empty: the empty config). ConfigError when the plugin cannot load it."""
    if not text:
        return Replicated("none", ())
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"unmarshal error: {e}") from None
    if doc is None:
        return Replicated("none", ())
    if not isinstance(doc, dict):
        raise ConfigError("unmarshal error: json: cannot unmarshal into Go value of type v1.Config")
    version = _field(doc, "version")
    if version not in (None, "", "v1"):
        raise ConfigError(f"unknown version: {version}")
    sharing = _field(doc, "sharing")
    if sharing is None:
        return Replicated("none", ())
    if not isinstance(sharing, dict):
        raise ConfigError("unmarshal error: json: cannot unmarshal into Go value of type v1.Sharing")
    try:
        ts = _replicated(_field(sharing, "timeSlicing"))
        mps = _replicated(_field(sharing, "mps"))
    except ConfigError as e:
        raise ConfigError(f"unmarshal error: {e}") from None
    chosen = Replicated("mps", tuple(mps)) if mps is not None else Replicated("time-slicing", tuple(ts or ()))
    return chosen if chosen.is_replicated() else Replicated("none", chosen.resources)
