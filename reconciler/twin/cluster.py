"""`ClusterTwin`: a whole GPU cluster twin — API server, GPU Operator behaviour, NVML — built from one call.

    with ClusterTwin.from_inventory("inventory/", strategy="single", drift=["wrong-strategy"]) as twin:
        twin.kubeconfig          # Path of a kubeconfig for kubectl / kubernetes.config.load_kube_config
        twin.api                 # the ApiServerTwin (url, token, store, request_counts())
        twin.nvml("gpu-h200-01") # pynvml-surface object over that node's GPUs (inject into the agent)
        twin.settle()            # run the GPU Operator controllers until quiescent
        twin.inject("gpu-recut:gpu-h200-01"); twin.heal("gpu-recut:gpu-h200-01")

On start the store is populated directly (not through HTTP): namespace `gpu-operator`, the ClusterPolicy
`cluster-policy` (strategy from the inventory unless overridden; `spec.migManager.config.name` = the inventory's
mig-parted ConfigMap, which holds one config per distinct current node layout plus `all-disabled`), the
device-plugin and mig-manager DaemonSets with one pod each per GPU node, nodes with GFD/operator labels
(`nvidia.com/mig.config` pointing at the config matching the layout, `nvidia.com/mig.config.state=success`), their
kube-node-lease Leases and capacity as the device plugin advertises it, and one Running pod (namespace `default`,
label app=<owner>) per owned partition, holding it. Then the controllers start (reconciler/twin/operator).
`applied=AppliedSeed(...)` starts the cluster as a tool that manages the mig-parted ConfigMap left it: that
ConfigMap's text and annotations, and the `nvidia.com/mig.config` value of each node, are the caller's (opaque
to the twin, which checks nothing of them: mig-manager does not either until a label changes).
Drift cases: reconciler/twin/fleet.py. Assumptions: reconciler/twin/ASSUMPTIONS-operator.md.
Not pure: starts an HTTP server thread and a controller thread; stop() (or leaving the with-block) ends both.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from reconciler.twin.apiserver.errors import ApiError
from reconciler.twin.apiserver.twin import ApiServerTwin, clusterpolicy_required_spec
from reconciler.twin.dra import DEVICE_CLASSES, DraDriverTwin, canonical_profile
from reconciler.twin.dra import DRIVER as DRA_DRIVER
from reconciler.twin.fleet import (
    BUILD_ONLY,
    POD_NAMESPACE,
    STALE_DP_CONFIG,
    UNDOCUMENTED_NODE,
    DriftCase,
    Fleet,
    PodSeed,
    TwinNode,
    parse_drift,
    undocumented_seeds,
)
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.kubelet import ClaimListing, PodResourcesServer
from reconciler.twin.nvml import NvmlTwin
from reconciler.twin.operator import deviceplugin, dsupdate, gfd, kubeobjects, rendering
from reconciler.twin.operator.controller import GpuOperator
from reconciler.twin.operator.names import DEPLOY_LABELS, MIG_CONFIG, MIG_CONFIG_STATE, MM_DS, MM_SELECTOR, PAUSED

__all__ = ["ClusterTwin"]

# [assumption] non-GPU node resources: placeholders so `kubectl describe node` looks like a real GPU server.
BASE_CAPACITY = {"cpu": "128", "memory": "2113592560Ki", "pods": "110", "ephemeral-storage": "1921298424Ki"}


# The field manager of a drift injected at run time (a person's hand edit): kubectl's default for `kubectl patch`
# (staging/src/k8s.io/kubectl/pkg/cmd/patch/patch.go, AddFieldManagerFlagVar(cmd, &o.fieldManager, "kubectl-patch")).
HAND_MANAGER = "kubectl-patch"
LARGE_FLEET = 1000  # nodes; above it the populated objects are moved to the GC's permanent generation


def _other(strategy: str) -> str:
    return "single" if strategy == "mixed" else "mixed"


@dataclass(frozen=True, slots=True)
class AppliedSeed:
    """The state a tool managing the mig-parted ConfigMap left behind: its `config.yaml`, its annotations, and the
    `nvidia.com/mig.config` label of each node. Given by the caller; the twin copies it into the store as is."""

    config_text: str
    node_configs: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)  # of the ConfigMap (e.g. who manages it)


class ClusterTwin:
    """A running GPU cluster twin (API server + GPU Operator + NVML) built from a Fleet."""

    def __init__(
        self,
        fleet: Fleet,
        *,
        strategy: str | None = None,
        device_plugin_config: str | None = None,
        drift: Iterable[str | DriftCase] = (),
        kubeconfig: str | Path | None = None,
        token: str | None = None,
        tls: bool = True,
        mig_mode_change_needs_reboot: bool = False,
        config_propagation_seconds: float = 0.0,
        clock: Callable[[], float] | None = None,
        operand_ready_seconds: float = 0.0,
        applied: AppliedSeed | None = None,
    ) -> None:
        self.fleet = fleet
        self._applied = applied
        # How long a new operand pod (device plugin, mig-manager) takes to be Ready: the rolling update's pace.
        if not operand_ready_seconds >= 0.0 or operand_ready_seconds == float("inf"):
            raise ValueError(f"operand_ready_seconds must be a finite number >= 0, not {operand_ready_seconds!r}")
        self.operand_ready_seconds = float(operand_ready_seconds)
        # How long the kubelet takes to project a ConfigMap change into mig-manager's volume (0: at once).
        self.config_propagation_seconds = config_propagation_seconds
        self._clock = clock
        for node in fleet.nodes.values():  # CSP VMs: a MIG mode change takes a reboot (mig-manager WITH_REBOOT)
            for gpu in node.gpus:
                gpu.reset_needs_reboot = mig_mode_change_needs_reboot
        self.inventory_strategy = fleet.settings.mig_strategy
        if strategy is not None and strategy not in deviceplugin.STRATEGIES:
            raise ValueError(f"unknown MIG strategy {strategy!r}")
        self.cp_strategy = strategy or self.inventory_strategy
        self.dp_config: tuple[str, str] | None = None  # (ConfigMap name, its flags.migStrategy)
        if device_plugin_config:
            self.dp_config = (device_plugin_config, _other(self.inventory_strategy))
        self.drift = [parse_drift(d) for d in drift]
        self._kubeconfig_arg = Path(kubeconfig) if kubeconfig else None
        self._token = token
        self._tls = tls
        self._tmp: Path | None = None
        self._kubeconfig: Path | None = None
        self._api: ApiServerTwin | None = None
        self._operator: GpuOperator | None = None
        self._nvml: dict[str, NvmlTwin] = {}
        self._kubelets: dict[str, PodResourcesServer] = {}
        # node -> the DRA claims its kubelet's DRA manager has prepared for running pods (hold_through_claim)
        self._dra_claims: dict[str, list[ClaimListing]] = {}
        self._dra_drivers: dict[str, DraDriverTwin] = {}
        self._dra_batch: list[dict[str, Any]] | None = None  # ResourceSlices of start_dra_plugins, to load at once
        self._dra_published = False  # start_dra_plugins found slices of the driver already published
        self._socket_dir: Path | None = None
        self._late: list[DriftCase] = []
        self._apply_build_drift()

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_inventory(
        cls,
        path: str | Path,
        *,
        strategy: str | None = None,
        device_plugin_config: str | None = None,
        drift: Iterable[str | DriftCase] = (),
        **kwargs: Any,
    ) -> ClusterTwin:
        """The cluster as the inventory at `path` describes it; `strategy` overrides the ClusterPolicy's."""
        return cls(
            Fleet.from_inventory(path),
            strategy=strategy,
            device_plugin_config=device_plugin_config,
            drift=drift,
            **kwargs,
        )

    @classmethod
    def synthetic(
        cls, nodes: int, *, gpus_per_node: int = 8, owned_fraction: float = 0.0, **kwargs: Any
    ) -> ClusterTwin:
        """N nodes x 8 H200 with mixed layouts (benchmarks)."""
        return cls(Fleet.synthetic(nodes, gpus_per_node=gpus_per_node, owned_fraction=owned_fraction), **kwargs)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ClusterTwin:
        if self._api is not None:
            return self
        s = self.fleet.settings
        api = ApiServerTwin(
            self._token,
            namespaces=("default", "kube-system", "kube-public", "kube-node-lease", s.namespace, POD_NAMESPACE),
            tls=self._tls,
        )
        self._api = api
        # One operator object populates the store (same renderers as at run time) and then runs.
        operator = GpuOperator(
            api.store,
            self.fleet,
            config_propagation_seconds=self.config_propagation_seconds,
            operand_ready_seconds=self.operand_ready_seconds,
            **({"clock": self._clock} if self._clock is not None else {}),
        )
        # Tens of thousands of long-lived dicts: the cyclic GC would rescan them over and over while we build.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._populate(operator)
            operator.scheduler.extended = self._schedule_extended
            self._operator = operator
            operator.start()  # reads the labels just written as already processed by mig-manager
        except BaseException:
            self.stop()
            raise
        finally:
            if gc_was_enabled:
                gc.enable()
        if len(self.fleet.nodes) >= LARGE_FLEET:
            gc.freeze()  # the populated store lives as long as the twin; keep it out of every later GC pass
        try:
            api.start()
            if self._kubeconfig_arg is not None:
                self._kubeconfig = api.write_kubeconfig(self._kubeconfig_arg)
            else:
                self._tmp = Path(tempfile.mkdtemp(prefix="migplan-twin-"))
                self._kubeconfig = api.write_kubeconfig(self._tmp / "kubeconfig")
            for d in self._late:
                self._inject_runtime(d)
        except BaseException:
            self.stop()  # no server or controller thread outlives a failed start
            raise
        return self

    def stop(self) -> None:
        for server in self._kubelets.values():
            server.stop()
        self._kubelets.clear()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
        if self._operator is not None:
            self._operator.stop()
            self._operator = None
        if self._api is not None:
            self._api.stop()
            self._api = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> ClusterTwin:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ access
    @property
    def api(self) -> ApiServerTwin:
        if self._api is None:
            raise RuntimeError("the cluster twin is not running")
        return self._api

    @property
    def store(self) -> Any:
        return self.api.store

    @property
    def operator(self) -> GpuOperator:
        if self._operator is None:
            raise RuntimeError("the cluster twin is not running")
        return self._operator

    @property
    def kubeconfig(self) -> Path:
        if self._kubeconfig is None:
            raise RuntimeError("the cluster twin is not running")
        return self._kubeconfig

    @property
    def url(self) -> str:
        return self.api.url

    def nvml(self, node: str) -> NvmlTwin:
        """The NVML twin of `node` (one object per node; its calls see and change the node's GPUs)."""
        if node not in self._nvml:
            tw = self.fleet.nodes[node]
            self._nvml[node] = NvmlTwin(tw.gpus, lock=tw.lock, on_change=lambda: self.gpus_changed(node))
        return self._nvml[node]

    def kubelet(self, node: str) -> PodResourcesServer:
        """The node's kubelet PodResources v1 server (started on first use)."""
        if node not in self.fleet.nodes:
            raise KeyError(node)
        if node not in self._kubelets:
            if self._socket_dir is None:
                # a short directory of its own: unix socket paths are limited to about 107 bytes
                self._socket_dir = Path(tempfile.mkdtemp(prefix="mp-kubelet-"))
            name = hashlib.sha1(node.encode()).hexdigest()[:12] + ".sock"
            operator = self.operator
            self._kubelets[node] = PodResourcesServer(
                self._socket_dir / name, lambda: operator.pod_resources(node), claims=lambda: self._live_claims(node)
            ).start()
        return self._kubelets[node]

    def dra_driver(self, node: str, *, dynamic_mig: bool = False) -> DraDriverTwin:
        """NVIDIA's DRA driver's GPU kubelet plugin on `node` (reconciler/twin/dra.py); nothing is published until
        its `start_plugin()`, as the real plugin publishes when it starts and only then."""
        if node not in self._dra_drivers:
            tw = self.fleet.nodes[node]
            store = self.store

            def create(obj: dict[str, Any]) -> None:
                if self._dra_batch is not None:  # start_dra_plugins: written with the others in one bulk load
                    self._dra_batch.append(obj)
                else:
                    store.create("resourceslices.resource.k8s.io", obj)

            def list_pool(name: str) -> list[dict[str, Any]]:
                if self._dra_batch is not None and not self._dra_published:
                    return []  # start_dra_plugins found no slice published yet: the pool is empty
                return [
                    s
                    for s in store.list("resourceslices.resource.k8s.io", field_selector=f"spec.nodeName={name}")
                    if s["spec"].get("driver") == DRA_DRIVER
                ]

            def update(obj: dict[str, Any]) -> None:
                store.update("resourceslices.resource.k8s.io", obj)

            def delete(name: str) -> None:
                store.delete("resourceslices.resource.k8s.io", name)

            uid = store.get("nodes", node)["metadata"].get("uid", "")
            for cls in DEVICE_CLASSES:  # the driver's Helm chart installs them with the driver
                if not store.exists("deviceclasses.resource.k8s.io", None, cls["metadata"]["name"]):
                    with contextlib.suppress(ApiError):  # created meanwhile
                        store.create("deviceclasses.resource.k8s.io", cls)
            self._dra_drivers[node] = DraDriverTwin(
                node,
                tw.gpus,
                create=create,
                list_pool=list_pool,
                update=update,
                delete=delete,
                node_uid=uid,
                dynamic_mig=dynamic_mig,
            )
        return self._dra_drivers[node]

    def start_dra_plugins(self, nodes: Iterable[str], *, dynamic_mig: bool = False) -> None:
        """`dra_driver(node).start_plugin()` on every node of `nodes` (`migplan twin --dra`), their publications
        written in one bulk load (Store.load) instead of one create each: the same ResourceSlices, each checked
        as create checks it. No thread: a plugin is its publication (reconciler/twin/dra.py)."""
        self._dra_batch = []
        self._dra_published = any(
            s["spec"].get("driver") == DRA_DRIVER for s in self.store.list("resourceslices.resource.k8s.io")
        )
        # A million small acyclic dicts (the devices of 5,000 nodes) held until the load: without the pause the
        # cyclic GC ran a dozen full passes over them while they were built (a third of this step at 5,000 nodes).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for node in nodes:
                self.dra_driver(node, dynamic_mig=dynamic_mig).start_plugin()
            batch, self._dra_batch = self._dra_batch, None
            self.store.load("resourceslices.resource.k8s.io", [(obj, None) for obj in batch])
        finally:
            self._dra_batch = None
            if gc_was_enabled:
                gc.enable()

    def run_claim_pod(self, node: str, namespace: str, pod: str, claim: str, *, container: str = "main") -> list[str]:
        """What the scheduler, the DRA driver and the kubelet do for `pod` (already bound to `node`) using the
        ResourceClaim `claim`: allocate it on the node's ResourceSlices (reconciler/twin/draallocator.py, CEL
        selectors), reserve it for the pod (status), prepare each device (DynamicMIG creates the MIG device) and
        list it in the kubelet's `dynamic_resources`; the MIG device is then held (NVML refuses to destroy it).
        Returns the devices; AllocationError (nothing written) when the claim cannot be satisfied there."""
        from reconciler.twin.draallocator import allocate

        store = self.store
        obj = store.get("resourceclaims.resource.k8s.io", claim, namespace)
        slices = store.list("resourceslices.resource.k8s.io", field_selector=f"spec.nodeName={node}")
        classes = {c["metadata"]["name"]: c for c in store.list("deviceclasses.resource.k8s.io")}
        taken = [
            (r["driver"], r["pool"], r["device"])
            for c in store.list("resourceclaims.resource.k8s.io")
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()
        ]
        results = allocate(obj, node=node, slices=slices, classes=classes, allocated=taken)
        uid = store.get("pods", pod, namespace)["metadata"].get("uid", "")
        status = {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}],
        }
        store.patch("resourceclaims.resource.k8s.io", claim, {"status": status}, namespace, subresource="status")
        driver = self.dra_driver(node)
        for r in results:
            driver.prepare(r["device"])
            self.hold_through_claim(node, namespace, pod, claim, r["device"], container=container)
            self._mark_held(node, r["device"], f"{namespace}/{pod}")
        self.gpus_changed(node)
        return [r["device"] for r in results]

    def _schedule_extended(self, pod: dict[str, Any]) -> str | None:
        """The scheduler's DRA extended-resource path (reconciler/twin/draextended.py) for a Pending pod: the first
        node (by name) that fits gets a special ResourceClaim created, allocated from the class mapping the
        resource and reserved for the pod; the pod's status names it, then the pod is bound and the claim prepared
        (run_claim_pod). None when no class maps what the pod asks, or no node fits (the device-plugin path then
        says why)."""
        from reconciler.twin.draallocator import AllocationError, allocate
        from reconciler.twin.draextended import NotFit, class_mapping, maps_any, special_claim

        store = self.store
        if not self._dra_drivers:
            return None  # no DRA driver runs anywhere: nothing to allocate from
        classes = store.list("deviceclasses.resource.k8s.io")
        mapping = class_mapping(classes)
        if not maps_any(pod, mapping):
            return None
        meta, spec = pod["metadata"], pod.get("spec") or {}
        selector = spec.get("nodeSelector") or {}
        by_name = {c["metadata"]["name"]: c for c in classes}
        taken = [
            (r["driver"], r["pool"], r["device"])
            for c in store.list("resourceclaims.resource.k8s.io")
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()
        ]
        for node in sorted(store.list("nodes"), key=lambda n: n["metadata"]["name"]):
            name = str(node["metadata"]["name"])
            labels = node["metadata"].get("labels") or {}
            if (node.get("spec") or {}).get("unschedulable") or any(labels.get(k) != v for k, v in selector.items()):
                continue
            try:
                made = special_claim(pod, (node.get("status") or {}).get("allocatable") or {}, mapping)
            except NotFit:
                continue
            if made is None:
                return None  # the device plugin serves it on this node: the usual path
            claim, mappings = made
            slices = store.list("resourceslices.resource.k8s.io", field_selector=f"spec.nodeName={name}")
            try:
                allocate(claim, node=name, slices=slices, classes=by_name, allocated=taken)
            except AllocationError:
                continue
            created = store.create("resourceclaims.resource.k8s.io", claim, meta.get("namespace"))
            claim_name = created["metadata"]["name"]
            status = {"extendedResourceClaimStatus": {"requestMappings": mappings, "resourceClaimName": claim_name}}
            store.patch("pods", meta["name"], {"status": status}, meta.get("namespace"), subresource="status")
            store.bind(meta.get("namespace", "default"), meta["name"], name)
            self.run_claim_pod(
                name, meta.get("namespace", "default"), meta["name"], claim_name, container=mappings[0]["containerName"]
            )
            return name
        return None

    def _mark_held(self, node: str, device: str, holder: str) -> None:
        """The MIG device's compute instance is in use by the pod (the twin's NVML then refuses to destroy it)."""
        for gpu in self.fleet.nodes[node].gpus:
            for gi in gpu.gpu_instances.values():
                if f"gpu-{gpu.minor}-mig-{canonical_profile(gi.profile.name)}-{gi.profile.id}-{gi.start}" == device:
                    for ci in gi.compute_instances.values():
                        ci.holder = holder

    def install_gpu_cluster(self, name: str = "gpu-cluster", *, dynamic_mig: bool) -> None:
        """The GPU Operator's GPUCluster CRD and one GPUCluster object (reconciler/twin/dra.py)."""
        from reconciler.twin.dra import gpucluster, gpucluster_crd

        with contextlib.suppress(ApiError):
            self.store.install_crd(gpucluster_crd())
        self.store.create("gpuclusters.nvidia.com", gpucluster(name, dynamic_mig=dynamic_mig))

    def install_dra_driver_chart(self, nodes: Iterable[str], feature_gates: str | None) -> None:
        """NVIDIA's DRA driver installed by its own Helm chart (no GPU Operator): its kubelet-plugin DaemonSet with
        FEATURE_GATES `feature_gates` (as the chart renders it) and its pod on each of `nodes`; nothing published
        yet (reconciler/twin/dra.py)."""
        from reconciler.twin.dra import kubelet_plugin_daemonset, kubelet_plugin_pod

        ds = kubelet_plugin_daemonset(feature_gates)
        namespace = ds["metadata"]["namespace"]
        self.store.ensure_namespaces([namespace])
        ds = self.store.create("daemonsets.apps", ds, namespace)  # with its uid, for its pods' ownerReferences
        for node in nodes:
            self.store.create("pods", kubelet_plugin_pod(ds, node), namespace)
        self.store.subscribe(lambda event, obj: self._plugin_pod_event(ds, event, obj), kinds=("Pod",))

    def _plugin_pod_event(self, ds: dict[str, Any], event: str, pod: dict[str, Any]) -> None:
        """The kubelet and the DaemonSet controller for the driver's kubelet-plugin pods (ASSUMPTIONS-dra.md): a pod
        marked for deletion is stopped and removed (the kubelet), the DaemonSet creates a new pod on that node
        (pkg/controller/daemon `manage`: a node without its daemon pod gets one), and the new pod's plugin starts:
        it enumerates the node's GPUs through NVML and publishes them (`DraDriverTwin.start_plugin`)."""
        from reconciler.twin.dra import kubelet_plugin_pod

        meta = pod.get("metadata") or {}
        selector = ds["spec"]["selector"]["matchLabels"]
        if meta.get("namespace") != ds["metadata"]["namespace"] or any(
            (meta.get("labels") or {}).get(k) != v for k, v in selector.items()
        ):
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if event == "MODIFIED" and meta.get("deletionTimestamp"):
            with contextlib.suppress(ApiError):  # the kubelet stops the containers, then the pod goes
                self.store.delete("pods", meta["name"], meta["namespace"], grace_period_seconds=0)
            return
        if event != "DELETED" or not node or node not in self.fleet.nodes:
            return
        fresh = kubelet_plugin_pod(ds, node)
        fresh["metadata"].pop("name")
        fresh["metadata"]["generateName"] = f"{ds['metadata']['name']}-"  # as the DaemonSet controller names pods
        self.store.create("pods", fresh, ds["metadata"]["namespace"])
        self.dra_driver(node).start_plugin()

    def hold_through_claim(
        self, node: str, namespace: str, pod: str, claim: str, device: str, *, container: str = "main"
    ) -> None:
        """`pod` (already on `node`) holds the DRA device `device` of NVIDIA's driver through ResourceClaim
        `claim`: what the kubelet's DRA manager records once the driver prepared the claim, and lists in
        PodResources `dynamic_resources` while the pod exists (pkg/kubelet/apis/podresources/server_v1.go
        `List`). Allocation by the twin's scheduler is not modelled here: the test names the device."""
        self._dra_claims.setdefault(node, []).append(
            (namespace, pod, container, namespace, claim, [("gpu.nvidia.com", node, device)])
        )

    def _live_claims(self, node: str) -> list[ClaimListing]:
        live: list[ClaimListing] = []
        for entry in self._dra_claims.get(node, []):
            try:
                self.store.get("pods", entry[1], entry[0])
            except ApiError:
                continue  # the pod is gone: the kubelet unprepared its claims
            live.append(entry)
        return live

    def pod_resources_socket(self, node: str) -> Path:
        """Where the node's kubelet serves PodResources v1 (point `migplan agent --pod-resources-socket` at it)."""
        return self.kubelet(node).socket_path

    def gpus(self, node: str) -> list[TwinGpu]:
        return self.fleet.nodes[node].gpus

    def reset_gpus(self, node: str) -> list[bool]:
        """A GPU reset on every GPU of the node (pending MIG mode takes effect where the GPU is idle)."""
        tw = self.fleet.nodes[node]
        with tw.lock:
            done = [g.reset() for g in tw.gpus]
        self.gpus_changed(node)
        return done

    def gpus_changed(self, node: str) -> None:
        """Tell the twin's GFD that the node's GPUs changed behind its back (e.g. through NVML)."""
        if self._operator is not None:
            self._operator.mark_node(node)

    def settle(self, timeout: float = 30.0) -> None:
        self.operator.settle(timeout)

    def tick(self, timeout: float = 30.0) -> None:
        """After the twin's clock moved: timers (mig-manager's client wait) look at it again, then settle."""
        self.operator.tick()
        self.operator.settle(timeout)

    def request_counts(self) -> dict[tuple[str, str, str], int]:
        return self.api.request_counts()

    def reset_counts(self) -> None:
        self.api.reset_counts()

    def allocations(self) -> dict[str, list[dict[str, Any]]]:
        """Which devices each pod holds: pod key → [{node, gpu, gi, ci, profile, placement: (start, size), uuid}]."""
        out: dict[str, list[dict[str, Any]]] = {}
        for name, tw in self.fleet.nodes.items():
            with tw.lock:
                for gpu in tw.gpus:
                    if gpu.holder:
                        out.setdefault(gpu.holder, []).append({"node": name, "gpu": gpu.index, "uuid": gpu.uuid})
                    for dev in gpu.mig_devices():
                        if dev.holder:
                            out.setdefault(dev.holder, []).append(
                                {
                                    "node": name,
                                    "gpu": gpu.index,
                                    "gi": dev.gi_id,
                                    "ci": dev.ci_id,
                                    "profile": dev.profile,
                                    "placement": (dev.start, dev.size),
                                    "uuid": dev.uuid,
                                }
                            )
        return out

    # ------------------------------------------------------------------ population
    def _cluster_policy(self) -> dict[str, Any]:
        s = self.fleet.settings
        spec: dict[str, Any] = {k: {} for k in clusterpolicy_required_spec()}
        spec["mig"] = {"strategy": self.cp_strategy}
        spec["migManager"] = {"enabled": True, "config": {"name": s.mig_config_map, "default": "all-disabled"}}
        if self.dp_config is not None:
            spec["devicePlugin"] = {"config": {"name": self.dp_config[0], "default": "default"}}
        return {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": s.cluster_policy},
            "spec": spec,
        }

    def _mig_parted_text(self) -> str:
        doc = self.fleet.mig_parted_config()
        doc["mig-configs"].setdefault("all-disabled", [{"devices": "all", "mig-enabled": False}])
        return str(yaml.safe_dump(doc, sort_keys=False))

    def _populate(self, helper: GpuOperator) -> None:
        store = self.api.store
        s = self.fleet.settings
        for d in self.drift:
            if d.kind == "mig-config-failed" and d.arg:
                self._add_stale_config(d.arg)
        metadata: dict[str, Any] = {"name": s.mig_config_map}
        text = self._mig_parted_text()
        if self._applied is not None:  # what the managing tool last wrote, as it wrote it
            text = self._applied.config_text
            metadata["annotations"] = dict(self._applied.annotations)
            metadata["labels"] = dict(self._applied.labels)
            for node, config in self._applied.node_configs.items():
                if node in self.fleet.nodes:
                    self.fleet.node_config[node] = config
        store.create("configmaps", {"metadata": metadata, "data": {"config.yaml": text}}, s.namespace)
        if self.dp_config is not None:
            self._create_dp_config()
        cp = store.create("clusterpolicies.nvidia.com", self._cluster_policy())
        # Created as the operator creates it: rendered whole, the ClusterPolicy as controller, its hash annotation.
        ds = dsupdate.apply_rendered(None, rendering.operator_daemonset(s.device_plugin_daemonset, s.namespace, cp))
        assert ds is not None
        store.create("daemonsets.apps", ds, s.namespace)
        mm = dsupdate.apply_rendered(None, rendering.operator_mig_manager_daemonset(s.namespace, cp))
        assert mm is not None
        store.create("daemonsets.apps", mm, s.namespace)
        helper.load_caches()
        self._load_nodes(helper, [n for n in sorted(self.fleet.nodes) if n not in self.fleet.absent])
        self._create_pods(self.fleet.pods)

    def _load_nodes(self, helper: GpuOperator, names: list[str]) -> None:
        """The starting fleet's nodes, their Leases and daemon pods, each kind in one bulk load (Store.load): the
        objects `_create_node` writes one by one, as it writes them (ASSUMPTIONS-operator.md, bulk load)."""
        store = self.api.store
        built = [(name, *self._node_object(helper, name)) for name in names]
        store.load("nodes", [(node, None) for _, node, _, _, _ in built])
        uids = {name: store.get("nodes", name)["metadata"]["uid"] for name in names}
        renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # every kubelet's first renewal, at once
        store.load(
            "leases.coordination.k8s.io",
            [(self._lease(name, uids[name], renewed), None) for name in names],
            "kube-node-lease",
        )
        ns = self.fleet.settings.namespace
        taken: set[str] = set()
        dp_ds = self.fleet.settings.device_plugin_daemonset
        dp_pods: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        mm_pods: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        mm_ds = helper.mig_manager_ds
        for name, _, labels, dp_pod, adv in built:
            if dp_pod is None or adv is None:
                continue
            pod_name = helper.free_daemon_pod_name(dp_ds, name, dp_pod["metadata"]["name"], taken)
            dp_pod["metadata"]["name"] = pod_name
            taken.add(pod_name)
            dp_pods.append((dp_pod, helper.started_dp_pod(name, pod_name, dp_pod, adv)))
            if mm_ds is not None and labels.get(MM_SELECTOR) == "true":
                mm_pod = helper.render_mm_pod(name, mm_ds)
                mm_name = helper.free_daemon_pod_name(MM_DS, name, mm_pod["metadata"]["name"], taken)
                mm_pod["metadata"]["name"] = mm_name
                taken.add(mm_name)
                mm_pods.append((mm_pod, helper.started_mm_pod(name, mm_name, mm_pod)))
        store.load("pods", dp_pods + mm_pods, ns)

    def _create_dp_config(self) -> None:
        assert self.dp_config is not None
        name, strategy = self.dp_config
        self.api.store.create(
            "configmaps",
            {"metadata": {"name": name}, "data": {"default": f"version: v1\nflags:\n  migStrategy: {strategy}\n"}},
            self.fleet.settings.namespace,
        )

    def _add_stale_config(self, node: str) -> str:
        tw = self.fleet.nodes[node]
        small = min(tw.gpus[0].profiles.values(), key=lambda p: (p.memory_slices, p.name)) if tw.gpus else None
        if small is None:
            raise ValueError(f"mig-config-failed:{node}: node has no GPU")
        name = f"all-{small.name.replace('+', '.')}"
        self.fleet.configs.setdefault(
            name, [{"devices": "all", "mig-enabled": True, "mig-devices": {small.name: small.max_instances}}]
        )
        return name

    def _node_labels(self, helper: GpuOperator, name: str, tw: TwinNode) -> dict[str, str]:
        labels = {
            **tw.labels,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
        }
        if not tw.gpus:
            return labels
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.deploy.device-plugin": "true",
                "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
                "nvidia.com/gpu.deploy.mig-manager": "true",
                "nvidia.com/gpu.deploy.dcgm": "true",
                "nvidia.com/gpu.deploy.dcgm-exporter": "true",
                MIG_CONFIG: self.fleet.node_config.get(name, "all-disabled"),
                MIG_CONFIG_STATE: "success",
            }
        )
        for d in self.drift:
            if d.arg != name:
                continue
            if d.kind == "mig-config-failed":
                labels[MIG_CONFIG] = self._add_stale_config(name)
                labels[MIG_CONFIG_STATE] = "failed"
            elif d.kind == "mig-config-pending":
                labels[MIG_CONFIG_STATE] = "pending"
        labels.update(gfd.gfd_labels(tw.gpus, helper.gfd_strategy(labels)))
        return labels

    def _create_node(self, helper: GpuOperator, name: str, *, with_dp_pod: bool = True) -> None:
        """Create the node (and, while populating, its device-plugin pod; at run time the operator makes it)."""
        store = self.api.store
        node, labels, dp_pod, adv = self._node_object(helper, name)
        created = store.create("nodes", node)
        # The kubelet's heartbeat Lease (kube-node-lease), so `kubectl describe node` finds it; renewed once.
        with contextlib.suppress(ApiError):  # a node re-created by heal() finds its old Lease
            lease = self._lease(name, created["metadata"]["uid"], datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
            store.create("leases.coordination.k8s.io", lease, "kube-node-lease")
        if with_dp_pod and dp_pod is not None and adv is not None:
            helper.create_dp_pod(name, dp_pod, adv)
            mm_ds = helper.mig_manager_ds
            if mm_ds is not None and labels.get(MM_SELECTOR) == "true":
                helper.create_mm_pod(name, mm_ds)

    def _node_object(
        self, helper: GpuOperator, name: str
    ) -> tuple[dict[str, Any], dict[str, str], dict[str, Any] | None, deviceplugin.Advertised | None]:
        """The node as its kubelet registers it (labels, capacity as its device plugin advertises it), its labels,
        and its device-plugin pod with what the plugin advertises (None for a node without GPUs)."""
        tw = self.fleet.nodes[name]
        labels = self._node_labels(helper, name, tw)
        capacity = dict(BASE_CAPACITY)
        dp_pod = helper.render_dp_pod(name) if tw.gpus else None
        adv = None
        if dp_pod is not None:
            # [assumption] the node's first device-plugin run saw its GPUs MIG-disabled (the operator labels a
            # new GPU node nvidia.com/mig.config=all-disabled), so the kubelet has nvidia.com/gpu registered and
            # keeps it at 0 once no plugin serves it (kubelet nodestatus/setters.go MachineInfo).
            capacity[deviceplugin.GPU_RESOURCE] = "0"
            adv = deviceplugin.evaluate(tw.gpus, helper.dp_strategy(dp_pod, labels))
            if adv.ok:
                capacity.update({k: str(v) for k, v in adv.resources.items()})
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {},
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": kubeobjects.now(),
                        "lastTransitionTime": kubeobjects.now(),
                    }
                ],
                "addresses": [{"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "kubeletVersion": "v1.36.2",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "containerRuntimeVersion": "containerd://2.1.0",
                },
            },
        }
        return node, labels, dp_pod, adv

    @staticmethod
    def _lease(name: str, uid: str, renewed: str) -> dict[str, Any]:
        """The kubelet's heartbeat Lease of node `name` (owned by the node), last renewed at `renewed`."""
        return {
            "metadata": {
                "name": name,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
            },
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": 40,
                "renewTime": renewed,
            },
        }

    def _create_pods(self, seeds: Iterable[PodSeed]) -> None:
        """The pods holding the fleet's partitions, Running on their nodes: in one bulk load (Store.load), each as if
        created and then given its status by its kubelet."""
        store = self.api.store
        by_namespace: dict[str, list[tuple[dict[str, Any], dict[str, Any] | None]]] = {}
        running: dict[str, dict[str, Any]] = {}  # node -> the status its kubelet reports, all at one instant
        for p in seeds:
            if p.node in self.fleet.absent or p.node not in self.fleet.nodes:
                continue
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": p.name, "namespace": p.namespace, "labels": {"app": p.owner}},
                "spec": {
                    "nodeName": p.node,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/inference:latest",
                            "resources": {"requests": {p.resource: "1"}, "limits": {p.resource: "1"}},
                        }
                    ],
                },
            }
            if p.node not in running:
                running[p.node] = kubeobjects.pod_status(p.node, ["main"], ready=True)
            by_namespace.setdefault(p.namespace, []).append((pod, running[p.node]))
        for namespace, items in by_namespace.items():
            store.load("pods", items, namespace)
        self.fleet.attach_holders()

    def _apply_build_drift(self) -> None:
        for d in self.drift:
            if d.kind == "gpu-recut" and d.arg:
                self._recut(d.arg, int(d.extra or 0))
            elif d.kind == "node-missing" and d.arg:
                if d.arg not in self.fleet.nodes:
                    raise ValueError(f"node-missing:{d.arg}: no such node in the inventory")
                self.fleet.absent.add(d.arg)
            elif d.kind == "undocumented-node":
                self.fleet.add_node(d.arg or UNDOCUMENTED_NODE, undocumented_seeds())
                self.fleet.node_config[d.arg or UNDOCUMENTED_NODE] = "all-disabled"
            elif d.kind == "wrong-strategy":
                self.cp_strategy = d.arg or _other(self.inventory_strategy)
            elif d.kind == "stale-device-plugin-config":
                self.dp_config = (d.arg or STALE_DP_CONFIG, _other(self.inventory_strategy))
            elif d.kind in ("mig-config-failed", "mig-config-pending"):
                if d.arg not in self.fleet.nodes:
                    raise ValueError(f"{d}: no such node in the inventory")
            elif d.kind == "mig-manager-wedged":
                if d.arg not in self.fleet.nodes or not self.fleet.nodes[d.arg].gpus:
                    raise ValueError(f"{d}: no such GPU node in the inventory")
                self._late.append(d)  # made by the twin's mig-manager itself, once it runs
            elif d.kind == "pod-wants-gpu":
                self._late.append(d)
            elif d.kind == "dra-dynamic-mig":
                if d.arg not in self.fleet.nodes or not self.fleet.nodes[d.arg].gpus:
                    raise ValueError(f"{d}: no such GPU node in the inventory")
                self._late.append(d)  # the DRA driver's plugin starts once the API serves
            elif d.kind == "foreign-holder" and d.arg:
                self._check_gpu(d)
                self.fleet.give_to_other_owner(d.arg, int(d.extra or 0))
            elif d.kind == "driver-placed" and d.arg:
                self._check_gpu(d)
                self._driver_place(d.arg, int(d.extra or 0))

    def _check_gpu(self, d: DriftCase) -> None:
        if d.arg not in self.fleet.nodes:
            raise ValueError(f"{d}: no such node in the inventory")
        if int(d.extra or 0) >= len(self.fleet.nodes[d.arg].gpus):
            raise ValueError(f"{d}: no such GPU")

    def _driver_place(self, node: str, gpu_index: int) -> None:
        """driver-placed: the GPU was cut by hand in the plan's partition order without placements
        (`nvidia-smi mig -cgi <profiles> -C`, the MIG User Guide's way), so the driver chose every start
        (TwinGpu.create_gpu_instance's automatic placement). The profile counts are the plan's, so
        mig-parted's assert (counts, placement ignored) accepts the GPU and mig-manager leaves it as it is:
        only an observer sees that the placements differ. The GPU's pods hold the instances of their
        profile in the same rank (by start) as before."""
        tw = self.fleet.nodes[node]
        gpu = tw.gpus[gpu_index]
        seed = tw.seeds[gpu_index]
        with tw.lock:
            before = {gi.id: (gi.profile.name, gi.start) for gi in gpu.gpu_instances.values()}
            gpu.clear()
            for part in seed.partitions:
                gpu.add_partition(part.profile)  # no start: the driver places it
            fresh: dict[str, list[tuple[int, int]]] = {}
            for gi in sorted(gpu.gpu_instances.values(), key=lambda g: g.start):
                fresh.setdefault(gi.profile.name, []).append((gi.id, min(gi.compute_instances)))
        pods = sorted(
            (k for k, p in enumerate(self.fleet.pods) if p.node == node and p.gpu_index == gpu_index),
            key=lambda k: before[self.fleet.pods[k].gi_id or 0][1],
        )
        for k in pods:
            p = self.fleet.pods[k]
            gi_id, ci_id = fresh[before[p.gi_id or 0][0]].pop(0)
            self.fleet.pods[k] = replace(p, gi_id=gi_id, ci_id=ci_id)
        self.fleet.refresh_config(node)

    def _recut(self, node: str, gpu_index: int) -> None:
        if node not in self.fleet.nodes:
            raise ValueError(f"gpu-recut:{node}: no such node in the inventory")
        if gpu_index >= len(self.fleet.nodes[node].gpus):
            raise ValueError(f"gpu-recut:{node}:{gpu_index}: no such GPU")
        self.fleet.recut(node, gpu_index)
        # Pods that held the destroyed instances were stopped before the hand-made recut.
        self.fleet.pods = [p for p in self.fleet.pods if not (p.node == node and p.gpu_index == gpu_index)]

    # ------------------------------------------------------------------ drift at run time
    def inject(self, case: str | DriftCase) -> None:
        """Inject a drift case into the running twin (same names as at build time)."""
        self._inject_runtime(parse_drift(case))

    def heal(self, case: str | DriftCase) -> None:
        """Undo a drift case: the cluster goes back to what the inventory describes for it."""
        d = parse_drift(case)
        store = self.store
        s = self.fleet.settings
        if d.kind == "wrong-strategy":
            self._patch_cp({"spec": {"mig": {"strategy": self.inventory_strategy}}})
        elif d.kind == "stale-device-plugin-config":
            name = d.arg or (self.dp_config[0] if self.dp_config else STALE_DP_CONFIG)
            self._patch_cp({"spec": {"devicePlugin": {"config": None}}})
            with contextlib.suppress(Exception):
                store.delete("configmaps", name, s.namespace)
            self.dp_config = None
        elif d.kind == "pod-wants-gpu":
            with contextlib.suppress(Exception):
                store.delete("pods", "wants-gpu", POD_NAMESPACE, grace_period_seconds=0)
        elif d.kind == "gpu-recut" and d.arg:
            self.fleet.restore(d.arg)
            self._restart_device_plugin(d.arg)
        elif d.kind in ("mig-config-failed", "mig-config-pending") and d.arg:
            value = self.fleet.node_config[d.arg]
            self.operator.processed(d.arg, value)
            store.patch("nodes", d.arg, {"metadata": {"labels": {MIG_CONFIG: value, MIG_CONFIG_STATE: "success"}}})
        elif d.kind == "mig-manager-wedged" and d.arg:
            # The stuck pod finally goes; the labels as a successful run would leave them (no GPU was touched).
            self.operator.stuck_terminating.discard(d.arg)
            value = self.fleet.node_config[d.arg]
            self.operator.processed(d.arg, value)
            labels: dict[str, str | None] = {MIG_CONFIG: value, MIG_CONFIG_STATE: "success"}
            node_labels = store.get("nodes", d.arg)["metadata"].get("labels") or {}
            labels.update({k: "true" for k in DEPLOY_LABELS if node_labels.get(k) == PAUSED})
            store.patch("nodes", d.arg, {"metadata": {"labels": labels}})
        elif d.kind == "node-missing" and d.arg:
            self.fleet.absent.discard(d.arg)
            self._create_node(self.operator, d.arg, with_dp_pod=False)
        elif d.kind == "undocumented-node":
            name = d.arg or UNDOCUMENTED_NODE
            store.delete("nodes", name)
            with contextlib.suppress(ApiError):
                store.delete("leases.coordination.k8s.io", name, "kube-node-lease")
            self.settle()
            self.fleet.nodes.pop(name, None)
        self.settle()

    def _inject_runtime(self, d: DriftCase) -> None:
        store = self.store
        if d.kind in BUILD_ONLY:
            raise ValueError(f"{d}: a build-time drift case (ClusterTwin(..., drift=[...]) or `migplan twin --drift`)")
        # A drift injected at run time is a person's hand edit: written as `kubectl patch` records it (kubectl's
        # default --field-manager), not as the `twin` that created the ClusterPolicy (ASSUMPTIONS-operator.md).
        if d.kind == "wrong-strategy":
            self._patch_cp(
                {"spec": {"mig": {"strategy": d.arg or _other(self.inventory_strategy)}}}, field_manager=HAND_MANAGER
            )
        elif d.kind == "stale-device-plugin-config":
            self.dp_config = (d.arg or STALE_DP_CONFIG, _other(self.inventory_strategy))
            self._create_dp_config()
            self._patch_cp(
                {"spec": {"devicePlugin": {"config": {"name": self.dp_config[0], "default": "default"}}}},
                field_manager=HAND_MANAGER,
            )
        elif d.kind == "dra-dynamic-mig" and d.arg:
            # NVIDIA's DRA driver in DynamicMIG mode starts on the node: its plugin destroys the MIG devices it did
            # not create (those in use stay: NVML refuses) and publishes counters and every profile x placement.
            self.settle()
            self.dra_driver(d.arg, dynamic_mig=True).start_plugin()
            self.gpus_changed(d.arg)
        elif d.kind == "pod-wants-gpu":
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "wants-gpu", "labels": {"app": "wants-gpu"}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/cuda:latest",
                            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            }
            # Pinned to a MIG node (the named one, else the first with a MIG-enabled GPU), where it cannot fit.
            target = d.arg or next(
                (n for n in sorted(self.fleet.nodes) if any(g.mig_current for g in self.fleet.nodes[n].gpus)), None
            )
            if target:
                pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": target}
            store.create("pods", pod, POD_NAMESPACE)
        elif d.kind == "gpu-recut" and d.arg:
            idx = int(d.extra or 0)
            # nvidia-smi would refuse to destroy instances in use: the pods on that GPU were stopped first.
            for key in self.operator.holders_on(d.arg, idx):
                ns, name = key.split("/", 1)
                store.delete("pods", name, ns, grace_period_seconds=0)
            self.settle()
            self.fleet.recut(d.arg, idx)
            self._restart_device_plugin(d.arg)
        elif d.kind in ("mig-config-failed", "mig-config-pending") and d.arg:
            if d.kind == "mig-config-failed":
                value = self._add_stale_config(d.arg)
                self._add_config_entry(value)
                self.operator.processed(d.arg, value)
                store.patch("nodes", d.arg, {"metadata": {"labels": {MIG_CONFIG: value, MIG_CONFIG_STATE: "failed"}}})
            else:
                store.patch("nodes", d.arg, {"metadata": {"labels": {MIG_CONFIG_STATE: "pending"}}})
        elif d.kind == "mig-manager-wedged" and d.arg:
            # A run of mig-manager whose wait for the device-plugin pod cannot end: a new config on the node, the
            # plugin pod stuck Terminating, and the 5-minute timeout (reconfigure.go waitForPodsToBeDeleted) run out.
            value = self._add_stale_config(d.arg)
            self._add_config_entry(value)
            self.settle()
            self.operator.projected(self.fleet.settings.mig_config_map)  # the config was there long before
            self.operator.stuck_terminating.add(d.arg)
            store.patch("nodes", d.arg, {"metadata": {"labels": {MIG_CONFIG: value}}})
            self.settle()
            self.operator.expire_client_waits(d.arg)
        elif d.kind == "node-missing" and d.arg:
            for key in [k for k, node in self.operator.pods_on(d.arg).items() if node]:
                ns, name = key.split("/", 1)
                store.delete("pods", name, ns, grace_period_seconds=0)
            store.delete("nodes", d.arg)
            with contextlib.suppress(ApiError):  # the garbage collector would remove the node's Lease
                store.delete("leases.coordination.k8s.io", d.arg, "kube-node-lease")
            self.fleet.absent.add(d.arg)
        elif d.kind == "undocumented-node":
            name = d.arg or UNDOCUMENTED_NODE
            self.fleet.add_node(name, undocumented_seeds())
            self.fleet.node_config[name] = "all-disabled"
            self._create_node(self.operator, name, with_dp_pod=False)
        self.settle()

    def _add_config_entry(self, name: str) -> None:
        """Add config `name` to the mig-parted ConfigMap as it is now (migplan may have rewritten it), if absent."""
        s = self.fleet.settings
        with contextlib.suppress(ApiError, yaml.YAMLError, AttributeError, TypeError):
            cm = self.store.get("configmaps", s.mig_config_map, s.namespace)
            doc = yaml.safe_load((cm.get("data") or {}).get("config.yaml") or "")
            configs = doc.setdefault("mig-configs", {})
            if name not in configs:
                configs[name] = self.fleet.configs[name]
                text = yaml.safe_dump(doc, sort_keys=False)
                self.store.patch("configmaps", s.mig_config_map, {"data": {"config.yaml": text}}, s.namespace)

    def _patch_cp(self, patch: dict[str, Any], *, field_manager: str | None = None) -> None:
        self.store.patch(
            "clusterpolicies.nvidia.com", self.fleet.settings.cluster_policy, patch, field_manager=field_manager
        )

    def _restart_device_plugin(self, node: str) -> None:
        """What an admin does after a hand-made MIG change: delete the node's device-plugin pod."""
        self.operator.restart_device_plugin(node)
        self.settle()
