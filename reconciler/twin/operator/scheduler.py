"""The twin's tiny kube-scheduler: which node a pod asking for GPU resources fits on, and why not. Pure.

Only extended resources under `nvidia.com/` are accounted (cpu/memory are assumed to fit). A node fits when it
matches `spec.nodeName` / `spec.nodeSelector`, is not cordoned, and has, for every requested GPU resource, at
least that many free devices that its device plugin advertises. The FailedScheduling text follows the real
scheduler's shape [assumption, ASSUMPTIONS-operator.md]:
`0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector.
preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.`
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.twin.draextended import dra_mapped

__all__ = ["NodeView", "container_requests", "fit", "gpu_requests", "unschedulable_message"]

SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
UNSCHEDULABLE = "node(s) were unschedulable"


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    unschedulable: bool
    free: Mapping[str, int]  # resource → free devices right now


def container_requests(pod: Mapping[str, Any]) -> list[tuple[str, dict[str, int]]]:
    """Per container, in spec order: its `nvidia.com/*` requests (limits if no request)."""
    out: list[tuple[str, dict[str, int]]] = []
    # What the scheduler gave to DRA (status.extendedResourceClaimStatus, KEP-5004) is not the device manager's.
    to_dra = dra_mapped(pod)
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        wanted: dict[str, int] = {}
        for k, v in merged.items():
            if k.startswith("nvidia.com/") and (str(c.get("name", "")), k) not in to_dra:
                try:
                    wanted[k] = int(str(v))
                except ValueError:
                    continue
        out.append((str(c.get("name", "")), wanted))
    return out


def gpu_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """Sum of `nvidia.com/*` requests (limits if no request) over the pod's containers."""
    out: dict[str, int] = {}
    for _, wanted in container_requests(pod):
        for k, n in wanted.items():
            out[k] = out.get(k, 0) + n
    return out


def fit(pod: Mapping[str, Any], nodes: Iterable[NodeView]) -> tuple[str | None, dict[str, int]]:
    """(chosen node or None, reason → number of nodes failing for it)."""
    spec = pod.get("spec") or {}
    want = gpu_requests(pod)
    selector = spec.get("nodeSelector") or {}
    reasons: dict[str, int] = {}
    for n in nodes:
        if spec.get("nodeName") and spec["nodeName"] != n.name:
            reasons[SELECTOR_MISMATCH] = reasons.get(SELECTOR_MISMATCH, 0) + 1
            continue
        if any(n.labels.get(k) != v for k, v in selector.items()):
            reasons[SELECTOR_MISMATCH] = reasons.get(SELECTOR_MISMATCH, 0) + 1
            continue
        if n.unschedulable:
            reasons[UNSCHEDULABLE] = reasons.get(UNSCHEDULABLE, 0) + 1
            continue
        short = [r for r, k in sorted(want.items()) if n.free.get(r, 0) < k]
        if short:
            for r in short:
                key = f"Insufficient {r}"
                reasons[key] = reasons.get(key, 0) + 1
            continue
        return n.name, {}
    return None, reasons


def unschedulable_message(total: int, reasons: Mapping[str, int]) -> str:
    parts = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda kv: kv[0]))
    head = f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."
    return f"{head} preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
