"""The twin of NVIDIA's DRA driver for GPUs (`gpu.nvidia.com`): its GPU kubelet plugin's ResourceSlices.

Built from NVIDIA/k8s-dra-driver-gpu (kubernetes-sigs/dra-driver-nvidia-gpu), cmd/gpu-kubelet-plugin; see
ASSUMPTIONS-dra.md for every rule and its source. In short:
- the plugin publishes once, when it starts (`driver.go` `NewDriver` → `PublishResources`), from the devices it
  enumerates then (`nvlib.go` `enumerateAllPossibleDevices`); it does not rescan, so a re-cut is invisible until
  the plugin restarts (`start_plugin` again);
- one pool per node, named after the node, `nodeName` set, the slices owned by the Node;
- static MIG (the default): a MIG-enabled GPU is published as its MIG devices only, each named
  `gpu-<minor>-mig-<profile without dots, RFC 1123>-<GI profile id>-<placement start>` (`mig.go`
  `ToCanonicalName`) with attributes type=mig, profile, uuid, parentUUID, productName (`CommonAttributesMig`,
  `MigDeviceInfo.GetDevice`) and a `memorySlice<i>` capacity per memory slice it covers; a GPU with MIG disabled
  is `gpu-<minor>` with type=gpu, uuid (`GpuInfo.GetDevice`);
- DynamicMIG (alpha, a feature gate): the plugin first destroys every MIG device it did not create
  (`DestroyUnknownMIGDevices`), then publishes per GPU one counter set `gpu-<minor>-counter-set` with a
  `memory-slice-<i>` counter per memory slice (`partitions.go` `PartSharedCounterSets`) and, in another slice,
  the whole GPU and every profile x placement as a device consuming the counters of its slices, without uuid
  (`PartGetDevice`, `generateSplitResourceSlices`).
The twin imports nothing of migplan's engine, logic or adapters; only the twin's GPUs.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

from reconciler.twin.gpus import GiProfile, TwinGpu

DRIVER = "gpu.nvidia.com"
_NOT_RFC1123 = re.compile(r"[^a-z0-9.-]")
_MIG_NAME = re.compile(r"gpu-([0-9]+)-mig-(.+)-([0-9]+)-([0-9]+)")  # mig.go canonicalMigNameRegex
_GPU_NAME = re.compile(r"gpu-([0-9]+)")


def _device_class(name: str, kind: str) -> dict[str, Any]:
    expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


# The DeviceClasses the driver's Helm chart installs (dra-facts.md): whole GPUs and MIG devices.
DEVICE_CLASSES = (_device_class("gpu.nvidia.com", "gpu"), _device_class("mig.nvidia.com", "mig"))

CreateSlice = Callable[[dict[str, Any]], None]
UpdateSlice = Callable[[dict[str, Any]], None]  # a whole slice (PUT, resourceVersion included)
DeleteSlice = Callable[[str], None]  # one slice, by name
ListPool = Callable[[str], list[dict[str, Any]]]  # node name: every slice of the driver's pool for that node


def canonical_profile(profile: str) -> str:
    """mig.go `toRFC1123Compliant(strings.ReplaceAll(profileName, ".", ""))`."""
    name = _NOT_RFC1123.sub("-", profile.replace(".", "").lower()).strip("-")
    return name.removesuffix(".")[:253]


def _string(value: str) -> dict[str, str]:
    return {"string": value}


def _slice(
    node: str,
    devices: list[dict[str, Any]] | None,
    counters: list[dict[str, Any]] | None,
    *,
    count: int,
    generation: int,
    node_uid: str,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
    }
    if devices is not None:
        spec["devices"] = devices
    if counters is not None:
        spec["sharedCounters"] = counters
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"{node}-{DRIVER}-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
            ],
        },
        "spec": spec,
    }


def static_devices(gpus: Sequence[TwinGpu]) -> list[dict[str, Any]]:
    """The devices a static-MIG plugin publishes for the GPUs as they are now."""
    out: list[dict[str, Any]] = []
    for gpu in gpus:
        product = _string(gpu.name)
        if not gpu.mig_current:
            out.append(
                {
                    "name": f"gpu-{gpu.minor}",
                    "attributes": {"type": _string("gpu"), "uuid": _string(gpu.uuid), "productName": product},
                }
            )
            continue
        parent, prefix = _string(gpu.uuid), f"gpu-{gpu.minor}-mig-"
        for gi in sorted(gpu.gpu_instances.values(), key=_BY_START):
            for ci in sorted(gi.compute_instances.values(), key=_BY_ID):
                suffix, profile, memory, slices = _mig_kind(gi.profile, gi.start, ci.size)
                capacity: dict[str, Any] = {"memory": {"value": memory}}
                for key in slices:
                    capacity[key] = {"value": "1"}
                out.append(
                    {
                        "name": prefix + suffix,
                        "attributes": {
                            "type": _string("mig"),
                            "profile": _string(profile),
                            "uuid": _string(ci.uuid),
                            "parentUUID": dict(parent),
                            "productName": dict(product),
                        },
                        "capacity": capacity,
                    }
                )
    return out


_BY_START = operator.attrgetter("start")
_BY_ID = operator.attrgetter("id")


@functools.cache
def _mig_kind(gi: GiProfile, start: int, ci_size: int) -> tuple[str, str, str, tuple[str, ...]]:
    """What a static MIG device's entry takes from its GI and CI, the same for every GPU of a fleet cut alike:
    (name after `gpu-<minor>-mig-`, profile, memory capacity, its memorySlice<i> capacity keys). A handful of
    distinct values per fleet (profiles x placements), so 5,000 nodes derive them a few dozen times, not 300,000."""
    profile = gi.name if ci_size == gi.compute_slices else f"{ci_size}c.{gi.name}"
    suffix = f"{canonical_profile(profile)}-{gi.id}-{start}"
    slices = tuple(f"memorySlice{i}" for i in range(start, start + gi.memory_slices))
    return suffix, profile, f"{gi.memory_mb}Mi", slices


def dynamic_slices(gpus: Sequence[TwinGpu]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(counter sets, devices) a DynamicMIG plugin publishes: every profile x placement of every GPU."""
    counters: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    for gpu in gpus:
        slices = gpu.model.memory_slices
        counter_set = f"gpu-{gpu.minor}-counter-set"
        counters.append({"name": counter_set, "counters": {f"memory-slice-{i}": {"value": "1"} for i in range(slices)}})
        devices.append(
            {
                "name": f"gpu-{gpu.minor}",
                "attributes": {"type": _string("gpu"), "uuid": _string(gpu.uuid), "productName": _string(gpu.name)},
                "consumesCounters": [
                    {
                        "counterSet": counter_set,
                        "counters": {f"memory-slice-{i}": {"value": "1"} for i in range(slices)},
                    }
                ],
            }
        )
        for prof in sorted(gpu.profiles.values(), key=lambda p: (p.memory_slices, p.id)):
            for start in prof.starts:
                devices.append(
                    {
                        "name": f"gpu-{gpu.minor}-mig-{canonical_profile(prof.name)}-{prof.id}-{start}",
                        "attributes": {
                            "type": _string("mig"),
                            "profile": _string(prof.name),
                            "parentUUID": _string(gpu.uuid),
                            "productName": _string(gpu.name),
                        },
                        "consumesCounters": [
                            {
                                "counterSet": counter_set,
                                "counters": {
                                    f"memory-slice-{i}": {"value": "1"}
                                    for i in range(start, start + prof.memory_slices)
                                },
                            }
                        ],
                    }
                )
    return counters, devices


class DraDriverTwin:
    """The GPU kubelet plugin of one node: `start_plugin()` is a (re)start of its pod."""

    def __init__(
        self,
        node: str,
        gpus: Sequence[TwinGpu],
        *,
        create: CreateSlice,
        list_pool: ListPool,
        update: UpdateSlice,
        delete: DeleteSlice,
        node_uid: str = "",
        dynamic_mig: bool = False,
    ) -> None:
        self.node = node
        self.gpus = gpus
        self.dynamic_mig = dynamic_mig
        self._create = create
        self._list_pool = list_pool
        self._update = update
        self._delete = delete
        self._node_uid = node_uid
        self.starts = 0  # how many times the plugin started (each a publication)
        self.created: set[tuple[int, int]] = set()  # (GPU index, GI id) of MIG devices this driver created

    def start_plugin(self) -> list[str]:
        """Start (or restart) the plugin: DynamicMIG's clean-up, then one publication of the devices it enumerates
        now (`device_state.go` `NewDeviceState` -> `nvlib.go` `enumerateAllPossibleDevices`, once per start).
        Returns what it destroyed."""
        destroyed = self._destroy_unknown() if self.dynamic_mig else []
        self.starts += 1
        wanted: list[tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]]
        if self.dynamic_mig:
            counters, devices = dynamic_slices(self.gpus)
            # 64 devices a slice at most when consuming counters (ResourceSliceMaxDevicesWithTaintsOrConsumesCounters)
            chunks = [devices[i : i + 64] for i in range(0, len(devices), 64)] or [[]]
            wanted = [(None, counters), *((chunk, None) for chunk in chunks)]
        else:
            wanted = [(static_devices(self.gpus), None)]
        self._sync_pool(wanted)
        return destroyed

    def _sync_pool(self, wanted: list[tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]]) -> None:
        """The pool brought to `wanted` (devices, shared counters per slice) as the kubelet plugin helper's
        ResourceSlice controller does it (k8s.io/dynamic-resource-allocation/resourceslice `Controller.syncPool`):
        the highest generation among the pool's slices is current, older slices are obsolete; current slices are
        matched to the wanted ones (the real controller by the index its slice names carry; the twin by creation
        order); the generation is kept when no slice is new and at most one matched slice changes (one update),
        bumped by one otherwise (the driver asks for none: its `resourceslice.Pool` sets no Generation); obsolete
        slices are deleted first, then changed ones updated, then new ones created. So a static node's restart
        after a re-cut updates its one slice in place at the same generation, and a first start creates
        generation 1."""
        existing = self._list_pool(self.node)
        generation = max((int(s["spec"]["pool"].get("generation", 0)) for s in existing), default=0)
        current = sorted(
            (s for s in existing if int(s["spec"]["pool"].get("generation", 0)) == generation),
            key=lambda s: int(s["metadata"].get("resourceVersion", 0)),
        )
        obsolete = [s for s in existing if int(s["spec"]["pool"].get("generation", 0)) < generation]
        matched = dict(enumerate(current[: len(wanted)]))
        obsolete.extend(current[len(wanted) :])
        pool = {"name": self.node, "generation": generation, "resourceSliceCount": len(wanted)}
        changed = {
            i
            for i, old in matched.items()
            if old["spec"].get("pool") != pool
            or old["spec"].get("devices") != wanted[i][0]
            or old["spec"].get("sharedCounters") != wanted[i][1]
        }
        new = len(wanted) - len(matched)
        bumped = not (new == 0 and len(changed) <= 1)
        if bumped:
            generation += 1
        for old in obsolete:
            self._delete(old["metadata"]["name"])
        for i, old in matched.items():
            if i not in changed and not bumped:
                continue
            fresh = _slice(
                self.node, wanted[i][0], wanted[i][1], count=len(wanted), generation=generation, node_uid=self._node_uid
            )
            fresh["metadata"] = {**old["metadata"]}
            self._update(fresh)
        for i in range(len(matched), len(wanted)):
            devices, counters = wanted[i]
            self._create(
                _slice(self.node, devices, counters, count=len(wanted), generation=generation, node_uid=self._node_uid)
            )

    def prepare(self, device: str) -> None:
        """NodePrepareResources for an allocated device. Under DynamicMIG the MIG device is created now, at the
        placement its name carries (`partitions.go` devices are profile x placement), and remembered as the
        driver's own; a static device exists already. A name that is not one of this node's devices is refused."""
        match = _MIG_NAME.fullmatch(device)
        whole = _GPU_NAME.fullmatch(device)
        if whole is not None and any(g.minor == int(whole.group(1)) for g in self.gpus):
            return
        if match is None:
            raise ValueError(f"{device}: not a device of NVIDIA's DRA driver")
        minor, profile_id, start = int(match.group(1)), int(match.group(3)), int(match.group(4))
        gpu = next((g for g in self.gpus if g.minor == minor), None)
        if gpu is None:
            raise ValueError(f"{device}: no GPU with minor number {minor} on {self.node}")
        with gpu.lock:
            existing = [gi for gi in gpu.gpu_instances.values() if gi.start == start and gi.profile.id == profile_id]
            if existing or not self.dynamic_mig:
                if not existing:
                    raise ValueError(f"{device}: no such MIG device on {self.node} (static MIG creates none)")
                return
            prof = gpu.profiles_by_id[profile_id]
            gi, _ = gpu.add_partition(prof.name, start)
            self.created.add((gpu.index, gi.id))

    def _destroy_unknown(self) -> list[str]:
        """`DestroyUnknownMIGDevices`: every MIG device this driver did not create goes, compute instances first."""
        destroyed: list[str] = []
        for gpu in self.gpus:
            with gpu.lock:
                for gi_id in sorted(gpu.gpu_instances):
                    if (gpu.index, gi_id) in self.created:
                        continue
                    gi = gpu.gpu_instances[gi_id]
                    if any(ci.holder is not None for ci in gi.compute_instances.values()):
                        continue  # NVML refuses (IN_USE); what the driver then does is not settled (ASSUMPTIONS-dra.md)
                    for ci_id in sorted(gi.compute_instances):
                        gpu.destroy_compute_instance(gi, ci_id)
                    gpu.destroy_gpu_instance(gi_id)
                    destroyed.append(f"gpu {gpu.index} {gi.profile.name}@{gi.start}")
        return destroyed


def gpucluster_crd() -> dict[str, Any]:
    """The GPU Operator's GPUCluster CRD, written from api/nvidia/v1alpha1/gpucluster_types.go (kubebuilder markers:
    cluster-scoped, short name `gc`, status subresource; group nvidia.com, version v1alpha1). Its schema keeps the
    spec open (the twin checks none of its fields): migplan only reads spec.draDriver.featureGates."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gpuclusters.nvidia.com"},
        "spec": {
            "group": "nvidia.com",
            "names": {
                "kind": "GPUCluster",
                "listKind": "GPUClusterList",
                "plural": "gpuclusters",
                "singular": "gpucluster",
                "shortNames": ["gc"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


def gpucluster(name: str, *, dynamic_mig: bool) -> dict[str, Any]:
    """A GPUCluster running the DRA driver, with the DynamicMIG feature gate as asked."""
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "GPUCluster",
        "metadata": {"name": name},
        "spec": {"draDriver": {"featureGates": {"DynamicMIG": dynamic_mig}}},
    }


# NVIDIA's DRA driver installed by its own Helm chart (deployments/helm/dra-driver-nvidia-gpu, NVIDIA/k8s-dra-driver-gpu
# at 22407113): what kubeletplugin.yaml and _helpers.tpl render for release `nvidia-dra-driver-gpu`, reduced to
# the fields the driver's configuration lives in (ASSUMPTIONS-dra.md "The driver's own chart").
DRIVER_CHART = "dra-driver-nvidia-gpu"
DRIVER_NAMESPACE = "nvidia-dra-driver-gpu"


def kubelet_plugin_daemonset(feature_gates: str | None, *, namespace: str = DRIVER_NAMESPACE) -> dict[str, Any]:
    """The chart's kubelet-plugin DaemonSet: `<name>-kubelet-plugin`, labelled `app.kubernetes.io/name: <name>`
    (templateLabels), pods selected by `<name>-component: kubelet-plugin` (selectorLabels), and the `gpus`
    container's env FEATURE_GATES as the chart renders `.Values.featureGates` ("Name=value," per gate, trailing
    comma included; absent when no gate is set). `feature_gates` is that rendered string, verbatim."""
    selector = {f"{DRIVER_CHART}-component": "kubelet-plugin"}
    env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    if feature_gates is not None:
        env.append({"name": "FEATURE_GATES", "value": feature_gates})
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": f"{DRIVER_CHART}-kubelet-plugin",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": DRIVER_CHART, "app.kubernetes.io/instance": DRIVER_NAMESPACE},
        },
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": DRIVER_CHART, **selector}},
                "spec": {
                    "containers": [
                        {"name": "compute-domains", "image": "nvcr.io/nvidia/k8s-dra-driver-gpu", "env": list(env)},
                        {
                            "name": "gpus",
                            "image": "nvcr.io/nvidia/k8s-dra-driver-gpu",
                            "command": ["bash", "-c"],
                            "args": ["gpu-kubelet-plugin -v $(LOG_VERBOSITY)"],
                            "env": env,
                        },
                    ]
                },
            },
        },
    }


def kubelet_plugin_pod(ds: dict[str, Any], node: str) -> dict[str, Any]:
    """The DaemonSet's pod on `node` (what the DaemonSet controller creates: the template's labels, bound)."""
    template = ds["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{ds['metadata']['name']}-{node}",
            "namespace": ds["metadata"]["namespace"],
            "labels": dict(template["metadata"]["labels"]),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": ds["metadata"]["name"],
                    "uid": ds["metadata"].get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"nodeName": node, "containers": [dict(c) for c in template["spec"]["containers"]]},
    }
