"""mig-parted v1 configs, parsed and applied to twin GPUs the way nvidia-mig-parted does (stack-facts.md §5).

`parse(text)` follows the v1 schema (`api/spec/v1/spec.go`): `version: v1` required ("unknown version: %v",
"unable to parse with missing 'version' field"), `mig-configs` with at least one entry, each a non-empty list
of `{device-filter?, devices: all|[i], mig-enabled, mig-devices}`; unknown fields → "unexpected field: %v".
`assert_applied` is `nvidia-mig-parted assert` (mode + profile→count equality per matched GPU, placement
ignored; "not all GPUs match the specified config"). `apply` is `nvidia-mig-parted apply`: per matched GPU,
skip if already as desired, else set the MIG mode (resetting the GPU when the mode is pending), clear all
GIs/CIs and create the devices with `CreateGpuInstance` (no placement) in permutations of the profile order
until one succeeds ("error attempting multiple config orderings"). A pod holding a MIG device makes the clear
fail with NVML_ERROR_IN_USE, which nvidia-smi renders "In use by another client".
Pure except for `apply`, which mutates the GPUs it is given.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pynvml
import yaml

from reconciler.twin.gpus import TwinGpu

__all__ = ["ConfigEntry", "MigPartedError", "ModeChangeNotEffective", "apply", "assert_applied", "parse", "select"]

_ENTRY_FIELDS = {"device-filter", "devices", "mig-enabled", "mig-devices"}
# How nvidia-smi / mig-parted render the NVML codes the twin raises (stack-facts §6).
NVML_TEXT = {
    pynvml.NVML_ERROR_IN_USE: "In use by another client",
    pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient Resources",
    pynvml.NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    pynvml.NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
}


class MigPartedError(Exception):
    pass


class ModeChangeNotEffective(MigPartedError):
    """`apply --mode-only` + `assert --mode-only` failed: the MIG mode is still pending (a reboot may help)."""


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    device_filter: tuple[str, ...]  # "0x233510DE" (device+vendor), empty = any
    devices: tuple[int, ...] | None  # None = all
    mig_enabled: bool
    mig_devices: Mapping[str, int]

    def matches(self, gpu: TwinGpu) -> bool:
        if self.devices is not None and gpu.index not in self.devices:
            return False
        if self.device_filter:
            ids = {f.split(":", 1)[0].lower() for f in self.device_filter}
            return any(p.lower() in ids for p in gpu.model.pci_device_ids[:1])
        return True


def _entry(raw: Any) -> ConfigEntry:
    if not isinstance(raw, dict):
        raise MigPartedError("unable to parse config entry: not a mapping")
    for key in raw:
        if key not in _ENTRY_FIELDS:
            raise MigPartedError(f"unexpected field: {key}")
    if "devices" not in raw:
        raise MigPartedError("missing required field 'devices'")
    if "mig-enabled" not in raw:
        raise MigPartedError("missing required field 'mig-enabled'")
    dev = raw["devices"]
    if dev == "all":
        devices = None
    elif isinstance(dev, list) and all(isinstance(i, int) for i in dev):
        devices = tuple(dev)
    else:
        raise MigPartedError(f"invalid format for 'devices' field: {dev}")
    filt = raw.get("device-filter") or ()
    filters = (filt,) if isinstance(filt, str) else tuple(str(f) for f in filt)
    enabled = bool(raw["mig-enabled"])
    mig_devices = raw.get("mig-devices") or {}
    if not enabled and mig_devices:
        raise MigPartedError("MIG devices included when 'mig-enabled' is false")
    if enabled and "mig-devices" not in raw:
        raise MigPartedError("missing required field 'mig-devices'")
    counts = {str(k): int(v) for k, v in mig_devices.items()}
    if any(v < 0 for v in counts.values()):
        raise MigPartedError("invalid count: must be >= 0")
    return ConfigEntry(filters, devices, enabled, counts)


def parse(text: str) -> dict[str, tuple[ConfigEntry, ...]]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MigPartedError(f"error parsing config file: {exc}") from exc
    if not isinstance(doc, dict):
        raise MigPartedError("error parsing config file: not a mapping")
    if "version" not in doc:
        raise MigPartedError("unable to parse with missing 'version' field")
    if doc["version"] != "v1":
        raise MigPartedError(f"unknown version: {doc['version']}")
    for key in doc:
        if key not in ("version", "mig-configs"):
            raise MigPartedError(f"unexpected field: {key}")
    configs = doc.get("mig-configs") or {}
    if not configs:
        raise MigPartedError("at least one entry in 'mig-configs' required")
    out = {}
    for name, entries in configs.items():
        if not entries:
            raise MigPartedError(f"config '{name}' has no entries")
        out[str(name)] = tuple(_entry(e) for e in entries)
    return out


def select(configs: Mapping[str, tuple[ConfigEntry, ...]], name: str) -> tuple[ConfigEntry, ...]:
    if name not in configs:
        raise MigPartedError(f"selected mig-config not present: {name}")
    return configs[name]


def _match(entries: Sequence[ConfigEntry], gpu: TwinGpu) -> ConfigEntry | None:
    for e in entries:
        if e.matches(gpu):
            return e
    return None


def _wanted(entry: ConfigEntry) -> dict[str, int]:
    return {k: v for k, v in entry.mig_devices.items() if v > 0}


def assert_applied(entries: Sequence[ConfigEntry], gpus: Sequence[TwinGpu]) -> bool:
    matched = 0
    for gpu in gpus:
        e = _match(entries, gpu)
        if e is None:
            continue
        matched += 1
        if gpu.mig_current != e.mig_enabled:
            return False
        if e.mig_enabled and gpu.geometry() != _wanted(e):
            return False
    return matched == len(gpus)  # "not all GPUs match the specified config"


def apply(entries: Sequence[ConfigEntry], gpus: Sequence[TwinGpu]) -> None:
    """nvidia-mig-parted apply: the MIG mode of every matched GPU first (then one reset of the pending ones, as
    `nvidia-smi -r -i <all>`), then the devices; raises MigPartedError with the text mig-manager would log."""
    todo = []
    for gpu in gpus:
        e = _match(entries, gpu)
        if e is None:
            continue
        if gpu.mig_current == e.mig_enabled and (not e.mig_enabled or gpu.geometry() == _wanted(e)):
            continue  # "Skipping -- already set to desired value"
        todo.append((gpu, e))
    try:
        for gpu, e in todo:  # apply --mode-only
            if gpu.mig_current != e.mig_enabled or gpu.mig_pending != e.mig_enabled:
                _clear(gpu)
                gpu.set_mig_mode(e.mig_enabled)
        pending = [gpu for gpu, _ in todo if gpu.mig_current != gpu.mig_pending]
        stuck = [gpu.index for gpu in pending if not gpu.reset()]
        if stuck:
            raise ModeChangeNotEffective(f"GPUs {stuck}: MIG mode change is pending, a GPU reset did not apply it")
        for gpu, e in todo:
            if e.mig_enabled:
                _clear(gpu)
                _create(gpu, _wanted(e))
    except pynvml.NVMLError as exc:
        text = NVML_TEXT.get(exc.value, str(exc))
        raise MigPartedError(f"error applying MIG configuration: {text}") from exc


def _clear(gpu: TwinGpu) -> None:
    """ClearMigConfig: destroy every CI, then its GI; the first failure ends it (NVIDIA's OpenShift doc log:
    "Error clearing MigConfig: error destroying Compute instance for profile '(0, 0)': In use by another client";
    the pair is read as (GI profile enum, CI profile enum) [inference])."""
    for gi in list(gpu.gpu_instances.values()):
        for ci_id, ci in list(gi.compute_instances.items()):
            try:
                gpu.destroy_compute_instance(gi, ci_id)
            except pynvml.NVMLError as exc:
                text = NVML_TEXT.get(exc.value, str(exc))
                raise MigPartedError(
                    f"Error clearing MigConfig: error destroying Compute instance for profile "
                    f"'({gi.profile.enum}, {ci.profile_enum})': {text}"
                ) from exc
        try:
            gpu.destroy_gpu_instance(gi.id)
        except pynvml.NVMLError as exc:
            text = NVML_TEXT.get(exc.value, str(exc))
            raise MigPartedError(
                f"Error clearing MigConfig: error destroying GPU instance for profile '{gi.profile.enum}': {text}"
            ) from exc


def _create(gpu: TwinGpu, wanted: Mapping[str, int]) -> None:
    profiles = [p for p, n in sorted(wanted.items()) for _ in range(n)]
    for p in profiles:
        if gpu.profile_by_name(p) is None:
            raise MigPartedError(f"unable to find MIG profile '{p}' on GPU {gpu.index}")
    tried: set[tuple[str, ...]] = set()
    last: Exception | None = None
    for order in itertools.permutations(profiles):
        if order in tried:
            continue
        tried.add(order)
        try:
            for p in order:
                gpu.add_partition(p)
            return
        except pynvml.NVMLError as exc:
            last = exc
            gpu.clear()
        if len(tried) > 5040:  # 7! orderings at most matter; keep the twin bounded
            break
    text = NVML_TEXT.get(last.value, str(last)) if isinstance(last, pynvml.NVMLError) else "no orderings"
    raise MigPartedError(f"error attempting multiple config orderings: {text}")


def generated_configs(gpus: Sequence[TwinGpu]) -> dict[str, tuple[ConfigEntry, ...]]:
    """v26.3+ with no spec.migManager.config.name: configs generated from hardware (stack-facts §3.2):
    all-disabled, all-enabled and one all-<profile> (max instances) per profile. `all-balanced` is generated by
    the real builder too, but its counts are not derivable from the references, so the twin leaves it out."""
    out: dict[str, tuple[ConfigEntry, ...]] = {
        "all-disabled": (ConfigEntry((), None, False, {}),),
        "all-enabled": (ConfigEntry((), None, True, {}),),
    }
    seen: dict[str, dict[str, Any]] = {}
    for g in gpus:
        for p in g.profiles.values():
            seen.setdefault(p.name.replace("+", "."), {"profile": p.name, "n": p.max_instances})
    for name, v in sorted(seen.items()):
        out[f"all-{name}"] = (ConfigEntry((), None, True, {v["profile"]: v["n"]}),)
    return out
