"""One classification of a node's GPUs against the config its label names, for drift and the planner. Pure.

A node's device plugin advertises extended resources (`nvidia.com/mig-<profile>`, `nvidia.com/gpu`); a
mig-parted config gives, under the cluster's MIG strategy, the counts it should advertise. When the two
differ, either something in flight explains it — the ClusterPolicy does not yet have the inventory's
strategy, or the device plugin still owes the restart that makes it advertise under that strategy, or the
node's device-plugin pod is not Ready or has not been Ready for PLUGIN_SETTLE (its counts are stale or
absent) — or nothing does, and then the GPUs
themselves differ from the config: cut by hand with nvidia-smi, reset, or a GPU fell off the bus.
mig-manager never sees that (it acts only on a new `nvidia.com/mig.config` value), so migplan must.

Both consumers ask `classify` and act on `Geometry.CHANGED_BY_HAND` alone:
- drift (reconciler.logic.drift.drift) adds the "changed by hand" hint to MP501 on a node whose label names
  its plan's config and whose mig-manager reports that config applied;
- the planner (reconciler.logic.planning.nodechanges) re-applies such a node's config through an alias, and does not
  trust the config a node's label names as the node's previous layout (the disruption guard then
  assumes every GPU is cut).
So the report says "changed by hand" exactly where the plan re-applies.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.logic.codecs import dpsharing
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import DevicePluginPod, ObservedNode, ObservedState, is_gpu_resource

STRATEGY_SET_ANNOTATION = "migplan.io/mig-strategy-set"  # on the ClusterPolicy: strategy migplan set
RESTARTED_FOR_ANNOTATION = "migplan.io/restarted-for-strategy"  # on the DaemonSet
# How long a device-plugin pod must have been Ready before the node's advertised counts are taken as what its
# GPUs hold. NVIDIA's device-plugin DaemonSet has no readiness probe, so the pod is Ready as soon as its container
# runs, before the plugin has registered with the kubelet; the kubelet then reports the new capacity in its next
# node status sync (KubeletConfiguration nodeStatusUpdateFrequency, default 10 s). Until then the node shows the
# counts of before the restart, and reading them as "the GPUs were cut by hand" would re-apply the layout of
# every node whose plugin just restarted (after a strategy change, hundreds at once). Two sync periods.
PLUGIN_SETTLE = timedelta(seconds=20)


class Geometry(enum.StrEnum):
    """What a node's advertised GPU resources say about a config (see the module docstring)."""

    AS_CONFIGURED = "as-configured"  # it advertises exactly what the config gives under the strategy
    UNSETTLED = "unsettled"  # it does not, but the strategy or its device plugin is not settled: counts say nothing
    CHANGED_BY_HAND = "changed-by-hand"  # it does not while nothing explains it: the GPUs differ from the config


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether a node's advertised counts can be believed, from one observation of the cluster."""

    strategy_settled: bool  # the ClusterPolicy has the inventory's strategy and no plugin restart is owed for it
    plugin_ready: Mapping[str, bool] = field(default_factory=dict)  # node -> its device-plugin pod has settled
    # node -> the device-plugin config's sharing of its devices (reconciler.logic.codecs.dpsharing); absent: not shared.
    sharing: Mapping[str, dpsharing.NodeSharing] = field(default_factory=dict)

    def counts_believable(self, node: str) -> bool:
        """Whether a difference between what the node advertises and what is expected says anything about its GPUs:
        not while the strategy or its plugin settles, nor while the config sharing its devices cannot be read."""
        if isinstance(self.sharing.get(node), dpsharing.Unbelievable):
            return False
        return self.strategy_settled and self.plugin_ready.get(node, False)

    def advertised(self, node: str, expected: Mapping[str, int]) -> Mapping[str, int]:
        """What the node's plugin advertises for devices that give `expected` unshared: `expected` folded through
        the sharing of its device-plugin config (time-slicing/MPS replicas, `.shared` names)."""
        shared = self.sharing.get(node)
        return dpsharing.fold(expected, shared) if isinstance(shared, dpsharing.Sharing) else expected


def strategy_settled(desired: DesiredState, observed: ObservedState) -> bool:
    """The ClusterPolicy has the inventory's strategy and no device-plugin restart is owed for it."""
    cp, ds = observed.cluster_policy, observed.device_plugin
    want = desired.cluster.mig_strategy.value
    if cp is None or cp.mig_strategy != want:
        return False
    if ds is not None and ds.operator_owned:
        # Settled once the operator has rendered the strategy into the DaemonSet (its pods then roll).
        return ds.template_mig_strategy in (None, want)
    restart_owed = cp.annotations.get(STRATEGY_SET_ANNOTATION) == want and (
        ds is not None and ds.annotations.get(RESTARTED_FOR_ANNOTATION) != want
    )
    return not restart_owed


def plugin_settled(pod: DevicePluginPod, now: datetime | None) -> bool:
    """The pod is Ready and has been for PLUGIN_SETTLE: the node's advertised counts are the plugin's by now.
    A Ready pod whose transition time is unknown counts as settled (what migplan did before it read the time),
    and so does any Ready pod when no clock is given (drift analysed without one)."""
    if not pod.ready:
        return False
    return now is None or pod.ready_since is None or now - pod.ready_since >= PLUGIN_SETTLE


def readiness(desired: DesiredState, observed: ObservedState, *, now: datetime | None) -> Readiness:
    ds = observed.device_plugin
    ready = {p.node: plugin_settled(p, now) for p in ds.pods if p.node} if ds is not None else {}
    return Readiness(strategy_settled(desired, observed), ready, dpsharing.sharing_by_node(observed))


def advertises(node: ObservedNode, expected: Mapping[str, int]) -> bool:
    """The node advertises exactly `expected` (GPU resources only; an absent resource counts 0)."""
    have = {k: v for k, v in node.advertised_resources.items() if is_gpu_resource(k)}
    return all(expected.get(k, 0) == have.get(k, 0) for k in set(expected) | set(have))


def classify(node: ObservedNode, expected: Mapping[str, int], ready: Readiness) -> Geometry:
    """The node's GPUs against a config that gives `expected` under the cluster's strategy (the caller
    says which config: the plan's, or the one the node's label names). A node whose device-plugin config shares its
    devices is compared with the shared counts and names, and one whose config cannot be read is never CHANGED_BY_HAND
    (its counts are not believable: drift says why, MP562)."""
    if advertises(node, ready.advertised(node.name, expected)):
        return Geometry.AS_CONFIGURED
    if not ready.counts_believable(node.name):
        return Geometry.UNSETTLED
    return Geometry.CHANGED_BY_HAND
