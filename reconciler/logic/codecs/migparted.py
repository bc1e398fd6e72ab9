"""Render the inventory as a mig-parted v1 config, and read such a config back strictly.

Pure. The GPU Operator's mig-manager applies the config named by a node's `nvidia.com/mig.config`
label, taken from the ConfigMap that ClusterPolicy `spec.migManager.config.name` points at (key
`config.yaml`, stack-facts §3.2). mig-parted's v1 format (stack-facts §5.1) has no placement fields:
each entry is `devices`, `mig-enabled` and a profile -> count map, and the driver picks the
placements. So one named config per *distinct node layout*, with one `devices: [i]` entry per GPU
(mig-parted's `assert` fails unless every GPU of the node is matched by an entry) and
`mig-enabled: false` for GPUs without MIG.

The text is emitted by hand, in the style of NVIDIA's own files (quoted profile keys, two-space
indent), so it diffs cleanly and is byte-stable for a given inventory. `parse_strict` is a reader
modelled on mig-parted's own strict UnmarshalJSON: tests round-trip every rendering through it and
run it over NVIDIA's files, and the planner uses it to learn a node's previous layout.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import yaml

from reconciler.model import yamlbudget
from reconciler.model.inventory import DesiredState, GpuSpec, NodeSpec

# Always present: the GPU Operator labels a MIG-capable node without a label `all-disabled`
# (stack-facts §3.1). If our ConfigMap lacked that name, mig-manager would mark such nodes failed
# as soon as the ClusterPolicy points at our ConfigMap.
ALL_DISABLED = "all-disabled"
CONFIG_KEY = "config.yaml"  # the key mig-manager reads (stack-facts §3.2)
ALIAS_SUFFIX = "-reapply"
_LABEL_VALUE_MAX = 63
_PROFILE_RE = re.compile(r"^(?:\d+c\.)?\d+g\.\d+gb(?:(?:\+|-)[A-Za-z][A-Za-z0-9.]*(?:,[A-Za-z][A-Za-z0-9.]*)*)?$")


@dataclass(frozen=True, slots=True)
class GpuLayout:
    """One GPU's geometry as mig-parted sees it: MIG mode and profile counts (no placements)."""

    mig_enabled: bool
    devices: tuple[tuple[str, int], ...] = ()  # sorted (profile, count), counts > 0

    def resources(self) -> frozenset[str]:
        """Extended resources this GPU contributes to under the mixed strategy."""
        if not self.mig_enabled:
            return frozenset({"nvidia.com/gpu"})
        return frozenset("nvidia.com/mig-" + p.replace("+", ".") for p, _ in self.devices)


@dataclass(frozen=True, slots=True)
class MigPartedConfig:
    """A rendered config file and which config name each node should carry."""

    text: str
    node_configs: Mapping[str, str]  # node name -> config name
    layouts: Mapping[str, Mapping[int, GpuLayout]]  # config name -> GPU index -> layout


class MigPartedFormatError(ValueError):
    """The text is not a valid mig-parted v1 config (messages follow mig-parted's own)."""


def gpu_layout(gpu: GpuSpec) -> GpuLayout:
    if not gpu.mig_enabled:
        return GpuLayout(mig_enabled=False)
    counts: dict[str, int] = {}
    for p in gpu.partitions:
        counts[p.profile] = counts.get(p.profile, 0) + 1
    return GpuLayout(mig_enabled=True, devices=tuple(sorted(counts.items())))


def node_layout(node: NodeSpec) -> tuple[tuple[int, GpuLayout], ...]:
    return tuple(sorted((g.index, gpu_layout(g)) for g in node.gpus))


def _canonical(layout: tuple[tuple[int, GpuLayout], ...]) -> str:
    parts = []
    for index, gl in layout:
        devs = ",".join(f"{p}={n}" for p, n in gl.devices)
        parts.append(f"{index}:{'mig' if gl.mig_enabled else 'nomig'}[{devs}]")
    return ";".join(parts)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._") or "custom"


def config_name(node: NodeSpec) -> str:
    """A stable, label-safe name for the node's layout: migplan-<n>x-<layout>-<hash>.

    The hash makes two different layouts never share a name; the readable middle tells a person
    looking at `kubectl get node -L nvidia.com/mig.config` what the node is meant to carry.
    """
    layout = node_layout(node)
    digest = hashlib.sha256(_canonical(layout).encode()).hexdigest()[:8]
    names = {g.layout for g in node.gpus if g.mig_enabled}
    if not any(g.mig_enabled for g in node.gpus):
        middle = "disabled"
    elif len(names) == 1 and None not in names:
        middle = _slug(str(next(iter(names))))
    else:
        middle = "custom"
    head = f"migplan-{len(node.gpus)}x-"
    # Leave room for the re-apply suffix (alias_name) within a label value's 63 characters.
    room = _LABEL_VALUE_MAX - len(ALIAS_SUFFIX) - len(head) - len(digest) - 1
    return f"{head}{middle[:room].rstrip('-._')}-{digest}"


# The controller keeps one DesiredState until Git changes and renders it every cycle: the last rendering is
# remembered by the DesiredState's identity (kept alive here, so its id is not reused; both are frozen values).
_LAST: list[tuple[DesiredState, MigPartedConfig]] = []


def render(desired: DesiredState) -> MigPartedConfig:
    """The ConfigMap's `config.yaml`: all-disabled plus one config per distinct node layout.
    Pure; the last result is remembered for the same DesiredState object (_LAST)."""
    last = _LAST[0] if _LAST else None
    if last is not None and last[0] is desired:
        return last[1]
    out = _render(desired)
    _LAST[:] = [(desired, out)]
    return out


def _render(desired: DesiredState) -> MigPartedConfig:
    by_layout: dict[tuple[tuple[int, GpuLayout], ...], str] = {}
    node_configs: dict[str, str] = {}
    for name in sorted(desired.nodes):
        node = desired.nodes[name]
        layout = node_layout(node)
        cfg = by_layout.get(layout)
        if cfg is None:
            cfg = config_name(node)
            by_layout[layout] = cfg
        node_configs[name] = cfg
    configs = {cfg: layout for layout, cfg in by_layout.items()}
    lines = [
        "# Rendered by migplan from the inventory; do not edit (changes are overwritten).",
        "version: v1",
        "mig-configs:",
        f"  {ALL_DISABLED}:",
        "    - devices: all",
        "      mig-enabled: false",
    ]
    for cfg in sorted(configs):
        lines.append("")
        lines.append(f"  {cfg}:")
        for index, gl in configs[cfg]:
            lines.append(f"    - devices: [{index}]")
            lines.append(f"      mig-enabled: {'true' if gl.mig_enabled else 'false'}")
            if gl.mig_enabled:
                if not gl.devices:
                    lines.append("      mig-devices: {}")
                else:
                    lines.append("      mig-devices:")
                    lines.extend(f'        "{p}": {n}' for p, n in gl.devices)
    layouts = {cfg: dict(layout) for cfg, layout in configs.items()}
    return MigPartedConfig(text="\n".join(lines) + "\n", node_configs=node_configs, layouts=layouts)


# --- strict reader (stack-facts §5.1) -------------------------------------------------------------

_ENTRY_KEYS = frozenset({"device-filter", "devices", "mig-enabled", "mig-devices"})


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    devices: tuple[int, ...] | None  # None = "all"
    mig_enabled: bool
    mig_devices: Mapping[str, int]
    device_filter: tuple[str, ...] = ()


def _shown(value: object, limit: int = 60) -> str:
    """A value from the parsed text as a message may quote it (its repr): cut, one line."""
    return _cut(repr(value), limit)


def _cut(value: object, limit: int = 60) -> str:
    """A value from the parsed text as mig-parted words it (str): cut, one line."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# One cycle parses the same ConfigMap text up to four times (the planner's before and after, the configs it carries
# over, the disruption guard's previous configs): 0.2 s each at 5,000 nodes. The last texts that parsed are
# remembered by value with their entries, shared by every caller: frozen, mig_devices included (a read-only view,
# _parse_entry), so no caller can change what the next one reads; each call gets its own outer dict. A text that
# fails is never remembered (it raises every time). Bounded: cleared when full.
_PARSED: dict[str, dict[str, tuple[ConfigEntry, ...]]] = {}
_PARSED_LIMIT = 4


def parse_strict(text: str) -> Mapping[str, tuple[ConfigEntry, ...]]:
    """Parse a mig-parted v1 config the way mig-parted does, raising MigPartedFormatError.

    The text is measured before it is loaded (reconciler.model.yamlbudget): a few hundred bytes of aliases
    in the ConfigMap, which anyone allowed to edit it can write, must not expand to gigabytes."""
    hit = _PARSED.get(text)
    if hit is None:
        hit = _parse_strict(text)
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        _PARSED[text] = hit
    return dict(hit)


def _parse_strict(text: str) -> dict[str, tuple[ConfigEntry, ...]]:
    if (too_much := yamlbudget.problem(text)) is not None:
        raise MigPartedFormatError(f"unable to parse YAML: {too_much}")
    try:
        doc = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        raise MigPartedFormatError(f"unable to parse YAML: {exc}") from exc
    except UnicodeEncodeError as exc:
        # A lone surrogate (a JSON `\ud800` escape in the ConfigMap as the client decoded it): the C reader
        # encodes the text to UTF-8 first and fails there; mig-parted (Go) never sees such text either.
        raise MigPartedFormatError(f"unable to parse YAML: not UTF-8 text at character {exc.start}") from exc
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        # PyYAML's constructors raise these, not YAMLError, on a value its tag does not fit: an implicit date
        # that is not one (`2026-13-45`), `!!int x`, `!!bool maybe`. No mig-parted field holds such a value.
        raise MigPartedFormatError(f"unable to parse YAML: a value cannot be read ({type(exc).__name__})") from exc
    if not isinstance(doc, dict):
        raise MigPartedFormatError("config is not a mapping")
    if "version" not in doc:
        raise MigPartedFormatError("unable to parse with missing 'version' field")
    if doc["version"] != "v1":
        raise MigPartedFormatError(f"unknown version: {_cut(doc['version'])}")
    for key in doc:
        if key not in ("version", "mig-configs"):
            raise MigPartedFormatError(f"unexpected field: {_cut(key)}")
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise MigPartedFormatError("missing required field 'mig-configs' (at least one config)")
    out: dict[str, tuple[ConfigEntry, ...]] = {}
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            raise MigPartedFormatError(f"config {_shown(name)}: at least one entry required")
        out[str(name)] = tuple(_parse_entry(str(name), e) for e in entries)
    return out


def _parse_entry(name: str, raw: object) -> ConfigEntry:
    if not isinstance(raw, dict):
        raise MigPartedFormatError(f"config {_shown(name)}: entry is not a mapping")
    for key in raw:
        if key not in _ENTRY_KEYS:
            raise MigPartedFormatError(f"unexpected field: {_cut(key)}")
    for key in ("devices", "mig-enabled"):
        if key not in raw:
            raise MigPartedFormatError(f"missing required field '{key}'")
    devices_raw = raw["devices"]
    devices: tuple[int, ...] | None
    if devices_raw == "all":
        devices = None
    elif isinstance(devices_raw, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in devices_raw):
        devices = tuple(devices_raw)
    else:
        raise MigPartedFormatError(f"invalid format for 'devices': {_shown(devices_raw)}")
    enabled = raw["mig-enabled"]
    if not isinstance(enabled, bool):
        raise MigPartedFormatError(f"invalid format for 'mig-enabled': {_shown(enabled)}")
    mig_devices_raw = raw.get("mig-devices")
    if enabled and mig_devices_raw is None:
        # api/spec/v1/spec.go: absent, or null (JSON null decodes to a nil map), is refused alike.
        raise MigPartedFormatError("missing required field 'mig-devices' when 'mig-enabled' is true")
    mig_devices: dict[str, int] = {}
    if mig_devices_raw not in (None, {}):
        if not enabled:
            raise MigPartedFormatError("MIG devices included when 'mig-enabled' is false")
        if not isinstance(mig_devices_raw, dict):
            raise MigPartedFormatError(f"invalid format for 'mig-devices': {_shown(mig_devices_raw)}")
        for profile, count in mig_devices_raw.items():
            if not isinstance(profile, str) or not _valid_profile(profile):
                raise MigPartedFormatError(f"invalid MIG profile: {_shown(profile)}")
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise MigPartedFormatError(f"invalid count for {_cut(profile)}: {_shown(count)}")
            mig_devices[profile] = count
        if not any(mig_devices.values()):
            # pkg/types/mig_config.go AssertValidFormat
            raise MigPartedFormatError("all counts for all MigProfiles are 0")
    filt = raw.get("device-filter")
    filters: tuple[str, ...]
    if filt is None:
        filters = ()
    elif isinstance(filt, str):
        filters = (filt,)
    elif isinstance(filt, list) and all(isinstance(f, str) for f in filt):
        filters = tuple(filt)
    else:
        raise MigPartedFormatError(f"invalid format for 'device-filter': {filt!r}")
    # Read-only: parse_strict hands the same entry to every caller of the same text.
    return ConfigEntry(
        devices=devices, mig_enabled=enabled, mig_devices=MappingProxyType(mig_devices), device_filter=filters
    )


def _valid_profile(profile: str) -> bool:
    """go-nvlib parseMigProfile's format rules: [<c>c.]<g>g.<gb>gb, then +attrs or -attrs (not both), each
    attribute unique, starting with a letter, alphanumeric or dots, not ending with a dot."""
    if not _PROFILE_RE.fullmatch(profile) or ("+" in profile and "-" in profile):
        return False
    for sign in "+-":
        if sign in profile:
            attrs = profile.split(sign, 1)[1].split(",")
            if len(set(attrs)) != len(attrs) or any(a.endswith(".") for a in attrs):
                return False
    return True


def layouts_of(entries: Sequence[ConfigEntry], gpu_indexes: Sequence[int]) -> Mapping[int, GpuLayout] | None:
    """Per-GPU layout a config gives a node with these GPU indexes, or None if it cannot be told.

    Device filters select by PCI id, which the plan does not carry for the previous config: a config
    with filters is treated as unknown (the disruption guard then assumes the worst).
    """
    out: dict[int, GpuLayout] = {}
    for e in entries:
        if e.device_filter:
            return None
        targets = gpu_indexes if e.devices is None else e.devices
        layout = GpuLayout(
            mig_enabled=e.mig_enabled,
            devices=tuple(sorted((p, n) for p, n in e.mig_devices.items() if n > 0)),
        )
        for i in targets:
            out.setdefault(i, layout)
    if any(i not in out for i in gpu_indexes):
        return None
    return out


def _entry_lines(e: ConfigEntry) -> list[str]:
    lines = []
    first = "    - "
    if e.device_filter:
        lines.append(first + "device-filter: [" + ", ".join(f'"{f}"' for f in e.device_filter) + "]")
        first = "      "
    devices = "all" if e.devices is None else "[" + ", ".join(str(d) for d in e.devices) + "]"
    lines.append(f"{first}devices: {devices}")
    lines.append(f"      mig-enabled: {'true' if e.mig_enabled else 'false'}")
    if e.mig_enabled:
        if not e.mig_devices:
            lines.append("      mig-devices: {}")
        else:
            lines.append("      mig-devices:")
            lines.extend(f'        "{p}": {n}' for p, n in sorted(e.mig_devices.items()))
    return lines


def alias_name(config: str) -> str:
    """The same layout under another name: pointing a node's label at it makes mig-manager re-apply
    a config it believes is already applied (it only acts when the label value changes, §3.3)."""
    return config + ALIAS_SUFFIX


def config_map_text(
    rendered: MigPartedConfig,
    *,
    observed_text: str | None,
    referenced: set[str],
    aliases: frozenset[str] = frozenset(),
    foreign_text: str | None = None,
) -> str:
    """The ConfigMap's config.yaml: the rendered configs, plus configs of the previous ConfigMap that a
    node's label still names (until that node is relabelled).

    Dropping a config a node still carries would leave mig-manager unable to resolve the node's label
    (its `assert --valid-config` fails and it sets `failed`, stack-facts §3.3 step 1), and would hide
    the node's current layout from the disruption guard. Carried-over configs are written back in
    canonical form; once no node names them, the next plan drops them.

    `foreign_text` is the config file of the ConfigMap the ClusterPolicy names while it is not migplan's (adoption):
    pointing spec.migManager.config.name at migplan's ConfigMap re-renders the mig-manager DaemonSet, and each new
    mig-manager pod runs its node's current label once more against the new file (gpu-operator
    `TransformMigManager`; mig-parted `cmd/nvidia-mig-manager/main.go`), so every config a node still names is carried
    from it too (migplan's own previous file wins a name both hold): no node turns `failed` for a missing config.
    """
    previous: dict[str, tuple[ConfigEntry, ...]] = {}
    for text in (foreign_text, observed_text) if referenced else ():
        if not text:
            continue
        try:
            previous.update(parse_strict(text))
        except MigPartedFormatError:
            continue
    wanted_aliases = {alias_name(c) for c in rendered.layouts if alias_name(c) in aliases}
    carried = sorted(
        n
        for n in referenced
        if n in previous and n not in rendered.layouts and n != ALL_DISABLED and n not in wanted_aliases
    )
    if not carried and not wanted_aliases:
        return rendered.text
    lines = [rendered.text.rstrip("\n")]
    if wanted_aliases:
        lines += ["", "  # Re-apply aliases: a config under a new name so mig-manager applies it again:"]
        for name in sorted(wanted_aliases):
            lines.append(f"  {name}:")
            for index, gl in sorted(rendered.layouts[name.removesuffix(ALIAS_SUFFIX)].items()):
                entry = ConfigEntry(devices=(index,), mig_enabled=gl.mig_enabled, mig_devices=dict(gl.devices))
                lines.extend(_entry_lines(entry))
    if carried:
        lines += ["", "  # Carried over from the previous ConfigMap while nodes still carry them:"]
        for name in carried:
            lines.append(f"  {name}:")
            for e in previous[name]:
                lines.extend(_entry_lines(e))
    return "\n".join(lines) + "\n"
