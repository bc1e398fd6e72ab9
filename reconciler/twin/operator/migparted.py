"""mig-parted v1 configs, parsed, generated and applied to twin GPUs the way nvidia-mig-parted does (stack-facts.md §5).

`parse(text)` follows the v1 schema (`api/spec/v1/spec.go`): `version: v1` required ("unknown version: %v",
"unable to parse with missing 'version' field"), `mig-configs` with at least one entry, each a non-empty list
of `{device-filter?, devices: all|[i], mig-enabled, mig-devices}`; unknown fields → "unexpected field: %v".
`assert_applied` is `nvidia-mig-parted assert` (mode + profile→count equality per matched GPU, placement
ignored; "not all GPUs match the specified config"). `apply` is `nvidia-mig-parted apply`: when any matched
GPU's MIG mode differs, clear every MIG GPU and set the modes (one reset of all GPUs when a change is pending);
then per MIG GPU whose counts differ, clear all its GIs/CIs and create the devices with `CreateGpuInstance`
(no placement) in permutations of the profile order until one succeeds ("error attempting multiple config
orderings"). A pod holding a MIG device makes the clear fail with NVML_ERROR_IN_USE, which nvidia-smi renders
"In use by another client".
Pure except for `apply`, which mutates the GPUs it is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pynvml
import yaml

from reconciler.twin.gpus import SLICES_TO_CI_PROFILE, GiProfile, GpuInstance, TwinGpu

__all__ = [
    "ConfigEntry",
    "MigPartedError",
    "ModeChangeNotEffective",
    "ModeStepFailed",
    "apply",
    "assert_applied",
    "parse",
    "select",
]

# How nvidia-smi / mig-parted render the NVML codes the twin raises (stack-facts §6).
NVML_TEXT = {
    pynvml.NVML_ERROR_IN_USE: "In use by another client",
    pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient Resources",
    pynvml.NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    pynvml.NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
}


class MigPartedError(Exception):
    """A failed mig-parted command: str() is its final error; `details` the error lines it logged before."""

    def __init__(self, message: str, *, details: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.details = details


class ModeStepFailed(MigPartedError):
    """The MIG mode step failed (`ApplyMigMode`: clearing a MIG GPU, setting a mode, the reset): what mig-manager's
    `applyMigModeChange` reports, on which it reboots the node under WITH_REBOOT whatever the reason."""


class ModeChangeNotEffective(ModeStepFailed):
    """`apply --mode-only` + `assert --mode-only` failed: the MIG mode is still pending (a reboot may help)."""


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    device_filter: tuple[str, ...]  # "0x233510DE" (device+vendor), empty = any
    devices: tuple[int, ...] | None  # None = all
    mig_enabled: bool
    mig_devices: Mapping[str, int]

    def matches(self, gpu: TwinGpu) -> bool:
        """api/spec/v1/helpers.go `MatchesDeviceFilter` then `MatchesDevices`: no filter matches every GPU; else any
        filter, read by `types.NewDeviceIDFromString`, must `Match` the GPU's PCI ids (pkg/types/device.go)."""
        if self.devices is not None and gpu.index not in self.devices:
            return False
        if self.device_filter:
            hardware = _hardware_id(gpu)
            return any(_filter_matches(device_id_from_string(f), hardware) for f in self.device_filter)
        return True


# --- device ids, as pkg/types/device.go reads and matches them ------------------------------------------------
# DeviceID (Device, Vendor, SubsystemDevice, SubsystemVendor, HasSubsystem).
DeviceId = tuple[int, int, int, int, bool]
_ZERO_ID: DeviceId = (0, 0, 0, 0, False)  # what NewDeviceIDFromString returns with its error


def _go_parse_uint32(text: str) -> int | None:
    """strconv.ParseUint(text, 0, 32): the base from the prefix (0x/0X hex, 0o/0O or a bare leading 0 octal, 0b/0B
    binary, else decimal), underscores only where Go's integer literals allow them (`underscoreOK`), no sign, at most
    32 bits. None where Go returns an error."""
    if not text:
        return None
    body, base = text, 10
    if text[0] == "0":
        prefix = text[1:2].lower()
        if len(text) >= 3 and prefix in ("b", "o", "x"):
            body, base = text[2:], {"b": 2, "o": 8, "x": 16}[prefix]
        else:
            body, base = text[1:], 8
    digits = body.replace("_", "")
    allowed = "0123456789abcdef"[:base]
    if any(c not in allowed for c in digits.lower()):
        return None
    if "_" in body and not _underscore_ok(text):
        return None
    significant = digits.lstrip("0")
    if len(significant) > 32:  # over 32 bits in any base; also keeps int() clear of its digit limit
        return None
    value = int(significant, base) if significant else 0
    return value if value <= 0xFFFFFFFF else None


def _underscore_ok(text: str) -> bool:
    """strconv's underscoreOK: underscores only between digits, or between a base prefix and a digit."""
    saw, i = "^", 0
    hexa = False
    if len(text) >= 2 and text[0] == "0" and text[1].lower() in "box":
        i, saw, hexa = 2, "0", text[1].lower() == "x"
    for c in text[i:]:
        if c.isdigit() or (hexa and c.lower() in "abcdef"):
            saw = "0"
        elif c == "_":
            if saw != "0":
                return False
            saw = "_"
        else:
            if saw == "_":
                return False
            saw = "!"
    return saw != "_"


def device_id_from_string(text: str) -> DeviceId:
    """types.NewDeviceIDFromString, as `MatchesDeviceFilter` calls it: `<devicevendor>` or
    `<devicevendor>:<subdevicevendor>`, each `strconv.ParseUint(.., 0, 32)`; on any error the zero DeviceID (the
    caller drops the error), which matches no real GPU."""
    parts = text.split(":")
    if len(parts) > 2:
        return _ZERO_ID
    primary = _go_parse_uint32(parts[0])
    if primary is None:
        return _ZERO_ID
    if len(parts) == 1:
        return (primary >> 16, primary & 0xFFFF, 0, 0, False)
    sub = _go_parse_uint32(parts[1])
    if sub is None:
        return _ZERO_ID
    return (primary >> 16, primary & 0xFFFF, sub >> 16, sub & 0xFFFF, True)


def _hardware_id(gpu: TwinGpu) -> DeviceId:
    """cmd/nvidia-mig-parted/util/device.go GetGPUDeviceIDs: `NewDeviceIDWithSubsystem` from the PCI config space."""
    dev, sub = gpu.pci_device_id, gpu.pci_subsystem_id
    return (dev >> 16, dev & 0xFFFF, sub >> 16, sub & 0xFFFF, True)


def _filter_matches(flt: DeviceId, hardware: DeviceId) -> bool:
    """DeviceID.Matches: device and vendor equal; the subsystem too only when the filter names one."""
    if flt[:2] != hardware[:2]:
        return False
    return not flt[4] or flt[2:4] == hardware[2:4]


# --- parsing, as `nvidia-mig-parted assert --valid-config` does it ------------------------------------
# cmd/nvidia-mig-parted/assert/assert.go ParseConfigFile: sigs.k8s.io/yaml.Unmarshal (YAML → JSON through
# go.yaml.in/yaml/v2, then encoding/json into api/spec/v1 Spec, whose UnmarshalJSON methods do the checks).
# Each error carries the whole chain mig-parted prints: assertWrapper's "error parsing config file: ",
# ParseConfigFile's "unmarshal error: ", sigs.k8s.io/yaml's "error unmarshaling JSON: while decoding JSON: "
# (or "error converting YAML to JSON: " for YAML syntax), then Go's json or mig-parted's own text.
_PARSE = "error parsing config file: unmarshal error: "
_JSON = _PARSE + "error unmarshaling JSON: while decoding JSON: "
_YAML = _PARSE + "error converting YAML to JSON: "
_RAW_MAP = "map[string]json.RawMessage"  # what Spec/MigConfigSpec.UnmarshalJSON decode into first


class _GoYamlV2Loader(yaml.SafeLoader):
    """PyYAML's YAML 1.1 resolver plus go-yaml v2's extra booleans (resolve.go: y/Y/n/N)."""


_GoYamlV2Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))


def _construct_bool(loader: yaml.SafeLoader, node: yaml.Node) -> bool:
    value = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    return value.lower() in ("yes", "true", "on", "y")


def _construct_timestamp(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    # go-yaml v2 leaves timestamps as strings when decoding into interface{}; JSON has no dates anyway.
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


_GoYamlV2Loader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
_GoYamlV2Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)

_CParser: Any
try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]  # PyYAML's libyaml binding
except ImportError:  # PyYAML built without libyaml: the pure-Python loader reads everything
    _CParser = None


if _CParser is not None:

    class _GoYamlV2CLoader(_CParser, _GoYamlV2Loader):  # type: ignore[misc]
        """The same constructors and resolvers as `_GoYamlV2Loader` over libyaml's scanner and parser, of which
        PyYAML's pure-Python ones are a port: the same document, several times faster on the fleet-sized configs the
        twin's mig-manager reads (its CPU, not what it models). See `_load`."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)


# Text the libyaml path may read: printable ASCII and newlines. Anything else (tabs, CR, control or non-ASCII
# characters, where the two readers' checks could differ) is read by the pure-Python loader alone.
_PLAIN_TEXT = re.compile(r"[\x20-\x7e\n]*")


def _load(text: str) -> Any:
    """yaml.load(text) with `_GoYamlV2Loader`; plain text goes through libyaml first, and any refusal there is
    left to the pure-Python loader, so errors (and their marks) are always its own."""
    if _CParser is not None and _PLAIN_TEXT.fullmatch(text):
        try:
            return yaml.load(text, Loader=_GoYamlV2CLoader)
        except yaml.YAMLError:
            pass
    return yaml.load(text, Loader=_GoYamlV2Loader)


def _json_key(key: Any) -> str:
    """sigs.k8s.io/yaml convertToJSONableObject: non-string keys become strings."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {_json_key(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def _kind(v: Any) -> str:
    """The JSON kind encoding/json names in an UnmarshalTypeError."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _type_error(v: Any, go_type: str) -> str:
    return f"json: cannot unmarshal {_kind(v)} into Go value of type {go_type}"


def _go_int(v: Any) -> tuple[int, str | None]:
    """json into int: null leaves 0; an integral float is fine (JSON has one number type); else the error."""
    if v is None:
        return 0, None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return 0, _type_error(v, "int")
    if isinstance(v, float) and not v.is_integer():
        return 0, f"json: cannot unmarshal number {v!r} into Go value of type int"
    return int(v), None


def _go_string(v: Any) -> tuple[str, str | None]:
    if v is None:
        return "", None
    if isinstance(v, str):
        return v, None
    return "", _type_error(v, "string")


def _go_list(v: Any, elem: str) -> tuple[list[Any], str | None]:
    """json into []int / []string: null is an empty slice; the first element error is returned."""
    if v is None:
        return [], None
    if not isinstance(v, list):
        return [], _type_error(v, f"[]{elem}")
    out: list[Any] = []
    for x in v:
        got, err = _go_int(x) if elem == "int" else _go_string(x)
        if err is not None:
            return [], err
        out.append(got)
    return out, None


def profile_format_error(profile: str) -> str | None:
    """go-nvlib pkg/nvlib/device/mig_profile.go parseMigProfile (what AssertValidMigProfileFormat runs)."""
    if profile == "":
        return "profile is the empty string"
    split = profile.split("+", 1)
    negsplit = profile.split("-", 1)
    if len(split) == 2 and len(negsplit) == 2:
        return f"profile '{profile}' contains both '+/-' attributes"
    if len(split) == 1:
        split = negsplit
    err = _profile_fields_error(split[0])
    if err is not None:
        return f"cannot parse fields of '{profile}': {err}"
    if len(split) == 2:
        err = _profile_attributes_error(split[1])
        if err is not None:
            return f"cannot parse attributes of '{profile}': {err}"
    return None


def _profile_field_error(s: str, field: str) -> str | None:
    if s.strip() != s:
        return f"leading or trailing spaces on '%d{field}'"
    if not s.endswith(field):
        return f"missing '{field}' from '%d{field}'"
    if re.fullmatch(r"[+-]?[0-9]+", s[: -len(field)]) is None:  # strconv.Atoi
        return f"malformed number in '%d{field}'"
    return None


def _profile_fields_error(s: str) -> str | None:
    parts = s.split(".", 2)
    names = {3: ("c", "g", "gb"), 2: ("g", "gb")}.get(len(parts))
    if names is None:
        return "parsed wrong number of fields, expected 2 or 3"
    for part, name in zip(parts, names, strict=True):
        err = _profile_field_error(part, name)
        if err is not None:
            return err
    return None


def _profile_attributes_error(s: str) -> str | None:
    seen: set[str] = set()
    for a in s.split(","):
        if a in seen:
            return "non unique attribute in list"
        if a == "":
            return "empty attribute in list"
        if a.strip() != a:
            return "leading or trailing spaces in attribute"
        if a[0].isdigit():
            return "attribute begins with a number"
        if a[0] == "." or a[-1] == ".":
            return "attribute begins/ends with a dot"
        if re.fullmatch(r"[A-Za-z0-9.]+", a) is None:
            return "non alpha-numeric character or digit in attribute"
        seen.add(a)
    return None


def _mig_devices(v: Any) -> tuple[dict[str, int] | None, str | None]:
    """json into types.MigConfig, then MigConfig.AssertValidFormat (pkg/types/mig_config.go)."""
    if v is None:
        return None, None  # json null into a map: nil
    if not isinstance(v, dict):
        return None, _type_error(v, "types.MigConfig")
    counts: dict[str, int] = {}
    for k, x in v.items():
        n, err = _go_int(x)
        if err is not None:
            return None, err
        counts[k] = n
    # Go walks the map in random order; the twin checks keys in sorted order (exact for one fault per file).
    for k in sorted(counts):
        err = profile_format_error(k)
        if err is not None:
            return None, f"error validating values in 'mig-devices' field: invalid format for '{k}': {err}"
        if counts[k] < 0:
            # sic: mig-parted prints the count, and the (nil) error of the format check before it
            return None, f"error validating values in 'mig-devices' field: invalid count for '{counts[k]}': <nil>"
    if counts and not any(n > 0 for n in counts.values()):
        return None, "error validating values in 'mig-devices' field: all counts for all MigProfiles are 0"
    return counts, None


def _entry(raw: Any) -> ConfigEntry:
    """api/spec/v1/spec.go MigConfigSpec.UnmarshalJSON."""
    if raw is None:
        raw = {}  # json null into map[string]json.RawMessage: a nil map, no error
    if not isinstance(raw, dict):
        raise MigPartedError(_JSON + _type_error(raw, _RAW_MAP))
    for key in ("devices", "mig-enabled"):
        if key not in raw:
            raise MigPartedError(_JSON + f"missing required field: {key}")
    devices: tuple[int, ...] | None = None
    filters: tuple[str, ...] = ()
    enabled = False
    mig_devices: dict[str, int] | None = None
    for key in sorted(raw):  # Go: random map order
        v = raw[key]
        if key == "device-filter":
            filters = _device_filter(v)
        elif key == "devices":
            devices = _devices(v)
        elif key == "mig-enabled":
            if v is not None and not isinstance(v, bool):
                raise MigPartedError(_JSON + _type_error(v, "bool"))
            enabled = bool(v)
        elif key == "mig-devices":
            mig_devices, err = _mig_devices(v)
            if err is not None:
                raise MigPartedError(_JSON + err)
        else:
            raise MigPartedError(_JSON + f"unexpected field: {key}")
    if enabled and mig_devices is None:
        raise MigPartedError(_JSON + "missing required field 'mig-devices' when 'mig-enabled' is true")
    if not enabled and mig_devices:
        raise MigPartedError(_JSON + "MIG devices included when 'mig-enabled' is false")
    return ConfigEntry(filters, devices, enabled, dict(mig_devices or {}))


def _device_filter(v: Any) -> tuple[str, ...]:
    text, err1 = _go_string(v)
    if err1 is None:
        return (text,) if text else ()
    many, err2 = _go_list(v, "string")
    if err2 is None:
        return tuple(many)
    raise MigPartedError(_JSON + f"({err1}, {err2})")


def _devices(v: Any) -> tuple[int, ...] | None:
    text, err1 = _go_string(v)
    if err1 is None:
        if text != "all":
            raise MigPartedError(_JSON + f"invalid string input for 'devices': {text}")
        return None
    idx, err2 = _go_list(v, "int")
    if err2 is None:
        return tuple(idx)
    raise MigPartedError(_JSON + f"({err1}, {err2})")


def parse(text: str) -> dict[str, tuple[ConfigEntry, ...]]:
    """The configs of a mig-parted config file; MigPartedError with mig-parted's text when it would refuse it.

    An empty (or null) document parses to no configs, as in mig-parted: the failure then comes from selecting
    a config ("selected mig-config not present")."""
    try:
        doc = _jsonable(_load(text))
    except yaml.YAMLError as exc:
        # go-yaml words syntax errors "yaml: line N: <problem>"; the problem text is PyYAML's [approximate].
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise MigPartedError(f"{_YAML}yaml: {line}{problem}") from exc
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise MigPartedError(_JSON + _type_error(doc, _RAW_MAP))
    # api/spec/v1/spec.go Spec.UnmarshalJSON
    if "version" not in doc and doc:
        raise MigPartedError(_JSON + "unable to parse with missing 'version' field")
    version, err = _go_string(doc.get("version"))
    if err is not None:
        raise MigPartedError(_JSON + err)
    if version != "v1":
        raise MigPartedError(_JSON + f"unknown version: {version}")
    out: dict[str, tuple[ConfigEntry, ...]] = {}
    for key in sorted(k for k in doc if k != "version"):
        if key != "mig-configs":
            raise MigPartedError(_JSON + f"unexpected field: {key}")
        out = _mig_configs(doc[key])
    return out


def _mig_configs(configs: Any) -> dict[str, tuple[ConfigEntry, ...]]:
    if configs is not None and not isinstance(configs, dict):
        raise MigPartedError(_JSON + _type_error(configs, "map[string]v1.MigConfigSpecSlice"))
    out: dict[str, tuple[ConfigEntry, ...]] = {}
    # json.Marshal sorts object keys, so encoding/json decodes the configs in name order; every entry is
    # decoded before the emptiness checks run.
    for name, entries in sorted((configs or {}).items()):
        if entries is not None and not isinstance(entries, list):
            raise MigPartedError(_JSON + _type_error(entries, "v1.MigConfigSpecSlice"))
        out[name] = tuple(_entry(e) for e in entries or [])
    if not out:
        raise MigPartedError(_JSON + "at least one entry in 'mig-configs' is required")
    for name, entries_ in out.items():
        if not entries_:
            raise MigPartedError(_JSON + f"at least one entry in '{name}' is required")
    return out


def select(configs: Mapping[str, tuple[ConfigEntry, ...]], name: str) -> tuple[ConfigEntry, ...]:
    """assert.go GetSelectedMigConfig (mig-manager always passes -c <label value>)."""
    if name not in configs:
        raise MigPartedError(f"error selecting MIG config: selected mig-config not present: {name}")
    return configs[name]


def walk(entries: Sequence[ConfigEntry], gpus: Sequence[TwinGpu]) -> list[tuple[TwinGpu, ConfigEntry]]:
    """cmd/nvidia-mig-parted/assert/assert.go `WalkSelectedMigConfigForEachGPU`: every entry in file order, and for
    each the GPUs it matches in index order. A GPU matched by several (overlapping) entries is visited once per
    entry, so every step applies each of them in turn and the last one wins."""
    return [(gpu, e) for e in entries for gpu in gpus if e.matches(gpu)]


def _wanted(entry: ConfigEntry) -> dict[str, int]:
    return {k: v for k, v in entry.mig_devices.items() if v > 0}


def _equals(current: Mapping[str, int], desired: Mapping[str, int]) -> bool:
    """pkg/types/mig_config.go MigConfig.Equals: same number of keys, every current profile present (count > 0)
    in the desired map with the same count. A desired profile listed with count 0 makes the maps' lengths
    differ, so such a config never asserts as applied (mig-manager re-applies it on every new label value)."""
    if len(current) != len(desired):
        return False
    return all(desired.get(k, 0) > 0 and desired[k] == v for k, v in current.items())


def assert_applied(entries: Sequence[ConfigEntry], gpus: Sequence[TwinGpu]) -> bool:
    """cmd/nvidia-mig-parted/assert/config.go AssertMigConfig: every GPU must be matched, a GPU with MIG off
    matches a mig-enabled: false entry, otherwise its devices must Equal the entry's (placement ignored; an
    empty MIG-enabled GPU also matches a mig-enabled: false entry, as GetMigConfig returns an empty map)."""
    matched: dict[int, bool] = {}  # matched[i], overwritten by each entry that walks GPU i: the last one counts
    for gpu, e in walk(entries, gpus):
        if not e.mig_enabled and not gpu.mig_current:
            matched[gpu.index] = True
            continue
        if not gpu.mig_current:
            return False  # GetMigConfig: "error asserting MIG enabled"
        matched[gpu.index] = _equals(gpu.geometry(), e.mig_devices)
    return sum(matched.values()) == len(gpus)  # CountTrue: "not all GPUs match the specified config"


def apply(entries: Sequence[ConfigEntry], gpus: Sequence[TwinGpu]) -> None:
    """nvidia-mig-parted apply, as `cmd/nvidia-mig-parted/apply/apply.go` `ApplyMigConfigWithHooks` runs it:

    1. only when `AssertMigMode` fails (some matched GPU's current mode differs), `ApplyMigMode`
       (apply/mode.go): for EVERY matched GPU, `ClearMigConfig` when its current mode is not Disabled (so a
       mode flip on one GPU destroys the instances of every MIG GPU of the node), then `SetMigMode`; if any
       change is pending, `ResetAllGPUs` (util/device.go `nvmlResetAllGPUs`: `nvidia-smi -r -i` with every
       GPU of the node);
    2. `ApplyMigConfig` (apply/config.go): per MIG-enabled GPU, skipped when its profile counts equal the
       config (`current.Equals`), else `SetMigConfig` (pkg/mig/config/config.go), which clears every
       instance of the GPU and creates the whole set: a re-cut replaces all of the GPU's instances.
    Raises MigPartedError with the text mig-manager would log."""
    matched = walk(entries, gpus)  # overlapping entries: each applied in turn, the last one wins
    try:
        if any(gpu.mig_current != e.mig_enabled for gpu, e in matched):  # AssertMigMode failed
            _apply_mig_mode(matched, gpus)
        for gpu, e in matched:  # ApplyMigConfig
            # An earlier overlapping entry whose mode the last one overrode: apply/config.go's own refusals.
            if e.mig_enabled and not gpu.mig_current:
                raise MigPartedError(_APPLY + "unable to apply MIG config with MIG mode disabled")
            if not e.mig_enabled and gpu.mig_current:
                raise MigPartedError(
                    _APPLY + "MIG mode is currently enabled, but the configuration specifies it should be disabled"
                )
            if not e.mig_enabled or _equals(gpu.geometry(), e.mig_devices):
                continue  # "Skipping MIG config -- MIG disabled" / "Skipping -- already set to desired value"
            _set_mig_config(gpu, _wanted(e))
    except pynvml.NVMLError as exc:
        text = NVML_TEXT.get(exc.value, str(exc))
        raise MigPartedError(_APPLY + f"error setting MIG mode: {text}") from exc


_APPLY = "error applying MIG configuration with hooks: "


def _apply_mig_mode(matched: Sequence[tuple[TwinGpu, ConfigEntry]], gpus: Sequence[TwinGpu]) -> None:
    """The mode step (apply/mode.go ApplyMigMode): any failure in it is a ModeStepFailed."""
    try:
        for gpu, e in matched:  # ApplyMigMode walks every GPU of the config
            if gpu.mig_current:  # currentMode != Disabled: ClearMigConfig, whether its mode changes or not
                _clear_or_raise(gpu, "error clearing existing MIG configurations: ")
            gpu.set_mig_mode(e.mig_enabled)
    except MigPartedError as exc:
        raise ModeStepFailed(str(exc), details=exc.details) from exc
    except pynvml.NVMLError as exc:
        text = NVML_TEXT.get(exc.value, str(exc))
        raise ModeStepFailed(_APPLY + f"error setting MIG mode: {text}") from exc
    if any(gpu.mig_current != gpu.mig_pending for gpu, _ in matched):
        # ResetAllGPUs resets every GPU of the node, not only the pending ones.
        stuck = [gpu.index for gpu in gpus if not gpu.reset()]
        if stuck:
            raise ModeChangeNotEffective(f"GPUs {stuck}: MIG mode change is pending, a GPU reset did not apply it")


def capitalize(text: str) -> str:
    """cmd/nvidia-mig-parted/util Capitalize: how mig-parted prints its fatal error and per-ordering errors."""
    return text[:1].upper() + text[1:]


def _clear(gpu: TwinGpu) -> None:
    """pkg/mig/config/config.go ClearMigConfig: destroy every CI, then its GI, walking GIs by profile; the first
    failure ends it (NVML is not transactional: what was destroyed before stays destroyed). Raises the text of
    the error chain, e.g. "error walking gpu instances for '0': error walking compute instances for '9': error
    destroying Compute instance for profile '(2, 0)': In use by another client" (CI profile id, CI engine
    profile id; go-nvml prints an nvml.Return as nvmlErrorString)."""
    for gi in sorted(gpu.gpu_instances.values(), key=lambda g: (g.profile.enum, g.id)):
        for ci_id, ci in sorted(gi.compute_instances.items()):
            try:
                gpu.destroy_compute_instance(gi, ci_id)
            except pynvml.NVMLError as exc:
                text = NVML_TEXT.get(exc.value, str(exc))
                raise MigPartedError(
                    f"error walking gpu instances for '{gpu.index}': error walking compute instances for "
                    f"'{gi.profile.enum}': error destroying Compute instance for profile '({ci.profile_enum}, 0)': "
                    f"{text}"
                ) from exc
        try:
            gpu.destroy_gpu_instance(gi.id)
        except pynvml.NVMLError as exc:
            text = NVML_TEXT.get(exc.value, str(exc))
            raise MigPartedError(
                f"error walking gpu instances for '{gpu.index}': error destroying GPU instance for profile "
                f"'{gi.profile.enum}': {text}"
            ) from exc


def _clear_or_raise(gpu: TwinGpu, prefix: str) -> None:
    try:
        _clear(gpu)
    except MigPartedError as exc:
        raise MigPartedError(_APPLY + prefix + str(exc)) from exc


def _set_mig_config(gpu: TwinGpu, wanted: Mapping[str, int]) -> None:
    """config.go SetMigConfig under apply/config.go ApplyMigConfig ("error setting MIGConfig: ..."): for each
    ordering of the profiles (iteratePermutationsUntilSuccess), clear the GPU ("error clearing MigConfig: ...")
    and create the devices; every failed ordering is logged (capitalized), and when all fail the error is
    "error attempting multiple config orderings: all orderings failed". The per-ordering lines travel in
    MigPartedError.details, the way they reach mig-manager's log before mig-parted's fatal line."""
    profiles = flatten(wanted)
    for p in profiles:
        if _resolve(gpu, p) is None:
            raise MigPartedError(
                _APPLY + "error setting MIGConfig: error attempting multiple config orderings: all orderings failed",
                details=(capitalize(f'MIG profile "{_canonical(p)}" not found on this GPU'),),
            )
    details: list[str] = []
    tried: set[tuple[str, ...]] = set()
    for order in orderings(profiles):
        tried.add(order)
        try:
            _clear(gpu)
        except MigPartedError as exc:
            details.append(capitalize(f"error clearing MigConfig: {exc}"))
            continue
        try:
            _create(gpu, order)
            return
        except MigPartedError as exc:
            details.append(capitalize(str(exc)))
            gpu.clear()
        if len(tried) > 5040:  # 7! orderings at most matter; keep the twin bounded
            break
    raise MigPartedError(
        _APPLY + "error setting MIGConfig: error attempting multiple config orderings: all orderings failed",
        details=tuple(details[-3:]),  # the twin keeps the last few per-ordering lines, not thousands
    )


def _canonical(profile: str) -> str:
    """types.MigProfile.String(): `<C>c.` only when C differs from G (`3c.3g.71gb` is `3g.71gb`)."""
    g, c, _ = _gc_attrs(profile)
    head, sep, attrs = profile.partition("+")
    base = head.split(".", 1)[1] if head.split(".", 1)[0].endswith("c") else head
    return (base if c == g else f"{c}c.{base}") + sep + attrs


def _resolve(gpu: TwinGpu, profile: str) -> tuple[GiProfile, int] | None:
    """config.go resolveMigProfileOnDevice: the GPU-instance profile and compute-instance slices of a profile the
    GPU offers (go-nvlib GetMigProfiles: each GI profile with each CI profile of at most its slices), else None."""
    g, c, _ = _gc_attrs(profile)
    head, sep, attrs = profile.partition("+")
    base = head.split(".", 1)[1] if head.split(".", 1)[0].endswith("c") else head
    gi = gpu.profile_by_name(base + sep + attrs)
    if gi is None or gi.compute_slices != g or c > g or c not in SLICES_TO_CI_PROFILE:
        return None
    return gi, c


def _create(gpu: TwinGpu, order: Sequence[str]) -> None:
    """One ordering of config.go SetMigConfig's loop, compute-instance packing included: a profile whose GPU-instance
    profile is the previous one's (`reuseGI`: the GI exists and `lastGIProfileID` is the same) first tries a
    compute instance inside that GI; when the CI cannot be made there it falls back to a new GI
    (`reuseGI = false; continue`). So `1c.3g.71gb: 3` is three CIs in one 3g GI, not three GIs."""
    last_gi_profile: int | None = None
    gi: GpuInstance | None = None
    for p in order:
        resolved = _resolve(gpu, p)
        assert resolved is not None  # checked for every profile before the orderings
        prof, ci_slices = resolved
        reuse = gi is not None and last_gi_profile == prof.id
        last_gi_profile = prof.id
        while True:
            if not reuse:
                try:
                    gi = gpu.create_gpu_instance(prof.id)
                except pynvml.NVMLError as exc:
                    text = NVML_TEXT.get(exc.value, str(exc))
                    raise MigPartedError(f"error creating GPU instance for '{_canonical(p)}': {text}") from exc
            assert gi is not None
            try:
                gpu.create_compute_instance(gi, SLICES_TO_CI_PROFILE[ci_slices])
            except pynvml.NVMLError as exc:
                if reuse:
                    reuse = False
                    continue
                text = NVML_TEXT.get(exc.value, str(exc))
                raise MigPartedError(f"error creating Compute instance for '{_canonical(p)}': {text}") from exc
            break


def _gc_attrs(profile: str) -> tuple[int, int, str]:
    """(G, C, attributes) of a profile name: `3g.71gb` -> (3, 3, ""), `1c.3g.71gb` -> (3, 1, ""),
    `1g.18gb+me` -> (1, 1, "me") (go-nvlib MigProfileInfo; attributes joined with ",")."""
    head, _, attrs = profile.partition("+")
    parts = head.split(".")
    c = g = 0
    for part in parts:
        if part.endswith("c") and part[:-1].isdigit():
            c = int(part[:-1])
        elif part.endswith("g") and part[:-1].isdigit():
            g = int(part[:-1])
    return g, c or g, ",".join(a for a in attrs.split("+") if a)


def flatten(wanted: Mapping[str, int]) -> list[str]:
    """pkg/types/mig_config.go `MigConfig.Flatten`: each profile `count` times, largest first: G descending, then C
    descending, then the attributes (joined) descending."""
    out = [p for p, n in wanted.items() if n > 0 for _ in range(n)]
    return sorted(out, key=lambda p: (-_gc_attrs(p)[0], -_gc_attrs(p)[1], _Desc(_gc_attrs(p)[2])))


@dataclass(frozen=True, slots=True, order=False)
class _Desc:
    """A string that sorts descending."""

    text: str

    def __lt__(self, other: _Desc) -> bool:
        return self.text > other.text


def orderings(profiles: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """pkg/mig/config/config.go `iteratePermutationsUntilSuccess`: the in-place swap recursion from Flatten's order,
    skipping a swap with an equal profile already tried at that position (`shouldSwap`: Flatten repeats the same
    profile object, so equal names are the same pointer)."""
    mps = list(profiles)

    def rec(i: int) -> Iterator[tuple[str, ...]]:
        if i >= len(mps):
            yield tuple(mps)
            return
        for j in range(i, len(mps)):
            if all(mps[k] != mps[j] for k in range(i, j)):
                mps[i], mps[j] = mps[j], mps[i]
                yield from rec(i + 1)
                mps[i], mps[j] = mps[j], mps[i]

    return rec(0)


# pkg/mig/builder/balanced.go balancedFormula: total slices (the largest base profile's G) -> {G: count}.
_BALANCED_FORMULA = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}


def _device_id(gpu: TwinGpu) -> str:
    """types.DeviceID.String() of the GPU's PCI id: 0x<device><vendor>, upper-case hex."""
    return f"0x{gpu.pci_device_id:08X}"


def generated_configs(gpus: Sequence[TwinGpu]) -> dict[str, tuple[ConfigEntry, ...]]:
    """No spec.migManager.config.name: mig-manager generates the configs from the hardware
    (cmd/nvidia-mig-manager/main.go setupMigConfig → pkg/mig/builder/builder.go buildMigConfigSpec, profiles
    from pkg/mig/discovery: GPU-instance profiles, CI sub-profiles skipped, max count = instance count).

    * all-disabled, all-enabled;
    * all-balanced (balanced.go): per device type, the base profiles (no +me/-x attribute) of 1, 2 and 3
      slices, for each G the one with the highest max count, counted by balancedFormula for the device's
      largest base profile (7 or 4 slices); a device type missing one is skipped; no config if none fits;
    * all-<profile with + as .> per profile: one entry per distinct max count.
    Entries carry a device-filter only when the node has more than one device type."""
    per_device: dict[str, dict[str, int]] = {}  # device id -> profile name -> max count
    for g in gpus:
        if not g.profiles:
            continue  # not MIG-capable: skipped by discovery
        per_device.setdefault(_device_id(g), {p.name: p.max_instances for p in g.profiles.values()})
    many = len(per_device) > 1

    def filt(ids: list[str]) -> tuple[str, ...]:
        return tuple(sorted(ids)) if many else ()

    out: dict[str, tuple[ConfigEntry, ...]] = {
        "all-disabled": (ConfigEntry((), None, False, {}),),
        "all-enabled": (ConfigEntry((), None, True, {}),),
    }
    balanced = []
    for dev in sorted(per_device):
        counts = _balanced(per_device[dev])
        if counts is not None:
            balanced.append(ConfigEntry(filt([dev]), None, True, counts))
    if balanced:
        out["all-balanced"] = tuple(balanced)
    names = sorted({name for profiles in per_device.values() for name in profiles})
    for name in names:
        by_count: dict[int, list[str]] = {}
        for dev, profiles in per_device.items():
            if name in profiles:
                by_count.setdefault(profiles[name], []).append(dev)
        out[f"all-{name.replace('+', '.')}"] = tuple(
            ConfigEntry(filt(devs), None, True, {name: n}) for n, devs in sorted(by_count.items())
        )
    return out


def _balanced(profiles: Mapping[str, int]) -> dict[str, int] | None:
    base = {n: c for n, c in profiles.items() if "+" not in n and "-" not in n}
    slots = max((int(n.split("g.", 1)[0].split(".")[-1]) for n in base), default=0)
    formula = _BALANCED_FORMULA.get(slots)
    if formula is None:
        return None
    chosen: dict[int, tuple[str, int]] = {}
    for n, c in sorted(base.items()):
        g = int(n.split("g.", 1)[0].split(".")[-1])
        if 1 <= g <= 3 and (g not in chosen or c > chosen[g][1]):
            chosen[g] = (n, c)
    if any(g not in chosen for g in formula):
        return None
    return {chosen[g][0]: count for g, count in formula.items()}
