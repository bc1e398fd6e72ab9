"""ClusterTwin as the tests, the demo and the benchmarks use it: built from the example inventory, reached with the
official kubernetes client, with drift injected at build time and at run time (and healed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest
from kubernetes import client, config

from reconciler.twin.cluster import ClusterTwin

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventory"
NS = "gpu-operator"


def gpu_alloc(twin: ClusterTwin, node: str) -> dict[str, str]:
    alloc = twin.store.get("nodes", node)["status"]["allocatable"]
    return {k: v for k, v in alloc.items() if k.startswith("nvidia.com/") and v != "0"}


def node_labels(twin: ClusterTwin, node: str) -> dict[str, str]:
    return dict(twin.store.get("nodes", node)["metadata"]["labels"])


@pytest.fixture(scope="module")
def clean() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        yield twin
        assert twin.operator.errors == []


def test_kubernetes_client_lists_paginated(clean: ClusterTwin) -> None:
    api = client.CoreV1Api(config.new_client_from_config(str(clean.kubeconfig)))
    clean.reset_counts()
    page = api.list_node(limit=2)
    names = [n.metadata.name for n in page.items]
    while page.metadata._continue:
        page = api.list_node(limit=2, _continue=page.metadata._continue)
        names += [n.metadata.name for n in page.items]
    assert sorted(names) == ["gpu-a100-01", "gpu-h100-01", "gpu-h200-01", "gpu-h200-02"]
    assert clean.request_counts()[("GET", "nodes", "list")] == 2
    node = api.read_node("gpu-h200-01")
    assert node.status.allocatable["nvidia.com/mig-1g.18gb"] == "4"
    assert node.metadata.labels["nvidia.com/mig.config.state"] == "success"


def test_clean_cluster_matches_the_inventory(clean: ClusterTwin) -> None:
    assert gpu_alloc(clean, "gpu-h200-02") == {
        "nvidia.com/mig-1g.18gb": "4",
        "nvidia.com/mig-2g.35gb": "2",
        "nvidia.com/mig-3g.71gb": "2",
    }
    cp = clean.store.get("clusterpolicies.nvidia.com", "cluster-policy")
    assert cp["spec"]["mig"]["strategy"] == "mixed"
    assert cp["spec"]["migManager"]["config"]["name"] == "migplan-mig-parted-config"
    assert "devicePlugin" not in cp["spec"] or not cp["spec"]["devicePlugin"].get("config")
    pods = clean.store.list("pods", "default")
    assert all(p["status"]["phase"] == "Running" for p in pods)
    assert {p["metadata"]["labels"]["app"] for p in pods} >= {"vllm-llama-70b", "embeddings"}
    # one device-plugin pod and one mig-manager pod per GPU node
    assert len(clean.store.list("pods", NS, label_selector="app=nvidia-device-plugin-daemonset")) == 4
    assert len(clean.store.list("pods", NS, label_selector="app=nvidia-mig-manager")) == 4


def test_nvml_twin_of_a_node_sees_the_holding_pods(clean: ClusterTwin) -> None:
    nv = clean.nvml("gpu-h200-01")
    nv.nvmlInit()
    try:
        dev = nv.nvmlDeviceGetHandleByIndex(0)
        assert nv.nvmlDeviceGetMigMode(dev) == [1, 1]
        held = {
            a["gi"] for k, v in clean.allocations().items() for a in v if a["node"] == "gpu-h200-01" and a["gpu"] == 0
        }
        assert {p.gpuInstanceId for p in nv.nvmlDeviceGetComputeRunningProcesses(dev)} == held
        # the 3g holds a pod: destroying its compute instance is refused
        (three_g,) = [
            a
            for v in clean.allocations().values()
            for a in v
            if a["node"] == "gpu-h200-01" and a["gpu"] == 0 and a["profile"] == "3g.71gb"
        ]
        gi = nv.nvmlDeviceGetGpuInstanceById(dev, three_g["gi"])
        ci = nv.nvmlGpuInstanceGetComputeInstanceById(gi, three_g["ci"])
        with pytest.raises(pynvml.NVMLError_InUse):
            nv.nvmlComputeInstanceDestroy(ci)
    finally:
        nv.nvmlShutdown()


@pytest.fixture(scope="module")
def drifted() -> Iterator[ClusterTwin]:
    cases = [
        "wrong-strategy",
        "node-missing:gpu-h100-01",
        "undocumented-node",
        "stale-device-plugin-config",
        "mig-config-failed:gpu-a100-01",
        "gpu-recut:gpu-h200-02:1",
        "pod-wants-gpu",
    ]
    with ClusterTwin.from_inventory(INVENTORY, drift=cases) as twin:
        twin.settle()
        yield twin
        assert twin.operator.errors == []


def test_build_drift_wrong_strategy_and_stale_config(drifted: ClusterTwin) -> None:
    cp = drifted.store.get("clusterpolicies.nvidia.com", "cluster-policy")
    assert cp["spec"]["mig"]["strategy"] == "single"
    assert cp["spec"]["devicePlugin"]["config"]["name"] == "device-plugin-config"
    cm = drifted.store.get("configmaps", "device-plugin-config", NS)
    assert "migStrategy: single" in cm["data"]["default"]
    assert node_labels(drifted, "gpu-h200-01")["nvidia.com/gpu.product"] == "NVIDIA-H200-MIG-INVALID"


def test_build_drift_nodes(drifted: ClusterTwin) -> None:
    names = {n["metadata"]["name"] for n in drifted.store.list("nodes")}
    assert "gpu-h100-01" not in names
    assert "gpu-undocumented-01" in names
    assert gpu_alloc(drifted, "gpu-undocumented-01") == {"nvidia.com/gpu": "2"}


def test_build_drift_mig_config_failed(drifted: ClusterTwin) -> None:
    lab = node_labels(drifted, "gpu-a100-01")
    assert lab["nvidia.com/mig.config.state"] == "failed"
    assert lab["nvidia.com/mig.config"] == "all-1g.5gb"


def test_build_drift_gpu_recut(drifted: ClusterTwin) -> None:
    gpus = drifted.gpus("gpu-h200-02")
    assert gpus[0].geometry() == {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}
    assert gpus[1].geometry() == {"1g.18gb": 7}


def test_build_drift_pod_wants_gpu(drifted: ClusterTwin) -> None:
    pod = drifted.store.get("pods", "wants-gpu", "default")
    assert pod["status"]["phase"] == "Pending"
    (cond,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert "Insufficient nvidia.com/gpu" in cond["message"]


def observe(twin: ClusterTwin) -> dict[str, Any]:
    cp = twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]
    return {
        "strategy": cp["mig"].get("strategy"),
        "dp_config": (cp.get("devicePlugin") or {}).get("config"),
        "nodes": {
            n["metadata"]["name"]: (
                {k: v for k, v in n["status"]["allocatable"].items() if k.startswith("nvidia.com/") and v != "0"},
                n["metadata"]["labels"].get("nvidia.com/mig.config.state"),
            )
            for n in twin.store.list("nodes")
        },
        "pending": sorted(
            p["metadata"]["name"] for p in twin.store.list("pods", "default") if p["status"]["phase"] == "Pending"
        ),
    }


@pytest.fixture(scope="module")
def runtime() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY, tls=False) as twin:
        twin.settle()
        yield twin
        assert twin.operator.errors == []


@pytest.mark.parametrize(
    ("case", "check"),
    [
        ("wrong-strategy", lambda o: o["strategy"] == "single"),
        ("stale-device-plugin-config", lambda o: o["dp_config"]["name"] == "device-plugin-config"),
        ("pod-wants-gpu", lambda o: o["pending"] == ["wants-gpu"]),
        ("mig-config-failed:gpu-a100-01", lambda o: o["nodes"]["gpu-a100-01"][1] == "failed"),
        ("mig-config-pending:gpu-a100-01", lambda o: o["nodes"]["gpu-a100-01"][1] == "pending"),
        ("mig-manager-wedged:gpu-a100-01", lambda o: o["nodes"]["gpu-a100-01"][1] == "pending"),
        ("undocumented-node", lambda o: "gpu-undocumented-01" in o["nodes"]),
        ("node-missing:gpu-h100-01", lambda o: "gpu-h100-01" not in o["nodes"]),
        ("gpu-recut:gpu-h200-02", lambda o: o["nodes"]["gpu-h200-02"][0]["nvidia.com/mig-1g.18gb"] == "9"),
    ],
)
def test_inject_then_heal(runtime: ClusterTwin, case: str, check: Any) -> None:
    before = observe(runtime)
    runtime.inject(case)
    during = observe(runtime)
    assert check(during), during
    assert during != before
    runtime.heal(case)
    after = observe(runtime)
    if case != "node-missing:gpu-h100-01":
        assert after == before
    else:  # the node is back with its GPUs advertised (its pods, gone with it, are not re-created)
        assert after["nodes"]["gpu-h100-01"] == before["nodes"]["gpu-h100-01"]


def test_nvml_changes_reach_gfd_at_once_and_the_device_plugin_on_restart() -> None:
    with ClusterTwin.from_inventory(INVENTORY, tls=False) as twin:
        twin.settle()
        nv = twin.nvml("gpu-h200-02")
        nv.nvmlInit()
        dev = nv.nvmlDeviceGetHandleByIndex(0)
        info = nv.nvmlDeviceGetGpuInstanceProfileInfo(dev, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
        count = pynvml.c_uint(7)
        gis = (pynvml.c_nvmlGpuInstance_t * 7)()
        nv.nvmlDeviceGetGpuInstances(dev, info.id, gis, pynvml.byref(count))
        assert count.value == 2
        cis = (pynvml.c_nvmlComputeInstance_t * 1)()
        ci_count = pynvml.c_uint(1)
        nv.nvmlGpuInstanceGetComputeInstances(
            gis[0], pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, cis, pynvml.byref(ci_count)
        )
        nv.nvmlComputeInstanceDestroy(cis[0])
        nv.nvmlGpuInstanceDestroy(gis[0])
        nv.nvmlShutdown()
        twin.settle()
        assert node_labels(twin, "gpu-h200-02")["nvidia.com/mig-1g.18gb.count"] == "3"  # GFD relabels
        assert gpu_alloc(twin, "gpu-h200-02")["nvidia.com/mig-1g.18gb"] == "4"  # the running plugin has not looked
        (dp,) = [
            p
            for p in twin.store.list("pods", NS, label_selector="app=nvidia-device-plugin-daemonset")
            if p["spec"]["nodeName"] == "gpu-h200-02"
        ]
        twin.store.delete("pods", dp["metadata"]["name"], NS)  # what an admin does: bounce the plugin
        twin.settle()
        assert gpu_alloc(twin, "gpu-h200-02")["nvidia.com/mig-1g.18gb"] == "3"
        assert twin.operator.errors == []


def test_synthetic_twin_answers_paginated_lists() -> None:
    with ClusterTwin.synthetic(30, owned_fraction=0.1, tls=False) as twin:
        twin.settle()
        api = client.CoreV1Api(config.new_client_from_config(str(twin.kubeconfig)))
        names: list[str] = []
        cont = None
        while True:
            page = api.list_node(limit=7, _continue=cont)
            names += [n.metadata.name for n in page.items]
            cont = page.metadata._continue
            if not cont:
                break
        assert len(names) == 30 == len(set(names))
        running = api.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
        assert len(running) == len(twin.store.list("pods"))  # device plugins, mig-managers, holders all run
        assert twin.operator.errors == []


def test_settle_is_deterministic() -> None:
    """Two twins fed the same writes settle into the same state (names, labels, resources, pod phases)."""

    def run() -> dict[str, Any]:
        with ClusterTwin.from_inventory(INVENTORY, strategy="single", tls=False) as twin:
            twin.settle()
            twin.store.patch("clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"mig": {"strategy": "mixed"}}})
            twin.settle()
            twin.inject("pod-wants-gpu")
            twin.store.patch(
                "nodes", "gpu-h200-02", {"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled"}}}
            )
            twin.settle()
            nodes = {
                n["metadata"]["name"]: (
                    {k: v for k, v in n["metadata"]["labels"].items() if k.startswith("nvidia.com/")},
                    n["status"]["allocatable"],
                )
                for n in twin.store.list("nodes")
            }
            pods = sorted(
                (p["metadata"]["namespace"], p["metadata"]["name"], p["status"]["phase"], p["spec"].get("nodeName"))
                for p in twin.store.list("pods")
            )
            assert twin.operator.errors == []
            return {"nodes": nodes, "pods": pods, "alloc": twin.allocations()}

    first, second = run(), run()
    assert first == second
    assert first["nodes"]["gpu-h200-02"][0]["nvidia.com/mig.config.state"] == "success"


def test_a_watch_sees_mig_manager_go_pending_then_success() -> None:
    """What a controller does on a real cluster: label the node, then watch nvidia.com/mig.config.state."""
    from kubernetes import watch

    with ClusterTwin.from_inventory(INVENTORY, tls=False) as twin:
        twin.settle()
        api = client.CoreV1Api(config.new_client_from_config(str(twin.kubeconfig)))
        rv = api.read_node("gpu-h200-02").metadata.resource_version
        api.patch_node("gpu-h200-02", {"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled"}}})
        twin.settle()
        states = []
        for event in watch.Watch().stream(
            api.list_node,
            field_selector="metadata.name=gpu-h200-02",
            resource_version=rv,
            timeout_seconds=2,
        ):
            state = event["object"].metadata.labels.get("nvidia.com/mig.config.state")
            if not states or states[-1] != state:
                states.append(state)
            if state in ("success", "failed") and "pending" in states:
                break
        assert states[-2:] == ["pending", "success"]
        assert twin.operator.errors == []
