"""`spec.devicePlugin.env` MIG_STRATEGY overrides `spec.mig.strategy` (gpu-operator TransformDevicePlugin): the twin's
operator renders it that way, and migplan reports the override naming the field (MP565) instead of waiting for a
strategy that never comes (issue 26 item 3)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.observe import cluster_policy_from_json
from reconciler.commands.reconcile import load_desired
from reconciler.engine import reconcile_once
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
CP = "clusterpolicies.nvidia.com"


def _plugin_env(twin: ClusterTwin) -> dict[str, str]:
    ds = twin.store.get("daemonsets.apps", "nvidia-device-plugin-daemonset", "gpu-operator")
    (c,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-device-plugin"]
    return {e["name"]: e.get("value", "") for e in c["env"]}


def test_a_mig_strategy_in_the_device_plugin_env_is_reported_as_the_override_it_is() -> None:
    desired, diags = load_desired(INVENTORY)
    assert desired is not None, [str(d) for d in diags]
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        assert _plugin_env(twin)["MIG_STRATEGY"] == "mixed"
        env = [{"name": "MIG_STRATEGY", "value": "single"}, {"name": "FOO", "value": "1"}]
        twin.store.patch(CP, "cluster-policy", {"spec": {"devicePlugin": {"env": env}}})
        twin.settle()
        assert _plugin_env(twin)["MIG_STRATEGY"] == "single"  # the env entry wins over spec.mig.strategy
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
        try:
            result = reconcile_once(desired=desired, cluster=cluster, now=datetime.now(UTC))
        finally:
            cluster.close()
        assert result.report is not None
        (override,) = [f for f in result.report.findings if f.code == "MP565"]
        assert "spec.devicePlugin.env" in override.message and "MIG_STRATEGY=single" in override.message
        assert twin.store.get(CP, "cluster-policy")["spec"]["mig"]["strategy"] == "mixed"


def test_the_env_list_is_read_as_the_operator_applies_it() -> None:
    cp = {
        "metadata": {"name": "cp"},
        "spec": {
            "devicePlugin": {
                "env": [
                    {"name": "MIG_STRATEGY", "value": "none"},
                    "garbage",
                    {"name": 3, "value": "x"},
                    {"name": "MIG_STRATEGY", "value": "single"},
                    {"name": "EMPTY"},
                ]
            }
        },
    }
    assert cluster_policy_from_json(cp).device_plugin_env == {"MIG_STRATEGY": "single", "EMPTY": ""}
    assert cluster_policy_from_json({"spec": {"devicePlugin": {"env": "nope"}}}).device_plugin_env == {}
