"""The GPU catalog: which MIG profiles each GPU model offers, and where they may be placed.

Pure data access. The catalog is a YAML file shipped in the package (data/gpu-catalog.yaml, generated
from reconciler/catalog/reference/gpu-profiles.yaml); this module only turns it into frozen values. Nothing here
knows about inventories, clusters or NVML handles, so the cluster twin may use it too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml_rs

__all__ = ["Catalog", "GpuModel", "PlacementRule", "Profile", "ProfileTable", "load_catalog", "memory_derived_gb"]


@dataclass(frozen=True, slots=True)
class PlacementRule:
    """Where a profile may start (memory-slice index) and how many memory slices it spans."""

    starts: tuple[int, ...]
    size: int


@dataclass(frozen=True, slots=True)
class Profile:
    name: str  # as nvidia-smi / mig-parted / the device plugin name it: "3g.71gb", "1g.18gb+me"
    compute_slices: int
    memory_slices: int
    max_instances: int
    nvml_profile: str  # NVML_GPU_INSTANCE_PROFILE_<nvml_profile>
    nvml_profile_value: int
    nvml_profile_derived: bool
    profile_id: int | None  # nvidia-smi "ID" column = nvmlGpuInstanceProfileInfo_t.id (device specific)
    memory_gib: float | None
    placements: PlacementRule | None  # None: not published; checked on slice counts only
    placement_source: str  # "published" | "derived:<model>" | "unknown"
    profile_id_confirmed: bool = True  # False: no source gave the nvidia-smi ID (profile_id is then None)

    @property
    def resource_name(self) -> str:
        """The mixed-strategy extended resource: 'mig-' + profile with '+' replaced by '.'."""
        return "nvidia.com/mig-" + self.name.replace("+", ".")

    @property
    def placement_derived(self) -> bool:
        return self.placement_source.startswith("derived")


class ProfileTable(Mapping[str, Profile]):
    """A model's profiles by name, that also answers to the other documented naming of the same slices.

    The driver derives a profile's name from its memory (go-nvlib `mig_profile.go` `String`), so one model can name
    the same slice two ways (GB200: `1g.23gb` or `1g.24gb`). Lookups (`in`, `[]`, `get`) accept either name and give
    the catalog's profile; iteration, `len` and `keys` give each profile once, under the catalog's name, so counting
    or listing profiles never sees a slice twice. Which naming a node really uses is its own word
    (logic/observe/profilecheck.py compares a plan with it)."""

    __slots__ = ("_by_name", "_canonical", "_renames")

    def __init__(self, profiles: Mapping[str, Profile], renames: Mapping[str, str] | None = None) -> None:
        self._by_name = dict(profiles)
        self._renames = dict(renames or {})  # catalog name -> the other naming's name
        self._canonical = {other: name for name, other in self._renames.items()}

    def __getitem__(self, name: str) -> Profile:
        return self._by_name[self._canonical.get(name, name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._canonical.get(name, name) in self._by_name

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfileTable):
            return NotImplemented
        return self._by_name == other._by_name and self._renames == other._renames

    __hash__ = None  # type: ignore[assignment]  # mutable-looking mapping semantics, like dict

    def __repr__(self) -> str:
        return f"ProfileTable({list(self._by_name)!r}, renames={self._renames!r})"

    @property
    def renames(self) -> Mapping[str, str]:
        """Catalog name -> the name the model's other documented naming gives the same slice (empty if none)."""
        return dict(self._renames)

    def canonical(self, name: str) -> str:
        """The catalog's name for `name` (itself when it is already the catalog's, or unknown)."""
        return self._canonical.get(name, name)


@dataclass(frozen=True, slots=True)
class GpuModel:
    key: str  # catalog key, e.g. "H200-141GB"
    products: tuple[str, ...]
    nvml_names: tuple[str, ...]
    gfd_products: tuple[str, ...]
    pci_device_ids: tuple[str, ...]
    compute_slices: int
    memory_slices: int
    placements_derived_from: str | None
    profiles: Mapping[str, Profile]  # a ProfileTable: also answers to the alternate naming's names
    alternate_naming: str | None = None  # what the other documented naming is called ("early boards/drivers")

    @property
    def placements_known(self) -> bool:
        """True when every profile has a placement table (published or derived)."""
        return all(p.placements is not None for p in self.profiles.values())

    def profile(self, name: str) -> Profile | None:
        return self.profiles.get(name)

    def name_on_device(self, name: str, derived_gb: int) -> str:
        """The name a device gives the catalog profile `name` when its driver derives `derived_gb` for it
        (`memory_derived_gb`): the other documented naming's name when that is the one with this `<N>gb`, else the
        catalog's. Never a name no source documents."""
        renames = self.profiles.renames if isinstance(self.profiles, ProfileTable) else {}
        other = renames.get(name)
        if other is not None and _gb_of(other) == derived_gb and _gb_of(name) != derived_gb:
            return other
        return name

    def namings(self) -> tuple[frozenset[str], ...]:
        """Each documented naming of the model's profiles as a set of names, the catalog's first. A model with one
        naming has one set."""
        names = frozenset(self.profiles)
        renames = self.profiles.renames if isinstance(self.profiles, ProfileTable) else {}
        if not renames:
            return (names,)
        return names, frozenset(renames.get(n, n) for n in names)


class Catalog:
    """All known GPU models, addressable by catalog key or by the names the stack uses for them."""

    def __init__(self, models: Mapping[str, GpuModel]) -> None:
        self._models = dict(models)
        aliases: dict[str, str] = {}
        for key, m in self._models.items():
            for alias in (key, *m.gfd_products, *m.nvml_names, *m.pci_device_ids):
                aliases.setdefault(alias.lower(), key)
        self._aliases = aliases

    def __iter__(self) -> Iterator[GpuModel]:
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self._models)

    def get(self, key: str) -> GpuModel | None:
        return self._models.get(key)

    def resolve(self, name: str) -> GpuModel | None:
        """Look a model up by catalog key, GFD product label, NVML name or PCI device id.

        A GFD `nvidia.com/gpu.product` is accepted as GFD writes it in every mode: under `single` it is
        `<product>-MIG-<profile>` (or `-MIG-INVALID`), with shared replicas `<product>-SHARED`
        (k8s-device-plugin internal/lm, stack-facts §2), so those suffixes are stripped. A PCI device id is
        accepted as mig-parted's device filters write it (`0x233510DE`) and as lspci/NFD do (`10de:2335`).
        """
        text = name.strip().lower()
        key = self._aliases.get(text)
        if key is None:
            key = self._aliases.get(_gfd_base(text)) or self._aliases.get(_pci_filter_form(text) or "")
        return self._models[key] if key else None

    def by_pci_device_id(self, device_id: str) -> GpuModel | None:
        """The model a PCI device id (`0x233510DE`, `10de:2335`) belongs to, else None."""
        form = _pci_filter_form(device_id.strip().lower())
        key = self._aliases.get(form) if form else None
        return self._models[key] if key else None


def memory_derived_gb(total_device_memory: int, mig_memory_size_mb: int) -> int:
    """The `<N>gb` of a profile's name as go-nvlib derives it (pkg/nvlib/device/mig_profile.go `getMigMemorySizeGB`):
    the profile's share of the device memory rounded UP to eighths, times the device memory in whole GiB rounded up,
    rounded half away from zero (Go's math.Round). This is why one GB200 slice is `1g.23gb` on a device reporting
    186 GiB and `1g.24gb` on one reporting 189 GiB."""
    if total_device_memory <= 0 or mig_memory_size_mb < 0:
        return 0
    one_mb, one_gb = 1024 * 1024, 1024 * 1024 * 1024
    fraction = (mig_memory_size_mb * one_mb) / total_device_memory
    fraction = math.ceil(fraction * 8) / 8
    total_gb = (total_device_memory + one_gb - 1) // one_gb
    return math.floor(fraction * total_gb + 0.5)


def _gb_of(name: str) -> int | None:
    """`1g.24gb+me` -> 24; `1c.3g.95gb` -> 95; None when the name has no `<N>gb` field."""
    head = name.split("+", 1)[0].split("-", 1)[0]
    last = head.rsplit(".", 1)[-1]
    return int(last[:-2]) if last.endswith("gb") and last[:-2].isdigit() else None


_SHARED_SUFFIX = "-shared"
_MIG_INFIX = "-mig-"


def _gfd_base(product: str) -> str:
    """`nvidia-h200-mig-1g.18gb` -> `nvidia-h200`; `nvidia-a100-pcie-40gb-shared` -> `nvidia-a100-pcie-40gb`."""
    base = product.removesuffix(_SHARED_SUFFIX)
    cut = base.rfind(_MIG_INFIX)
    return base[:cut] if cut > 0 else base


def _pci_filter_form(text: str) -> str | None:
    """A PCI device id in mig-parted's filter form (`0x<device>10de`, lower case), or None when it is not one."""
    t = text.removeprefix("0x")
    if t.startswith("10de:"):
        t = t[len("10de:") :] + "10de"
    if len(t) != 8 or not t.endswith("10de") or any(c not in "0123456789abcdef" for c in t):
        return None
    return "0x" + t


def _model_from(key: str, raw: Mapping[str, Any]) -> GpuModel:
    profiles = {}
    for p in raw["profiles"]:
        pl = p.get("placements")
        profiles[p["name"]] = Profile(
            name=p["name"],
            compute_slices=int(p["compute_slices"]),
            memory_slices=int(p["memory_slices"]),
            max_instances=int(p["max_instances"]),
            nvml_profile=p["nvml_profile"],
            nvml_profile_value=int(p["nvml_profile_value"]),
            nvml_profile_derived=bool(p["nvml_profile_derived"]),
            profile_id=p.get("profile_id"),
            memory_gib=p.get("memory_gib"),
            placements=PlacementRule(tuple(pl["starts"]), int(pl["size"])) if pl else None,
            placement_source=p["placement_source"],
            profile_id_confirmed=bool(p.get("profile_id_confirmed", True)),
        )
    alternate = raw.get("alternate_naming") or {}
    return GpuModel(
        key=key,
        products=tuple(raw.get("products", ())),
        nvml_names=tuple(raw.get("nvml_names", ())),
        gfd_products=tuple(raw.get("gfd_products", ())),
        pci_device_ids=tuple(raw.get("pci_device_ids", ())),
        compute_slices=int(raw["compute_slices"]),
        memory_slices=int(raw["memory_slices"]),
        placements_derived_from=raw.get("placements_derived_from"),
        profiles=ProfileTable(profiles, alternate.get("profiles")),
        alternate_naming=alternate.get("name"),
    )


_PACKAGED = Path(__file__).resolve().parent / "data" / "gpu-catalog.yaml"


def parse_catalog(text: str | bytes) -> Catalog:
    """A catalog from YAML text, read as pyyaml (YAML 1.1) reads it."""
    import yaml  # the reference reader; load_catalog does without it

    return _catalog_from(yaml.load(text, Loader=yaml.CSafeLoader))


def _catalog_from(raw: Any) -> Catalog:
    return Catalog({k: _model_from(k, v) for k, v in raw["models"].items()})


@functools.cache
def load_catalog() -> Catalog:
    """The packaged catalog (parsed once per process)."""
    # yaml-rs, not pyyaml: ~1.5 ms instead of ~10 ms plus ~10 ms of importing pyyaml, in every `migplan validate`.
    # The packaged file is generated plain YAML that both read alike (tests/unit/catalog/test_catalog.py compares them).
    return _catalog_from(yaml_rs.loads(_PACKAGED.read_text("utf-8"), parse_datetime=False))
