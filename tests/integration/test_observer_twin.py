"""The node observer against the twin, for every node of the example fleet, through the real adapters.

Each node: the NVML adapter over the node's NVML twin, the PodResources client over the node's twin kubelet
(a real gRPC server on a unix socket), the Kubernetes adapter over the API server twin. The published
annotation is read back from the API and compared with the twin's own truth — the GPUs' instances and which
pod each MIG device's compute instance is held by (TwinGpu state, not the kubelet's answer) — including a pod
holding a partition the plan gives someone else (foreign-holder) and a GPU whose placements the driver chose
(driver-placed). Also: a pod admitted at run time, a kubelet naming a device NVML does not know, and the size
of the annotation for an 8-GPU node with 56 partitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from reconciler.adapters.kube.agentmode import OBSERVED, KubeNodeState
from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.catalog import load_catalog
from reconciler.commands.reconcile import load_desired
from reconciler.controller.loop import kube_configuration
from reconciler.kubeletapi.podresources.v1 import api_pb2
from reconciler.logic.codecs import observedcodec
from reconciler.logic.planning.agentplan import desired_from_node_spec
from reconciler.model.nodeobservation import SOURCE_OK, Holder, NodeObservation
from reconciler.observer import publish_pass
from reconciler.resources import inventory_dir
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.fleet import ClusterSettings, Fleet, GpuSeed, PartitionSeed

CATALOG = load_catalog()
FOREIGN = ("gpu-h200-01", 1)
DRIVER = ("gpu-h200-01", 0)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterTwin]:
    drift = [f"foreign-holder:{FOREIGN[0]}:{FOREIGN[1]}", f"driver-placed:{DRIVER[0]}:{DRIVER[1]}"]
    with ClusterTwin.from_inventory(inventory_dir(), drift=drift) as twin:
        twin.settle()
        yield twin


def core_api(twin: ClusterTwin) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))


def observe_node(twin: ClusterTwin, node: str, *, heartbeat: float = 300.0) -> tuple[NodeObservation, str]:
    """One observer pass through the production adapters; the annotation as the API now holds it."""
    core = core_api(twin)
    publish_pass(
        open_gpus=lambda: NvmlGpu(nvml=twin.nvml(node)),
        holders=KubeletPodResources(str(twin.pod_resources_socket(node)), timeout_seconds=5),
        node_state=KubeNodeState(core, heartbeat_seconds=heartbeat),
        node=node,
    )
    text = core.read_node(node).metadata.annotations[OBSERVED]
    return observedcodec.decode(text), text


def twin_truth(twin: ClusterTwin, node: str) -> dict[int, dict[tuple[int, int], tuple[str, int, str, set[Holder]]]]:
    """gpu -> (start, size) -> (profile, GPU-instance id, MIG UUID, holders), from the twin's GPUs and pods."""
    out: dict[int, dict[tuple[int, int], tuple[str, int, str, set[Holder]]]] = {}
    for gpu in twin.gpus(node):
        per: dict[tuple[int, int], tuple[str, int, str, set[Holder]]] = {}
        for gi in gpu.gpu_instances.values():
            ci = gi.compute_instances[min(gi.compute_instances)]
            holders: set[Holder] = set()
            if ci.holder:
                ns, name = ci.holder.split("/", 1)
                pod = twin.store.get("pods", name, ns)
                for c in pod["spec"]["containers"]:
                    for res in (c.get("resources") or {}).get("limits") or {}:
                        if res.startswith("nvidia.com/"):
                            holders.add(Holder(ns, name, c["name"], res))
            per[(gi.start, gi.size)] = (gi.profile.name, gi.id, ci.uuid, holders)
        out[gpu.index] = per
    return out


def as_observed(obs: NodeObservation) -> dict[int, dict[tuple[int, int], tuple[str, int, str, set[Holder]]]]:
    return {
        g.index: {
            (i.placement.start, i.placement.size): (i.profile, i.gpu_instance_id, i.uuid or "", set(i.holders))
            for i in g.instances
        }
        for g in obs.gpus
    }


def plan_placements(node: str) -> dict[int, dict[tuple[int, int], str]]:
    desired, _ = load_desired(inventory_dir())
    assert desired is not None
    layout, problems = desired_from_node_spec(desired.nodes[node], revision="r", catalog=CATALOG)
    assert problems == ()
    return {g.index: {(p.placement.start, p.placement.size): p.profile for p in g.partitions} for g in layout.gpus}


def plan_owner(node: str, gpu: int, profile: str) -> list[str]:
    desired, _ = load_desired(inventory_dir())
    assert desired is not None
    return [p.owner or "" for p in desired.nodes[node].gpus[gpu].partitions if p.profile == profile]


def test_every_node_publishes_exactly_the_twins_layout_and_holders(cluster: ClusterTwin) -> None:
    held = 0
    for node in sorted(cluster.fleet.nodes):
        obs, text = observe_node(cluster, node)
        assert obs.version == "v2" and obs.observer.startswith("migplan/")
        assert obs.sources == {"nvml": SOURCE_OK, "podResources": SOURCE_OK}, (node, obs.sources)
        assert obs.holders_known and not obs.truncated and obs.unknown_devices == ()
        truth = twin_truth(cluster, node)
        assert as_observed(obs) == truth, node
        assert [g.uuid for g in obs.gpus] == [g.uuid for g in cluster.gpus(node)]
        assert all(g.holders == () for g in obs.gpus)  # nobody holds a whole GPU in the example fleet
        held += sum(1 for g in truth.values() for v in g.values() if v[3])
        # the twin's allocations agree on the UUID each pod holds
        for pod, devices in cluster.allocations().items():
            for d in devices:
                if d["node"] == node and "gi" in d:
                    _, _, uuid, holders = truth[d["gpu"]][d["placement"]]
                    assert uuid == d["uuid"] and {h.pod_key for h in holders} == {pod}
        assert len(text) < observedcodec.MAX_OBSERVED_BYTES
    assert held == len(cluster.fleet.pods) == 9  # every owned partition of the example fleet, observed held


def test_a_pod_holding_a_partition_planned_for_another_owner_is_named(cluster: ClusterTwin) -> None:
    node, gpu = FOREIGN
    obs, _ = observe_node(cluster, node)
    plan = plan_placements(node)[gpu]
    observed = {(i.placement.start, i.placement.size): i for i in obs.gpus[gpu].instances}
    borrowed = [i for i in observed.values() for h in i.holders if "-borrowed-" in h.pod]
    assert len(borrowed) == 1
    inst = borrowed[0]
    holder = inst.holders[0]
    pod = cluster.store.get("pods", holder.pod, holder.namespace)
    app = pod["metadata"]["labels"]["app"]
    # the partition at that placement is planned for someone else than the pod's owner
    assert plan[(inst.placement.start, inst.placement.size)] == inst.profile
    assert app not in plan_owner(node, gpu, inst.profile)
    assert app in {p.owner for p in cluster.fleet.pods}  # another owner of the fleet, not a made-up one


def test_a_gpu_whose_driver_chose_the_placements_shows_them(cluster: ClusterTwin) -> None:
    node, gpu = DRIVER
    obs, _ = observe_node(cluster, node)
    real = {(i.placement.start, i.placement.size): i.profile for i in obs.gpus[gpu].instances}
    plan = plan_placements(node)[gpu]
    assert sorted(real.values()) == sorted(plan.values())  # the same profile counts: mig-parted's assert passes
    assert real != plan  # but not the same placements
    assert real == {k: v[0] for k, v in twin_truth(cluster, node)[gpu].items()}
    # the pods still hold their profile's instances, at the driver's placements
    owners = {h.pod.split("-gpu-")[0] for i in obs.gpus[gpu].instances for h in i.holders}
    assert owners == {o for o in plan_owner(node, gpu, "3g.71gb") + plan_owner(node, gpu, "2g.35gb") if o} | {
        o for o in plan_owner(node, gpu, "1g.18gb") if o
    }


def test_a_pod_admitted_at_run_time_is_observed_on_its_device_with_its_container(cluster: ClusterTwin) -> None:
    node = "gpu-h200-02"  # no owned partition: every 1g.18gb is free
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "notebook-1", "namespace": "default", "labels": {"app": "notebooks"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {"name": "proxy", "image": "registry.example/proxy"},
                {
                    "name": "jupyter",
                    "image": "registry.example/jupyter",
                    "resources": {"limits": {"nvidia.com/mig-1g.18gb": "1"}},
                },
            ],
        },
    }
    cluster.store.create("pods", pod, "default")
    try:
        cluster.settle()
        obs, _ = observe_node(cluster, node)
        holders = [(i.placement, h) for g in obs.gpus for i in g.instances for h in i.holders]
        assert [h for _, h in holders] == [Holder("default", "notebook-1", "jupyter", "nvidia.com/mig-1g.18gb")]
        assert as_observed(obs) == twin_truth(cluster, node)
    finally:
        cluster.store.delete("pods", "notebook-1", "default", grace_period_seconds=0)
        cluster.settle()
    obs, _ = observe_node(cluster, node)
    assert not any(i.holders for g in obs.gpus for i in g.instances)  # released: the holder is gone


def test_a_device_the_kubelet_names_that_nvml_does_not_know_is_reported(cluster: ClusterTwin) -> None:
    node = "gpu-a100-01"
    kubelet = cluster.kubelet(node)
    stale = "MIG-00000000-dead-beef-0000-000000000000"
    reply = api_pb2.ListPodResourcesResponse(
        pod_resources=[
            api_pb2.PodResources(
                name="ghost",
                namespace="team-x",
                containers=[
                    api_pb2.ContainerResources(
                        name="main",
                        devices=[api_pb2.ContainerDevices(resource_name="nvidia.com/mig-1g.5gb", device_ids=[stale])],
                    )
                ],
            )
        ]
    )
    kubelet.answer = reply.SerializeToString()
    try:
        obs, _ = observe_node(cluster, node)
    finally:
        kubelet.answer = None
    assert [(u.holder.pod_key, u.device_id) for u in obs.unknown_devices] == [("team-x/ghost", stale)]
    assert obs.sources["podResources"] == SOURCE_OK
    assert as_observed(obs) == {
        g: {k: (*v[:3], set()) for k, v in per.items()} for g, per in twin_truth(cluster, node).items()
    }


def test_unchanged_node_is_not_rewritten_until_the_heartbeat(cluster: ClusterTwin) -> None:
    node = "gpu-h100-01"
    _, text = observe_node(cluster, node)
    cluster.reset_counts()
    _, same = observe_node(cluster, node, heartbeat=300)
    patches = {k: v for k, v in cluster.request_counts().items() if k[0] == "PATCH"}
    assert same == text and patches == {}, patches  # nothing changed, heartbeat not due: no write
    _, fresh = observe_node(cluster, node, heartbeat=1e-9)  # heartbeat due: the time is refreshed
    assert observedcodec.decode(fresh).observed_at is not None
    assert any(k[0] == "PATCH" for k in cluster.request_counts())


def test_size_of_an_eight_gpu_node_with_56_partitions() -> None:
    """The annotation for 8 x H200 cut into 7 x 1g.18gb, every partition held by its own pod."""
    model = CATALOG.get("H200-141GB")
    assert model is not None
    fleet = Fleet(ClusterSettings(name="size", mig_strategy="mixed"))
    seeds = [
        GpuSeed(i, model, True, tuple(PartitionSeed("1g.18gb", None, f"inference-team-{i}-{k}") for k in range(7)))
        for i in range(8)
    ]
    fleet.add_node("gpu-h200-big-01", seeds)
    with ClusterTwin(fleet) as twin:
        twin.settle()
        obs, text = observe_node(twin, "gpu-h200-big-01")
        assert as_observed(obs) == twin_truth(twin, "gpu-h200-big-01")
    assert sum(len(g.instances) for g in obs.gpus) == 56
    assert sum(1 for g in obs.gpus for i in g.instances if len(i.holders) == 1) == 56
    assert not obs.truncated and obs.holders_known
    print(f"\nannotation size, 8 GPUs x 7 partitions, 56 holders: {len(text)} bytes")
    assert len(text) < observedcodec.MAX_OBSERVED_BYTES // 2


def test_every_compute_instance_of_a_gpu_instance_is_joined() -> None:
    """A 3g GPU instance cut into three 1-slice compute instances: three MIG devices, three UUIDs; a pod
    holding the second or third is a holder of that GPU instance, not an unknown device."""
    import pynvml

    model = CATALOG.get("H200-141GB")
    assert model is not None
    fleet = Fleet(ClusterSettings(name="ci", mig_strategy="single"))
    fleet.add_node("gpu-ci-01", [GpuSeed(0, model, True, ())])
    with ClusterTwin(fleet) as twin:
        twin.settle()
        gpu = twin.gpus("gpu-ci-01")[0]
        prof = gpu.profile_by_name("3g.71gb")
        assert prof is not None
        with twin.fleet.nodes["gpu-ci-01"].lock:
            gi = gpu.create_gpu_instance(prof.id)
            cis = [gpu.create_compute_instance(gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE) for _ in range(3)]
        kubelet = twin.kubelet("gpu-ci-01")
        kubelet.answer = api_pb2.ListPodResourcesResponse(
            pod_resources=[
                api_pb2.PodResources(
                    name=f"worker-{k}",
                    namespace="batch",
                    containers=[
                        api_pb2.ContainerResources(
                            name="main",
                            devices=[api_pb2.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[ci.uuid])],
                        )
                    ],
                )
                for k, ci in enumerate(cis)
            ]
        ).SerializeToString()
        obs, text = observe_node(twin, "gpu-ci-01")
    (inst,) = obs.gpus[0].instances
    assert inst.uuid == cis[0].uuid and inst.compute_uuids == tuple(ci.uuid for ci in cis)
    assert [h.pod for h in inst.holders] == ["worker-0", "worker-1", "worker-2"]
    assert obs.unknown_devices == ()
    assert '"computeUuids"' in text and observedcodec.decode(text) == obs
