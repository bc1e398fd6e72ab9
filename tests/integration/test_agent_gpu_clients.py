"""apply.mode: agent — after the agent re-cuts a GPU, the node's device plugin advertises the new partitions.

The agent pauses the GPU Operator's GPU clients around its NVML changes as mig-manager does
(reconfigure.go shutdownKubernetesGPUClients / waitForPodsToBeDeleted / restartKubernetesGPUClients,
reconciler/adapters/kube/gpuclients.py). On the twin the device plugin enumerates the GPUs when its pod starts
(like the real one), so without the dance the node keeps advertising the old partitions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from helpers.agentmode import publish
from kubernetes import client

from reconciler.adapters.kube.agentmode import KubeNodeState
from reconciler.adapters.kube.gpuclients import PAUSE_RECORD, KubeGpuClients, decode_record
from reconciler.adapters.nvml import NvmlGpu
from reconciler.agent import actuate_once
from reconciler.catalog import load_catalog
from reconciler.controller.loop import kube_configuration
from reconciler.logic.inventory import placement as placements
from reconciler.logic.planning.agentplan import DesiredGpu, DesiredNode, DesiredPartition, MigState
from reconciler.model.errors import MigplanError
from reconciler.model.observed import GPU_CLIENT_DEPLOY_LABELS, PAUSED_FOR_MIG_CHANGE
from reconciler.resources import inventory_dir
from reconciler.twin.cluster import ClusterTwin

CATALOG = load_catalog()
NODE = "gpu-h200-02"  # no pod holds a partition there
NS = "gpu-operator"
DS = "nvidia-device-plugin-daemonset"
ONES = "nvidia.com/mig-1g.18gb"


@pytest.fixture
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(inventory_dir()) as t:
        t.settle()
        yield t
        assert t.operator.errors == []


def core_api(twin: ClusterTwin) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))


def clients(core: client.CoreV1Api, wait: float = 10.0) -> KubeGpuClients:
    return KubeGpuClients(core, namespace=NS, device_plugin_daemonset=DS, wait_seconds=wait, poll_seconds=0.02)


def all_ones(twin: ClusterTwin) -> DesiredNode:
    """GPU 0 of the node cut into 1g.18gb only (a re-cut of what the inventory gave it)."""
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:
        gpu0 = gpus.observe()[0]
    model = CATALOG.resolve(gpu0.name)
    assert model is not None
    ones = placements.solve(model, [placements.Request("1g.18gb")] * 7)
    assert ones is not None
    return DesiredNode(
        NODE, "test@sha1:" + "3" * 40, (DesiredGpu(0, True, tuple(DesiredPartition("1g.18gb", p) for p in ones)),)
    )


def advertised(twin: ClusterTwin, resource: str) -> int:
    return int(twin.store.get("nodes", NODE)["status"]["allocatable"].get(resource, "0"))


def dp_pod_uids(twin: ClusterTwin) -> list[str]:
    return [
        p["metadata"]["uid"]
        for p in twin.store.list("pods", NS)
        if p["spec"].get("nodeName") == NODE and (p["metadata"].get("labels") or {}).get("app") == DS
    ]


def node_meta(twin: ClusterTwin) -> tuple[dict[str, str], dict[str, str]]:
    meta = twin.store.get("nodes", NODE)["metadata"]
    return dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})


def test_after_an_agent_recut_the_node_advertises_the_new_partitions(twin: ClusterTwin) -> None:
    core = core_api(twin)
    before_ones, before_pods = advertised(twin, ONES), dp_pod_uids(twin)
    labels_before = {k: v for k, v in node_meta(twin)[0].items() if k in GPU_CLIENT_DEPLOY_LABELS}
    publish(core, all_ones(twin))
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:
        outcome = actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=NODE, clients=clients(core))
    assert outcome.state is MigState.SUCCESS, outcome.reason
    assert outcome.executed
    twin.settle()
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:
        held = [i.profile for g in gpus.observe() for i in g.instances]
    # The node now advertises what its GPUs hold: GPU 0's seven 1g.18gb and the untouched GPU 1's.
    assert advertised(twin, ONES) == held.count("1g.18gb") > before_ones
    after_pods = dp_pod_uids(twin)
    assert len(after_pods) == 1 and after_pods != before_pods  # a new device-plugin pod enumerated the GPUs
    labels, annotations = node_meta(twin)
    # restored as mig-manager restores them: maybeSetTrue of the value read before, so the absent nvsm label
    # becomes "true" too (reconfigure.go restartKubernetesGPUClients; the twin's mig-manager does the same)
    assert "nvidia.com/gpu.deploy.nvsm" not in labels_before
    restored = {**labels_before, "nvidia.com/gpu.deploy.nvsm": "true"}
    assert {k: v for k, v in labels.items() if k in GPU_CLIENT_DEPLOY_LABELS} == restored
    assert PAUSE_RECORD not in annotations


def test_without_the_dance_the_running_plugin_keeps_the_old_partitions(twin: ClusterTwin) -> None:
    core = core_api(twin)
    before_ones, before_pods = advertised(twin, ONES), dp_pod_uids(twin)
    publish(core, all_ones(twin))
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:
        outcome = actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=NODE)
    assert outcome.state is MigState.SUCCESS, outcome.reason
    twin.settle()
    assert dp_pod_uids(twin) == before_pods
    assert advertised(twin, ONES) == before_ones  # what this test file exists to prevent


def test_a_client_pod_that_does_not_leave_changes_nothing_and_restores_the_clients(twin: ClusterTwin) -> None:
    core = core_api(twin)
    twin.operator.stuck_terminating.add(NODE)  # the device-plugin container cannot be killed
    labels_before = {k: v for k, v in node_meta(twin)[0].items() if k in GPU_CLIENT_DEPLOY_LABELS}
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:
        gpus_before = gpus.observe()
    publish(core, all_ones(twin))
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:
        outcome = actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=NODE, clients=clients(core, 0.3))
        gpus_after = gpus.observe()
    assert outcome.state is MigState.PENDING
    assert "MP912" in outcome.reason and "nvidia-device-plugin-daemonset" in outcome.reason
    assert outcome.executed == () and gpus_after == gpus_before
    labels, annotations = node_meta(twin)
    restored = {**labels_before, "nvidia.com/gpu.deploy.nvsm": "true"}  # maybeSetTrue("") as above
    assert {k: v for k, v in labels.items() if k in GPU_CLIENT_DEPLOY_LABELS} == restored  # never wedged
    assert PAUSE_RECORD not in annotations


def test_a_pass_that_died_paused_is_undone_by_the_next(twin: ClusterTwin) -> None:
    core = core_api(twin)
    labels_before = {k: v for k, v in node_meta(twin)[0].items() if k in GPU_CLIENT_DEPLOY_LABELS}
    clients(core).pause(NODE)  # ... and the agent was killed here
    twin.settle()
    labels, annotations = node_meta(twin)
    assert PAUSED_FOR_MIG_CHANGE in labels.values() and PAUSE_RECORD in annotations
    assert not dp_pod_uids(twin)
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:  # no desired layout published: nothing else to do
        actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=NODE, clients=clients(core))
    twin.settle()
    labels, annotations = node_meta(twin)
    restored = {**labels_before, "nvidia.com/gpu.deploy.nvsm": "true"}  # maybeSetTrue("") as above
    assert {k: v for k, v in labels.items() if k in GPU_CLIENT_DEPLOY_LABELS} == restored
    assert PAUSE_RECORD not in annotations and len(dp_pod_uids(twin)) == 1


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"nvidia.com/gpu.deploy.device-plugin": 1}',
        '{"kubernetes.io/hostname": "x"}',
        '{"nvidia.com/gpu.deploy.device-plugin": "' + "x" * 100 + '"}',
        "{" * 5000,
        "NaN",
        json.dumps({"nvidia.com/gpu.deploy.dcgm": None}),
    ],
)
def test_a_hostile_pause_record_is_refused(text: str) -> None:
    with pytest.raises(MigplanError) as err:
        decode_record(text)
    assert err.value.code == "MP913"
