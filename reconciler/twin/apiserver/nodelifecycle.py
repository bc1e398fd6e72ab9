"""The node lifecycle controller's NoSchedule tainting pass, run by the embedded (non-bare) twin after node writes.

Pure. Source: kubernetes/kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go
`doNoScheduleTaintingPass` with `nodeConditionToTaintKeyStatusMap`: the NoSchedule taints a node should carry are
derived from its conditions (Ready False -> not-ready, Ready Unknown -> unreachable, MemoryPressure/DiskPressure/
PIDPressure True -> *-pressure, NetworkUnavailable True -> network-unavailable) and from spec.unschedulable
(node.kubernetes.io/unschedulable); the controller adds the missing ones and removes the managed ones no longer
derived (SwapNodeControllerTaint), leaving every other taint alone. So the not-ready taint that
TaintNodesByCondition puts on a new Node goes once its kubelet reports Ready=True (or reports no conditions yet).
Not modelled: the health monitor that turns a silent node's Ready to Unknown after the grace period and the
NoExecute pass (taint-based eviction).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": "node.kubernetes.io/not-ready", "Unknown": "node.kubernetes.io/unreachable"},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
}
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_MANAGED = {key for by_status in _CONDITION_TAINTS.values() for key in by_status.values()} | {UNSCHEDULABLE_TAINT}


def desired_taint_keys(node: Mapping[str, Any]) -> list[str]:
    """The NoSchedule taint keys the controller derives for this node, in its order."""
    keys: list[str] = []
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping):
            key = _CONDITION_TAINTS.get(str(cond.get("type")), {}).get(str(cond.get("status")))
            if key is not None:
                keys.append(key)
    if (node.get("spec") or {}).get("unschedulable") is True:
        keys.append(UNSCHEDULABLE_TAINT)
    return keys


def reconciled_taints(node: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
    """spec.taints after the pass, or None when nothing changes; taints added now carry timeAdded `now`."""
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, Mapping)]
    present = {t.get("key") for t in taints if t.get("effect") == "NoSchedule" and t.get("key") in _MANAGED}
    wanted = desired_taint_keys(node)
    to_add = [k for k in wanted if k not in present]
    to_del = present - set(wanted)
    if not to_add and not to_del:
        return None
    kept = [dict(t) for t in taints if not (t.get("effect") == "NoSchedule" and t.get("key") in to_del)]
    # SwapNodeControllerTaint stamps TimeAdded on each taint it adds; AddOrUpdateTaint appends it
    return kept + [{"key": k, "effect": "NoSchedule", "timeAdded": now} for k in to_add]
