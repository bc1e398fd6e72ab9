"""DRA-static nodes migplan lays out: which they are, the record of their DRA kubelet plugin's restart, and whether
their ResourceSlices publish the plan. Pure.

NVIDIA's DRA driver with static MIG allocates the MIG devices that exist and creates none; its GPU kubelet plugin
enumerates them only when it starts (k8s-dra-driver-gpu `cmd/gpu-kubelet-plugin/driver.go` `NewDriver` ->
`device_state.go` `NewDeviceState` -> `nvlib.go` `enumerateAllPossibleDevices`, then one `PublishResources`). So on
such a node migplan writes the layout through its own node agent (never mig-manager: under a GPU Operator
`GPUCluster` there is none, and never a ClusterPolicy there), then restarts the plugin (deletes its pod; the
DaemonSet recreates it) so that the slices publish the new devices, and counts the node converged only when they
publish the plan, name for name (reconciler.logic.drift.draregime `planned_devices` / `published_devices`).

The restart is recorded on the Node (`migplan.io/dra-plugin-restart`) *before* the pod is deleted, with the pod's
uid: a controller that dies between the two writes finds the same pod still there next cycle and deletes it then
(with a uid precondition, so never its successor); one that dies after finds another uid and restarts nothing.
Once per applied layout per node, never in a loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.logic.drift import draregime
from reconciler.model.dra import DraPluginPod, NodeDra, Regime
from reconciler.model.inventory import DesiredState, NodeSpec
from reconciler.model.observed import ObservedState
from reconciler.model.strict import StrictValueError, parse_timestamp

RESTART_ANNOTATION = "migplan.io/dra-plugin-restart"
# How long slices may still differ from the plan after the restart before it is a finding (MP591): the new pod
# must be scheduled, pull its image, enumerate the GPUs and publish (seconds in practice).
STALE_AFTER = timedelta(minutes=5)
_MAX_RECORD = 1024  # bytes: a record longer than this is not migplan's


@dataclass(frozen=True, slots=True)
class PluginRestart:
    """What migplan recorded about the restart of a node's DRA kubelet plugin."""

    layout: str  # the layout key (reconciler.logic.planning.agentdrain.layout_key) the restart was made for
    revision: str  # the inventory revision of that layout, for people
    pod: str  # "namespace/name" of the pod deleted
    uid: str  # its uid: another uid on the node means the DaemonSet has replaced it
    at: datetime

    def encode(self) -> str:
        return json.dumps(
            {"layout": self.layout, "revision": self.revision, "pod": self.pod, "uid": self.uid, "at": _stamp(self.at)},
            sort_keys=True,
            separators=(",", ":"),
        )


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def decode(text: str | None) -> tuple[PluginRestart | None, str | None]:
    """The record on the node, or (None, why) when it is there and malformed (None, None: absent)."""
    if text is None:
        return None, None
    if len(text) > _MAX_RECORD:
        return None, f"{RESTART_ANNOTATION} is longer than {_MAX_RECORD} bytes"
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None, f"{RESTART_ANNOTATION} is not JSON"
    if not isinstance(doc, dict):
        return None, f"{RESTART_ANNOTATION} is not a JSON object"
    fields = {k: doc.get(k) for k in ("layout", "revision", "pod", "uid", "at")}
    if not all(isinstance(v, str) and 0 < len(v) <= 256 for v in fields.values()):
        return None, f"{RESTART_ANNOTATION} lacks layout, revision, pod, uid or at as a string"
    try:
        at = parse_timestamp(fields["at"])
    except StrictValueError as exc:
        return None, f"{RESTART_ANNOTATION}: {exc}"
    return PluginRestart(
        str(fields["layout"]), str(fields["revision"]), str(fields["pod"]), str(fields["uid"]), at
    ), None


def gpu_cluster(observed: ObservedState) -> str | None:
    """The GPU Operator GPUCluster the cluster runs (not one the operator ignores as a duplicate), or None. Under a
    GPUCluster the GPU stack is DRA's: no ClusterPolicy, no mig-manager, no device plugin for migplan to drive."""
    return next((c.name for c in observed.gpu_clusters if not c.ignored), None)


def static_nodes(desired: DesiredState, observed: ObservedState) -> frozenset[str]:
    """The inventory nodes migplan lays out (layoutWriter migplan, no other writer found) on which NVIDIA's DRA
    driver allocates static MIG devices: the regime read from their slices, or any GPU node of a GPUCluster cluster
    without DynamicMIG (nothing else lays out MIG there). Their layout goes through migplan's node agent."""
    on_gpu_cluster = gpu_cluster(observed) is not None
    if on_gpu_cluster and draregime.cluster_dynamic_mig(observed.gpu_clusters) is not None:
        return frozenset()  # DynamicMIG lays out every GPU node: nothing is migplan's to write (MP570)
    out: set[str] = set()
    for name in desired.nodes:
        if desired.layout_writer(name) != "migplan" or name not in observed.nodes:
            continue
        published = observed.dra.get(name)
        if draregime.driver_dynamic_mig(observed.dra_drivers, name) is not None:
            continue
        kind = draregime.regime(published)
        if kind is Regime.DRA_STATIC or (on_gpu_cluster and kind is Regime.DEVICE_PLUGIN):
            out.add(name)
    return frozenset(out)


def plugin_pods(observed: ObservedState, node: str) -> tuple[DraPluginPod, ...]:
    """The DRA kubelet-plugin pods bound to `node` (one, normally; several while a rollout replaces it)."""
    return tuple(p for d in observed.dra_drivers for p in d.pods if p.node == node)


def slices_match(plan: NodeSpec, published: NodeDra | None, minors: Mapping[int, int]) -> bool:
    """The node's ResourceSlices publish exactly the plan's MIG devices, name for name (placement included)."""
    found, bad = draregime.published_devices(published or NodeDra(plan.name))
    return not bad and set(found) == set(draregime.planned_devices(plan, minors))


def stale_for(record: PluginRestart, now: datetime | None) -> timedelta | None:
    """How long ago the recorded restart was made, when that is past STALE_AFTER (None: not yet, or no clock)."""
    if now is None:
        return None
    age = now - record.at
    return age if age > STALE_AFTER else None
