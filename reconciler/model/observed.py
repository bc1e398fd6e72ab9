"""Observed state: what the Kubernetes API says about the GPU side of a cluster, as plain values.

Pure: stdlib only. The kube adapter fills these from list calls; the drift, occupancy and planner
functions read them. Only the fields migplan reasons about are kept (labels, advertised resources,
MIG-holding pods, the ClusterPolicy essentials, the device plugin's health, the mig-parted
ConfigMap), so a 5,000-node snapshot stays small.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from reconciler.model.dra import DraDriverConfig, GpuClusterState, NodeDra, ObservedClaim, ObservedDeviceClass
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
# While migplan drains a node for a change (allowDisruption): when the drain started (RFC 3339) and the config it
# drains for; written with the cordon, dropped by the relabel that ends the drain (or the uncordon).
DRAIN_STARTED_ANNOTATION = "migplan.io/drain-started-at"
DRAIN_FOR_ANNOTATION = "migplan.io/drain-for"
# The kubelet's mark on the API copy of a static pod (k8s.io/api core/v1 MirrorPodAnnotationKey).
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
# Written by the node's observer (`migplan agent`, every apply mode): its NodeObservation
# (reconciler.logic.codecs.observedcodec), read by the controller as the node's measured layout and holders.
OBSERVED_ANNOTATION = "migplan.io/mig-observed"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "migplan"
FIELD_MANAGER = "migplan"
# The ClusterPolicy fields migplan patches (the JSON merge patch of the planner), as dotted paths: the fields whose
# other owners (metadata.managedFields) tell a fight with Helm or Argo CD (MP590).
CLUSTER_POLICY_FIELDS = ("spec.mig.strategy", "spec.migManager.config.name", "spec.devicePlugin.config")
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
MIG_MANAGER_APP_LABEL = ("app", "nvidia-mig-manager")  # the GPU Operator's mig-manager DaemonSet pods
# mig-manager's pause of the node's GPU clients (mig-parted pkg/mig/reconfigure/reconfigure.go
# shutdownKubernetesGPUClients: each label maybeSetPaused; gpu.deploy.client only when it has a value).
GPU_CLIENT_DEPLOY_LABELS = (
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
    "nvidia.com/gpu.deploy.client",
)
PAUSED_FOR_MIG_CHANGE = "paused-for-mig-change"
# reconfigure.go Run: the error when waitForPodsToBeDeleted gave up (each wait 5 min); Run returns it before
# setState, so the state stays `pending` and the clients stay paused until mig-manager runs again.
CLIENT_WAIT_FAILED = "failed to wait for pods to be deleted"
# waitForPodsToBeDeleted's waits, by the words of their errors ("<client> pod did not shutdown") -> what it lists
# (label selector, with spec.nodeName=<node>, in mig-manager's DEFAULT_GPU_CLIENTS_NAMESPACE).
CLIENT_WAIT_SELECTORS = {
    "device-plugin pod": "app=nvidia-device-plugin-daemonset",
    "gpu-feature-discovery pod": "app=gpu-feature-discovery",
    "dcgm-exporter pod": "app=nvidia-dcgm-exporter",
    "dcgm pod": "app=nvidia-dcgm",
}
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


# The device plugin's name for a whole GPU shared with time-slicing/MPS under renameByDefault (k8s-device-plugin
# api/config/v1 DefaultSharedRename); a shared MIG resource keeps the nvidia.com/mig- prefix.
SHARED_GPU_RESOURCE = GPU_RESOURCE + ".shared"


def is_gpu_resource(name: str) -> bool:
    return name in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or is_mig_resource(name)


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
    # Whether spec.unschedulable is migplan's field alone (metadata.managedFields): True once migplan
    # cordoned the node and nobody wrote or claimed the field since, False when someone else did (kubectl
    # uncordon removes the field from every owner; kubectl cordon makes it "kubectl"'s), None when the
    # server sent no managedFields - then migplan cannot tell and keeps to spec.unschedulable alone.
    unschedulable_owned_by_migplan: bool | None = None
    resource_version: str = ""
    # spec.taints as (key, value, effect); what workloads must tolerate to run there.
    taints: tuple[tuple[str, str, str], ...] = ()
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
    def paused_gpu_clients(self) -> tuple[str, ...]:
        """The nvidia.com/gpu.deploy.* labels mig-manager left at paused-for-mig-change."""
        return tuple(k for k in GPU_CLIENT_DEPLOY_LABELS if self.labels.get(k) == PAUSED_FOR_MIG_CHANGE)

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
    controller: bool = True  # ownerReferences[].controller: false when only a plain owner is known


@dataclass(frozen=True, slots=True)
class ObservedPod:
    """A pod that asks for nvidia.com/gpu or nvidia.com/mig-*, or uses DRA ResourceClaims (others are not kept)."""

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
    terminating: bool = False  # metadata.deletionTimestamp is set: it goes on its own
    mirror: bool = False  # the API copy of a static pod (kubernetes.io/config.mirror): the API cannot remove it
    # The ResourceClaims it uses ("<namespace>/<name>", sorted): a DRA pod holds its devices through them, with
    # no extended-resource request, so only the node observer (or the claims) can say what it holds.
    claims: tuple[str, ...] = ()
    # `key`, made on first use and kept (drift, occupancy and the planner ask it of every pod many times over); not
    # part of the value: no repr, no comparison, no hash, not an argument.
    _key: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def key(self) -> str:
        key = self._key
        if key is None:
            key = f"{self.namespace}/{self.name}"
            object.__setattr__(self, "_key", key)
        return key

    def take_key(self, key: str) -> None:
        """Hold `key` as this pod's `key` when it is exactly "namespace/name" (made by whoever read the pod, e.g. the
        kube adapter's cache record): one string for both instead of two equal ones. Anything else is ignored."""
        namespace, name = self.namespace, self.name
        if (
            self._key is None
            and type(key) is str
            and type(namespace) is str  # a hostile pod's fields may be anything the JSON holds
            and type(name) is str
            and len(key) == len(namespace) + 1 + len(name)
            and key.startswith(namespace)
            and key.endswith(name)
            and key[len(namespace)] == "/"
        ):
            object.__setattr__(self, "_key", key)

    @property
    def active(self) -> bool:
        return self.phase not in ("Succeeded", "Failed")

    @property
    def holds_devices(self) -> bool:
        """Bound and not finished: the kubelet has (or will have) given it the devices it asked for."""
        return self.node is not None and self.active

    def requested(self) -> Mapping[str, int]:
        """GPU/MIG resources over all containers (init containers excluded: they run before). Read-only."""
        return requested_by(self.containers)


def _requested(containers: tuple[ContainerResources, ...]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in containers:
        for k, v in c.effective.items():
            total[k] = total.get(k, 0) + v
    return total


# A fleet's pods share a few container tuples (the kube adapter keeps one object per distinct value,
# kubeobserve.Shared), and drift, occupancy and the planner ask every pod what it requests: the sum is made once
# per tuple, remembered by the tuple's identity. Each entry keeps its tuple alive, so an id cannot be reused while
# it is remembered; bounded (cleared when full), so tuples of older observations cost at most that. The values are
# read-only views: a caller cannot change what another pod is said to request.
_REQUESTED: dict[int, tuple[tuple[ContainerResources, ...], Mapping[str, int]]] = {}
_REQUESTED_LIMIT = 1 << 12


def requested_by(containers: tuple[ContainerResources, ...]) -> Mapping[str, int]:
    """The GPU/MIG resources a pod with these containers requests (see ObservedPod.requested), read-only."""
    hit = _REQUESTED.get(id(containers))
    if hit is not None and hit[0] is containers:
        return hit[1]
    value: Mapping[str, int] = MappingProxyType(_requested(containers))
    if len(_REQUESTED) >= _REQUESTED_LIMIT:
        _REQUESTED.clear()
    _REQUESTED[id(containers)] = (containers, value)
    return value


# How many of the pods a reboot ends are named per node (the count is always whole): enough to act on and to
# drain in batches (the next ones are named once the first are gone), bounded so a node of 110 pods (the kubelet's
# default maxPods) or a flood of bare pods costs the same as a quiet one at 5,000 nodes.
REBOOT_NAMES_CAP = 20


@dataclass(frozen=True, slots=True)
class NodePods:
    """The pods a reboot of one node ends: every pod bound to it that is not finished (Succeeded/Failed), not
    DaemonSet-managed (its controller recreates it on the node) and not a mirror pod (the kubelet restarts the
    static pod from its manifest). Counted whole; named only up to REBOOT_NAMES_CAP, the first by key.
    `unreplicated_names` names, capped too, those drain cannot remove (no controller: kubectl drain needs --force),
    wherever they sort, so a drain is refused on the first cycle, not after 20 others are gone.

    `details` gives the named pods as drain needs them (light ObservedPods: name, labels, owner, terminating; no
    requests), built only when asked: the planner asks for a node it may reboot, a handful per cycle, while
    building them for every node of a 5,000-node cluster each cycle would cost more than the whole tally."""

    count: int = 0
    names: tuple[str, ...] = ()  # sorted, at most REBOOT_NAMES_CAP
    unreplicated_names: tuple[str, ...] = ()  # sorted, at most REBOOT_NAMES_CAP
    unreplicated_count: int = 0
    details: Callable[[], tuple[tuple[ObservedPod, ...], tuple[ObservedPod, ...]]] | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def pods(self) -> tuple[ObservedPod, ...]:
        """The named pods (by `names`), for the drain; () when only the names are known (read from a report)."""
        return self.details()[0] if self.details is not None else ()

    @property
    def unreplicated(self) -> tuple[ObservedPod, ...]:
        return self.details()[1] if self.details is not None else ()

    def describe(self) -> str:
        """'3 pods end (ml/a, ml/b, web/c)', the names capped, with how many more there are."""
        shown = ", ".join(self.names)
        more = self.count - len(self.names)
        if more > 0:
            shown += f" and {more} more"
        return f"{self.count} pod{'s' if self.count != 1 else ''} end" + (f" ({shown})" if shown else "")


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One matchExpressions entry of a label selector (operator In | NotIn | Exists | DoesNotExist)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ObservedPdb:
    """A PodDisruptionBudget (policy/v1): its selector and the status its controller maintains.

    `selector` None means the PDB has no selector (it matches no pod); `selector_valid` False means the
    selector could not be read (unknown operator): the eviction subresource treats it as matching nothing."""

    namespace: str
    name: str
    match_labels: Mapping[str, str] | None = None  # None: no spec.selector at all
    match_expressions: tuple[SelectorRequirement, ...] = ()
    selector_valid: bool = True
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod: ObservedPod) -> bool:
        """Whether the eviction subresource counts this PDB for the pod (eviction.go getPodDisruptionBudgets:
        same namespace, a valid non-empty selector that matches the pod's labels)."""
        if pod.namespace != self.namespace or not self.selector_valid or self.match_labels is None:
            return False
        if not self.match_labels and not self.match_expressions:
            return False
        if any(pod.labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for r in self.match_expressions:
            present = r.key in pod.labels
            value = pod.labels.get(r.key)
            if r.operator == "In" and not (present and value in r.values):
                return False
            if r.operator == "NotIn" and present and value in r.values:
                return False
            if r.operator == "Exists" and not present:
                return False
            if r.operator == "DoesNotExist" and present:
                return False
        return True


@dataclass(frozen=True, slots=True)
class ClusterPolicyState:
    name: str
    mig_strategy: str | None  # spec.mig.strategy; None when absent
    mig_manager_config_name: str | None  # spec.migManager.config.name
    device_plugin_config_name: str | None  # spec.devicePlugin.config.name
    device_plugin_config_default: str | None = None
    resource_version: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    # spec.devicePlugin.env as the operator applies it (name -> value, a later entry wins): rendered after
    # spec.mig.strategy, so its MIG_STRATEGY overrides the strategy (gpu-operator TransformDevicePlugin).
    device_plugin_env: Mapping[str, str] = field(default_factory=dict)
    # spec.migManager.env (WITH_REBOOT: mig-manager reboots the node when the MIG mode step fails) and
    # spec.driver.enabled (false: a host driver, for which the operator's mig-manager entrypoint exports
    # WITH_SHUTDOWN_HOST_GPU_CLIENTS=true, the kubelet among the host services it stops for a mode change).
    mig_manager_env: Mapping[str, str] = field(default_factory=dict)
    driver_enabled: bool = True
    # Field path ("spec.mig.strategy") -> the field managers that own it or a field under it, read from
    # metadata.managedFields (main resource only, sorted), for the fields migplan patches. Empty when the server
    # sent no managedFields: migplan then cannot name who else writes them.
    field_owners: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DevicePluginPod:
    name: str
    node: str | None
    ready: bool
    log_line: str | None = None  # only read when not ready: the line quoting the error
    log_read: bool = True  # False: not ready, but its log was not read (per-cycle cap on log reads)
    # When the pod's Ready condition last turned True (its lastTransitionTime); None when not ready or unknown.
    ready_since: datetime | None = None


@dataclass(frozen=True, slots=True)
class DevicePluginState:
    namespace: str
    name: str
    restarted_at: str | None  # spec.template.metadata.annotations[kubectl.kubernetes.io/restartedAt]
    generation: int = 0
    pods: tuple[DevicePluginPod, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)  # metadata.annotations
    controller_kind: str | None = None  # kind of the controlling ownerReference ("ClusterPolicy": the operator's)
    template_mig_strategy: str | None = None  # env MIG_STRATEGY of the template's nvidia-device-plugin container

    @property
    def operator_owned(self) -> bool:
        """The GPU Operator renders this DaemonSet (object_controls.go SetControllerReference to the ClusterPolicy)
        and replaces it whole when its rendering changes: a spec.mig.strategy change rolls it by itself."""
        return self.controller_kind == "ClusterPolicy"

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
    # The ConfigMap spec.migManager.config.name names while it is not migplan's (adopting a cluster): the configs
    # nodes' labels name now, carried into migplan's ConfigMap before the ClusterPolicy is pointed at it.
    mig_manager_config_map: ConfigMapState | None = None
    # node -> the nvidia-mig-manager pod's error line, read only for nodes whose state is `failed`, or `pending`
    # with GPU clients paused (mig-manager may have given up waiting for them: MP522).
    mig_manager_errors: Mapping[str, str] = field(default_factory=dict)
    # node -> the ConfigMap its nvidia-mig-manager pod reads its configs from (the `mig-parted-config` volume when
    # the container has CONFIG_FILE; "" without it: configs generated from the hardware). A pod keeps what it was
    # started with: after spec.migManager.config.name changes, a node reads the new ConfigMap only once the
    # DaemonSet's rolling update has given it a new pod (one node at a time by default).
    mig_manager_sources: Mapping[str, str] = field(default_factory=dict)
    # PodDisruptionBudgets in namespaces where a GPU pod runs or a pod a reboot ends is named (to name the ones
    # that block a drain).
    pdbs: tuple[ObservedPdb, ...] = ()
    # node -> the pods a reboot of it ends (NodePods; counted for every bound pod, named up to REBOOT_NAMES_CAP);
    # a node with none is absent. What a mig-manager with WITH_REBOOT may take (reconciler/logic/planning).
    node_pods: Mapping[str, NodePods] = field(default_factory=dict)
    # node -> what NVIDIA's DRA driver publishes for it (resource.k8s.io/v1 ResourceSlices of gpu.nvidia.com);
    # a node the driver publishes nothing for is absent. Empty on a server without resource.k8s.io/v1.
    dra: Mapping[str, NodeDra] = field(default_factory=dict)
    # ResourceClaims allocated a device of NVIDIA's DRA driver (the holders where no node observer reports), and
    # the one-line reasons the claims that could not be read were left out (MP571).
    claims: tuple[ObservedClaim, ...] = ()
    claim_problems: tuple[str, ...] = ()
    # The GPU Operator's GPUCluster resources (the DRA stack it runs; DynamicMIG lays out every GPU node).
    gpu_clusters: tuple[GpuClusterState, ...] = ()
    # The kubelet-plugin DaemonSets of NVIDIA's DRA driver installed by its own chart (DynamicMIG lays out their nodes).
    dra_drivers: tuple[DraDriverConfig, ...] = ()
    # node -> {GPU index: minor} a committed drift report recorded where no node observer can be read (a merge
    # request's plan in CI); the observer's own measure, when there is one, comes first.
    reported_minors: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    # Every DeviceClass (resource.k8s.io/v1), to keep the ones migplan renders from the plan; None when they were not
    # listed (a server without resource.k8s.io/v1, or an observer that does not read them): then none is written.
    device_classes: tuple[ObservedDeviceClass, ...] | None = None

    @property
    def foreign_mig_config_text(self) -> str | None:
        """The config file of the ConfigMap the ClusterPolicy names while it is not migplan's (None otherwise)."""
        cm = self.mig_manager_config_map
        return cm.data.get("config.yaml") if cm is not None else None

    def pods_by_node(self) -> Mapping[str, tuple[ObservedPod, ...]]:
        """Bound pods grouped by node, in one pass (callers join on this, never per node over all pods)."""
        grouped: dict[str, list[ObservedPod]] = {}
        for p in self.pods:
            if p.node is not None:
                grouped.setdefault(p.node, []).append(p)
        return {k: tuple(v) for k, v in grouped.items()}
