"""Drain a node before a change destroys what its pods hold (apply.allowDisruption). Pure.

kubectl drain's order, as Changes of the plan: cordon, evict the pods through the Eviction API
(policy/v1 Eviction, `POST pods/{name}/eviction`: the API server honours PodDisruptionBudgets and answers
429 when one would be violated), wait until the pods are gone (observed on a later cycle), then the change
(the relabel), and the uncordon once mig-manager reports success (reconciler/logic/planning/rollout.py). A refused
eviction is
retried on the next cycle, never forced; past `apply.drainTimeoutSeconds` the change is held and the pods
and PodDisruptionBudgets that block it are named (MP538). Only the pods holding what the change destroys
are evicted (the apply mode's disruption model, reconciler/logic/planning/disruption.py), not every pod of the node.
In apply.mode agent the change held is the publication of the node's layout (reconciler/logic/planning/agentchanges.py;
who holds what it destroys: reconciler/logic/planning/agentdrain.py) and the uncordon waits for the agent's success.

Which pods drain can remove follows kubectl's filters (k8s.io/kubectl/pkg/drain/filters.go `makeFilters`,
in that order), for the pods that hold a destroyed device:
- `skipDeletedFilter`: a pod already terminating (deletionTimestamp) is not evicted again; it is waited for
  (kubectl, with its default skip-wait-for-delete-timeout 0, waits for it as well);
- `daemonSetFilter`: a running DaemonSet pod is never deleted by drain (its controller ignores the cordon
  and recreates it); kubectl refuses without --ignore-daemonsets and with it leaves the pod, which would
  still hold the device: the change is held (MP539);
- `mirrorPodFilter`: a mirror pod (annotation kubernetes.io/config.mirror) cannot be deleted through the
  API; kubectl skips it, and it would still hold the device: held (MP539);
- `localStorageFilter`: allowDisruption stands for --delete-emptydir-data (the partition the pod uses is
  destroyed anyway); volumes are not observed;
- `unreplicatedFilter`: a running pod without a controller is refused by kubectl unless --force; migplan has
  no --force (an evicted bare pod is gone for good): held (MP539), the owner deletes or moves it.
Finished pods (Succeeded/Failed) hold nothing (ObservedPod.holds_devices) and are not considered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.model.observed import (
    CORDONED_ANNOTATION,
    DRAIN_FOR_ANNOTATION,
    DRAIN_STARTED_ANNOTATION,
    ObservedNode,
    ObservedPdb,
    ObservedPod,
)
from reconciler.model.plans import Action, Change, Kind
from reconciler.model.strict import StrictValueError, parse_timestamp

# Finding codes (declared in reconciler/logic/drift/drift.py FINDING_CODES) a drain's changes carry.
DRAINING = "MP536"  # pods evicted / waited for
PDB_BLOCKS = "MP537"  # a PodDisruptionBudget allows no disruption of a pod to evict
TIMED_OUT = "MP538"  # past drainTimeoutSeconds: held, nothing forced
UNDRAINABLE = "MP539"  # DaemonSet, mirror or controller-less pods hold what the change destroys

# A start stamp this far in the future is not believed (it would make the drain endless).
_CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What drain does with the pods that hold what a node's change destroys."""

    evict: tuple[ObservedPod, ...] = ()  # evicted through the Eviction API
    terminating: tuple[str, ...] = ()  # already going: waited for
    refused: tuple[tuple[str, str], ...] = ()  # (pod, why drain cannot remove it)

    @property
    def pods(self) -> tuple[str, ...]:
        return tuple(sorted({p.key for p in self.evict} | set(self.terminating) | {k for k, _ in self.refused}))


def why_not_drainable(pod: ObservedPod) -> str | None:
    """Why kubectl drain (without --ignore-daemonsets / --force) would not remove the pod; None if it would."""
    if pod.terminating:
        return None
    if pod.owner is not None and pod.owner.controller and pod.owner.kind == "DaemonSet":
        return f"DaemonSet-managed ({pod.owner.name}): its controller recreates it on the cordoned node"
    if pod.mirror:
        return "mirror pod of a static pod: the API cannot delete it"
    if pod.owner is None or not pod.owner.controller:
        return "declares no controller: an evicted bare pod is gone for good (kubectl drain needs --force)"
    return None


def classify(pods: Iterable[ObservedPod]) -> Verdict:
    evict: list[ObservedPod] = []
    terminating: list[str] = []
    refused: list[tuple[str, str]] = []
    for p in sorted(pods, key=lambda p: p.key):
        if p.terminating:
            terminating.append(p.key)
            continue
        why = why_not_drainable(p)
        if why is not None:
            refused.append((p.key, why))
        else:
            evict.append(p)
    return Verdict(tuple(evict), tuple(terminating), tuple(refused))


def blocking_pdbs(pods: Iterable[ObservedPod], pdbs: Iterable[ObservedPdb]) -> tuple[str, ...]:
    """The PodDisruptionBudgets (namespace/name) that select one of the pods and allow no disruption now."""
    pdb_list = list(pdbs)
    out = {b.key for p in pods for b in pdb_list if b.disruptions_allowed <= 0 and b.selects(p)}
    return tuple(sorted(out))


def describe_pdbs(keys: Iterable[str], pdbs: Iterable[ObservedPdb]) -> str:
    """'ml/vllm-pdb (needs 1 healthy pods and has 1)' for each key, from the observed status."""
    by_key = {b.key: b for b in pdbs}
    parts = []
    for k in keys:
        b = by_key.get(k)
        parts.append(k if b is None else f"{k} (needs {b.desired_healthy} healthy pods and has {b.current_healthy})")
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class DrainClock:
    """Where a node's drain for a config stands: not started, running since `started`, or unreadable."""

    started: datetime | None
    unreadable: str | None = None  # the annotation's value could not be believed

    def elapsed(self, now: datetime) -> timedelta:
        return timedelta(0) if self.started is None else now - self.started


def drain_clock(node: ObservedNode, config: str, now: datetime) -> DrainClock:
    """The drain migplan started on this node for `config` (annotations written with the cordon)."""
    ann = node.annotations
    text = ann.get(DRAIN_STARTED_ANNOTATION)
    if text is None or ann.get(DRAIN_FOR_ANNOTATION) != config:
        return DrainClock(None)
    try:
        started = parse_timestamp(text)
    except StrictValueError as exc:
        return DrainClock(None, f"{DRAIN_STARTED_ANNOTATION} is malformed ({exc})")
    if started > now + _CLOCK_SKEW:
        return DrainClock(None, f"{DRAIN_STARTED_ANNOTATION}={text} is in the future")
    return DrainClock(started)


def draining_for(node: ObservedNode) -> str | None:
    """The config a drain migplan started on the node is for, if any."""
    if DRAIN_STARTED_ANNOTATION in node.annotations:
        return node.annotations.get(DRAIN_FOR_ANNOTATION)
    return None


def start_change(node: ObservedNode, config: str, stamp: str, pods: tuple[str, ...]) -> Change:
    """Cordon the node (unless it already is) and record when the drain for `config` started."""
    subject = f"node/{node.name}"
    marks = {DRAIN_STARTED_ANNOTATION: stamp, DRAIN_FOR_ANNOTATION: config}
    if node.unschedulable:
        return Change(
            subject,
            Action.CONFIGURE,
            Kind.CORDON,
            {DRAIN_STARTED_ANNOTATION: node.annotations.get(DRAIN_STARTED_ANNOTATION)},
            {DRAIN_STARTED_ANNOTATION: stamp},
            "already cordoned: record the start of the drain",
            patch={"metadata": {"annotations": marks}},
        )
    return Change(
        subject,
        Action.CONFIGURE,
        Kind.CORDON,
        {"spec.unschedulable": False},
        {"spec.unschedulable": True},
        f"allowDisruption: cordon, then evict {', '.join(pods)}",
        patch={"metadata": {"annotations": {CORDONED_ANNOTATION: "true", **marks}}, "spec": {"unschedulable": True}},
    )


def eviction(pod: ObservedPod, node: str, why: str) -> Change:
    """One policy/v1 Eviction of the pod. No DeleteOptions: the pod's own grace period applies (kubectl drain
    sends a grace period only when --grace-period is given)."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
    }
    return Change(
        f"pod/{pod.namespace}/{pod.name}",
        Action.CREATE,
        Kind.EVICT,
        {"spec.nodeName": node},
        None,
        why,
        patch=body,
        code=DRAINING,
    )


def end_marks(node: ObservedNode) -> Mapping[str, None]:
    """Annotation removals that end a drain (merged into the relabel or uncordon patch)."""
    return {k: None for k in (DRAIN_STARTED_ANNOTATION, DRAIN_FOR_ANNOTATION) if k in node.annotations}


def node_of(change: Change) -> str:
    """The node a change of the per-node part of the plan concerns (an eviction: the pod's node)."""
    if change.kind is Kind.EVICT:
        return str((change.before or {}).get("spec.nodeName", ""))
    return change.subject.removeprefix("node/")
