"""A DRA-static node on the cluster twin, for the whole re-cut (issue 30): node `n` of a GPU Operator `GPUCluster`
cluster without DynamicMIG, NVIDIA's DRA driver installed by its chart (kubelet-plugin pod on `n`) and its plugin
started (slices published from the twin's NVML), GPU 0 whole as 7g.141gb, GPU 1 cut 3g/2g/1g/1g (re-cut by
GPU1_RECUT into 7 x 1g.18gb, which destroys the 2g.35gb).

One object drives every actor through the production adapters: `observe` (the node observer), `agent` (the node
agent's NVML pass), `cycle` (the controller's reconcile_once), and the scheduler/kubelet for a pod holding a MIG
device through a ResourceClaim (`claim_pod`). It records every write of a ClusterPolicy (`cluster_policy_writes`).
Later scenarios (a pod scheduled through a rendered DeviceClass) build on `DraStaticTwin`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from helpers.draintwin import GPU0, GPU1_CUT, GPU1_RECUT, NODE, write_inventory
from reconciler.adapters.kube.agentmode import KubeNodeState
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.agent import actuate_once
from reconciler.commands.reconcile import load_desired
from reconciler.controller.loop import kube_configuration
from reconciler.engine import CycleResult, reconcile_once
from reconciler.logic.planning.agentplan import MigState
from reconciler.model.inventory import DesiredState
from reconciler.observer import publish_pass
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.dra import DRIVER_NAMESPACE, canonical_profile

__all__ = ["GPU0", "GPU1_CUT", "GPU1_RECUT", "NODE", "T0", "DraStaticTwin", "dra_static_twin"]

# The node agent dates its observations with the real clock (actuate_once takes none), so the scenario's cycles run
# from now: an observation "from the future" or older than the silence limit would not be used (MP543).
T0 = datetime.now(UTC).replace(microsecond=0)
PLUGIN_SELECTOR = "dra-driver-nvidia-gpu-component=kubelet-plugin"


@dataclass
class DraStaticTwin:
    twin: ClusterTwin
    root: Path
    cluster_policy_writes: list[str] = field(default_factory=list)

    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(client.ApiClient(kube_configuration(str(self.twin.kubeconfig))))

    def desired(self, name: str, gpus: list[dict[str, Any]], *, allow_disruption: bool = False) -> DesiredState:
        root = write_inventory(self.root / name, gpus)
        doc = yaml.safe_load((root / "cluster.yaml").read_text())
        doc["spec"]["apply"]["allowDisruption"] = allow_disruption
        (root / "cluster.yaml").write_text(yaml.safe_dump(doc))
        desired, diagnostics = load_desired(root)
        assert desired is not None, [str(d) for d in diagnostics]
        return desired

    def observe(self) -> None:
        """One pass of the node observer (NVML + the kubelet's PodResources, DRA allocations included)."""
        publish_pass(
            open_gpus=lambda: NvmlGpu(nvml=self.twin.nvml(NODE)),
            holders=KubeletPodResources(str(self.twin.pod_resources_socket(NODE)), timeout_seconds=5),
            node_state=KubeNodeState(self.core(), heartbeat_seconds=300),
            node=NODE,
            clock=lambda: T0,
        )

    def agent(self) -> MigState | None:
        """One pass of the node agent: builds the published layout through NVML."""
        with NvmlGpu(nvml=self.twin.nvml(NODE)) as gpus:
            result = actuate_once(
                gpus=gpus,
                node_state=KubeNodeState(self.core()),
                node=NODE,
                holders=KubeletPodResources(str(self.twin.pod_resources_socket(NODE)), timeout_seconds=5),
            )
        self.twin.settle()
        return result.state

    def cycle(self, desired: DesiredState, minutes: float) -> CycleResult:
        cluster = KubeCluster.from_kubeconfig(str(self.twin.kubeconfig))
        try:
            return reconcile_once(desired=desired, cluster=cluster, now=T0 + timedelta(minutes=minutes))
        finally:
            cluster.close()

    def claim_pod(self, pod: str, profile: str) -> list[str]:
        """A pod on `n` holding a `profile` MIG device through ResourceClaim `<pod>-gpu` (class mig.nvidia.com,
        a CEL selector on the profile), allocated, prepared and listed by the twin's scheduler and kubelet."""
        store = self.twin.store
        expression = f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
        store.create(
            "resourceclaims.resource.k8s.io",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"{pod}-gpu"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "mig.nvidia.com",
                                    "selectors": [{"cel": {"expression": expression}}],
                                },
                            }
                        ]
                    }
                },
            },
            "default",
        )
        store.create(
            "pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod,
                    "labels": {"app": "emb"},
                    # a ReplicaSet's pod: a drain may evict it (kubectl drain refuses bare pods)
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": "emb-5d",
                            "uid": "rs-1",
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeName": NODE,
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{pod}-gpu"}],
                    "containers": [
                        {"name": "main", "image": "registry.example/emb:1", "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                },
            },
            "default",
        )
        return self.twin.run_claim_pod(NODE, "default", pod, f"{pod}-gpu")

    def end_claim_pod(self, pod: str) -> None:
        """The pod is deleted and gone (the kubelet frees its device), and the resourceclaim controller takes it out
        of its claim's status.reservedFor and deallocates the claim, as it does for a claim nobody reserves."""
        self.core().delete_namespaced_pod(pod, "default", grace_period_seconds=0)
        for gpu in self.twin.gpus(NODE):
            for _, ci in gpu.iter_cis():
                if ci.holder == f"default/{pod}":
                    ci.holder = None
        self.twin.store.patch(
            "resourceclaims.resource.k8s.io",
            f"{pod}-gpu",
            {"status": {"reservedFor": None, "allocation": None}},
            "default",
            subresource="status",
        )
        self.twin.settle()

    def plugin_pods(self) -> list[dict[str, Any]]:
        return list(self.twin.store.list("pods", DRIVER_NAMESPACE, label_selector=PLUGIN_SELECTOR))

    def published(self) -> list[str]:
        """The device names the node's ResourceSlices publish now."""
        slices = self.twin.store.list("resourceslices.resource.k8s.io", field_selector=f"spec.nodeName={NODE}")
        return sorted(d["name"] for s in slices for d in s["spec"].get("devices") or ())

    def nvml_devices(self) -> list[str]:
        """NVIDIA's DRA driver's names of the MIG devices NVML shows on the node now."""
        return sorted(
            f"gpu-{g.minor}-mig-{canonical_profile(gi.profile.name)}-{gi.profile.id}-{gi.start}"
            for g in self.twin.gpus(NODE)
            for gi in g.gpu_instances.values()
        )


@contextmanager
def dra_static_twin(root: Path) -> Iterator[DraStaticTwin]:
    """The twin described in the module docstring, running; ClusterPolicy writes recorded from the start."""
    with ClusterTwin.from_inventory(write_inventory(root / "before", [GPU0, GPU1_CUT]), tls=False) as twin:
        twin.settle()
        twin.install_gpu_cluster(dynamic_mig=False)
        twin.install_dra_driver_chart([NODE], None)
        twin.dra_driver(NODE).start_plugin()
        scenario = DraStaticTwin(twin, root)
        twin.store.subscribe(
            lambda event, obj: scenario.cluster_policy_writes.append(f"{event} {obj['metadata']['name']}"),
            kinds=("ClusterPolicy",),
        )
        twin.settle()
        yield scenario
