"""Drift and occupancy values: what differs between the plan and the cluster, and who holds what.

Pure values. A Finding carries a stable code (the table in reconciler/logic/drift/drift.py and
docs/reference/codes.md), the node/GPU/profile it concerns, the desired and observed values and one line a person
can act on. A DriftReport is the whole picture for one revision; reports.py renders it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.model.codes import severity as registered_severity
from reconciler.model.redaction import redact
from reconciler.model.revisions import Revision


class FindingSeverity(enum.StrEnum):
    ERROR = "error"  # something is broken now (pods cannot start, a node refused its layout)
    WARNING = "warning"  # differs from the plan; migplan will (or cannot) fix it
    INFO = "info"  # worth knowing (a reconfiguration in progress, a profile saturated)


class NodeStatus(enum.StrEnum):
    IN_SYNC = "InSync"
    DRIFTED = "Drifted"
    MISSING = "Missing"  # in the inventory, not in the cluster
    UNDOCUMENTED = "Undocumented"  # a GPU node in the cluster, not in the inventory
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    message: str
    severity: FindingSeverity = FindingSeverity.WARNING
    node: str | None = None
    gpu: int | None = None
    profile: str | None = None
    desired: Any = None
    observed: Any = None
    pods: tuple[str, ...] = ()  # namespace/name of pods involved, sorted

    def __post_init__(self) -> None:
        # Where error texts enter a report: a message quoting an API or Git error may carry a URL's credential.
        # Redacted here, once, so the per-node report files built from findings need no scan of their own
        # (reconciler.adapters.git.reports guards only the files that quote settings and the commit message).
        cleaned = redact(self.message)
        if cleaned is not self.message:
            object.__setattr__(self, "message", cleaned)

    def sort_key(self) -> tuple[str, str, int, str, str]:
        return (self.node or "", self.code, -1 if self.gpu is None else self.gpu, self.profile or "", self.message)

    def __str__(self) -> str:
        where = self.node or "cluster"
        return f"{where}: {self.severity.value} {self.code}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "severity": self.severity.value, "message": self.message}
        for key in ("node", "gpu", "profile", "desired", "observed"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.pods:
            out["pods"] = list(self.pods)
        return out


def finding(
    code: str,
    message: str,
    *,
    severity: FindingSeverity | None = None,
    node: str | None = None,
    gpu: int | None = None,
    profile: str | None = None,
    desired: object = None,
    observed: object = None,
    pods: tuple[str, ...] = (),
) -> Finding:
    """The one Finding constructor: the severity is the code's in the registry unless `severity` overrides it
    (a finding whose weight depends on what it found, such as MP540's fragmentation)."""
    return Finding(
        code=code,
        message=message,
        severity=severity or FindingSeverity(registered_severity(code).value),
        node=node,
        gpu=gpu,
        profile=profile,
        desired=desired,
        observed=observed,
        pods=pods,
    )


@dataclass(frozen=True, slots=True)
class Holder:
    """A pod holding partitions of one profile on one node."""

    pod: str  # namespace/name
    count: int
    owner: str | None = None  # the inventory partition owner it was matched to, if any


@dataclass(frozen=True, slots=True)
class Occupancy:
    node: str
    profile: str  # "3g.71gb"; "gpu" for whole GPUs (nvidia.com/gpu)
    total: int
    used: int
    holders: tuple[Holder, ...] = ()
    # OBSERVED: totals and holders measured by the node's observer (NVML + the kubelet's PodResources);
    # INFERRED: totals from the plan, holders matched from the pods' requests (see occupancy.py).
    source: str = "inferred"

    @property
    def free(self) -> int:
        return max(self.total - self.used, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "source": self.source,
            "total": self.total,
            "used": self.used,
            "free": self.free,
            "holders": [
                {"pod": h.pod, "count": h.count, **({"owner": h.owner} if h.owner else {})} for h in self.holders
            ],
        }


@dataclass(frozen=True, slots=True)
class NodeReport:
    name: str
    status: NodeStatus
    findings: tuple[Finding, ...] = ()
    occupancy: tuple[Occupancy, ...] = ()
    mig_config: str | None = None  # the config name the plan gives this node
    # The node observer's state: reporting | silent | malformed | absent (None: not a GPU node).
    observer: str | None = None
    # Under WITH_REBOOT only: how many pods a reboot of the node ends, and the first of them by name (capped), so a
    # merge request's plan can say what a change that may reboot the node takes (reconciler/logic/review).
    reboot_ends: int | None = None
    reboot_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MigManagerHost:
    """What the observed ClusterPolicy makes mig-manager do to a node's host around a MIG mode change
    (mig-parted pkg/mig/reconfigure/reconfigure.go `Run`): reboot it when the mode step fails (WITH_REBOOT), stop
    the kubelet with the host GPU clients (a host driver: WITH_SHUTDOWN_HOST_GPU_CLIENTS)."""

    with_reboot: bool = False
    host_driver: bool = False

    @property
    def any(self) -> bool:
        return self.with_reboot or self.host_driver

    def to_json(self) -> dict[str, bool]:
        return {"withReboot": self.with_reboot, "shutdownHostGpuClients": self.host_driver}

    def flags(self) -> dict[str, bool]:
        """As reconciler/logic/planning/disruption.py host_effects takes them."""
        return {"with_reboot": self.with_reboot, "host_driver": self.host_driver}


@dataclass(frozen=True, slots=True)
class DriftReport:
    cluster: str
    revision: Revision
    strategy: str
    nodes: tuple[NodeReport, ...]  # sorted by name
    cluster_findings: tuple[Finding, ...] = ()  # findings not about one node
    # The desired plan per node/GPU, for the slice maps: node -> (gpu index, model, [(profile,
    # start, size, owner, holder)]). Filled by the engine from DesiredState + occupancy.
    slice_maps: Mapping[str, tuple[GpuSliceMap, ...]] = field(default_factory=dict)
    owners: tuple[OwnerAccount, ...] = ()  # owner accounting, by (owner, profile)
    # What mig-manager does to the host around a mode change, when it does anything (None: nothing, or unknown).
    mig_manager: MigManagerHost | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        out = list(self.cluster_findings)
        for n in self.nodes:
            out.extend(n.findings)
        return tuple(out)

    def counts(self) -> dict[str, int]:
        """Nodes per status (every status present, for stable summaries)."""
        counts = {s.value: 0 for s in NodeStatus}
        for n in self.nodes:
            counts[n.status.value] += 1
        return counts

    @property
    def in_sync(self) -> bool:
        return not self.cluster_findings_blocking and all(n.status is NodeStatus.IN_SYNC for n in self.nodes)

    @property
    def cluster_findings_blocking(self) -> bool:
        return any(f.severity is not FindingSeverity.INFO for f in self.cluster_findings)

    def summary(self) -> str:
        """One line for commit messages and logs: counts only, no timestamps."""
        c = self.counts()
        parts = [f"{c[s.value]} {s.value}" for s in NodeStatus if c[s.value]]
        findings = self.findings
        errors = sum(1 for f in findings if f.severity is FindingSeverity.ERROR)
        return (
            f"drift: {self.cluster} vs {self.revision}: {', '.join(parts) or 'no nodes'}; "
            f"{len(findings)} finding(s), {errors} error(s)"
        )


@dataclass(frozen=True, slots=True)
class SlicePartition:
    profile: str
    start: int | None  # None: placement unknown for this model
    size: int
    owner: str | None = None
    holder: str | None = None  # namespace/name of the pod holding it (several: comma-separated), when known
    # Against the plan, for an observed layout: "planned" (a planned partition at its planned placement, or
    # a planned layout), "moved" (the plan has this profile here, at `planned_start`), "unplanned" (the GPU
    # has it, the plan does not), "missing" (the plan has it, the GPU does not).
    state: str = "planned"
    planned_start: int | None = None


@dataclass(frozen=True, slots=True)
class GpuSliceMap:
    index: int
    model: str
    mig_enabled: bool
    memory_slices: int
    partitions: tuple[SlicePartition, ...] = ()
    # Where the layout comes from: "observed" (the node's observer read it from NVML) or "planned" (the
    # inventory's cut, what the GPU should have); where the holders come from: "observed" (the kubelet's
    # PodResources, per partition) or "inferred" (pod requests matched to owners, occupancy.py).
    layout_source: str = "planned"
    holders_source: str = "inferred"


@dataclass(frozen=True, slots=True)
class OwnerAccount:
    """One inventory owner's partitions of one profile over the cluster: reserved by the plan vs held."""

    owner: str  # "" for the partitions the plan leaves unowned
    profile: str
    reserved: int  # partitions of this profile the plan gives the owner
    held: int  # of those, held by a pod (any pod)
    held_by_owner: int  # partitions of this profile (reserved or not) held by this owner's pods
    foreign: tuple[str, ...] = ()  # pods of another owner holding one of this owner's partitions, sorted
    source: str = "inferred"  # observed | inferred | mixed (some nodes observed, others inferred)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "owner": self.owner,
            "profile": self.profile,
            "source": self.source,
            "reserved": self.reserved,
            "held": self.held,
            "heldByOwner": self.held_by_owner,
        }
        if self.foreign:
            out["foreignHolders"] = list(self.foreign)
        return out
