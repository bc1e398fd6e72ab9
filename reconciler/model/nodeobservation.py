"""What a node's observer saw on its own GPUs: the node's real MIG layout and who holds each partition.

Pure values, stdlib only. The observer (`migplan agent`, in every apply mode) reads the GPUs through NVML
and the kubelet's PodResources API, joins them and publishes one `NodeObservation` per node in the Node
annotation `migplan.io/mig-observed` (codec: reconciler.logic.codecs.observedcodec). The controller reads it back
and prefers these measured facts to its own inference (occupancy matched by owner names, placements taken
from the plan), saying which one each value is.

Format versions: v1 is what the agent wrote before observation existed (instances only, no holders, no
time); v2 adds the observation time, the observer's version, the state of each source, the holders of
each instance and the devices the kubelet reported that NVML does not know. v1 documents still decode,
with `version == "v1"` and the fields v1 lacks left empty, so a controller newer than its agents reads
them and says the holders are unknown rather than absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.model.inventory import Placement

SOURCE_OK = "ok"  # the value of a source that answered; anything else is the one-line reason it did not


@dataclass(frozen=True, slots=True)
class Holder:
    """A container the kubelet allocated a device to (PodResources v1 ContainerDevices or DynamicResource)."""

    namespace: str
    pod: str
    container: str
    # the extended resource it asked for ("nvidia.com/mig-3g.71gb", "nvidia.com/gpu"), or, for a DRA holder,
    # the DRA driver that allocated the device ("gpu.nvidia.com")
    resource: str
    claim: str = ""  # a DRA holder's ResourceClaim, "<namespace>/<name>"; empty for a device-plugin holder

    @property
    def through_dra(self) -> bool:
        return bool(self.claim)

    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.pod}"


@dataclass(frozen=True, slots=True)
class ObservedInstance:
    """One GPU instance as NVML reports it, with the containers holding its MIG device."""

    gpu_instance_id: int
    profile: str  # catalog profile name ("3g.71gb"); "profile-id:<n>" when the id is unknown to the catalog
    placement: Placement
    uuid: str | None = None  # the MIG device UUID ("MIG-…"), when a compute instance exists
    processes: tuple[int, ...] = ()  # PIDs running on it
    holders: tuple[Holder, ...] = ()  # from the kubelet; empty when none (or unknown: see NodeObservation)
    # Every MIG device UUID of this GPU instance, in compute-instance order, when it has more than one compute
    # instance (a `1c.3g.71gb` cut: one MIG device per compute instance, each allocatable on its own under the
    # `single` strategy); empty otherwise, `uuid` being the only one. Additive in v2 (key "computeUuids").
    compute_uuids: tuple[str, ...] = ()

    @property
    def in_use(self) -> bool:
        return bool(self.processes) or bool(self.holders)


@dataclass(frozen=True, slots=True)
class ObservedGpu:
    index: int
    uuid: str
    name: str  # NVML device name ("NVIDIA H200")
    mig_capable: bool
    mig_current: bool
    mig_pending: bool
    instances: tuple[ObservedInstance, ...] = ()
    # profile -> the placements NVML says this GPU offers (nvmlDeviceGetGpuInstancePossiblePlacements);
    # empty when NVML did not say (MIG disabled on some drivers), then the catalog is the reference.
    # Not published in the annotation (it is the catalog's business, and large).
    possible: Mapping[str, tuple[Placement, ...]] = field(default_factory=dict)
    holders: tuple[Holder, ...] = ()  # holders of the whole GPU (nvidia.com/gpu on a MIG-disabled GPU)
    # NVML's minor number (/dev/nvidia<minor>), which NVIDIA's DRA driver names devices by (`gpu-<minor>-…`);
    # None when NVML did not say. Additive in v2 (key "minor").
    minor: int | None = None


@dataclass(frozen=True, slots=True)
class UnknownDevice:
    """A device the kubelet says it allocated that no GPU or MIG device NVML listed has (by UUID)."""

    holder: Holder
    device_id: str


@dataclass(frozen=True, slots=True)
class KubeletAllocation:
    """What the kubelet's PodResources API (v1 `List`) says one container was given for one resource.

    `device_ids` are the device plugin's IDs: for NVIDIA's plugin the GPU UUID or the MIG device UUID
    (k8s-device-plugin internal/rm/devices.go `BuildDevice`: `dev.ID = uuid`), with `::<replica>` appended
    when the device is shared by time-slicing or MPS (`NewAnnotatedID`). Not published as such: the
    observer joins them with NVML's UUIDs into holders and unknown devices.
    """

    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]
    # A DRA allocation (PodResources v1 `dynamic_resources`, one per ClaimResource): `claim` is the
    # ResourceClaim "<namespace>/<name>", `resource` the driver name, `pool` the pool (the node name for
    # NVIDIA's driver), `device_ids` the one device name. Empty `claim`: a device-plugin allocation.
    claim: str = ""
    pool: str = ""


@dataclass(frozen=True, slots=True)
class NodeObservation:
    """One observer pass on one node."""

    version: str  # "v1" | "v2": the format it was decoded from (what the observer could say)
    gpus: tuple[ObservedGpu, ...]
    observed_at: datetime | None = None  # v2: when the observer read the node (aware, UTC)
    observer: str = ""  # v2: "migplan/<version>" of the observer that wrote it
    # v2: source name ("nvml", "podResources") -> SOURCE_OK or the one-line reason it could not be read.
    sources: Mapping[str, str] = field(default_factory=dict)
    unknown_devices: tuple[UnknownDevice, ...] = ()
    truncated: bool = False  # v2: the observer dropped detail to stay under the annotation's size cap

    @property
    def holders_known(self) -> bool:
        """Whether the holders in this observation are measured (v2 with the kubelet answering)."""
        return self.version != "v1" and self.sources.get("podResources") == SOURCE_OK and not self.truncated
