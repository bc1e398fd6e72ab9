"""The official `kubernetes` Python client works unmodified against the API server twin."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from reconciler.twin.apiserver import ApiServerTwin, clusterpolicy_required_spec


@pytest.fixture(scope="module")
def api_client(kubeconfig: Path) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    config.load_kube_config(str(kubeconfig), client_configuration=cfg)
    with client.ApiClient(cfg) as api:
        yield api


def _pod(name: str, requests: dict[str, str] | None, limits: dict[str, str] | None, node: str | None = None) -> Any:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    spec: dict[str, Any] = {
        "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base", "resources": resources}]
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_nodes_crud_selectors_and_pagination(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    for i in range(7):
        labels = {"rack": "r12" if i % 2 else "r13", "nvidia.com/gpu.product": "NVIDIA-H200"}
        if i < 3:
            labels["nvidia.com/mig.config"] = "all-balanced"
        core.create_node({"metadata": {"name": f"cli-node-{i}", "labels": labels}})
    with pytest.raises(ApiException) as exc:
        core.create_node({"metadata": {"name": "cli-node-0"}})
    assert exc.value.status == 409 and "already exists" in exc.value.body

    names = {n.metadata.name for n in core.list_node(label_selector="rack=r12,nvidia.com/mig.config").items}
    assert names == {"cli-node-1"}
    names = {n.metadata.name for n in core.list_node(label_selector="!nvidia.com/mig.config,rack in (r13)").items}
    assert names == {"cli-node-4", "cli-node-6"}

    seen: list[str] = []
    cont = None
    pages = 0
    while True:
        page = core.list_node(limit=3, _continue=cont, label_selector="nvidia.com/gpu.product=NVIDIA-H200")
        seen += [n.metadata.name for n in page.items]
        pages += 1
        cont = page.metadata._continue
        if not cont:
            break
    assert seen == sorted(f"cli-node-{i}" for i in range(7)) and pages == 3


def test_patch_flavours_and_stale_replace(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    core.create_node({"metadata": {"name": "cli-patch", "labels": {"a": "1"}}})
    node = core.patch_node("cli-patch", {"metadata": {"labels": {"b": "2"}}})
    assert node.metadata.labels == {"a": "1", "b": "2"}
    node = core.patch_node("cli-patch", [{"op": "remove", "path": "/metadata/labels/a"}])
    assert node.metadata.labels == {"b": "2"}
    with pytest.raises(ApiException) as exc:
        core.patch_node("cli-patch", [{"op": "test", "path": "/metadata/labels/b", "value": "3"}])
    assert exc.value.status == 422

    stale = core.read_node("cli-patch")
    core.patch_node("cli-patch", {"metadata": {"labels": {"c": "3"}}})
    stale.metadata.labels["d"] = "4"
    with pytest.raises(ApiException) as exc:
        core.replace_node("cli-patch", stale)
    assert exc.value.status == 409 and "the object has been modified" in exc.value.body
    assert "d" not in core.read_node("cli-patch").metadata.labels

    status = {"status": {"capacity": {"nvidia.com/mig-1g.18gb": "4"}, "allocatable": {"nvidia.com/mig-1g.18gb": "3"}}}
    core.patch_node_status("cli-patch", status)
    core.patch_node("cli-patch", {"status": {"capacity": {"nvidia.com/mig-1g.18gb": "99"}}})
    assert core.read_node("cli-patch").status.capacity == {"nvidia.com/mig-1g.18gb": "4"}


def test_pod_extended_resource_rules_and_log(apiserver: ApiServerTwin, api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    mig = "nvidia.com/mig-3g.71gb"
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", _pod("cli-neq", {mig: "1"}, {mig: "2"}))
    assert exc.value.status == 422
    assert f"must be equal to {mig} limit of 2" in exc.value.body
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", _pod("cli-noreq", {mig: "1"}, None))
    assert "Limit must be set for non overcommitable resources" in exc.value.body
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", _pod("cli-frac", None, {mig: "500m"}))
    assert "must be an integer" in exc.value.body
    assert core.list_namespaced_pod("default", field_selector="metadata.name=cli-neq").items == []

    pod = core.create_namespaced_pod("default", _pod("cli-ok", None, {mig: "1"}, node="gpu-x"))
    assert pod.spec.containers[0].resources.requests == {mig: "1"}
    assert pod.status.phase == "Pending" and pod.status.qos_class == "BestEffort"
    apiserver.store.set_pod_log("default", "cli-ok", "line one\nline two\n")
    assert core.read_namespaced_pod_log("cli-ok", "default") == "line one\nline two\n"
    bound = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-x,status.phase!=Succeeded").items
    assert [p.metadata.name for p in bound] == ["cli-ok"]


def test_daemonset_restart_bumps_generation(api_client: client.ApiClient) -> None:
    apps = client.AppsV1Api(api_client)
    body = {
        "metadata": {"name": "cli-dp"},
        "spec": {
            "selector": {"matchLabels": {"name": "cli-dp"}},
            "template": {
                "metadata": {"labels": {"name": "cli-dp"}},
                "spec": {"containers": [{"name": "dp", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]},
            },
        },
    }
    ds = apps.create_namespaced_daemon_set("gpu-operator", body)
    assert ds.metadata.generation == 1
    restart = {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}}
    ds = apps.patch_namespaced_daemon_set("cli-dp", "gpu-operator", restart)
    assert ds.metadata.generation == 2
    assert ds.metadata.annotations["deprecated.daemonset.template.generation"] == "2"
    ds = apps.patch_namespaced_daemon_set("cli-dp", "gpu-operator", {"metadata": {"annotations": {"x": "y"}}})
    assert ds.metadata.generation == 2


def test_clusterpolicy_custom_objects(api_client: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    crd = ext.read_custom_resource_definition("clusterpolicies.nvidia.com")
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    custom = client.CustomObjectsApi(api_client)
    spec = {k: {} for k in clusterpolicy_required_spec()}
    spec["mig"] = {"strategy": "single"}
    cp = custom.create_cluster_custom_object(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cli-policy"}, "spec": spec},
    )
    assert cp["spec"]["operator"] == {"runtimeClass": "nvidia"}  # schema default applied
    cp = custom.patch_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies", "cli-policy", {"spec": {"mig": {"strategy": "mixed"}}}
    )
    assert cp["spec"]["mig"]["strategy"] == "mixed" and cp["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as exc:
        custom.patch_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", "cli-policy", {"spec": {"mig": {"strategy": "bogus"}}}
        )
    assert exc.value.status == 422
    assert 'supported values: "none", "single", "mixed"' in json.loads(exc.value.body)["message"]
    cp = custom.patch_cluster_custom_object_status(
        "nvidia.com", "v1", "clusterpolicies", "cli-policy", {"status": {"state": "ready"}}
    )
    assert cp["status"]["state"] == "ready" and cp["metadata"]["generation"] == 2


def test_lease_conflict_and_events(api_client: client.ApiClient) -> None:
    coord = client.CoordinationV1Api(api_client)
    lease = coord.create_namespaced_lease(
        "gpu-operator",
        {
            "metadata": {"name": "cli-leader"},
            "spec": {
                "holderIdentity": "a",
                "leaseDurationSeconds": 15,
                "renewTime": "2026-12-02T10:28:04.123456Z",
                "acquireTime": "2026-12-02T10:28:04.123456Z",
            },
        },
    )
    lease.spec.holder_identity = "b"
    renewed = coord.replace_namespaced_lease("cli-leader", "gpu-operator", lease)
    assert renewed.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as exc:
        coord.replace_namespaced_lease("cli-leader", "gpu-operator", lease)
    assert exc.value.status == 409

    events = client.EventsV1Api(api_client)
    events.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "cli-ev"},
            "eventTime": "2026-12-02T10:28:04.898313Z",
            "reportingController": "nvidia.com/migplan",
            "reportingInstance": "x",
            "action": "Reconfigure",
            "reason": "MigReconfigured",
            "type": "Normal",
            "note": "done",
            "regarding": {"apiVersion": "v1", "kind": "Node", "name": "cli-node-0"},
        },
    )
    got = events.list_namespaced_event("default", field_selector="regarding.name=cli-node-0").items
    assert [e.note for e in got] == ["done"]
    core_events = (
        client.CoreV1Api(api_client)
        .list_event_for_all_namespaces(field_selector="involvedObject.name=cli-node-0")
        .items
    )
    assert [e.message for e in core_events] == ["done"]


def test_watch_stream_from_resource_version(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    core.create_node({"metadata": {"name": "cli-watch"}})
    rv = core.list_node().metadata.resource_version

    def writer() -> None:
        time.sleep(0.3)
        core.patch_node("cli-watch", {"metadata": {"labels": {"w": "1"}}})
        core.delete_node("cli-watch")

    threading.Thread(target=writer).start()
    seen = []
    for ev in watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=3):
        seen.append((ev["type"], ev["object"].metadata.name))
    assert seen == [("MODIFIED", "cli-watch"), ("DELETED", "cli-watch")]


def test_bad_token_is_401(apiserver: ApiServerTwin, kubeconfig: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text(kubeconfig.read_text().replace(apiserver.token, "wrong-token"))
    cfg = client.Configuration()
    config.load_kube_config(str(bad), client_configuration=cfg)
    with client.ApiClient(cfg) as api, pytest.raises(ApiException) as exc:
        client.CoreV1Api(api).list_node()
    assert exc.value.status == 401


def test_request_counts_only_lists(apiserver: ApiServerTwin, api_client: client.ApiClient) -> None:
    apiserver.reset_counts()
    core = client.CoreV1Api(api_client)
    core.list_node(limit=2)
    core.list_pod_for_all_namespaces()
    counts = apiserver.request_counts()
    assert counts == {("GET", "nodes", "list"): 1, ("GET", "pods", "list"): 1}
