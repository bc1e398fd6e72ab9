"""The devices NVIDIA's DRA driver will publish for the plan's nodes, as a claim's selectors see them. Pure.

Per GPU of a node (k8s-dra-driver-gpu cmd/gpu-kubelet-plugin):
- MIG enabled: one device per planned partition, named `gpu-<minor>-mig-<profile>-<GI profile id>-<start>`
  (reconciler.logic.codecs.dradevices), attributes `CommonAttributesMig` + `uuid` (`MigDeviceInfo.GetDevice`),
  capacities `CommonCapacitiesMig` + `memorySlice<i>` = 1 for each memory slice the placement covers; a GPU with
  MIG enabled is not published whole;
- MIG disabled: the whole GPU, `gpu-<minor>`, `type: gpu` (`GpuInfo.GetDevice`, `Attributes`, `fullGpuCapacity`).
The minor number is taken to be the GPU's index (the plan knows no other; dra.md says the same of drift).

What the plan knows: `type`, `profile`, `productName` (NVML's name for the model, the catalog's first `nvml_names`),
the memory slices, and `memory` from the catalog's `memory_gib` (NVML's own MiB figure may differ slightly). What
only the node knows is `dracel.UNKNOWN`: `uuid`, `parentUUID`, `brand`, `architecture`, the CUDA and driver
versions, the PCI attributes (domain `resource.kubernetes.io`), SM and engine counts.

For `matchAttribute` constraints (equality only) each device also carries comparable stand-ins: a device's own uuid,
its GPU's uuid and PCI attributes, its model's brand/architecture/compute capability, its node's driver versions.

`possible_devices` are every profile at every placement the catalog gives the node's GPU models: what DynamicMIG
could create there (`partitions.go` publishes each profile x placement), to name a claim only DynamicMIG satisfies.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from reconciler.catalog import Catalog, GpuModel, Profile
from reconciler.logic.codecs import dradevices
from reconciler.logic.workloads import dracel
from reconciler.model.inventory import NodeSpec

DRIVER = dradevices.DRIVER
PCI_DOMAIN = "resource.kubernetes.io"
_U = dracel.UNKNOWN
_MIG_CAPACITIES = ("multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines")


@dataclass(frozen=True, slots=True)
class PlanDevice:
    node: str
    name: str
    gpu: int  # the GPU's index in the plan
    start: int  # first memory slice (0 for a whole GPU)
    size: int  # memory slices covered (all of them for a whole GPU)
    profile: str | None  # None: a whole GPU
    owner: str | None
    model: str | None  # catalog key
    cel: dracel.Device  # shared by every device of the same model, profile and placement

    def overlaps(self, other: PlanDevice) -> bool:
        """Two devices of one GPU that share a memory slice cannot both be allocated (DynamicMIG's counters)."""
        return (
            self.node == other.node
            and self.gpu == other.gpu
            and self.start < other.start + other.size
            and other.start < self.start + self.size
        )

    def match_value(self, attribute: str) -> Any:
        """The value `matchAttribute` compares (a stand-in where only the node knows it); None: no such attribute."""
        if attribute == f"{DRIVER}/type":
            return "mig" if self.profile is not None else "gpu"
        if attribute == f"{DRIVER}/profile":
            return self.profile
        if attribute == f"{DRIVER}/uuid":
            return ("uuid", self.node, self.name)
        if self.model is None:
            return None
        scope = _SCOPES.get(attribute)
        if scope == "gpu":
            return (attribute, self.node, self.gpu)
        if scope == "model":
            return (attribute, self.model)
        if scope == "node":
            return (attribute, self.node)
        return None


# matchAttribute stand-ins: a MIG device's parent and PCI attributes are its GPU's; brand, architecture, compute
# capability and product follow the model; the driver and CUDA versions are one per node.
_SCOPES = {
    f"{DRIVER}/parentUUID": "gpu",
    f"{PCI_DOMAIN}/pciBusID": "gpu",
    f"{PCI_DOMAIN}/pcieRoot": "gpu",
    f"{DRIVER}/brand": "model",
    f"{DRIVER}/architecture": "model",
    f"{DRIVER}/cudaComputeCapability": "model",
    f"{DRIVER}/productName": "model",
    f"{DRIVER}/driverVersion": "node",
    f"{DRIVER}/cudaDriverVersion": "node",
}


def _common(model: GpuModel) -> dict[str, Any]:
    product: Any = model.nvml_names[0] if model.nvml_names else _U
    return {
        "productName": product,
        "brand": _U,
        "architecture": _U,
        "cudaComputeCapability": _U,
        "driverVersion": _U,
        "cudaDriverVersion": _U,
        f"{PCI_DOMAIN}/pciBusID": _U,
        f"{PCI_DOMAIN}/pcieRoot": _U,
    }


_CEL_VIEWS: dict[tuple[str | None, str | None, int], dracel.Device] = {}


def _mig_view(model: GpuModel, profile: Profile, start: int) -> dracel.Device:
    """A MIG device as selectors see it: the same for every device of a model, profile and placement."""
    key = (model.key, profile.name, start)
    view = _CEL_VIEWS.get(key)
    if view is None:
        attributes = {**_common(model), "type": "mig", "profile": profile.name, "uuid": _U, "parentUUID": _U}
        capacity: dict[str, Any] = dict.fromkeys(_MIG_CAPACITIES, _U)
        capacity["memory"] = Fraction(round(profile.memory_gib * 2**30)) if profile.memory_gib is not None else _U
        for i in range(start, start + profile.memory_slices):
            capacity[f"memorySlice{i}"] = Fraction(1)
        view = _CEL_VIEWS[key] = dracel.Device.of(DRIVER, attributes, capacity)
    return view


def _whole_view(model: GpuModel | None) -> dracel.Device:
    key = (model.key if model is not None else None, None, 0)
    view = _CEL_VIEWS.get(key)
    if view is None:
        attributes: dict[str, Any] = {"type": "gpu", "uuid": _U, "productName": _U}
        if model is not None:
            attributes.update(_common(model))
        view = _CEL_VIEWS[key] = dracel.Device.of(DRIVER, attributes, {"memory": _U})
    return view


def _mig_device(node: str, gpu: int, model: GpuModel, profile: Profile, start: int, owner: str | None) -> PlanDevice:
    pid = profile.profile_id if profile.profile_id is not None else 0
    return PlanDevice(
        node=node,
        name=dradevices.mig_name(gpu, profile.name, pid, start),
        gpu=gpu,
        start=start,
        size=profile.memory_slices,
        profile=profile.name,
        owner=owner,
        model=model.key,
        cel=_mig_view(model, profile, start),
    )


def _whole_gpu(node: str, gpu: int, model: GpuModel | None) -> PlanDevice:
    return PlanDevice(
        node=node,
        name=f"gpu-{gpu}",
        gpu=gpu,
        start=0,
        size=model.memory_slices if model is not None else 8,
        profile=None,
        owner=None,
        model=model.key if model is not None else None,
        cel=_whole_view(model),
    )


def planned_devices(node: NodeSpec, catalog: Catalog) -> tuple[PlanDevice, ...]:
    """What the driver publishes for `node` once the plan is applied (placements as validation solved them)."""
    out: list[PlanDevice] = []
    for g in node.gpus:
        model = catalog.get(g.model)
        if not g.mig_enabled:
            out.append(_whole_gpu(node.name, g.index, model))
            continue
        if model is None:
            continue
        for part, placement in zip(g.partitions, g.placements, strict=False):
            profile = model.profiles.get(part.profile)
            if profile is not None:
                out.append(_mig_device(node.name, g.index, model, profile, placement.start, part.owner))
    return tuple(out)


def possible_devices(node: NodeSpec, catalog: Catalog) -> tuple[PlanDevice, ...]:
    """Every MIG device the node's GPUs could be cut into (each profile at each placement the catalog knows)."""
    out: list[PlanDevice] = []
    for g in node.gpus:
        model = catalog.get(g.model)
        if model is None:
            continue
        seen: set[str] = set()
        for profile in model.profiles.values():
            if profile.name in seen or profile.placements is None:
                continue
            seen.add(profile.name)
            for start in profile.placements.starts:
                out.append(_mig_device(node.name, g.index, model, profile, start, None))
    return tuple(out)
