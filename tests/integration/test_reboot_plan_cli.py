"""`migplan plan --kubeconfig` on a cluster whose mig-manager runs with WITH_REBOOT (issue 26 item 2): a merge that
turns MIG off on a GPU of gpu-0 (a MIG mode flip) may make mig-manager reboot the node, and the plan says so with
every pod a reboot ends there, GPU or not (a DaemonSet's pod is not counted: it comes back by itself)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from gitserver import cluster_yaml, git, node_yaml

from reconciler.cli import cli
from reconciler.twin.apiserver import ApiServerTwin, clusterpolicy_required_spec

MIG_OFF = """apiVersion: migplan/v1
kind: Node
metadata: {name: gpu-0}
spec:
  gpus:
    - {index: 0, model: H200-141GB, mig: {enabled: false}}
"""


def _repo(tmp_path: Path) -> Path:
    work = tmp_path / "inv"
    git("init", "-q", "-b", "main", str(work))
    (work / "nodes").mkdir(parents=True)
    (work / "cluster.yaml").write_text(cluster_yaml())
    (work / "nodes/gpu-0.yaml").write_text(node_yaml("gpu-0"))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "base", cwd=work)
    git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "nodes/gpu-0.yaml").write_text(MIG_OFF)
    git("commit", "-q", "-am", "gpu-0 whole", cwd=work)
    return work


def _pod(name: str, owner: str) -> dict[str, object]:
    ref = {"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner", "uid": name, "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [ref]},
        "spec": {"nodeName": "gpu-0", "containers": [{"name": "c", "image": "x"}]},
    }


def _plan(work: Path, tmp_path: Path, env: list[dict[str, str]]) -> tuple[dict[str, object], str]:
    with ApiServerTwin() as api:
        api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0"}})
        spec: dict[str, object] = {k: {} for k in clusterpolicy_required_spec()}
        spec["migManager"] = {"env": env}
        api.store.create("clusterpolicies.nvidia.com", {"metadata": {"name": "cluster-policy"}, "spec": spec})
        for name, owner in (("web-0", "ReplicaSet"), ("etl-0", "Job"), ("exporter", "DaemonSet")):
            api.store.create("pods", _pod(name, owner), namespace="default")
            api.store.patch("pods", name, {"status": {"phase": "Running"}}, namespace="default", subresource="status")
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        args = ["plan", "--repo", str(work), "--from", "main", "--to", "feature", "--kubeconfig", kubeconfig]
        as_json = CliRunner().invoke(cli, [*args, "-o", "json"])
        as_text = CliRunner().invoke(cli, args)
    assert as_json.exit_code == 0 and as_text.exit_code == 0, (as_json.output, as_text.output)
    return json.loads(as_json.output), as_text.output


def test_plan_says_may_reboot_with_every_pod_a_reboot_ends(tmp_path: Path) -> None:
    doc, text = _plan(_repo(tmp_path), tmp_path, [{"name": "WITH_REBOOT", "value": "true"}])
    disruption = doc["disruption"]
    assert isinstance(disruption, dict)
    assert disruption["host"] == [
        {"node": "gpu-0", "not_ready": False, "may_reboot": {"pods": 2, "names": ["default/etl-0", "default/web-0"]}}
    ]
    assert "may reboot (WITH\\_REBOOT, if the MIG mode change fails): 2 pods end (default/etl-0, default/web-0)" in text


def test_without_with_reboot_the_plan_says_no_reboot(tmp_path: Path) -> None:
    doc, text = _plan(_repo(tmp_path), tmp_path, [{"name": "WITH_REBOOT", "value": "false"}])
    disruption = doc["disruption"]
    assert isinstance(disruption, dict) and disruption["host"] == []
    assert "may reboot" not in text
