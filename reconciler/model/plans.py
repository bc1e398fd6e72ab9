"""The plan: an ordered, deterministic tuple of Changes, one vocabulary for dry-run, apply, logs and reports.

Pure values. A Change names its subject ("configmap/gpu-operator/migplan-mig-parted-config",
"clusterpolicy/cluster-policy", "daemonset/gpu-operator/nvidia-device-plugin-daemonset",
"node/gpu-h200-01"), what to do with it, the before/after values of the fields migplan owns and
why. The applier turns each non-trivial Change into exactly one write (`patch`), so the plan *is*
the list of writes, in order.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.model.revisions import WORKDIR, Revision


class Action(enum.StrEnum):
    CREATE = "create"
    CONFIGURE = "configure"
    UNCHANGED = "unchanged"
    DELETE = "delete"
    SKIP = "skip"  # wanted, but held back (disruption guard, maxUnavailableNodes, ordering)


class Kind(enum.StrEnum):
    """What a change writes; the applier dispatches on it."""

    MIG_CONFIG_MAP = "mig-config-map"  # create or merge-patch the mig-parted ConfigMap
    CLUSTER_POLICY = "cluster-policy"  # one JSON merge patch of ClusterPolicy spec
    RESTART_DEVICE_PLUGIN = "restart-device-plugin"  # kubectl-rollout-restart style SMP
    CORDON = "cordon"  # spec.unschedulable=true + migplan.io/cordoned (+ the drain's start)
    EVICT = "evict"  # POST pods/{name}/eviction (policy/v1 Eviction): the drain, PodDisruptionBudgets honoured
    NODE_MIG_CONFIG = "node-mig-config"  # nvidia.com/mig.config label (+ requested-at)
    AGENT_LAYOUT = "agent-layout"  # apply.mode agent: migplan.io/mig-desired annotation for the node agent
    UNCORDON = "uncordon"  # spec.unschedulable=false, drop migplan.io/cordoned
    # DRA-static nodes (reconciler/logic/planning/draplugin.py): the record of a restart of NVIDIA's DRA kubelet
    # plugin on the node (a Node annotation), then the delete of that plugin pod (uid precondition)
    DRA_PLUGIN_RECORD = "dra-plugin-record"
    RESTART_DRA_PLUGIN = "restart-dra-plugin"
    DEVICE_CLASS = "device-class"  # create / merge-patch a DeviceClass migplan keeps (resource.k8s.io/v1)


@dataclass(frozen=True, slots=True)
class Change:
    subject: str
    action: Action
    kind: Kind
    before: Mapping[str, Any] | None = None
    after: Mapping[str, Any] | None = None
    reason: str = ""
    # Pods that hold a partition this change would destroy (disruption guard); namespace/name.
    blocked_by: tuple[str, ...] = ()
    # The write itself, as the applier sends it (a JSON merge patch or a ConfigMap body); None for
    # UNCHANGED / SKIP. Kept in the plan so dry-run prints exactly what would be sent.
    patch: Mapping[str, Any] | None = None
    # The drift finding a held change or an eviction is reported as (MP519, MP536-MP539); "" = none/default.
    code: str = ""
    # PodDisruptionBudgets (namespace/name) that block the drain this change waits for.
    pdbs: tuple[str, ...] = ()

    @property
    def writes(self) -> bool:
        return self.action in (Action.CREATE, Action.CONFIGURE, Action.DELETE)

    @property
    def headline(self) -> str:
        """What a person reads first: action and object. A plugin restart is grouped under its node (its subject)
        but deletes a pod, never the Node: "delete node/X" would read as the Node deleted."""
        meta = (self.patch or {}).get("metadata") if self.kind is Kind.RESTART_DRA_PLUGIN else None
        if isinstance(meta, Mapping) and meta.get("name"):
            pod = f"pod/{meta.get('namespace', '')}/{meta['name']}"
            return f"{self.action.value} {pod} (DRA kubelet plugin of {self.subject})"
        return f"{self.action.value} {self.subject}"

    def __str__(self) -> str:
        text = self.headline
        if self.reason:
            text += f": {self.reason}"
        if self.blocked_by:
            text += f" (blocked by {', '.join(self.blocked_by)})"
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "subject": self.subject,
            "action": self.action.value,
            "kind": self.kind.value,
            "reason": self.reason,
        }
        if self.before is not None:
            out["before"] = dict(self.before)
        if self.after is not None:
            out["after"] = dict(self.after)
        if self.blocked_by:
            out["blockedBy"] = list(self.blocked_by)
        if self.code:
            out["code"] = self.code
        if self.pdbs:
            out["podDisruptionBudgets"] = list(self.pdbs)
        return out


@dataclass(frozen=True, slots=True)
class Plan:
    changes: tuple[Change, ...]
    revision: Revision = WORKDIR
    # Node name -> mig-parted config name it should carry (for reports and tests).
    node_configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def writes(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.writes)

    @property
    def skipped(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.action is Action.SKIP)

    def is_empty(self) -> bool:
        """Nothing to write and nothing held back: the cluster matches the plan."""
        return not self.writes and not self.skipped

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": str(self.revision),
            "changes": [c.to_json() for c in self.changes if c.action is not Action.UNCHANGED],
            "unchanged": sum(1 for c in self.changes if c.action is Action.UNCHANGED),
        }
