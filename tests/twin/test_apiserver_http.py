"""HTTP details of the API server twin not covered by the transcripts: /watch paths, selector transitions in
watches, bookmarks, tables for kubectl, OpenAPI v3 for kubectl's validation, aggregated discovery, auth."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import requests

from reconciler.twin.apiserver import ApiServerTwin


def _get(api: ApiServerTwin, path: str, token: str | None = "ok", **kw: Any) -> requests.Response:
    headers = dict(kw.pop("headers", {}))
    if token is not None:
        headers["Authorization"] = f"Bearer {api.token if token == 'ok' else token}"
    return requests.get(api.url + path, headers=headers, verify=str(api.ca_file), timeout=30, **kw)


def test_watch_path_selector_transitions_and_bookmark(fresh_apiserver: ApiServerTwin) -> None:
    api = fresh_apiserver
    store = api.store
    store.create("nodes", {"metadata": {"name": "n1", "labels": {"pool": "a"}}})
    rv = store.resource_version

    def writer() -> None:
        time.sleep(0.3)
        store.patch("nodes", "n1", {"metadata": {"labels": {"pool": "b"}}})  # leaves pool=a
        store.patch("nodes", "n1", {"metadata": {"labels": {"pool": "a"}}})  # enters again
        store.patch("nodes", "n1", {"metadata": {"labels": {"x": "1"}}})

    threading.Thread(target=writer).start()
    resp = _get(
        api,
        f"/api/v1/watch/nodes?labelSelector=pool%3Da&resourceVersion={rv}&timeoutSeconds=3&allowWatchBookmarks=true",
        stream=True,
    )
    assert resp.status_code == 200 and resp.headers["Transfer-Encoding"] == "chunked"
    events = [json.loads(line) for line in resp.iter_lines() if line]
    changes = [e for e in events if e["type"] != "BOOKMARK"]
    assert [e["type"] for e in changes] == ["DELETED", "ADDED", "MODIFIED"]
    assert changes[0]["object"]["metadata"]["labels"] == {"pool": "a"}
    (bookmark,) = [e for e in events if e["type"] == "BOOKMARK"]  # one, 2 s before the 3 s timeout
    assert set(bookmark["object"]["metadata"]) == {"resourceVersion"}


def test_watch_without_resource_version_starts_with_current_state(fresh_apiserver: ApiServerTwin) -> None:
    store = fresh_apiserver.store
    store.create("nodes", {"metadata": {"name": "n1"}})
    store.create("nodes", {"metadata": {"name": "n2"}})
    resp = _get(fresh_apiserver, "/api/v1/nodes?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dn2", stream=True)
    events = [json.loads(line) for line in resp.iter_lines() if line]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "n2")]


def test_tables_openapi_and_discovery(apiserver: ApiServerTwin) -> None:
    table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    apiserver.store.create(
        "nodes",
        {
            "metadata": {"name": "tbl-node"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.36.2"}},
        },
    )
    table = _get(
        apiserver, "/api/v1/nodes?fieldSelector=metadata.name%3Dtbl-node", headers={"Accept": table_accept}
    ).json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
    ]
    assert table["rows"][0]["cells"][:3] == ["tbl-node", "Ready", "<none>"]
    root = _get(apiserver, "/openapi/v3").json()
    assert "apis/nvidia.com/v1" in root["paths"]
    doc = _get(apiserver, root["paths"]["apis/nvidia.com/v1"]["serverRelativeURL"]).json()
    (op,) = [p["patch"] for p in doc["paths"].values()]
    assert op["x-kubernetes-group-version-kind"]["kind"] == "ClusterPolicy"
    assert "fieldValidation" in [p["name"] for p in op["parameters"]]
    agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    resp = _get(apiserver, "/apis", headers={"Accept": agg + ",application/json"})
    assert resp.headers["Content-Type"] == agg
    groups = [i["metadata"]["name"] for i in resp.json()["items"]]
    assert groups == [
        "apps",
        "events.k8s.io",
        "authorization.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "resource.k8s.io",  # Dynamic Resource Allocation (issue 27), after discovery.k8s.io as the real server
        "nvidia.com",
    ]


def test_auth_and_unknown_paths(apiserver: ApiServerTwin) -> None:
    assert _get(apiserver, "/version", token=None).status_code == 200
    anonymous = _get(apiserver, "/api/v1/nodes", token=None)
    assert anonymous.status_code == 403
    assert 'User "system:anonymous" cannot list resource "nodes"' in anonymous.json()["message"]
    assert _get(apiserver, "/api", token=None).status_code == 403
    assert _get(apiserver, "/version", token="wrong").status_code == 401
    text404 = _get(apiserver, "/apis/nope.example.com/v1/things")
    assert text404.status_code == 404 and text404.text == "404 page not found\n"
    json404 = _get(apiserver, "/api/v1/foos")
    assert json404.status_code == 404 and json404.json()["reason"] == "NotFound"


def test_deletecollection_and_request_counts(fresh_apiserver: ApiServerTwin) -> None:
    api = fresh_apiserver
    for i in range(3):
        api.store.create(
            "configmaps", {"metadata": {"name": f"cm{i}", "labels": {"drop": str(i < 2).lower()}}}, "default"
        )
    api.reset_counts()
    resp = requests.delete(
        api.url + "/api/v1/namespaces/default/configmaps?labelSelector=drop%3Dtrue",
        headers={"Authorization": f"Bearer {api.token}"},
        verify=str(api.ca_file),
        timeout=30,
    )
    assert resp.status_code == 200 and len(resp.json()["items"]) == 2
    assert [c["metadata"]["name"] for c in api.store.list("configmaps", "default")] == ["cm2"]
    assert api.request_counts() == {("DELETE", "configmaps", "deletecollection"): 1}


def test_binding_subresource(fresh_apiserver: ApiServerTwin) -> None:
    api = fresh_apiserver
    api.store.create(
        "pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}, "default"
    )
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"},
    }
    url = api.url + "/api/v1/namespaces/default/pods/p/binding"
    headers = {"Authorization": f"Bearer {api.token}", "Content-Type": "application/json"}
    resp = requests.post(url, json=body, headers=headers, verify=str(api.ca_file), timeout=30)
    assert resp.status_code == 201 and resp.json()["status"] == "Success"
    assert api.store.get("pods", "p", "default")["spec"]["nodeName"] == "gpu-1"
    again = requests.post(url, json=body, headers=headers, verify=str(api.ca_file), timeout=30)
    assert again.status_code == 409


def test_namespace_status_subresource_path(fresh_apiserver: ApiServerTwin) -> None:
    resp = _get(fresh_apiserver, "/api/v1/namespaces/default/status")
    assert resp.status_code == 200 and resp.json()["status"] == {"phase": "Active"}


def test_watch_list_sends_initial_events_end_bookmark(fresh_apiserver: ApiServerTwin) -> None:
    store = fresh_apiserver.store
    store.create("nodes", {"metadata": {"name": "n1"}})
    rv = store.resource_version
    resp = _get(
        fresh_apiserver,
        "/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
        "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
        stream=True,
    )
    events = [json.loads(line) for line in resp.iter_lines() if line]
    assert [e["type"] for e in events[:2]] == ["ADDED", "BOOKMARK"]
    end = events[1]["object"]["metadata"]
    assert end == {"resourceVersion": str(rv), "annotations": {"k8s.io/initial-events-end": "true"}}


def test_rbac_workload_kinds_and_request_log(fresh_apiserver: ApiServerTwin) -> None:
    api = fresh_apiserver
    headers = {"Authorization": f"Bearer {api.token}", "Content-Type": "application/json"}
    manifests = [
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            {
                "kind": "Role",
                "metadata": {"name": "r"},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
            },
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "b"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "c"},
                "subjects": [{"kind": "ServiceAccount", "name": "migplan", "namespace": "default"}],
            },
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            {
                "kind": "Deployment",
                "metadata": {"name": "d"},
                "spec": {
                    "selector": {"matchLabels": {"a": "b"}},
                    "template": {
                        "metadata": {"labels": {"a": "b"}},
                        "spec": {"containers": [{"name": "c", "image": "i:1"}]},
                    },
                },
            },
        ),
        (
            "/api/v1/namespaces/default/services",
            {"kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 8080}]}},
        ),
    ]
    api.reset_counts()
    for path, body in manifests:
        resp = requests.post(api.url + path, json=body, headers=headers, verify=str(api.ca_file), timeout=30)
        assert resp.status_code == 201, resp.text
    deploy = api.store.get("deployments.apps", "d", "default")
    assert deploy["spec"]["replicas"] == 1 and deploy["metadata"]["generation"] == 1
    log = api.request_log()
    assert [(r.verb, r.group, r.resource, r.namespace) for r in log] == [
        ("create", "rbac.authorization.k8s.io", "roles", "default"),
        ("create", "rbac.authorization.k8s.io", "clusterrolebindings", ""),
        ("create", "apps", "deployments", "default"),
        ("create", "", "services", "default"),
    ]
    assert all(r.authenticated for r in log)


def test_service_account_tokens_are_authorized_by_rbac(fresh_apiserver: ApiServerTwin) -> None:
    api = fresh_apiserver
    store = api.store
    store.create("nodes", {"metadata": {"name": "n1"}})
    store.create(
        "clusterroles.rbac.authorization.k8s.io",
        {
            "metadata": {"name": "node-reader"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
        },
    )
    store.create(
        "clusterrolebindings.rbac.authorization.k8s.io",
        {
            "metadata": {"name": "ctl-reads-nodes"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "default"}],
        },
    )
    store.create(
        "roles.rbac.authorization.k8s.io",
        {
            "metadata": {"name": "cm-writer"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}],
        },
        "default",
    )
    store.create(
        "rolebindings.rbac.authorization.k8s.io",
        {
            "metadata": {"name": "ctl-writes-cm"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-writer"},
            "subjects": [{"kind": "ServiceAccount", "name": "ctl"}],
        },
        "default",
    )
    token = api.service_account_token("default", "ctl")
    assert _get(api, "/api/v1/nodes", token=token).status_code == 200
    assert _get(api, "/api", token=token).status_code == 200  # discovery for every authenticated user
    denied = requests.patch(
        api.url + "/api/v1/nodes/n1",
        json={"metadata": {"labels": {"a": "b"}}},
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"},
        verify=str(api.ca_file),
        timeout=30,
    )
    assert denied.status_code == 403
    assert denied.json()["message"] == (
        'nodes "n1" is forbidden: User "system:serviceaccount:default:ctl" cannot patch resource "nodes" in API '
        'group "" at the cluster scope'
    )
    created = requests.post(
        api.url + "/api/v1/namespaces/default/configmaps",
        json={"metadata": {"name": "c"}},
        headers={"Authorization": f"Bearer {token}"},
        verify=str(api.ca_file),
        timeout=30,
    )
    assert created.status_code == 201
    other_ns = _get(api, "/api/v1/namespaces/kube-system/configmaps", token=token)
    assert other_ns.status_code == 403 and 'in the namespace "kube-system"' in other_ns.json()["message"]
