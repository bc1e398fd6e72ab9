"""Observed state: what the Kubernetes API says about the GPU side of a cluster, as plain values.

Pure: stdlib only. The kube adapter fills these from list calls; the drift, occupancy and planner
functions read them. Only the fields migplan reasons about are kept (labels, advertised resources,
MIG-holding pods, the ClusterPolicy essentials, the device plugin's health, the mig-parted
ConfigMap), so a 5,000-node snapshot stays small.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.model.nodeobservation import NodeObservation

# Labels and annotations with a meaning to migplan. The first three are NVIDIA's (stack-facts §2,
# §3.3); the `migplan.io/` ones are migplan's own and the only annotation keys it writes.
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
REQUESTED_AT_ANNOTATION = "migplan.io/mig-config-requested-at"  # RFC 3339, set with the label
# On the mig-parted ConfigMap: when migplan last wrote it with a config that was not in it before (RFC 3339).
CONFIGS_ADDED_AT_ANNOTATION = "migplan.io/configs-added-at"
CORDONED_ANNOTATION = "migplan.io/cordoned"  # "true" while migplan holds the node cordoned
# Written by the node's observer (`migplan agent`, every apply mode): its NodeObservation
# (reconciler.logic.observedcodec), read by the controller as the node's measured layout and holders.
OBSERVED_ANNOTATION = "migplan.io/mig-observed"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "migplan"
FIELD_MANAGER = "migplan"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
MIG_MANAGER_APP_LABEL = ("app", "nvidia-mig-manager")  # the GPU Operator's mig-manager DaemonSet pods
# stack-facts §1.4: match on this substring, whatever wraps it.
MIXED_LAYOUT_ERROR = "more than one MIG device type present on node"
# The device plugin's refusals of a node's layout (k8s-device-plugin internal/rm/device_map.go
# buildDeviceMapFromConfigResources, checked in this order): under `single` a MIG-enabled GPU without MIG
# devices (assertAllMigDevicesAreValid), more than one MIG device type (the article's), then MIG-enabled and
# -disabled GPUs together; under `mixed` a compute-instance profile such as 1c.3g.71gb, for which
# AddDefaultResourcesToConfig (rm.go) made no resource pattern (buildMigDeviceMap). Whatever wraps them.
MIXED_MODES_ERROR = "all devices on the node must be configured with the same migEnabled value"
EMPTY_MIG_GPU_ERROR = "has no MIG devices configured"
UNMATCHED_PROFILE_ERROR = "does not match any resource patterns"
LAYOUT_REFUSALS = (
    MIXED_LAYOUT_ERROR,
    MIXED_MODES_ERROR,
    EMPTY_MIG_GPU_ERROR,
    UNMATCHED_PROFILE_ERROR,
)


class MigConfigState(enum.StrEnum):
    """Values mig-manager writes to nvidia.com/mig.config.state (stack-facts §3.3)."""

    PENDING = "pending"
    REBOOTING = "rebooting"
    SUCCESS = "success"
    FAILED = "failed"


def is_mig_resource(name: str) -> bool:
    return name.startswith(MIG_RESOURCE_PREFIX)


def is_gpu_resource(name: str) -> bool:
    return name == GPU_RESOURCE or is_mig_resource(name)


@dataclass(frozen=True, slots=True)
class Malformed:
    """A value on a cluster object that migplan reads and could not: reported as MP530 on that node,
    and the node is left alone (nothing is written on a guess)."""

    field: str  # where: "status.capacity[nvidia.com/gpu]", "label nvidia.com/mig.config.state", ...
    value: str  # the value as read, bounded (reconciler.model.strict.short)
    reason: str  # one line

    def __str__(self) -> str:
        return f"{self.field}={self.value}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ObservedNode:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)  # GPU resources only
    allocatable: Mapping[str, int] = field(default_factory=dict)  # GPU resources only
    unschedulable: bool = False
    resource_version: str = ""
    # Values migplan needs and could not read (MP530). A node with any is observed, reported and
    # never written: no relabel, no cordon or uncordon, no re-apply.
    malformed: tuple[Malformed, ...] = ()
    # The node observer's last report (annotation migplan.io/mig-observed), decoded; None when absent
    # or unreadable. When unreadable, `observation_error` says why (MP547): the node is then reported
    # on inference only and never written, like a malformed value.
    observation: NodeObservation | None = None
    observation_error: str | None = None

    @property
    def mig_config(self) -> str | None:
        return self.labels.get(MIG_CONFIG_LABEL)

    @property
    def mig_config_state(self) -> str | None:
        return self.labels.get(MIG_CONFIG_STATE_LABEL)

    @property
    def is_gpu_node(self) -> bool:
        """The signals NVIDIA's stack leaves on a GPU node: GFD/operator labels or advertised resources."""
        if self.labels.get(GPU_PRESENT_LABEL) == "true" or GPU_COUNT_LABEL in self.labels:
            return True
        return any(v > 0 for k, v in self.capacity.items() if is_gpu_resource(k))

    def advertised(self, resource: str) -> int:
        """What the device plugin advertises: allocatable, else capacity, else 0."""
        if resource in self.allocatable:
            return self.allocatable[resource]
        return self.capacity.get(resource, 0)

    @property
    def advertised_resources(self) -> Mapping[str, int]:
        merged = dict(self.capacity)
        merged.update(self.allocatable)
        return merged


@dataclass(frozen=True, slots=True)
class ContainerResources:
    name: str
    requests: Mapping[str, int] = field(default_factory=dict)  # GPU resources only
    limits: Mapping[str, int] = field(default_factory=dict)  # GPU resources only

    @property
    def effective(self) -> Mapping[str, int]:
        """For extended resources Kubernetes copies limits into requests when requests are absent."""
        out = dict(self.limits)
        out.update(self.requests)
        return out


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class ObservedPod:
    """A pod that asks for nvidia.com/gpu or nvidia.com/mig-* (others are not kept)."""

    namespace: str
    name: str
    node: str | None  # spec.nodeName; None while unscheduled
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    containers: tuple[ContainerResources, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    owner: OwnerRef | None = None  # the controlling ownerReference
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # GPU quantities that could not be read; each is counted as 1 so the pod still holds devices
    # for the disruption guard (MP530 on its node).
    malformed: tuple[Malformed, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def active(self) -> bool:
        return self.phase not in ("Succeeded", "Failed")

    @property
    def holds_devices(self) -> bool:
        """Bound and not finished: the kubelet has (or will have) given it the devices it asked for."""
        return self.node is not None and self.active

    def requested(self) -> Mapping[str, int]:
        """GPU/MIG resources over all containers (init containers excluded: they run before)."""
        total: dict[str, int] = {}
        for c in self.containers:
            for k, v in c.effective.items():
                total[k] = total.get(k, 0) + v
        return total


@dataclass(frozen=True, slots=True)
class ClusterPolicyState:
    name: str
    mig_strategy: str | None  # spec.mig.strategy; None when absent
    mig_manager_config_name: str | None  # spec.migManager.config.name
    device_plugin_config_name: str | None  # spec.devicePlugin.config.name
    device_plugin_config_default: str | None = None
    resource_version: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DevicePluginPod:
    name: str
    node: str | None
    ready: bool
    log_line: str | None = None  # only read when not ready: the line quoting the error
    log_read: bool = True  # False: not ready, but its log was not read (per-cycle cap on log reads)


@dataclass(frozen=True, slots=True)
class DevicePluginState:
    namespace: str
    name: str
    restarted_at: str | None  # spec.template.metadata.annotations[kubectl.kubernetes.io/restartedAt]
    generation: int = 0
    pods: tuple[DevicePluginPod, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)  # metadata.annotations

    def pod_on(self, node: str) -> DevicePluginPod | None:
        for p in self.pods:
            if p.node == node:
                return p
        return None


@dataclass(frozen=True, slots=True)
class ConfigMapState:
    namespace: str
    name: str
    data: Mapping[str, str]
    labels: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def managed_by_migplan(self) -> bool:
        return self.labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


@dataclass(frozen=True, slots=True)
class ObservedState:
    nodes: Mapping[str, ObservedNode]
    pods: tuple[ObservedPod, ...] = ()
    cluster_policy: ClusterPolicyState | None = None  # None: not found
    device_plugin: DevicePluginState | None = None  # None: DaemonSet not found
    mig_config_map: ConfigMapState | None = None  # None: not found
    # The ConfigMap named by spec.devicePlugin.config.name, when it exists (to tell whether it
    # contradicts the strategy).
    device_plugin_config_map: ConfigMapState | None = None
    # node -> the nvidia-mig-manager pod's error line, read only for nodes whose state is `failed`.
    mig_manager_errors: Mapping[str, str] = field(default_factory=dict)

    def pods_by_node(self) -> Mapping[str, tuple[ObservedPod, ...]]:
        """Bound pods grouped by node, in one pass (callers join on this, never per node over all pods)."""
        grouped: dict[str, list[ObservedPod]] = {}
        for p in self.pods:
            if p.node is not None:
                grouped.setdefault(p.node, []).append(p)
        return {k: tuple(v) for k, v in grouped.items()}
