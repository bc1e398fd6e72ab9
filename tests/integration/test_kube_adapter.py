"""The kube adapter against the API server twin: list-only paginated observation, one write per Change,
dry runs that persist nothing, and API errors translated into migplan's error kinds."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube.cluster import KubeCluster, NotFound
from reconciler.model.errors import MigplanError, Transient
from reconciler.model.inventory import GpuOperatorSettings
from reconciler.model.plans import Action, Change, Kind
from reconciler.twin.apiserver import ApiServerTwin

OPS = GpuOperatorSettings()
ERROR_LINE = (
    "E1202 10:00:00.000000 1 main.go:297] error starting plugins: error getting plugins: unable to create plugins: "
    "failed to construct resource managers: error building device map: invalid MIG configuration: error visiting "
    "devices: error visiting device: error visiting MIG device: more than one MIG device type present on node"
)

CLUSTER_POLICY: dict[str, Any] = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "cluster-policy"},
    "spec": {
        "daemonsets": {},
        "dcgm": {},
        "dcgmExporter": {},
        "devicePlugin": {"config": {"name": "old-plugin-config", "default": "any"}},
        "driver": {},
        "gfd": {},
        "nodeStatusExporter": {},
        "operator": {},
        "toolkit": {},
        "mig": {"strategy": "single"},
    },
}
DAEMONSET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": OPS.device_plugin_daemonset, "namespace": OPS.namespace, "labels": {"app": "dp"}},
    "spec": {
        "selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
        "template": {
            "metadata": {"labels": {"name": "nvidia-device-plugin-ds"}},
            "spec": {
                "containers": [{"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]
            },
        },
    },
}


def _pod(ns: str, name: str, node: str | None, resources: dict[str, str], **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x", "resources": {"limits": resources}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, **meta}, "spec": spec}


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServerTwin, Path]]:
    with ApiServerTwin(namespaces=("default", "ml", OPS.namespace)) as api:
        st = api.store
        for i in range(7):
            labels = {"nvidia.com/gpu.present": "true"} if i < 5 else {}
            st.create(
                "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": labels}}
            )
        st.patch(
            "nodes",
            "node-0",
            {"status": {"capacity": {"nvidia.com/mig-1g.18gb": "4"}, "allocatable": {"nvidia.com/mig-1g.18gb": "4"}}},
            subresource="status",
        )
        st.create("clusterpolicies.nvidia.com", copy.deepcopy(CLUSTER_POLICY))
        ds = st.create("daemonsets.apps", copy.deepcopy(DAEMONSET), OPS.namespace)
        owner = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": ds["metadata"]["name"],
            "uid": ds["metadata"]["uid"],
            "controller": True,
        }
        for i, ready in ((0, False), (1, True)):
            p = _pod(OPS.namespace, f"dp-{i}", f"node-{i}", {}, ownerReferences=[owner])
            st.create("pods", p, OPS.namespace)
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
            st.patch("pods", f"dp-{i}", {"status": status}, OPS.namespace, subresource="status")
        st.set_pod_log(OPS.namespace, "dp-0", "I1202 starting\n" + ERROR_LINE + "\n")
        st.set_pod_log(OPS.namespace, "dp-1", ERROR_LINE + "\n")  # never read: the pod is Ready
        st.create("pods", _pod("ml", "vllm-0", "node-0", {"nvidia.com/mig-1g.18gb": "1"}), "ml")
        st.create("pods", _pod("ml", "web", "node-6", {"cpu": "1"}), "ml")
        st.create(
            "configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "old-plugin-config", "namespace": OPS.namespace},
                "data": {"any": "version: v1\nflags:\n  migStrategy: single\n"},
            },
            OPS.namespace,
        )
        kubeconfig = api.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        yield api, kubeconfig


@pytest.fixture()
def cluster(twin: tuple[ApiServerTwin, Path]) -> Iterator[KubeCluster]:
    kc = KubeCluster.from_kubeconfig(str(twin[1]), page_size=2)
    yield kc
    kc.close()


def test_observe_lists_only_paginated_and_reads_logs_of_unready_pods_only(
    twin: tuple[ApiServerTwin, Path], cluster: KubeCluster
) -> None:
    api, _ = twin
    api.reset_counts()
    observed = cluster.observe(OPS)
    counts = api.request_counts()
    assert {verb for (_, _, verb) in counts} == {"list", "get"}
    assert counts[("GET", "nodes", "list")] == 4  # 7 nodes, page size 2
    assert all(res == "pods/log" for (_, res, verb) in counts if verb == "get")
    assert sum(n for (_, res, _), n in counts.items() if res == "pods/log") == 1  # only dp-0 (not Ready)
    assert set(observed.nodes) == {f"node-{i}" for i in range(7)}
    assert observed.nodes["node-0"].advertised("nvidia.com/mig-1g.18gb") == 4
    assert [p.key for p in observed.pods] == ["ml/vllm-0"]  # the CPU pod and the plugin pods are not kept
    assert observed.device_plugin is not None
    dp = {p.name: p for p in observed.device_plugin.pods}
    assert dp["dp-0"].ready is False and dp["dp-0"].log_line == ERROR_LINE
    assert dp["dp-1"].ready is True and dp["dp-1"].log_line is None
    assert observed.cluster_policy is not None
    assert observed.cluster_policy.mig_strategy == "single"
    assert observed.cluster_policy.device_plugin_config_name == "old-plugin-config"
    assert observed.device_plugin_config_map is not None and "any" in observed.device_plugin_config_map.data
    assert observed.mig_config_map is None


def _cm_change(action: Action, patch: dict[str, Any]) -> Change:
    return Change(f"configmap/{OPS.namespace}/{OPS.mig_config_map}", action, Kind.MIG_CONFIG_MAP, patch=patch)


def test_writes_use_one_field_manager_and_dry_run_persists_nothing(
    twin: tuple[ApiServerTwin, Path], cluster: KubeCluster
) -> None:
    api, _ = twin
    st = api.store
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": OPS.mig_config_map,
            "namespace": OPS.namespace,
            "labels": {"app.kubernetes.io/managed-by": "migplan"},
        },
        "data": {"config.yaml": "version: v1\n"},
    }
    cluster.apply(_cm_change(Action.CREATE, body), dry_run=True)
    with pytest.raises(Exception, match=r"not found|NotFound|404"):
        st.get("configmaps", OPS.mig_config_map, OPS.namespace)
    cluster.apply(_cm_change(Action.CREATE, body))
    cm = st.get("configmaps", OPS.mig_config_map, OPS.namespace)
    assert cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "migplan"
    # (field manager "migplan" is passed on every write; the twin does not keep managedFields)

    node_before = st.get("nodes", "node-1")
    label = Change(
        "node/node-1",
        Action.CONFIGURE,
        Kind.NODE_MIG_CONFIG,
        patch={"metadata": {"labels": {"nvidia.com/mig.config": "cfg-a"}}},
    )
    cluster.apply(label, dry_run=True)
    assert st.get("nodes", "node-1")["metadata"]["resourceVersion"] == node_before["metadata"]["resourceVersion"]
    cluster.apply(label)
    labels = st.get("nodes", "node-1")["metadata"]["labels"]
    assert labels == {**node_before["metadata"]["labels"], "nvidia.com/mig.config": "cfg-a"}  # other labels kept


def test_cluster_policy_merge_patch_and_rollout_restart(twin: tuple[ApiServerTwin, Path], cluster: KubeCluster) -> None:
    api, _ = twin
    st = api.store
    cp = st.get("clusterpolicies.nvidia.com", "cluster-policy")
    patch = {
        "metadata": {"resourceVersion": cp["metadata"]["resourceVersion"]},
        "spec": {
            "mig": {"strategy": "mixed"},
            "devicePlugin": {"config": None},
            "migManager": {"config": {"name": OPS.mig_config_map}},
        },
    }
    cluster.apply(Change("clusterpolicy/cluster-policy", Action.CONFIGURE, Kind.CLUSTER_POLICY, patch=patch))
    after = st.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]
    assert after["mig"]["strategy"] == "mixed"
    assert "config" not in after["devicePlugin"]
    assert after["migManager"]["config"]["name"] == OPS.mig_config_map
    # the same patch again carries a stale resourceVersion: a 409, reported as a non-retried Transient
    with pytest.raises(Transient) as exc:
        cluster.apply(Change("clusterpolicy/cluster-policy", Action.CONFIGURE, Kind.CLUSTER_POLICY, patch=patch))
    assert exc.value.code == "MP553"

    gen = st.get("daemonsets.apps", OPS.device_plugin_daemonset, OPS.namespace)["metadata"]["generation"]
    restart = {
        "spec": {
            "template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-02T10:00:00Z"}}}
        }
    }
    cluster.apply(
        Change(
            f"daemonset/{OPS.namespace}/{OPS.device_plugin_daemonset}",
            Action.CONFIGURE,
            Kind.RESTART_DEVICE_PLUGIN,
            patch=restart,
        )
    )
    ds = st.get("daemonsets.apps", OPS.device_plugin_daemonset, OPS.namespace)
    assert ds["metadata"]["generation"] == gen + 1
    assert (
        ds["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] == "2026-12-02T10:00:00Z"
    )


def test_errors_are_translated(cluster: KubeCluster) -> None:
    with pytest.raises(NotFound):
        cluster.apply(
            Change("node/nope", Action.CONFIGURE, Kind.NODE_MIG_CONFIG, patch={"metadata": {"labels": {"a": "b"}}})
        )
    with pytest.raises(MigplanError) as exc:
        bogus = {"spec": {"mig": {"strategy": "bogus"}}}
        cluster.apply(Change("clusterpolicy/cluster-policy", Action.CONFIGURE, Kind.CLUSTER_POLICY, patch=bogus))
    assert exc.value.code == "MP550" and "422" in exc.value.message


def test_unreachable_server_is_transient(tmp_path: Path) -> None:
    with ApiServerTwin() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "config")
    kc = KubeCluster.from_kubeconfig(str(kubeconfig))  # the server is gone now
    with pytest.raises(Transient) as exc:
        kc.observe(OPS)
    assert exc.value.code == "MP555"


def test_log_reads_are_capped_per_cycle(twin: tuple[ApiServerTwin, Path], cluster: KubeCluster) -> None:
    api, _ = twin
    cluster.max_log_reads = 0
    api.reset_counts()
    observed = cluster.observe(OPS)
    assert not any(res == "pods/log" for (_, res, _) in api.request_counts())
    assert observed.device_plugin is not None
    dp = {p.name: p for p in observed.device_plugin.pods}
    assert dp["dp-0"].ready is False and dp["dp-0"].log_read is False and dp["dp-0"].log_line is None
