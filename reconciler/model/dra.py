"""What NVIDIA's DRA driver publishes about a node, and who writes a GPU node's MIG layout. Pure values.

The kube adapter reads the ResourceSlices of driver `gpu.nvidia.com` (resource.k8s.io/v1) into one `NodeDra` per
node: the devices, the counter sets (DynamicMIG publishes one per GPU; static MIG none) and the one-line reasons
for what could not be read (a finding, never a crash). reconciler.logic.drift.draregime classifies the node from it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

# On every DeviceClass migplan keeps: what it is for ("profile 1g.18gb", "owner embeddings", "declared"), beside the
# managed-by label, so a person reading the cluster knows where it comes from.
DEVICE_CLASS_PURPOSE_ANNOTATION = "migplan.io/device-class-for"


class Regime(enum.StrEnum):
    """Who allocates (and possibly lays out) a GPU node's MIG devices."""

    DEVICE_PLUGIN = "device-plugin"  # NVIDIA's device plugin with mig-manager or migplan's agent (today's path)
    DRA_STATIC = "dra-static"  # NVIDIA's DRA driver allocates the MIG devices that exist; it creates none
    DRA_DYNAMIC_MIG = "dra-dynamic-mig"  # the DRA driver creates MIG devices per claim and destroys unknown ones
    EXTERNAL = "external"  # another dynamic partitioner (HAMi's MIG mode, ...), as the inventory declares


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One device of a node's ResourceSlices, with the attributes migplan uses (None when absent)."""

    name: str
    kind: str | None = None  # attribute `type`: "gpu" | "mig" | "vfio"
    profile: str | None = None  # attribute `profile` ("3g.71gb")
    uuid: str | None = None  # attribute `uuid` (static devices only)
    parent_uuid: str | None = None  # attribute `parentUUID`
    product: str | None = None  # attribute `productName` ("NVIDIA H200"): the GPU's model, for `migplan import`
    consumes_counters: bool = False  # DynamicMIG: it consumes its GPU's counter set


@dataclass(frozen=True, slots=True)
class NodeDra:
    """The devices NVIDIA's DRA driver publishes for one node (its pool), and what could not be read."""

    node: str
    devices: tuple[DraDevice, ...] = ()
    counter_sets: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # one line each: a slice or device that could not be read (MP571)


@dataclass(frozen=True, slots=True)
class ClaimedDevice:
    """One allocated device of a ResourceClaim (`status.allocation.devices.results[]`)."""

    driver: str
    pool: str  # the node's name for NVIDIA's driver (one pool per node)
    device: str


@dataclass(frozen=True, slots=True)
class ObservedClaim:
    """A ResourceClaim allocated a device of NVIDIA's DRA driver, and the pods reserving it (`status.reservedFor`)."""

    namespace: str
    name: str
    devices: tuple[ClaimedDevice, ...]
    reserved_for: tuple[str, ...] = ()  # "<namespace>/<pod>" of each pod consumer, sorted

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DraPluginPod:
    """A pod of NVIDIA's DRA kubelet-plugin DaemonSet: the one migplan deletes to restart the plugin on its node."""

    node: str
    namespace: str
    name: str
    uid: str
    deleting: bool = False  # metadata.deletionTimestamp set: a restart is under way


@dataclass(frozen=True, slots=True)
class DraDriverConfig:
    """The kubelet-plugin DaemonSet of NVIDIA's DRA driver installed by its own Helm chart, as migplan reads it.

    `dynamic_mig` is the DynamicMIG gate of the `gpus` container (FEATURE_GATES env, `--feature-gates` args); None
    when it cannot be read (`problem` says why, MP579), which migplan takes as on. `nodes`: where its pods run."""

    namespace: str
    name: str
    dynamic_mig: bool | None
    nodes: frozenset[str] = frozenset()
    problem: str | None = None
    pods: tuple[DraPluginPod, ...] = ()  # its pods, by node (what a plugin restart deletes)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class GpuClusterState:
    """A GPU Operator GPUCluster (nvidia.com/v1alpha1): the DRA stack it runs, as migplan reads it.

    `dynamic_mig` is spec.draDriver.featureGates.DynamicMIG (api/nvidia/v1alpha1/gpucluster_types.go: rendered as the
    driver's FEATURE_GATES); None when it cannot be read (`problem` says why), which migplan takes as on."""

    name: str
    dynamic_mig: bool | None
    ignored: bool = False  # status.state "ignored": a duplicate the operator's singleton controller skips
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class ObservedDeviceClass:
    """A DeviceClass (resource.k8s.io/v1) as migplan reads it: what it maps and whether migplan keeps it."""

    name: str
    extended_resource_name: str | None = None  # spec.extendedResourceName
    selectors: tuple[str, ...] = ()  # spec.selectors[].cel.expression, in order
    managed: bool = False  # labelled app.kubernetes.io/managed-by: migplan (migplan created it)
    purpose: str | None = None  # the migplan.io/device-class-for annotation
    resource_version: str = ""
