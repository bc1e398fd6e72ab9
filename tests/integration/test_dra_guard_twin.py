"""A pod holding a MIG partition through a DRA ResourceClaim, end to end on the cluster twin (issue 27 item 1).

Node `n`: GPU 1 cut 3g/2g/1g/1g, re-cut by the merge into 7 x 1g.18gb, which destroys the 2g.35gb. Pod emb-0
asks for no extended resource: it holds the 2g.35gb through ResourceClaim emb-0-gpu, which the twin's kubelet
lists in PodResources `dynamic_resources` under NVIDIA's DRA device name. The node observer (production NVML,
PodResources and Kubernetes adapters) publishes it as the partition's holder; the controller's disruption guard
then holds the re-cut, and with allowDisruption drains that pod first (cordon, eviction). Without the claim the
same pod holds nothing, and the re-cut goes ahead: the holder comes from the claim, not from the pod's requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.draintwin import GPU0, GPU1_CUT, GPU1_RECUT, NODE, write_inventory
from kubernetes import client

from reconciler.adapters.kube.agentmode import KubeNodeState
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.commands.reconcile import load_desired
from reconciler.controller.loop import kube_configuration
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Kind
from reconciler.observer import publish_pass
from reconciler.twin.cluster import ClusterTwin

T0 = datetime(2026, 12, 2, 10, tzinfo=UTC)
CLAIM = "emb-0-gpu"


def _claim_pod(twin: ClusterTwin, name: str) -> None:
    """A ReplicaSet's pod on node n that uses ResourceClaim `<name>-gpu` and requests no extended resource."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "emb-5d", "uid": "rs-1", "controller": True}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "emb"}, "ownerReferences": [owner]},
        "spec": {
            "nodeName": NODE,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
            "containers": [
                {"name": "main", "image": "registry.example/emb:1", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }
    twin.store.create("pods", pod, "default")


def _device_of_2g(twin: ClusterTwin) -> str:
    """NVIDIA's DRA driver's name for GPU 1's 2g.35gb, from the twin's own GPU (minor, GI profile id, start)."""
    gpu = twin.gpus(NODE)[1]
    (gi,) = [g for g in gpu.gpu_instances.values() if g.profile.name == "2g.35gb"]
    return f"gpu-{gpu.minor}-mig-2g35gb-{gi.profile.id}-{gi.start}"


def _inventory(root: Path, gpus: list[dict[str, Any]], *, allow_disruption: bool) -> Path:
    write_inventory(root, gpus)
    doc = yaml.safe_load((root / "cluster.yaml").read_text())
    doc["spec"]["apply"]["allowDisruption"] = allow_disruption
    (root / "cluster.yaml").write_text(yaml.safe_dump(doc))
    return root


def _desired(root: Path) -> DesiredState:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(
        _inventory(tmp_path / "before", [GPU0, GPU1_CUT], allow_disruption=False), tls=False
    ) as tw:
        tw.settle()
        _claim_pod(tw, "emb-0")
        tw.settle()
        assert tw.store.get("pods", "emb-0", "default")["status"]["phase"] == "Running"
        yield tw


def _observe(twin: ClusterTwin) -> None:
    core = client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))
    publish_pass(
        open_gpus=lambda: NvmlGpu(nvml=twin.nvml(NODE)),
        holders=KubeletPodResources(str(twin.pod_resources_socket(NODE)), timeout_seconds=5),
        node_state=KubeNodeState(core, heartbeat_seconds=300),
        node=NODE,
        clock=lambda: T0,
    )


def _cycle(twin: ClusterTwin, desired: DesiredState) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=T0 + timedelta(minutes=1))
    finally:
        cluster.close()


def _relabel(result: CycleResult) -> Any:
    assert result.plan is not None
    (change,) = [c for c in result.plan.changes if c.kind is Kind.NODE_MIG_CONFIG]
    return change


def test_the_guard_holds_a_recut_of_a_partition_held_through_a_claim(twin: ClusterTwin, tmp_path: Path) -> None:
    twin.hold_through_claim(NODE, "default", "emb-0", CLAIM, _device_of_2g(twin))
    _observe(twin)
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], allow_disruption=False))
    result = _cycle(twin, desired)
    held = _relabel(result)
    assert held.action is Action.SKIP and held.blocked_by == ("default/emb-0",), held
    assert "disruption guard" in held.reason
    assert not [c for c in result.applied if c.subject == f"node/{NODE}"]  # nothing written to the node
    assert twin.store.get("pods", "emb-0", "default")["status"]["phase"] == "Running"


def test_with_allow_disruption_the_claims_pod_is_drained_first(twin: ClusterTwin, tmp_path: Path) -> None:
    twin.hold_through_claim(NODE, "default", "emb-0", CLAIM, _device_of_2g(twin))
    _observe(twin)
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], allow_disruption=True))
    first = _cycle(twin, desired)
    assert not first.errors
    node_changes = [(c.kind, c.subject) for c in first.applied if c.kind in (Kind.CORDON, Kind.EVICT)]
    assert node_changes == [(Kind.CORDON, f"node/{NODE}"), (Kind.EVICT, "pod/default/emb-0")]
    held = _relabel(first)
    assert held.action is Action.SKIP and held.blocked_by == ("default/emb-0",)  # the relabel waits
    left = {p["metadata"]["name"]: p for p in twin.store.list("pods", "default")}
    assert "emb-0" not in left or left["emb-0"]["metadata"].get("deletionTimestamp")


def test_without_the_claim_the_same_pod_holds_nothing_and_the_recut_goes(twin: ClusterTwin, tmp_path: Path) -> None:
    _observe(twin)
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], allow_disruption=False))
    change = _relabel(_cycle(twin, desired))
    assert change.action is not Action.SKIP and not change.blocked_by, change


def _allocate(twin: ClusterTwin, claim: str, device: str, pod: str, *, pool: str = NODE) -> None:
    """ResourceClaim `claim` allocated `device` of NVIDIA's driver and reserved for `pod`, as the scheduler writes
    them (status subresource)."""
    twin.store.create(
        "resourceclaims.resource.k8s.io",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": claim},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}},
        },
        "default",
    )
    status = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}]}
        },
        "reservedFor": [{"resource": "pods", "name": pod, "uid": "00000000-0000-0000-0000-000000000001"}],
    }
    twin.store.patch("resourceclaims.resource.k8s.io", claim, {"status": status}, "default", subresource="status")


def test_without_an_observer_the_claim_alone_holds_the_recut(twin: ClusterTwin, tmp_path: Path) -> None:
    _allocate(twin, CLAIM, _device_of_2g(twin), "emb-0")  # no observer on the node: no annotation at all
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], allow_disruption=False))
    held = _relabel(_cycle(twin, desired))
    assert held.action is Action.SKIP and held.blocked_by == ("default/emb-0",), held


def test_a_claim_on_another_gpu_does_not_hold_the_recut(twin: ClusterTwin, tmp_path: Path) -> None:
    gpu0 = twin.gpus(NODE)[0]
    (gi,) = gpu0.gpu_instances.values()
    _allocate(twin, CLAIM, f"gpu-{gpu0.minor}-mig-7g141gb-{gi.profile.id}-{gi.start}", "emb-0")
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], allow_disruption=False))
    change = _relabel(_cycle(twin, desired))
    assert change.action is not Action.SKIP, change


def test_a_claim_on_a_node_the_cluster_does_not_list_is_named_and_changes_nothing(
    twin: ClusterTwin, tmp_path: Path
) -> None:
    _allocate(twin, CLAIM, "gpu-0-mig-1g18gb-19-0", "emb-0", pool="gpu-elsewhere")
    desired = _desired(_inventory(tmp_path / "same", [GPU0, GPU1_CUT], allow_disruption=False))
    result = _cycle(twin, desired)
    assert not result.errors and result.report is not None
    (named,) = [f for f in result.report.findings if f.code == "MP571"]
    assert named.node == "gpu-elsewhere" and "default/emb-0-gpu" in named.message


def test_a_claim_the_twins_scheduler_allocated_holds_the_recut_through_the_observer(
    twin: ClusterTwin, tmp_path: Path
) -> None:
    """The whole DRA path: the driver publishes, the scheduler allocates the claim with a CEL selector, the
    kubelet lists it, the observer publishes the holder and the guard holds the re-cut."""
    twin.dra_driver(NODE).start_plugin()
    twin.store.create(
        "resourceclaims.resource.k8s.io",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": CLAIM},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "mig.nvidia.com",
                                "selectors": [
                                    {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '2g.35gb'"}}
                                ],
                            },
                        }
                    ]
                }
            },
        },
        "default",
    )
    assert twin.run_claim_pod(NODE, "default", "emb-0", CLAIM) == [_device_of_2g(twin)]
    _observe(twin)
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], allow_disruption=False))
    result = _cycle(twin, desired)
    assert result.plan is not None
    # The driver publishes static MIG devices: a DRA-static node, laid out through migplan's agent (issue 30), so
    # the publication of its layout is what the guard holds.
    (held,) = [c for c in result.plan.changes if c.kind is Kind.AGENT_LAYOUT]
    assert held.action is Action.SKIP and held.blocked_by == ("default/emb-0",), held
