"""Desired state: the inventory after parsing, layout resolution and validation.

Vocabulary: a *Partition* is one MIG GPU instance the inventory declares (profile, placement,
owner); a *Placement* is where it sits on the GPU (start memory slice, size); a *GpuSpec* is one
GPU's desired cut and a *NodeSpec* a node's GPUs and their partitions. "Plan" is kept for changes
(reconciler.model.plans): what a cycle or a merge would create, destroy and re-own. Pure values;
positions (file, line) travel with them so later stages can still point at the line a person wrote.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.model.revisions import WORKDIR, Revision


class MigStrategy(enum.StrEnum):
    NONE = "none"
    SINGLE = "single"
    MIXED = "mixed"


class ApplyMode(enum.StrEnum):
    GPU_OPERATOR = "gpu-operator"
    AGENT = "agent"
    REPORT_ONLY = "report-only"


class VerifyMode(enum.StrEnum):
    NONE = "none"
    HEAD = "head"


class InventoryFiles(dict[str, bytes]):
    """What a loader read from an inventory root: relative path -> bytes, plus what it could not read.

    `unreadable` maps a path (printable: a name that is not UTF-8 is shown with escapes) to why it
    could not be read (permission denied, a symbolic link, a FIFO or device, nested too deep, a
    submodule). Validation turns each that concerns the inventory into an error (MP420): what cannot
    be read is never an empty inventory."""

    def __init__(self, files: Mapping[str, bytes] | None = None, unreadable: Mapping[str, str] | None = None) -> None:
        super().__init__(files or {})
        self.unreadable: dict[str, str] = dict(unreadable or {})


@dataclass(frozen=True, slots=True)
class SourceRef:
    file: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Start memory slice and size in memory slices, as NVML's nvmlGpuInstancePlacement_t."""

    start: int
    size: int

    @property
    def end(self) -> int:  # exclusive
        return self.start + self.size

    def overlaps(self, other: Placement) -> bool:
        return self.start < other.end and other.start < self.end

    def __str__(self) -> str:
        return f"{self.start}:{self.size}"


@dataclass(frozen=True, slots=True)
class Partition:
    profile: str
    placement: int | None = None  # start memory slice as written; None = the solver picks
    owner: str | None = None  # None = free for anyone
    purpose: str | None = None
    source: SourceRef | None = None


@dataclass(frozen=True, slots=True)
class GpuSpec:
    index: int
    model: str  # catalog key after resolution ("H200-141GB")
    mig_enabled: bool
    partitions: tuple[Partition, ...] = ()
    layout: str | None = None  # name of the Layout it came from, if any
    # Solver result: one Placement per partition, aligned with `partitions`. Filled by validation;
    # empty when MIG is disabled or the model's placements are unknown.
    placements: tuple[Placement, ...] = ()
    source: SourceRef | None = None


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpus: tuple[GpuSpec, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    source: SourceRef | None = None
    # spec.layoutWriter: who writes this node's MIG layout; None = the cluster's (ClusterSpec.layout_writer)
    layout_writer: str | None = None

    def gpu(self, index: int) -> GpuSpec | None:
        for g in self.gpus:
            if g.index == index:
                return g
        return None


@dataclass(frozen=True, slots=True)
class LayoutSpec:
    """A reusable per-GPU layout (layouts/<name>.yaml)."""

    name: str
    mig_enabled: bool
    partitions: tuple[Partition, ...]
    model: str | None = None  # if set, the layout may only be used on this model
    source: SourceRef | None = None


# The kubelet refreshes a ConfigMap volume when it syncs the pod: every syncFrequency (KubeletConfiguration default
# 1m, kubernetes pkg/kubelet/apis/config/v1beta1 defaults) plus up to 50% jitter (pkg/kubelet/pod_workers.go
# workerResyncIntervalJitterFactor = 0.5, wait.Jitter), from its ConfigMap manager, which under the `Cache`
# configMapAndSecretChangeDetectionStrategy serves a copy up to defaultTTL = 1m old (pkg/kubelet/configmap/
# configmap_manager.go; under the default `Watch` strategy the watch delay is far shorter). kubernetes.io "Mounted
# ConfigMaps are updated automatically": "kubelet sync period + cache propagation delay". 60 s x 1.5 + 60 s.
CONFIG_PROPAGATION_SECONDS = 150
DEFAULT_WRITE_CONCURRENCY = 16  # spec.apply.writeConcurrency when the cluster file leaves it out
MAX_WRITE_CONCURRENCY = 256  # its maximum (schemas/cluster.schema.json); the kube adapter keeps this many connections


@dataclass(frozen=True, slots=True)
class ApplySettings:
    mode: ApplyMode = ApplyMode.GPU_OPERATOR
    max_unavailable_nodes: int = 1
    allow_disruption: bool = False
    # A revision that removes many nodes of the last applied one is refused (MP725) unless this
    # says how many it removes, exactly (so a confirmation left in place confirms nothing later).
    confirm_node_removal: int = 0
    # How long the kubelet may take to project a ConfigMap change into mig-manager's mounted config.yaml; a node
    # is relabelled to a config only once the ConfigMap content holding it is at least this old.
    config_propagation_seconds: int = CONFIG_PROPAGATION_SECONDS
    # With allow_disruption: how long migplan drains a node (evictions through the Eviction API, PodDisruptionBudgets
    # honoured) before it gives up and holds the change (MP538); pods are never deleted by force.
    drain_timeout_seconds: int = 900
    # Writes in flight at once (node groups written in parallel, reconciler/engine.py): bounds the load
    # migplan puts on the API server; a 429 with Retry-After slows it down further.
    write_concurrency: int = DEFAULT_WRITE_CONCURRENCY


@dataclass(frozen=True, slots=True)
class GpuOperatorSettings:
    namespace: str = "gpu-operator"
    cluster_policy: str = "cluster-policy"
    device_plugin_daemonset: str = "nvidia-device-plugin-daemonset"
    mig_config_map: str = "migplan-mig-parted-config"


@dataclass(frozen=True, slots=True)
class ReportSettings:
    branch: str = "migplan-reports"
    path: str = "reports"
    source: SourceRef | None = field(default=None, compare=False)  # where reports.path is written
    # reports.minInterval: occupancy-only changes are committed at most this often (logic/reports/reportcadence.py)
    min_interval_seconds: int = 600


@dataclass(frozen=True, slots=True)
class VerifySettings:
    mode: VerifyMode = VerifyMode.NONE
    allowed_signers: tuple[str, ...] = ()  # SSH allowed-signers lines
    gpg_public_keys: tuple[str, ...] = ()  # ASCII-armoured OpenPGP public keys


@dataclass(frozen=True, slots=True)
class OwnerClass:
    """spec.deviceClasses.owners[]: a DeviceClass selecting exactly one owner's planned partitions on DRA nodes."""

    owner: str
    name: str  # the DeviceClass name (default migplan-owner-<owner>, reconciler.logic.inventory.deviceclasses)
    extended_resource_name: str | None = None
    source: SourceRef | None = None


@dataclass(frozen=True, slots=True)
class DeclaredClass:
    """spec.deviceClasses.declared[]: a DeviceClass written by hand in cluster.yaml, kept like a rendered one."""

    name: str
    extended_resource_name: str | None = None
    selectors: tuple[str, ...] = ()  # CEL expressions, all of which a device must satisfy
    source: SourceRef | None = None


@dataclass(frozen=True, slots=True)
class DeviceClassSettings:
    """spec.deviceClasses: the DeviceClasses migplan renders from the plan and keeps (docs/explanation/dra.md)."""

    enabled: bool = True  # one class per profile the plan offers on DRA nodes, extendedResourceName nvidia.com/mig-*
    owners: tuple[OwnerClass, ...] = ()
    declared: tuple[DeclaredClass, ...] = ()
    source: SourceRef | None = field(default=None, compare=False)  # where `enabled` is written, if it is


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    name: str
    mig_strategy: MigStrategy
    apply: ApplySettings = ApplySettings()
    gpu_operator: GpuOperatorSettings = GpuOperatorSettings()
    reports: ReportSettings = ReportSettings()
    verify: VerifySettings = VerifySettings()
    source: SourceRef | None = None
    # spec.layoutWriter: who writes the GPU nodes' MIG layouts unless a node says otherwise (LAYOUT_WRITERS)
    layout_writer: str = "migplan"
    device_classes: DeviceClassSettings = DeviceClassSettings()


# Who may write a GPU node's MIG layout: migplan itself, NVIDIA's DRA driver in DynamicMIG mode, or another dynamic
# partitioner (HAMi's MIG mode, ...). migplan writes a layout only where the effective writer is "migplan".
LAYOUT_WRITERS = ("migplan", "dra-dynamic-mig", "external")


@dataclass(frozen=True, slots=True)
class DesiredState:
    """A validated inventory root: the cluster settings and every node's plan, at one revision."""

    cluster: ClusterSpec
    nodes: Mapping[str, NodeSpec]
    layouts: Mapping[str, LayoutSpec] = field(default_factory=dict)
    revision: Revision = WORKDIR

    def layout_writer(self, node: str) -> str:
        """Who writes `node`'s MIG layout: its own spec.layoutWriter, else the cluster's."""
        spec = self.nodes.get(node)
        own = spec.layout_writer if spec is not None else None
        return own if own is not None else self.cluster.layout_writer
