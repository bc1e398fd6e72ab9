"""The kubelet of each GPU node: admits the pods bound to it (allocating devices its plugin advertises), finishes
graceful deletions, frees devices, keeps the node's `nvidia.com/*` capacity, answers PodResources `List`.

Sources (ASSUMPTIONS-operator.md "Scheduler and kubelet"): kubernetes `pkg/kubelet/cm/devicemanager`
`Allocate(pod, container)` (per container, in spec order, from what is still free; the plugin's device IDs are
recorded then, deviceplugin.py `device_id`), `pkg/kubelet/nodestatus/setters.go` `MachineInfo` (a resource once
registered and no longer advertised stays at 0), `pkg/kubelet/apis/podresources/server_v1.go` `List`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.twin.fleet import Fleet, PodSeed, TwinNode
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.operator.cache import AllocatedDevice, NodeUnit, OperatorCache, PodInfo, PodKey
from reconciler.twin.operator.deviceplugin import Unit, device_id
from reconciler.twin.operator.kubeobjects import now, pod_status
from reconciler.twin.operator.names import MM_DS
from reconciler.twin.operator.scheduler import container_requests
from reconciler.twin.operator.storeapi import StoreApi
from reconciler.twin.operator.workqueue import Job, WorkQueue

__all__ = ["Kubelet", "PodResources"]

# (namespace, name, [(container, [(resource, [device ID])])]) per pod, as PodResources `List` answers
PodResources = list[tuple[str, str, list[tuple[str, list[tuple[str, list[str]]]]]]]


def _unit_free(gpu: TwinGpu, unit: Unit) -> bool:
    if unit.gi_id is None:
        return gpu.holder is None and not any(ci.holder for _, ci in gpu.iter_cis())
    gi = gpu.gpu_instances.get(unit.gi_id)
    ci = gi.compute_instances.get(unit.ci_id or 0) if gi is not None else None
    return ci is not None and ci.holder is None and gpu.holder is None


def _replica_exists(gpu: TwinGpu, unit: Unit) -> bool:
    if unit.gi_id is None:
        return True
    gi = gpu.gpu_instances.get(unit.gi_id)
    return gi is not None and (unit.ci_id or 0) in gi.compute_instances


def _shortfall(requests: Mapping[str, int], free: Mapping[str, list[Unit]]) -> tuple[str, int, int] | None:
    """The first resource (by name) with fewer free units than requested: (resource, requested, available)."""
    for res, n in sorted(requests.items()):
        have = len(free.get(res, []))
        if have < n:
            return res, n, have
    return None


def _admission_error(shortfall: tuple[str, int, int]) -> dict[str, Any]:
    """The status of a pod the device manager cannot allocate for (UnexpectedAdmissionError)."""
    res, n, have = shortfall
    msg = (
        f"Allocate failed due to requested number of devices unavailable for {res}. "
        f"Requested: {n}, Available: {have}, which is unexpected"
    )
    return {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": msg, "startTime": now()}


class Kubelet:
    """Every GPU node's kubelet (pods, devices, node status); device allocations live in the shared cache."""

    def __init__(self, api: StoreApi, cache: OperatorCache, fleet: Fleet, queue: WorkQueue) -> None:
        self.api = api
        self.cache = cache
        self.fleet = fleet
        self.queue = queue

    def adopt(self, seeds: Iterable[PodSeed]) -> None:
        """The devices the fleet's pods hold when the twin starts, as the kubelet's checkpoint would have them."""
        for seed in seeds:
            key = PodKey(seed.namespace, seed.name)
            if key not in self.cache.pods:
                continue
            unit = Unit(seed.gpu_index, seed.gi_id, seed.ci_id)
            self.cache.allocations[key] = [NodeUnit(seed.node, unit)]
            tw = self.fleet.nodes.get(seed.node)
            did = device_id(tw.gpus[seed.gpu_index], unit) if tw is not None else None
            containers = self.cache.pods[key].containers
            if did is not None and containers:
                self.cache.devices[key] = [AllocatedDevice(containers[0], seed.resource, did)]

    # ---------------------------------------------------------------- pods leaving
    def finish_deletions(self, node: str) -> None:
        """Graceful deletions on the node end at once, except the device plugin's on a node whose plugin
        container cannot be killed (stuck_terminating)."""
        stuck = node in self.cache.stuck_terminating
        ds_name = self.cache.device_plugin_ds_name
        for info in [p for p in self.cache.pods_on(node) if p.deleting and not (stuck and p.app == ds_name)]:
            self.release(info.key)
            self.api.delete_pod(info.name, info.namespace)

    def release(self, key: PodKey) -> None:
        """Free the devices `key` held (its checkpoint entry goes too)."""
        with self.cache.lock:
            self.cache.devices.pop(key, None)
        holder = str(key)
        for node, unit in self.cache.allocations.pop(key, []):
            tw = self.fleet.nodes.get(node)
            if tw is None:
                continue
            with tw.lock:
                if unit.gpu_index >= len(tw.gpus):
                    continue
                gpu = tw.gpus[unit.gpu_index]
                # A shared device stays held while another pod holds one of its replicas.
                heir = self._replica_holder(node, unit) if unit.replica is not None else None
                if unit.gi_id is None:
                    if gpu.holder == holder:
                        gpu.holder = heir
                    continue
                gi = gpu.gpu_instances.get(unit.gi_id)
                ci = gi.compute_instances.get(unit.ci_id or 0) if gi is not None else None
                if ci is not None and ci.holder == holder:
                    ci.holder = heir
            self.queue.add(Job.SCHEDULE)

    def _replica_holder(self, node: str, unit: Unit) -> str | None:
        """A pod still holding a replica of the device `unit` is a replica of, if any."""
        with self.cache.lock:
            for key, units in self.cache.allocations.items():
                if any(
                    n == node and (u.gpu_index, u.gi_id, u.ci_id) == (unit.gpu_index, unit.gi_id, unit.ci_id)
                    for n, u in units
                ):
                    return str(key)
        return None

    # ---------------------------------------------------------------- devices
    def free_units(self, node: str, tw: TwinNode) -> dict[str, list[Unit]]:
        """Per advertised resource, the units no pod holds (none without a healthy plugin)."""
        adv = self.cache.advertised(node)
        if adv is None or not adv.ok:
            return {}
        # A replica of a shared device (`<id>::<i>`) is its own device ID to the kubelet's device manager: free
        # while no pod holds that replica, however many hold the others (sharing.py).
        with self.cache.lock:
            held = {
                u for units in self.cache.allocations.values() for n, u in units if n == node and u.replica is not None
            }

        def free(u: Unit) -> bool:
            gpu = tw.gpus[u.gpu_index]
            return u not in held and _replica_exists(gpu, u) if u.replica is not None else _unit_free(gpu, u)

        return {r: [u for u in units if free(u)] for r, units in adv.units.items()}

    def node_status(self, node: dict[str, Any]) -> None:
        """capacity/allocatable of every nvidia.com/* resource: what the plugin advertises, 0 for one it no
        longer does (setters.go MachineInfo keeps registered names)."""
        name = node["metadata"]["name"]
        status = node.get("status") or {}
        cap = status.get("capacity") or {}
        alloc = status.get("allocatable") or {}
        want = {k: "0" for k in {*cap, *alloc} if k.startswith("nvidia.com/")}
        adv = self.cache.advertised(name)
        if adv is not None and adv.ok:
            want.update({k: str(v) for k, v in adv.resources.items()})
        if all(cap.get(k) == v and alloc.get(k) == v for k, v in want.items()):
            return
        self.api.store.patch("nodes", name, {"status": {"capacity": want, "allocatable": want}}, subresource="status")

    # ---------------------------------------------------------------- admission
    def admit(self, node: str, tw: TwinNode) -> None:
        """Admit the node's Pending pods, oldest first (the DaemonSets' own pods are not the device manager's)."""
        pending = sorted(
            (p for p in self.cache.pods_on(node) if p.phase == "Pending" and not p.deleting),
            key=lambda p: (p.created, str(p.key)),
        )
        for info in pending:
            if info.app not in (self.cache.device_plugin_ds_name, MM_DS):
                self._admit(node, tw, info)

    def _admit(self, node: str, tw: TwinNode, info: PodInfo) -> None:
        free = self.free_units(node, tw)
        pod = self.api.get("pods", info.name, info.namespace)
        shortfall = _shortfall(info.requests, free)
        if shortfall is not None:
            self.api.patch_pod_status(info.name, info.namespace, _admission_error(shortfall))
            return
        take, devices = self._allocate(tw, pod or {}, free)
        for u in take:
            gpu = tw.gpus[u.gpu_index]
            if u.gi_id is None:
                if u.replica is None or gpu.holder is None:
                    gpu.holder = str(info.key)
            else:
                ci = gpu.gpu_instances[u.gi_id].compute_instances[u.ci_id or 0]
                if u.replica is None or ci.holder is None:  # a shared device: its first holder stands for all
                    ci.holder = str(info.key)
        self.cache.allocations[info.key] = [NodeUnit(node, u) for u in take]
        with self.cache.lock:
            self.cache.devices[info.key] = devices
        containers = [c["name"] for c in ((pod or {}).get("spec") or {}).get("containers") or []]
        self.api.patch_pod_status(info.name, info.namespace, pod_status(node, containers, ready=True))

    @staticmethod
    def _allocate(
        tw: TwinNode, pod: Mapping[str, Any], free: dict[str, list[Unit]]
    ) -> tuple[list[Unit], list[AllocatedDevice]]:
        """The device manager allocates per container, in spec order (kubelet cm/devicemanager
        `Allocate(pod, container)`), each from what is still free; the plugin's IDs are recorded then."""
        take: list[Unit] = []
        devices: list[AllocatedDevice] = []
        for cname, wanted in container_requests(pod):
            for res, n in sorted(wanted.items()):
                units, free[res] = free.get(res, [])[:n], free.get(res, [])[n:]
                for u in units:
                    did = device_id(tw.gpus[u.gpu_index], u)
                    if did is not None:
                        devices.append(AllocatedDevice(cname, res, did))
                take += units
        return take, devices

    # ---------------------------------------------------------------- what other threads ask
    def holders_on(self, node: str, gpu_index: int) -> dict[str, list[Unit]]:
        """The pods ("namespace/name") holding units of GPU `gpu_index` of `node`, with those units."""
        with self.cache.lock:
            return {
                str(k): [u for n, u in units if n == node and u.gpu_index == gpu_index]
                for k, units in self.cache.allocations.items()
                if any(n == node and u.gpu_index == gpu_index for n, u in units)
            }

    def pod_resources(self, node: str) -> PodResources:
        """What the node's kubelet answers to PodResources `List` (kubernetes pkg/kubelet/apis/podresources
        server_v1.go `List`): every pod bound to the node, every container of its spec in order, with the
        devices the device manager allocated to it grouped by resource. (namespace, name, containers)."""
        out: PodResources = []
        with self.cache.lock:
            for key, info in sorted(self.cache.by_node.get(node, {}).items(), key=lambda kv: str(kv[0])):
                got = self.cache.devices.get(key, [])
                containers = []
                for cname in info.containers:
                    by_res: dict[str, list[str]] = {}
                    for d in got:
                        if d.container == cname:
                            by_res.setdefault(d.resource, []).append(d.device_id)
                    containers.append((cname, sorted(by_res.items())))
                out.append((info.namespace, info.name, containers))
        return out
