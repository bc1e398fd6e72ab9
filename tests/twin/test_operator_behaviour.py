"""The GPU Operator twin pinned to tests/reference/stack-facts.md, one test per fact (section in the name/docstring).

Each test builds a small cluster twin from a throw-away inventory, changes API objects the way a user or migplan
would, lets the controllers settle and checks what the real components are documented to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.catalog import GpuModel, load_catalog
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.operator import deviceplugin

CATALOG = load_catalog()
NS = "gpu-operator"
DS = "nvidia-device-plugin-daemonset"
ARTICLE = [
    {"profile": "3g.71gb", "placement": 4, "owner": None},
    {"profile": "2g.35gb", "placement": 0},
    {"profile": "1g.18gb", "placement": 2},
    {"profile": "1g.18gb", "placement": 3},
]


def write_inventory(root: Path, strategy: str, nodes: dict[str, list[dict[str, Any]]]) -> Path:
    (root / "nodes").mkdir(parents=True, exist_ok=True)
    (root / "cluster.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "migplan/v1",
                "kind": "Cluster",
                "metadata": {"name": "t"},
                "spec": {"migStrategy": strategy},
            }
        )
    )
    for name, gpus in nodes.items():
        doc = {"apiVersion": "migplan/v1", "kind": "Node", "metadata": {"name": name}, "spec": {"gpus": gpus}}
        (root / "nodes" / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    return root


def gpu(index: int, model: str, parts: list[dict[str, Any]] | None) -> dict[str, Any]:
    if parts is None:
        return {"index": index, "model": model, "mig": {"enabled": False}}
    clean = [{k: v for k, v in p.items() if v is not None} for p in parts]
    return {"index": index, "model": model, "mig": {"enabled": True, "partitions": clean}}


@pytest.fixture
def make_twin(tmp_path: Path) -> Iterator[Any]:
    started: list[ClusterTwin] = []

    def make(strategy: str, nodes: dict[str, list[dict[str, Any]]], **kw: Any) -> ClusterTwin:
        root = write_inventory(tmp_path / f"inv{len(started)}", kw.pop("inventory_strategy", strategy), nodes)
        twin = ClusterTwin.from_inventory(root, strategy=strategy, tls=False, **kw).start()
        started.append(twin)
        twin.settle()
        return twin

    yield make
    for t in started:
        assert t.operator.errors == []
        t.stop()


# A failing plugin registers nothing; the kubelet keeps the nvidia.com/gpu it registered while the node's GPUs were
# MIG-disabled, at 0 (kubelet nodestatus/setters.go MachineInfo; the twin's node history, ASSUMPTIONS-operator.md).
KUBELET_KEPT = {"nvidia.com/gpu": "0"}


def gpu_resources(twin: ClusterTwin, node: str) -> dict[str, str]:
    alloc = twin.store.get("nodes", node)["status"]["allocatable"]
    return {k: v for k, v in alloc.items() if k.startswith("nvidia.com/")}


def labels(twin: ClusterTwin, node: str) -> dict[str, str]:
    return dict(twin.store.get("nodes", node)["metadata"]["labels"])


def dp_pod(twin: ClusterTwin, node: str) -> dict[str, Any]:
    (pod,) = [p for p in twin.store.list("pods", NS, label_selector=f"app={DS}") if p["spec"].get("nodeName") == node]
    return pod


def h200(parts: list[dict[str, Any]] | None, n: int = 2) -> list[dict[str, Any]]:
    return [gpu(i, "H200-141GB", parts) for i in range(n)]


# ------------------------------------------------------------------ §1.3 resources per strategy
def test_s1_3_mixed_one_resource_per_profile_plus_becomes_dot(make_twin: Any) -> None:
    twin = make_twin("mixed", {"a100": [gpu(0, "A100-40GB", [{"profile": "1g.5gb+me"}, {"profile": "3g.20gb"}])]})
    assert gpu_resources(twin, "a100") == {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.5gb.me": "1",
        "nvidia.com/mig-3g.20gb": "1",
    }


def test_s1_3_none_counts_mig_gpus_as_whole_gpus(make_twin: Any) -> None:
    twin = make_twin("none", {"n": h200(ARTICLE)})
    assert gpu_resources(twin, "n") == {"nvidia.com/gpu": "2"}


def test_s1_3_single_all_same_type_is_nvidia_com_gpu(make_twin: Any) -> None:
    twin = make_twin("single", {"n": h200([{"profile": "1g.18gb"}] * 7)})
    assert gpu_resources(twin, "n") == {"nvidia.com/gpu": "14"}


# ------------------------------------------------------------------ §1.4 the single-strategy errors
def test_s1_4_single_with_two_mig_types_advertises_nothing_and_logs_the_error(make_twin: Any) -> None:
    twin = make_twin("single", {"n": h200(ARTICLE)})
    assert gpu_resources(twin, "n") == KUBELET_KEPT
    pod = dp_pod(twin, "n")
    ready = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "False"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    log = twin.store.pod_log(NS, pod["metadata"]["name"])
    assert "more than one MIG device type present on node" in log
    assert log.startswith("error starting plugins: error getting plugins: unable to create plugins:")
    assert "invalid MIG configuration: " in log


def test_s1_4_single_with_mig_and_full_gpus_mixed(make_twin: Any) -> None:
    twin = make_twin("single", {"n": [gpu(0, "H200-141GB", [{"profile": "1g.18gb"}]), gpu(1, "H200-141GB", None)]})
    assert gpu_resources(twin, "n") == KUBELET_KEPT
    log = twin.store.pod_log(NS, dp_pod(twin, "n")["metadata"]["name"], "nvidia-device-plugin")
    assert "all devices on the node must be configured with the same migEnabled value" in log


def test_s1_1_unknown_strategy_in_device_plugin_config(make_twin: Any) -> None:
    twin = make_twin("single", {"n": h200(ARTICLE)})
    twin.store.patch(
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        [{"op": "remove", "path": "/spec/mig/strategy"}],
        patch_type="json",
    )
    twin.store.create(
        "configmaps", {"metadata": {"name": "dp"}, "data": {"x": "version: v1\nflags:\n  migStrategy: bogus\n"}}, NS
    )
    # The default names the entry: the operator's config-manager falls back to no config (FALLBACK_STRATEGIES=empty)
    twin.store.patch(
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        {"spec": {"devicePlugin": {"config": {"name": "dp", "default": "x"}}}},
    )
    twin.settle()
    assert (
        twin.store.pod_log(NS, dp_pod(twin, "n")["metadata"]["name"], "nvidia-device-plugin").strip()
        == "error starting plugins: unable to validate flags: unknown MIG strategy: bogus"
    )


def test_s1_6_without_label_or_default_the_operator_falls_back_to_no_config(make_twin: Any) -> None:
    """cmd/config-manager updateConfigName with the operator's FALLBACK_STRATEGIES=empty: a one-entry ConfigMap is not
    picked on its own; the plugin runs without a config file (strategy none: the MIG node's GPUs are whole)."""
    twin = make_twin("single", {"n": h200(ARTICLE)})
    twin.store.patch(
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        [{"op": "remove", "path": "/spec/mig/strategy"}],
        patch_type="json",
    )
    twin.store.create(
        "configmaps", {"metadata": {"name": "dp"}, "data": {"x": "version: v1\nflags:\n  migStrategy: bogus\n"}}, NS
    )
    twin.store.patch(
        "clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"devicePlugin": {"config": {"name": "dp"}}}}
    )
    twin.settle()
    log = twin.store.pod_log(NS, dp_pod(twin, "n")["metadata"]["name"], "nvidia-device-plugin")
    assert "Registered device plugin for 'nvidia.com/gpu' with Kubelet" in log


def test_s1_6_time_slicing_config_shares_the_mig_devices(make_twin: Any) -> None:
    """The entry the node label names shares 1g.18gb 3 ways (sharing.py, deviceplugin.py replicate)."""
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    ts = "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/mig-1g.18gb, replicas: 3}]\n"
    twin.store.create("configmaps", {"metadata": {"name": "dp"}, "data": {"default": "", "ts": ts}}, NS)
    twin.store.patch("nodes", "n", {"metadata": {"labels": {"nvidia.com/device-plugin.config": "ts"}}})
    twin.store.patch(
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        {"spec": {"devicePlugin": {"config": {"name": "dp", "default": "default"}}}},
    )
    twin.settle()
    alloc = twin.store.get("nodes", "n")["status"]["allocatable"]
    ones = 2 * sum(1 for p in ARTICLE if p["profile"] == "1g.18gb")  # two GPUs
    assert alloc["nvidia.com/mig-1g.18gb"] == str(3 * ones)
    assert alloc["nvidia.com/mig-3g.71gb"] == "2"  # not shared: as it was


# ------------------------------------------------------------------ §1.5 / §2 GFD labels
def test_s1_5_gfd_invalid_label_set_under_single(make_twin: Any) -> None:
    twin = make_twin("single", {"n": h200(ARTICLE)})
    lab = labels(twin, "n")
    assert lab["nvidia.com/gpu.product"] == "NVIDIA-H200-MIG-INVALID"
    assert lab["nvidia.com/gpu.count"] == "0"
    assert lab["nvidia.com/gpu.replicas"] == "0"
    assert lab["nvidia.com/gpu.sharing-strategy"] == ""
    assert lab["nvidia.com/gpu.memory"] == "0"
    assert lab["nvidia.com/mig.strategy"] == "single"


def test_s2_gfd_single_valid_product_and_count(make_twin: Any) -> None:
    twin = make_twin("single", {"n": h200([{"profile": "1g.18gb"}] * 7)})
    lab = labels(twin, "n")
    assert lab["nvidia.com/gpu.product"] == "NVIDIA-H200-MIG-1g.18gb"
    assert lab["nvidia.com/gpu.count"] == "14"
    assert (lab["nvidia.com/gpu.slices.gi"], lab["nvidia.com/gpu.slices.ci"]) == ("1", "1")


def test_s2_gfd_mixed_per_profile_labels_and_physical_count(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    lab = labels(twin, "n")
    assert lab["nvidia.com/mig.strategy"] == "mixed"
    assert lab["nvidia.com/gpu.count"] == "2"  # physical GPUs under mixed
    assert lab["nvidia.com/gpu.product"] == "NVIDIA-H200"
    assert lab["nvidia.com/mig-1g.18gb.count"] == "4"
    assert lab["nvidia.com/mig-3g.71gb.count"] == "2"
    assert lab["nvidia.com/mig-3g.71gb.product"] == "NVIDIA-H200-MIG-3g.71gb"
    assert lab["nvidia.com/mig-2g.35gb.slices.gi"] == "2"


def test_s2_gfd_no_mig_strategy_label_under_none(make_twin: Any) -> None:
    twin = make_twin("none", {"n": h200(ARTICLE)})
    lab = labels(twin, "n")
    assert "nvidia.com/mig.strategy" not in lab
    assert not any(k.startswith("nvidia.com/mig-") for k in lab)
    assert lab["nvidia.com/mig.capable"] == "true"


# ------------------------------------------------------------------ §1.6 / §1.2 operator and precedence
def dp_env(twin: ClusterTwin) -> dict[str, str]:
    ds = twin.store.get("daemonsets.apps", DS, NS)
    (c,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-device-plugin"]
    return {e["name"]: e.get("value", "") for e in c.get("env", [])}


def test_s1_6_strategy_change_rewrites_env_and_restarts_pods(make_twin: Any) -> None:
    twin = make_twin("single", {"n": h200(ARTICLE)})
    assert dp_env(twin)["MIG_STRATEGY"] == "single"
    before = dp_pod(twin, "n")["metadata"]["name"]
    gen = twin.store.get("daemonsets.apps", DS, NS)["metadata"]["generation"]
    twin.store.patch("clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"mig": {"strategy": "mixed"}}})
    twin.settle()
    env = dp_env(twin)
    assert env["MIG_STRATEGY"] == "mixed" and env["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    assert twin.store.get("daemonsets.apps", DS, NS)["metadata"]["generation"] == gen + 1
    assert dp_pod(twin, "n")["metadata"]["name"] != before
    assert gpu_resources(twin, "n")["nvidia.com/mig-1g.18gb"] == "4"


def test_s1_6_strategy_none_drops_monitor_devices(make_twin: Any) -> None:
    twin = make_twin("none", {"n": h200(ARTICLE)})
    assert dp_env(twin)["MIG_STRATEGY"] == "none"
    assert "NVIDIA_MIG_MONITOR_DEVICES" not in dp_env(twin)


def test_s1_2_env_from_clusterpolicy_beats_config_file(make_twin: Any) -> None:
    """stale-device-plugin-config says single; spec.mig.strategy=mixed is in the env and wins."""
    twin = make_twin("mixed", {"n": h200(ARTICLE)}, drift=["stale-device-plugin-config"])
    env = dp_env(twin)
    assert env["MIG_STRATEGY"] == "mixed" and env["CONFIG_FILE"] == "/config/config.yaml"
    cm = twin.store.get("configmaps", "device-plugin-config", NS)
    assert "migStrategy: single" in cm["data"]["default"]
    assert gpu_resources(twin, "n")["nvidia.com/mig-3g.71gb"] == "2"


def test_s1_6_config_file_strategy_applies_only_without_clusterpolicy_strategy(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)}, drift=["stale-device-plugin-config"])
    twin.store.patch(
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        [{"op": "remove", "path": "/spec/mig/strategy"}],
        patch_type="json",
    )
    twin.settle()
    env = dp_env(twin)
    assert "MIG_STRATEGY" not in env and env["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    # now the config's flags.migStrategy (single) decides: the heterogeneous node advertises nothing
    assert not any(v != "0" for v in gpu_resources(twin, "n").values())
    assert "more than one MIG device type" in twin.store.pod_log(
        NS, dp_pod(twin, "n")["metadata"]["name"], "nvidia-device-plugin"
    )
    assert labels(twin, "n")["nvidia.com/gpu.product"] == "NVIDIA-H200-MIG-INVALID"  # GFD shares the config


def test_rollout_restart_annotation_restarts_device_plugin_pods(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    before = dp_pod(twin, "n")["metadata"]["name"]
    patch = {
        "spec": {
            "template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}
        }
    }
    twin.store.patch("daemonsets.apps", DS, patch, NS, patch_type="strategic")
    twin.settle()
    after = dp_pod(twin, "n")
    assert after["metadata"]["name"] != before
    assert after["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] == "2026-01-01T00:00:00Z"
    ds = twin.store.get("daemonsets.apps", DS, NS)
    assert ds["status"]["updatedNumberScheduled"] == 1 and ds["status"]["numberReady"] == 1


# ------------------------------------------------------------------ §3 mig-manager
def record_labels(twin: ClusterTwin, node: str) -> list[dict[str, str]]:
    seen: list[dict[str, str]] = []

    def cb(kind: str, obj: dict[str, Any]) -> None:
        if obj.get("kind") == "Node" and obj["metadata"]["name"] == node:
            seen.append(dict(obj["metadata"].get("labels") or {}))

    twin.store.subscribe(cb)
    return seen


def add_config(twin: ClusterTwin, name: str, entries: list[dict[str, Any]]) -> None:
    cm = twin.store.get("configmaps", "migplan-mig-parted-config", NS)
    doc = yaml.safe_load(cm["data"]["config.yaml"])
    doc["mig-configs"][name] = entries
    twin.store.patch("configmaps", "migplan-mig-parted-config", {"data": {"config.yaml": yaml.safe_dump(doc)}}, NS)


def set_config(twin: ClusterTwin, node: str, value: str | None) -> None:
    twin.store.patch("nodes", node, {"metadata": {"labels": {"nvidia.com/mig.config": value}}})
    twin.settle()


def test_s3_3_reconfiguration_sequence_pending_paused_success(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    add_config(twin, "all-1g", [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}])
    seen = record_labels(twin, "n")
    set_config(twin, "n", "all-1g")
    states = [s.get("nvidia.com/mig.config.state") for s in seen]
    assert "pending" in states and states[-1] == "success"
    paused = [s for s in seen if s.get("nvidia.com/mig.config.state") == "pending"]
    assert paused[0]["nvidia.com/gpu.deploy.device-plugin"] == "paused-for-mig-change"
    assert paused[0]["nvidia.com/gpu.deploy.gpu-feature-discovery"] == "paused-for-mig-change"
    final = labels(twin, "n")
    assert final["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert [g.geometry() for g in twin.gpus("n")] == [{"1g.18gb": 7}, {"1g.18gb": 7}]
    assert gpu_resources(twin, "n")["nvidia.com/mig-1g.18gb"] == "14"
    assert gpu_resources(twin, "n")["nvidia.com/mig-3g.71gb"] == "0"  # kept by the kubelet at 0


def test_s3_3_already_applied_config_is_success_without_disruption(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    add_config(
        twin,
        "same",
        [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}}],
    )
    before = dp_pod(twin, "n")["metadata"]["name"]
    seen = record_labels(twin, "n")
    set_config(twin, "n", "same")
    assert "pending" not in [s.get("nvidia.com/mig.config.state") for s in seen]
    assert dp_pod(twin, "n")["metadata"]["name"] == before


def test_s5_mode_flip_on_gpu_1_clears_every_mig_gpu_so_a_pod_on_gpu_0_fails_it(make_twin: Any) -> None:
    """mig-parted ApplyMigMode (cmd/nvidia-mig-parted/apply/mode.go) calls ClearMigConfig on every GPU whose
    mode is not Disabled, not only on the GPU whose mode changes: a pod on GPU 0 makes a flip of GPU 1 fail."""
    twin = make_twin(
        "mixed",
        {"n": [gpu(0, "H200-141GB", [{"profile": "7g.141gb", "owner": "vllm"}]), gpu(1, "H200-141GB", ARTICLE)]},
    )
    add_config(
        twin,
        "gpu1-off",
        [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.141gb": 1}},
            {"devices": [1], "mig-enabled": False},
        ],
    )
    set_config(twin, "n", "gpu1-off")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "failed"
    assert any("In use by another client" in line for line in twin.operator.mig_manager_log["n"])
    gpu0, gpu1 = twin.gpus("n")
    assert gpu0.geometry() == {"7g.141gb": 1}  # the held instance survives the failed clear
    assert gpu1.mig_current  # the clear of GPU 0 failed before any mode was set


def test_s5_mode_flip_clears_and_recreates_every_mig_gpu(make_twin: Any) -> None:
    """With nothing in use, the flip of GPU 1 re-creates GPU 0's instances too (new MIG device UUIDs)."""
    twin = make_twin("mixed", {"n": [gpu(0, "H200-141GB", [{"profile": "7g.141gb"}]), gpu(1, "H200-141GB", ARTICLE)]})
    before = [d.uuid for d in twin.gpus("n")[0].mig_devices()]
    add_config(
        twin,
        "gpu1-off",
        [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.141gb": 1}},
            {"devices": [1], "mig-enabled": False},
        ],
    )
    set_config(twin, "n", "gpu1-off")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "success"
    gpu0, gpu1 = twin.gpus("n")
    assert gpu0.geometry() == {"7g.141gb": 1} and not gpu1.mig_current
    after = [d.uuid for d in gpu0.mig_devices()]
    assert len(after) == 1 and after != before  # destroyed and created again, not left alone


def test_s5_recut_of_one_partition_replaces_the_whole_gpu(make_twin: Any) -> None:
    """SetMigConfig (pkg/mig/config/config.go) clears every instance of the GPU before creating the new set:
    re-cutting the two 1g.18gb into a 2g.35gb fails while a pod holds the 3g.71gb of the same GPU."""
    parts = [dict(p) for p in ARTICLE]
    parts[0]["owner"] = "vllm"
    twin = make_twin("mixed", {"n": [gpu(0, "H200-141GB", parts), gpu(1, "H200-141GB", ARTICLE)]})
    add_config(
        twin,
        "recut",
        [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.71gb": 1, "2g.35gb": 2}},
            {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}},
        ],
    )
    set_config(twin, "n", "recut")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "failed"
    assert any("In use by another client" in line for line in twin.operator.mig_manager_log["n"])


def test_s3_3_failed_when_a_pod_holds_a_partition_and_stays_failed(make_twin: Any) -> None:
    parts = [dict(p) for p in ARTICLE]
    parts[0]["owner"] = "vllm"
    twin = make_twin("mixed", {"n": [gpu(0, "H200-141GB", parts)]})
    add_config(twin, "all-1g", [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}])
    set_config(twin, "n", "all-1g")
    lab = labels(twin, "n")
    assert lab["nvidia.com/mig.config.state"] == "failed"
    assert lab["nvidia.com/gpu.deploy.device-plugin"] == "true"  # setState re-enables the paused labels
    assert any("In use by another client" in line for line in twin.operator.mig_manager_log["n"])
    # The reason is where an operator reads it: the mig-manager pod's log (NVIDIA's OpenShift doc lines, §3.3).
    (mm,) = twin.store.list("pods", NS, label_selector="app=nvidia-mig-manager")
    log = twin.store.pod_log(NS, mm["metadata"]["name"])
    # mig-parted's chain (pkg/mig/config/config.go SetMigConfig → ClearMigConfig, capitalized per ordering),
    # its fatal line, then mig-manager's own line (reconfigure.go Run, main.go "Error: %s").
    assert (
        "Error clearing MigConfig: error walking gpu instances for '0': error walking compute instances for '"
    ) in log
    assert "error destroying Compute instance for profile '(" in log
    assert "In use by another client" in log
    assert (
        "Error applying MIG configuration with hooks: error setting MIGConfig: "
        "error attempting multiple config orderings: all orderings failed\n"
        "Error: failed to apply MIG configuration: exit status 1\n"
    ) in log
    assert log.rstrip().endswith("Changing the 'nvidia.com/mig.config.state' node label to 'failed'")
    # The held instance survives (clearing stops at the first IN_USE, like mig-parted's ClearMigConfig;
    # the free instances destroyed before it are gone, as with the real, non-transactional NVML calls).
    assert twin.gpus("n")[0].geometry().get("3g.71gb") == 1
    assert twin.allocations()["default/vllm-n-g0-3"][0]["placement"] == (4, 4)
    # Writing the same value again does not retry: it stays failed.
    twin.store.patch("nodes", "n", {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g"}}})
    twin.settle()
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "failed"
    # The documented re-trigger (remove the label, then set it again) works once the pod is gone.
    twin.store.delete("pods", "vllm-n-g0-3", "default", grace_period_seconds=0)
    set_config(twin, "n", None)
    set_config(twin, "n", "all-1g")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "success"


def test_s3_2_unknown_config_name_fails(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    set_config(twin, "n", "no-such-config")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "failed"


def test_s3_2_without_config_name_the_generated_configs_are_used(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    twin.store.patch(
        "clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"migManager": {"config": {"name": None}}}}
    )
    set_config(twin, "n", "all-3g.71gb")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "success"
    assert [g.geometry() for g in twin.gpus("n")] == [{"3g.71gb": 2}, {"3g.71gb": 2}]


def test_s3_1_default_label_all_disabled_when_absent(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(None)})
    set_config(twin, "n", None)
    assert labels(twin, "n")["nvidia.com/mig.config"] == "all-disabled"
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "success"


# ------------------------------------------------------------------ scheduler / kubelet
def request_pod(name: str, resource: str, **spec: Any) -> dict[str, Any]:
    res = {"requests": {resource: "1"}, "limits": {resource: "1"}}
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x", "resources": res}], **spec}}


def test_scheduler_binds_mig_pod_to_a_free_partition_and_nvml_sees_the_process(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE, n=1)})
    twin.store.create("pods", request_pod("infer", "nvidia.com/mig-3g.71gb"), "default")
    twin.settle()
    pod = twin.store.get("pods", "infer", "default")
    assert pod["spec"]["nodeName"] == "n" and pod["status"]["phase"] == "Running"
    (held,) = twin.allocations()["default/infer"]
    assert (held["profile"], held["placement"]) == ("3g.71gb", (4, 4))
    nv = twin.nvml("n")
    nv.nvmlInit()
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    procs = nv.nvmlDeviceGetComputeRunningProcesses(dev)
    assert [p.gpuInstanceId for p in procs] == [held["gi"]]
    # A second one does not fit (one 3g per GPU here) and stays Pending with the scheduler's reason.
    twin.store.create("pods", request_pod("infer2", "nvidia.com/mig-3g.71gb"), "default")
    twin.settle()
    pod2 = twin.store.get("pods", "infer2", "default")
    assert pod2["status"]["phase"] == "Pending"
    (cond,) = [c for c in pod2["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient nvidia.com/mig-3g.71gb.")
    # Deleting the holder releases the partition and the pending pod gets it.
    twin.store.delete("pods", "infer", "default")
    twin.settle()
    assert twin.store.get("pods", "infer2", "default")["status"]["phase"] == "Running"
    nv.nvmlShutdown()


def test_scheduler_event_for_a_gpu_request_on_a_mig_node(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE, n=1)})
    twin.store.create("pods", request_pod("wants", "nvidia.com/gpu"), "default")
    twin.settle()
    events = twin.store.list("events", "default", field_selector="involvedObject.name=wants")
    assert [e["reason"] for e in events] == ["FailedScheduling"]
    assert events[0]["message"].startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert events[0]["type"] == "Warning"


def test_s1_4_single_mig_enabled_gpu_without_devices(make_twin: Any) -> None:
    twin = make_twin("single", {"n": [gpu(0, "H200-141GB", [])]})
    assert gpu_resources(twin, "n") == KUBELET_KEPT
    log = twin.store.pod_log(NS, dp_pod(twin, "n")["metadata"]["name"], "nvidia-device-plugin")
    assert "at least one device with migEnabled=true was not configured correctly: " in log
    assert "has no MIG devices configured" in log


def test_s1_4_mixed_mig_enabled_gpu_without_devices_is_only_a_warning(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": [gpu(0, "H200-141GB", []), gpu(1, "H200-141GB", [{"profile": "7g.141gb"}])]})
    assert gpu_resources(twin, "n") == {"nvidia.com/gpu": "0", "nvidia.com/mig-7g.141gb": "1"}
    pod = dp_pod(twin, "n")
    assert next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    # §2: under mixed, MIG-enabled GPUs with no MIG devices are ignored by GFD; gpu.count stays physical
    lab = labels(twin, "n")
    assert lab["nvidia.com/gpu.count"] == "2"
    assert [k for k in lab if k.endswith(".count") and k.startswith("nvidia.com/mig-")] == [
        "nvidia.com/mig-7g.141gb.count"
    ]


def test_s3_3_false_deploy_labels_stay_false_and_client_only_if_present(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE, n=1)})
    twin.store.patch("nodes", "n", {"metadata": {"labels": {"nvidia.com/gpu.deploy.dcgm": "false"}}})
    twin.settle()
    add_config(twin, "all-1g", [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}])
    seen = record_labels(twin, "n")
    set_config(twin, "n", "all-1g")
    pending = next(s for s in seen if s.get("nvidia.com/mig.config.state") == "pending")
    assert pending["nvidia.com/gpu.deploy.dcgm"] == "false"
    assert pending["nvidia.com/gpu.deploy.dcgm-exporter"] == "paused-for-mig-change"
    assert "nvidia.com/gpu.deploy.client" not in pending
    final = labels(twin, "n")
    assert final["nvidia.com/gpu.deploy.dcgm"] == "false"
    assert final["nvidia.com/gpu.deploy.dcgm-exporter"] == "true"
    assert final["nvidia.com/mig.config.state"] == "success"


def test_s3_3_empty_label_value_is_treated_as_absent_by_the_operator(make_twin: Any) -> None:
    # gpu-operator state_manager.go hasMIGConfigLabel: "" is no label; nodelabeling_controller.go then sets
    # spec.migManager.config.default (all-disabled) on the MIG-capable node, and mig-manager applies it.
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    set_config(twin, "n", "")
    lab = labels(twin, "n")
    assert lab["nvidia.com/mig.config"] == "all-disabled" and lab["nvidia.com/mig.config.state"] == "success"
    assert [g.mig_current for g in twin.gpus("n")] == [False, False]


def test_s3_3_no_default_label_without_a_mig_manager_config_object(make_twin: Any) -> None:
    # The CRD default sits on spec.migManager.config.default: without the config object there is none.
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    twin.store.patch("clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"migManager": {"config": None}}})
    twin.settle()
    twin.store.patch("nodes", "n", {"metadata": {"labels": {"nvidia.com/mig.config": None}}})
    twin.settle()
    assert "nvidia.com/mig.config" not in labels(twin, "n")


def test_s3_3_mode_change_disables_mig(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    set_config(twin, "n", "all-disabled")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "success"
    assert [g.mig_current for g in twin.gpus("n")] == [False, False]
    assert gpu_resources(twin, "n")["nvidia.com/gpu"] == "2"  # full GPUs under mixed


def test_s5_1_device_filter_and_devices_select_the_gpus(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    add_config(
        twin,
        "filtered",
        [
            {"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"7g.40gb": 1}},
            {"device-filter": "0x233510DE", "devices": [1], "mig-enabled": True, "mig-devices": {"1g.18gb": 7}},
            {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.71gb": 2}},
        ],
    )
    set_config(twin, "n", "filtered")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "success"
    assert [g.geometry() for g in twin.gpus("n")] == [{"3g.71gb": 2}, {"1g.18gb": 7}]


def test_s5_1_invalid_mig_parted_config_fails(make_twin: Any) -> None:
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    twin.store.patch(
        "configmaps",
        "migplan-mig-parted-config",
        {"data": {"config.yaml": "version: v2\nmig-configs: {x: [{devices: all, mig-enabled: false}]}\n"}},
        NS,
    )
    before = [g.geometry() for g in twin.gpus("n")]
    set_config(twin, "n", "x")
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == "failed"
    assert (
        "Error parsing config file: unmarshal error: error unmarshaling JSON: while decoding JSON: unknown version: v2"
    ) in twin.operator.mig_manager_log["n"]
    assert "Error: failed to validate MIG configuration: exit status 1" in twin.operator.mig_manager_log["n"]
    assert [g.geometry() for g in twin.gpus("n")] == before  # nothing applied from invalid input


def test_scheduler_respects_node_selector(make_twin: Any) -> None:
    twin = make_twin("mixed", {"a": h200(ARTICLE, n=1), "b": h200(ARTICLE, n=1)})
    twin.store.create(
        "pods", request_pod("pinned", "nvidia.com/mig-1g.18gb", nodeSelector={"kubernetes.io/hostname": "b"}), "default"
    )
    twin.store.create(
        "pods",
        request_pod("nowhere", "nvidia.com/mig-1g.18gb", nodeSelector={"kubernetes.io/hostname": "c"}),
        "default",
    )
    twin.settle()
    assert twin.store.get("pods", "pinned", "default")["spec"]["nodeName"] == "b"
    (cond,) = [
        c for c in twin.store.get("pods", "nowhere", "default")["status"]["conditions"] if c["type"] == "PodScheduled"
    ]
    assert cond["message"].startswith("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")


def test_s1_6_config_manager_follows_the_node_label(make_twin: Any) -> None:
    """Per-node strategy from the device-plugin ConfigMap (ClusterPolicy strategy unset), switched by node label."""
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    twin.store.create(
        "configmaps",
        {
            "metadata": {"name": "dp"},
            "data": {
                "single": "version: v1\nflags:\n  migStrategy: single\n",
                "mixed": "version: v1\nflags:\n  migStrategy: mixed\n",
            },
        },
        NS,
    )
    twin.store.patch(
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        [{"op": "remove", "path": "/spec/mig/strategy"}],
        patch_type="json",
    )
    twin.store.patch(
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        {"spec": {"devicePlugin": {"config": {"name": "dp", "default": "single"}}}},
    )
    twin.settle()
    assert not any(v != "0" for v in gpu_resources(twin, "n").values())  # DEFAULT_CONFIG=single refuses the cut
    pod = dp_pod(twin, "n")["metadata"]["name"]
    twin.store.patch("nodes", "n", {"metadata": {"labels": {"nvidia.com/device-plugin.config": "mixed"}}})
    twin.settle()
    assert gpu_resources(twin, "n")["nvidia.com/mig-1g.18gb"] == "4"
    assert dp_pod(twin, "n")["metadata"]["name"] == pod  # SIGHUP, not a new pod
    assert labels(twin, "n")["nvidia.com/mig.strategy"] == "mixed"  # GFD shares the config


@pytest.mark.parametrize("with_reboot", [False, True])
def test_s3_3_mode_change_needing_a_reboot(make_twin: Any, with_reboot: bool) -> None:
    """§3.3 step 9: the mode change does not take effect; WITH_REBOOT=true → `rebooting` then success, else failed."""
    twin = make_twin("mixed", {"n": h200(None)}, mig_mode_change_needs_reboot=True)
    if with_reboot:
        twin.store.patch(
            "clusterpolicies.nvidia.com",
            "cluster-policy",
            {"spec": {"migManager": {"env": [{"name": "WITH_REBOOT", "value": "true"}]}}},
        )
    seen = record_labels(twin, "n")
    add_config(twin, "all-3g", [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.71gb": 2}}])
    set_config(twin, "n", "all-3g")
    states = [s.get("nvidia.com/mig.config.state") for s in seen]
    if with_reboot:
        assert "rebooting" in states
        assert labels(twin, "n")["nvidia.com/mig.config.state"] == "success"
        assert [g.geometry() for g in twin.gpus("n")] == [{"3g.71gb": 2}, {"3g.71gb": 2}]
    else:
        assert "rebooting" not in states
        assert labels(twin, "n")["nvidia.com/mig.config.state"] == "failed"
        assert [g.mig_current for g in twin.gpus("n")] == [False, False]


@pytest.mark.parametrize("with_reboot", [False, True])
def test_s3_3_a_mode_step_failing_for_any_reason_reboots_and_the_reboot_ends_every_pod(
    make_twin: Any, with_reboot: bool
) -> None:
    """reconfigure.go Run: applyMigModeChange failing for any reason (here ClearMigConfig: a pod holds a MIG device)
    reboots the node under WITH_REBOOT; the reboot ends every pod on the node (graceful node shutdown's status)."""
    twin = make_twin("mixed", {"n": h200(ARTICLE, n=1)})
    if with_reboot:
        twin.store.patch(
            "clusterpolicies.nvidia.com",
            "cluster-policy",
            {"spec": {"migManager": {"env": [{"name": "WITH_REBOOT", "value": "true"}]}}},
        )
    twin.store.create("pods", request_pod("infer", "nvidia.com/mig-3g.71gb"), "default")
    twin.settle()
    assert twin.store.get("pods", "infer", "default")["status"]["phase"] == "Running"
    seen = record_labels(twin, "n")
    add_config(twin, "off", [{"devices": "all", "mig-enabled": False}])
    set_config(twin, "n", "off")
    states = [x.get("nvidia.com/mig.config.state") for x in seen]
    status = twin.store.get("pods", "infer", "default")["status"]
    if with_reboot:
        assert "rebooting" in states
        assert (status["phase"], status["reason"]) == ("Failed", "Terminated")
        assert status["message"] == "Pod was terminated in response to imminent node shutdown."
        assert labels(twin, "n")["nvidia.com/mig.config.state"] == "success"
        assert [g.mig_current for g in twin.gpus("n")] == [False]
    else:
        assert "rebooting" not in states and status["phase"] == "Running"
        assert labels(twin, "n")["nvidia.com/mig.config.state"] == "failed"


@pytest.mark.parametrize(
    ("env", "reboots"),
    [
        (["1"], True),
        (["T"], True),
        (["TRUE"], True),
        (["true", "false"], False),  # the later entry wins, as the operator renders the list onto the container
        (["false", "t"], True),
        (["tRuE"], False),  # not a boolean to Go's strconv.ParseBool
        (["yes"], False),
    ],
)
def test_with_reboot_is_read_as_go_parses_a_bool_flag(make_twin: Any, env: list[str], reboots: bool) -> None:
    """cmd/nvidia-mig-manager/main.go: WITH_REBOOT is a urfave/cli BoolFlag (strconv.ParseBool): "1" and "T" reboot."""
    twin = make_twin("mixed", {"n": h200(None)}, mig_mode_change_needs_reboot=True)
    entries = [{"name": "WITH_REBOOT", "value": v} for v in env]
    twin.store.patch("clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"migManager": {"env": entries}}})
    seen = record_labels(twin, "n")
    add_config(twin, "all-3g", [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.71gb": 2}}])
    set_config(twin, "n", "all-3g")
    assert ("rebooting" in [s.get("nvidia.com/mig.config.state") for s in seen]) is reboots
    assert labels(twin, "n")["nvidia.com/mig.config.state"] == ("success" if reboots else "failed")


def test_clusterpolicy_state_follows_the_device_plugin(make_twin: Any) -> None:
    """status.state (CRD enum ignored|ready|notReady) is notReady while the device plugin crash-loops."""
    twin = make_twin("single", {"n": h200(ARTICLE)})
    cp = twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")
    assert cp["status"] == {"state": "notReady", "namespace": NS}
    twin.store.patch("clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"mig": {"strategy": "mixed"}}})
    twin.settle()
    assert twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")["status"]["state"] == "ready"


# ------------------------------------------------------------------ device plugin and GFD, read from NVIDIA's source
# NVIDIA/k8s-device-plugin internal/rm/device_map.go buildDeviceMapFromConfigResources, with the wrappers of
# cmd/nvidia-device-plugin/main.go, plugin-manager.go, internal/plugin/factory.go, internal/rm/nvml_manager.go and
# go-nvlib's visitors (pkg/nvlib/device/device.go: the MIG-device prefix is added twice).
DP_OUTER = (
    "error starting plugins: error getting plugins: unable to create plugins: failed to construct resource "
    "managers: error building device map: error building device map from config.resources: "
)
VISIT_MIG = (
    "error visiting devices: error visiting device: error visiting device: error visiting MIG device: "
    "error visiting MIG device: "
)


def _model(key: str) -> GpuModel:
    m = CATALOG.get(key)
    assert m is not None
    return m


def twin_gpus(*cuts: list[str] | None, model: str = "H200-141GB") -> list[TwinGpu]:
    """GPUs as the twin holds them: None = MIG disabled, else the profiles cut on a MIG-enabled GPU."""
    out = []
    for i, cut in enumerate(cuts):
        g = TwinGpu(node="n", index=i, model=_model(model), mig_enabled=cut is not None)
        for profile in cut or ():
            g.add_partition(profile)
        out.append(g)
    return out


@pytest.mark.parametrize(
    ("strategy", "cuts", "expected"),
    [
        (
            "single",
            (["3g.71gb", "1g.18gb"], ["3g.71gb"]),
            DP_OUTER + "invalid MIG configuration: " + VISIT_MIG + "more than one MIG device type present on node",
        ),
        (
            "single",
            (["1g.18gb"], []),
            DP_OUTER + "invalid MIG configuration: at least one device with migEnabled=true was not configured "
            "correctly: error visiting device: device 1 has no MIG devices configured",
        ),
        (
            "single",
            (["1g.18gb"], None),
            DP_OUTER + "all devices on the node must be configured with the same migEnabled value",
        ),
        ("bogus", (None,), "error starting plugins: unable to validate flags: unknown MIG strategy: bogus"),
    ],
    ids=["two-types", "empty-mig-gpu", "mixed-modes", "unknown-strategy"],
)
def test_device_plugin_error_texts_are_the_source_chains(
    strategy: str, cuts: tuple[list[str] | None, ...], expected: str
) -> None:
    assert deviceplugin.evaluate(twin_gpus(*cuts), strategy).error == expected


def test_device_plugin_single_checks_mig_devices_before_the_mig_enabled_check() -> None:
    # device_map.go: assertAllMigDevicesAreValid runs before `requireUniformMIGDevices && !deviceMap.isEmpty()
    # && !migDeviceMap.isEmpty()`, so a node that also mixes modes reports its MIG-device problem.
    two_types = deviceplugin.evaluate(twin_gpus(["3g.71gb", "1g.18gb"], None), "single").error or ""
    assert two_types.endswith("more than one MIG device type present on node")
    empty = deviceplugin.evaluate(twin_gpus([], None), "single").error or ""
    assert empty.endswith("device 0 has no MIG devices configured")
    assert "same migEnabled" not in two_types + empty


def test_device_plugin_mixed_refuses_a_compute_instance_profile(make_twin: Any) -> None:
    # rm.go AddDefaultResourcesToConfig adds patterns only for profiles with C == G; buildMigDeviceMap then fails
    # on a 1c.3g.71gb MIG device and the plugin exits: nothing is registered for the node.
    twin = make_twin("mixed", {"n": [gpu(0, "H200-141GB", [{"profile": "3g.71gb", "placement": 4}])]})
    g = twin.fleet.nodes["n"].gpus[0]
    with g.lock:
        (gi,) = g.gpu_instances.values()
        (ci,) = gi.compute_instances.values()
        g.destroy_compute_instance(gi, ci.id)
        g.create_compute_instance(gi, 0)  # a 1-slice compute instance in the 3g GPU instance
    assert [d.profile for d in g.mig_devices()] == ["1c.3g.71gb"]
    twin.operator.restart_device_plugin("n")
    twin.settle()
    log = twin.store.pod_log(NS, dp_pod(twin, "n")["metadata"]["name"], "nvidia-device-plugin").strip()
    assert log == (
        DP_OUTER
        + "error building MIG device map: "
        + VISIT_MIG
        + "MIG profile '1c.3g.71gb' does not match any resource patterns"
    )
    assert gpu_resources(twin, "n") == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.71gb": "0"}


def test_device_plugin_single_serves_compute_instance_profiles_as_nvidia_com_gpu() -> None:
    # under single the MIG pattern is `*` (rm.go), so a uniform node of 1c.* devices is served
    gpus = twin_gpus(["3g.71gb"])
    (gi,) = gpus[0].gpu_instances.values()
    (ci,) = gi.compute_instances.values()
    gpus[0].destroy_compute_instance(gi, ci.id)
    gpus[0].create_compute_instance(gi, 0)
    adv = deviceplugin.evaluate(gpus, "single")
    assert (adv.error, adv.resources) == (None, {"nvidia.com/gpu": 1})


def test_device_plugin_registers_nvidia_com_gpu_only_with_a_whole_gpu(make_twin: Any) -> None:
    # nvml_manager.go NewNVMLResourceManagers skips a resource without devices: on an all-MIG node under mixed the
    # plugin registers only the MIG resources; the node's nvidia.com/gpu: 0 is the kubelet keeping a name it had.
    twin = make_twin(
        "mixed", {"all": h200(ARTICLE), "half": [gpu(0, "H200-141GB", ARTICLE), gpu(1, "H200-141GB", None)]}
    )
    log = twin.store.pod_log(NS, dp_pod(twin, "all")["metadata"]["name"], "nvidia-device-plugin")
    assert "Registered device plugin for 'nvidia.com/mig-3g.71gb' with Kubelet" in log
    assert "'nvidia.com/gpu'" not in log
    assert gpu_resources(twin, "all")["nvidia.com/gpu"] == "0"
    log = twin.store.pod_log(NS, dp_pod(twin, "half")["metadata"]["name"], "nvidia-device-plugin")
    assert "Registered device plugin for 'nvidia.com/gpu' with Kubelet" in log
    assert gpu_resources(twin, "half")["nvidia.com/gpu"] == "1"
    assert deviceplugin.evaluate(twin_gpus(["7g.141gb"]), "mixed").resources == {"nvidia.com/mig-7g.141gb": 1}


def test_device_plugin_without_devices_waits_and_logs_it() -> None:
    adv = deviceplugin.evaluate(twin_gpus([]), "mixed")
    assert (adv.ok, adv.resources, adv.warnings) == (True, {}, ("device 0 has no MIG devices configured",))


@pytest.mark.parametrize(
    ("strategy", "cuts", "replicas"),
    [("mixed", (ARTICLE, ARTICLE), "0"), ("mixed", (ARTICLE, None), "1"), ("none", (ARTICLE, ARTICLE), "0")],
    ids=["mixed-all-mig", "mixed-with-a-full-gpu", "none-all-mig"],
)
def test_gfd_gpu_replicas_is_0_for_mig_gpus(
    make_twin: Any, strategy: str, cuts: tuple[list[dict[str, Any]] | None, ...], replicas: str
) -> None:
    # internal/lm/mig-strategy.go newGPULabelers: MIG-enabled GPUs get NewGPUResourceLabelerWithoutSharing
    # (resource.go getReplicas → 0); a full GPU of the same name overrides it with the configured 1.
    twin = make_twin(strategy, {"n": [gpu(i, "H200-141GB", c) for i, c in enumerate(cuts)]})
    assert labels(twin, "n")["nvidia.com/gpu.replicas"] == replicas


def test_gfd_single_product_replaces_the_plus_of_me_by_a_dot(make_twin: Any) -> None:
    # nvml-mig-device.go GetName replaces `+` by `.`; resource.go sanitise keeps `.`; the MIG labeler has the config,
    # so replicas is back to 1.
    twin = make_twin("single", {"a": [gpu(0, "A100-40GB", [{"profile": "1g.5gb+me"}])]})
    lab = labels(twin, "a")
    assert lab["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb.me"
    assert (lab["nvidia.com/gpu.count"], lab["nvidia.com/gpu.replicas"]) == ("1", "1")
    assert gpu_resources(twin, "a") == {"nvidia.com/gpu": "1"}


def test_s3_3_set_state_restores_all_five_deploy_labels_even_when_a_run_fails_early(make_twin: Any) -> None:
    # reconfigure.go setState: maybeSetTrue of the values read at the start of the run, for device-plugin, GFD,
    # dcgm-exporter, dcgm and nvsm ("false" stays, anything else, even absent, becomes "true"); client only when
    # it had a value. A config name that is not in the file fails at validateMigConfig, before any pause.
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    twin.store.patch(
        "nodes",
        "n",
        {"metadata": {"labels": {"nvidia.com/gpu.deploy.nvsm": None, "nvidia.com/gpu.deploy.dcgm": "false"}}},
    )
    twin.settle()
    set_config(twin, "n", "no-such-config")
    lab = labels(twin, "n")
    assert lab["nvidia.com/mig.config.state"] == "failed"
    assert lab["nvidia.com/gpu.deploy.nvsm"] == "true"
    assert lab["nvidia.com/gpu.deploy.dcgm"] == "false"
    assert lab["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert "nvidia.com/gpu.deploy.client" not in lab
    log = twin.operator.mig_manager_log["n"]
    assert "Error selecting MIG config: selected mig-config not present: no-such-config" in log


def test_s3_3_same_value_after_an_empty_one_is_a_new_run(make_twin: Any) -> None:
    # main.go SyncableMigConfig: Set("") wakes nobody, but the next non-empty value differs from "" and is run
    # again, even when it equals the value before (Get only compares with the last value read).
    twin = make_twin("mixed", {"n": h200(ARTICLE)})
    twin.store.patch(
        "clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"migManager": {"config": {"default": ""}}}}
    )
    twin.settle()
    value = labels(twin, "n")["nvidia.com/mig.config"]
    runs = len([ln for ln in twin.operator.mig_manager_log.get("n", []) if ln.startswith("Changing")])
    set_config(twin, "n", "")
    set_config(twin, "n", value)
    after = [ln for ln in twin.operator.mig_manager_log.get("n", []) if ln.startswith("Changing")]
    assert len(after) == runs + 1 and after[-1].endswith("'success'")
