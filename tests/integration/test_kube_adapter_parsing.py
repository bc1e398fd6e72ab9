"""Parsing of raw API objects into observed values (no server needed)."""

from __future__ import annotations

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.model.observed import LAYOUT_REFUSALS


def test_gpu_pods_only_with_effective_requests() -> None:
    cpu = {"metadata": {"name": "a", "namespace": "x"}, "spec": {"containers": [{"name": "c", "resources": {}}]}}
    assert kubeobserve.gpu_pod_from_json(cpu) is None
    gpu = {
        "metadata": {
            "name": "b",
            "namespace": "x",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "b-1", "controller": True}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.18gb": "2", "cpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }
    p = kubeobserve.gpu_pod_from_json(gpu)
    assert p is not None and p.node == "n1" and p.requested() == {"nvidia.com/mig-1g.18gb": 2}
    assert p.owner is not None and p.owner.name == "b-1"


def test_log_quotes() -> None:
    log = "I starting\nE boom: more than one MIG device type present on node\nI retrying in 5s\n"
    assert kubeobserve.quote_log(log, LAYOUT_REFUSALS) == "E boom: more than one MIG device type present on node"
    assert kubeobserve.quote_log("a\nlast words\n\n", LAYOUT_REFUSALS) == "last words"
    assert kubeobserve.quote_log("", LAYOUT_REFUSALS) is None
    mm = (
        "Updating to MIG config: x\n"
        "Error clearing MigConfig: error destroying Compute instance for profile '(0, 0)': In use by another client\n"
        "Changing the 'nvidia.com/mig.config.state' node label to 'failed'\n"
    )
    assert kubeobserve.mig_manager_error(
        mm
    ) is not None and "In use by another client" in kubeobserve.mig_manager_error(mm)  # type: ignore[operator]


def test_node_observation_is_decoded_once_and_a_bad_one_is_kept_as_a_reason() -> None:
    good = (
        '{"version":"v2","observer":"migplan/0.1.0","observedAt":"2026-12-02T10:00:00Z",'
        '"sources":{"nvml":"ok","podResources":"ok"},"gpus":[{"index":0,"uuid":"GPU-0","name":"NVIDIA H200",'
        '"migCapable":true,"mig":{"current":true,"pending":false},"holders":[],"instances":[{"profile":"7g.141gb",'
        '"start":0,"size":8,"gpuInstanceId":0,"uuid":"MIG-0","processes":[],"holders":[{"namespace":"ml",'
        '"pod":"a","container":"c","resource":"nvidia.com/mig-7g.141gb"}]}]}],"unknownDevices":[],"truncated":false}'
    )
    n = kubeobserve.node_from_json({"metadata": {"name": "n1", "annotations": {"migplan.io/mig-observed": good}}})
    assert n.observation is not None and n.observation_error is None and not n.malformed
    assert n.observation.gpus[0].instances[0].holders[0].pod_key == "ml/a"
    bad = kubeobserve.node_from_json({"metadata": {"name": "n2", "annotations": {"migplan.io/mig-observed": "{"}}})
    assert bad.observation is None and bad.observation_error and not bad.malformed  # MP547, not MP530
    none = kubeobserve.node_from_json({"metadata": {"name": "n3"}})
    assert none.observation is None and none.observation_error is None


def _mig_manager_pod(**spec: object) -> dict[str, object]:
    base: dict[str, object] = {
        "nodeName": "gpu-1",
        "containers": [{"name": "nvidia-mig-manager", "env": [{"name": "CONFIG_FILE", "value": "/x"}]}],
        "volumes": [{"name": "mig-parted-config", "configMap": {"name": "migplan-mig-parted"}}],
    }
    base.update(spec)
    return {"metadata": {"namespace": "gpu-operator", "labels": {"app": "nvidia-mig-manager"}}, "spec": base}


def test_the_configmap_a_mig_manager_pod_reads() -> None:
    """TransformMIGManager: CONFIG_FILE with the mig-parted-config volume's ConfigMap; without CONFIG_FILE the
    configs are generated (""); anything else (no such volume, a pod being deleted, hostile shapes) is unknown."""
    source = kubeobserve.mig_manager_source
    assert source(_mig_manager_pod()) == "migplan-mig-parted"
    assert source(_mig_manager_pod(containers=[{"name": "c", "env": [{"name": "DEFAULT_CONFIG_FILE"}]}])) == ""
    assert source(_mig_manager_pod(volumes=[])) is None
    deleting = _mig_manager_pod()
    deleting["metadata"] = {**deleting["metadata"], "deletionTimestamp": "2026-12-03T12:00:00Z"}  # type: ignore[dict-item]
    assert source(deleting) is None
    hostiles: tuple[dict[str, object], ...] = (
        {"volumes": "x"},
        {"volumes": [None, 3, {"name": "mig-parted-config", "configMap": {"name": 7}}]},
        {"containers": []},
        {"containers": [None]},
        {"containers": [{"env": "CONFIG_FILE"}]},
        {"containers": [{"env": [None, "x", {"name": ["CONFIG_FILE"]}]}]},
    )
    for hostile in hostiles:
        assert source(_mig_manager_pod(**hostile)) in (None, ""), hostile
    assert source({"metadata": None, "spec": []}) is None
