"""Who writes a GPU node's MIG layout, read from what NVIDIA's DRA driver publishes; and DRA drift. Pure.

A node is on the device-plugin path unless NVIDIA's DRA driver publishes devices for it (ResourceSlices of
`gpu.nvidia.com` in the node's pool, reconciler.model.dra.NodeDra):
- counter sets, or devices consuming counters: DynamicMIG (`partitions.go` `PartSharedCounterSets`,
  `PartConsumesCounters`). The driver creates MIG devices per claim and destroys, when its plugin starts, every MIG
  device it did not create (`DestroyUnknownMIGDevices`): it is the node's layout writer, and a layout migplan
  wrote there would be destroyed at the plugin's next start, or fight the driver for the GPU. migplan writes
  nothing on such a node (MP570, naming both writers).
- MIG devices without counters: static MIG (`MigDeviceInfo.GetDevice`): the driver allocates the MIG devices
  that exist and creates none, so the layout is still written by whoever cut it (mig-manager, migplan's agent).
A GPU Operator GPUCluster whose DRA driver has the DynamicMIG feature gate on (api/nvidia/v1alpha1/
gpucluster_types.go `DRADriverSpec.FeatureGates`) says the same for every GPU node, before any slice is published.
Drift on a DRA node is the plan against the published devices, name for name (placement included): each planned
partition is the device `gpu-<minor>-mig-<profile>-<GI profile id>-<start>` (reconciler.logic.codecs.dradevices), and
a node's device-plugin counts (`nvidia.com/mig-*`, which a DRA node never advertises) say nothing there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.logic.codecs import dradevices
from reconciler.model.dra import GpuClusterState, NodeDra, Regime
from reconciler.model.inventory import NodeSpec

DYNAMIC_MIG_WRITER = "NVIDIA's DRA driver (DynamicMIG)"


def regime(published: NodeDra | None) -> Regime:
    """The node's regime from what the DRA driver publishes for it (None: nothing)."""
    if published is None:
        return Regime.DEVICE_PLUGIN
    if published.counter_sets or any(d.consumes_counters for d in published.devices):
        return Regime.DRA_DYNAMIC_MIG
    if published.devices:
        return Regime.DRA_STATIC
    return Regime.DEVICE_PLUGIN


def cluster_dynamic_mig(clusters: Iterable[GpuClusterState]) -> str | None:
    """The GPUCluster that runs NVIDIA's DRA driver with DynamicMIG (its driver lays out every GPU node, published
    or not yet), or None. One whose gate cannot be read counts as on: a guess must never lead to a write."""
    for c in clusters:
        if not c.ignored and c.dynamic_mig is not False:
            return c.name
    return None


def other_writer(published: NodeDra | None, gpu_cluster: str | None = None) -> str | None:
    """Who else writes the node's MIG layout, or None when migplan may (its plan is then the layout).
    `gpu_cluster`: the GPUCluster running DynamicMIG (cluster_dynamic_mig), if any."""
    if regime(published) is Regime.DRA_DYNAMIC_MIG:
        return DYNAMIC_MIG_WRITER
    if gpu_cluster is not None:
        return f"{DYNAMIC_MIG_WRITER[:-1]}, GPUCluster {gpu_cluster})"
    return None


def _key(minor: int, profile: str, start: int) -> tuple[int, str, int]:
    return (minor, dradevices.profile_token(profile), start)


def planned_devices(plan: NodeSpec, minors: Mapping[int, int]) -> dict[tuple[int, str, int], tuple[int, str]]:
    """(minor, profile token, start) -> (GPU index, "profile@start") for every placed partition of the plan.

    `minors` maps a GPU index to its minor number where the node's observer measured it; elsewhere the index is
    taken for the minor (true on most hosts; the report says which GPUs this inference concerns)."""
    out: dict[tuple[int, str, int], tuple[int, str]] = {}
    for g in plan.gpus:
        if not g.mig_enabled:
            continue
        minor = minors.get(g.index, g.index)
        for part, placement in zip(g.partitions, g.placements, strict=False):
            out[_key(minor, part.profile, placement.start)] = (g.index, f"{part.profile}@{placement.start}")
    return out


def published_devices(published: NodeDra) -> tuple[dict[tuple[int, str, int], str], list[str]]:
    """(minor, profile token, start) -> device name of every published MIG device, and the names that do not
    parse as NVIDIA's driver writes them (bad input: MP571). Under DynamicMIG every possible device is
    published, so there this is the set of what could be cut, not of what is cut."""
    found: dict[tuple[int, str, int], str] = {}
    bad: list[str] = []
    for d in published.devices:
        parsed = dradevices.parse(d.name)
        if isinstance(parsed, dradevices.DraMig):
            found[(parsed.minor, parsed.profile_token, parsed.start)] = d.name
        elif parsed is None and d.kind != "vfio":
            bad.append(d.name)
    return found, bad


def unpublished_gpus(plan: NodeSpec) -> Iterable[int]:
    """GPUs whose plan enables MIG without a partition: a DRA driver publishes nothing for them."""
    return (g.index for g in plan.gpus if g.mig_enabled and not g.partitions)
