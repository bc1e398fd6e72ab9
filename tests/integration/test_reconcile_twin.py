"""`reconcile_once` and `migplan reconcile --once` end to end on the cluster twin (API server + GPU Operator).

The article's story first: a cluster on the Helm default `single` strategy, the heterogeneous H200 layout
and an old device-plugin config; then the disruption guard, a failing mig-manager, dry runs and the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.inventories import recut_gpu1_to_sevens
from helpers.twinclock import TwinClock

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.cycles import EXIT_DRIFT, EXIT_ERROR, EXIT_IN_SYNC
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import MIXED_LAYOUT_ERROR
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
NODE = "gpu-h200-01"


def _desired(root: Path = INVENTORY) -> DesiredState:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


# One simulated clock for every twin of this module and the cycles run against them: each cycle runs one
# configPropagationSeconds after the one before (a controller's next cycle), and the twins' mig-manager reads the
# ConfigMap as the kubelet has projected it by then.
CLOCK = TwinClock()


def _run(twin: ClusterTwin, desired: DesiredState, *, dry_run: bool = False) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig), page_size=2)
    try:
        return reconcile_once(desired=desired, cluster=cluster, dry_run=dry_run, now=CLOCK.cycle_now())
    finally:
        cluster.close()


def _instant_inventory(root: Path) -> Path:
    """The example inventory with configPropagationSeconds: 0, for the CLI runs (real clock, seconds apart)
    against a twin that projects ConfigMaps at once: these tests are about outputs and exit codes."""
    shutil.copytree(INVENTORY, root)
    cluster = root / "cluster.yaml"
    text = cluster.read_text()
    cluster.write_text(text.replace("  apply:\n", "  apply:\n    configPropagationSeconds: 0\n", 1))
    return root


def _writes(counts: dict[tuple[str, str, str], int]) -> dict[tuple[str, str, str], int]:
    return {k: v for k, v in counts.items() if k[2] not in ("list", "get", "watch")}


@pytest.fixture()
def article_twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(
        INVENTORY, strategy="single", device_plugin_config="old-plugin-config", **CLOCK.twin_kwargs()
    ) as twin:
        twin.settle()
        yield twin


@pytest.fixture()
def article_twin_instant() -> Iterator[ClusterTwin]:
    """The same cluster with a kubelet that projects ConfigMaps at once (for the real-clock CLI runs)."""
    with ClusterTwin.from_inventory(INVENTORY, strategy="single", device_plugin_config="old-plugin-config") as twin:
        twin.settle()
        yield twin


def test_article_story_converges_and_second_run_writes_nothing(article_twin: ClusterTwin) -> None:
    twin, desired = article_twin, _desired()
    first = _run(twin, desired)
    assert first.report is not None and not first.errors
    codes = {(f.node, f.code) for f in first.report.findings}
    assert {(None, "MP502"), (None, "MP503"), (NODE, "MP504")} <= codes
    refusal = next(f for f in first.report.findings if f.code == "MP504" and f.node == NODE)
    assert MIXED_LAYOUT_ERROR in refusal.message  # the device plugin's own log line, quoted
    kinds = [c.kind for c in first.applied]
    assert kinds.index(Kind.MIG_CONFIG_MAP) < kinds.index(Kind.CLUSTER_POLICY)
    # The device-plugin DaemonSet is the operator's: the strategy in its env (applyMIGConfiguration) rolls it.
    assert Kind.RESTART_DEVICE_PLUGIN not in kinds
    assert first.status.exit_code == EXIT_DRIFT

    store = twin.store
    spec = store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]
    assert spec["mig"]["strategy"] == "mixed"
    assert "config" not in spec["devicePlugin"]  # the old config removed explicitly
    assert spec["migManager"]["config"]["name"] == desired.cluster.gpu_operator.mig_config_map
    twin.settle()
    ds = store.get("daemonsets.apps", "nvidia-device-plugin-daemonset", "gpu-operator")
    (plugin,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-device-plugin"]
    assert {"name": "MIG_STRATEGY", "value": "mixed"} in plugin["env"]
    assert "kubectl.kubernetes.io/restartedAt" not in (ds["spec"]["template"]["metadata"].get("annotations") or {})

    allocatable = store.get("nodes", NODE)["status"]["allocatable"]
    assert allocatable["nvidia.com/mig-1g.18gb"] == "4"
    assert allocatable["nvidia.com/mig-2g.35gb"] == "2"
    assert allocatable["nvidia.com/mig-3g.71gb"] == "2"
    assert allocatable["nvidia.com/gpu"] == "0"

    # The nodes keep their labels this cycle: the configs were added to the ConfigMap just now, and mig-manager
    # reads its mounted copy, which the kubelet refreshes within configPropagationSeconds.
    assert not [c for c in first.applied if c.kind is Kind.NODE_MIG_CONFIG]
    second = _run(twin, desired)  # one propagation delay later: the relabels (same layouts under migplan's names)
    assert second.report is not None and not second.errors
    assert [c for c in second.applied if c.kind is Kind.NODE_MIG_CONFIG]
    twin.settle()
    states = {n["metadata"]["labels"].get("nvidia.com/mig.config.state") for n in store.list("nodes")}
    assert "failed" not in states  # mig-manager found every config it was pointed at

    twin.reset_counts()
    third = _run(twin, desired)
    assert third.converged and third.status.exit_code == EXIT_IN_SYNC, [str(f) for f in third.report.findings]  # type: ignore[union-attr]
    counts = twin.request_counts()
    assert _writes(counts) == {}
    assert {verb for (_, _, verb) in counts} == {"list"}


def test_layout_change_on_a_busy_node_is_held_back(tmp_path: Path) -> None:
    root = tmp_path / "inventory"
    shutil.copytree(INVENTORY, root)
    recut_gpu1_to_sevens(root, NODE)
    desired = _desired(root)
    with ClusterTwin.from_inventory(INVENTORY, **CLOCK.twin_kwargs()) as twin:
        twin.settle()
        result = _run(twin, desired)
        blocked = [c for c in result.plan.changes if c.subject == f"node/{NODE}"]  # type: ignore[union-attr]
        assert [c.action.value for c in blocked] == ["skip"]
        holders = set(blocked[0].blocked_by)
        assert "default/whisper-gpu-h200-01-g1-0" in holders
        finding = next(f for f in result.report.findings if f.code == "MP519")  # type: ignore[union-attr]
        assert finding.node == NODE and set(finding.pods) == holders
        twin.settle()
        node = twin.store.get("nodes", NODE)
        assert node["metadata"]["labels"]["nvidia.com/mig.config"] != result.plan.node_configs[NODE]  # type: ignore[union-attr]
        assert not node["spec"].get("unschedulable")
        assert result.status.exit_code == EXIT_DRIFT


def test_failing_mig_manager_is_reported() -> None:
    with ClusterTwin.from_inventory(INVENTORY, drift=["mig-config-failed:gpu-h200-02"], **CLOCK.twin_kwargs()) as twin:
        twin.settle()
        result = _run(twin, _desired(), dry_run=True)
        assert result.report is not None
        (failed,) = [f for f in result.report.findings if f.code == "MP507"]
        assert failed.node == "gpu-h200-02" and "state=failed" in failed.message
        status = {n.name: n.status.value for n in result.report.nodes}
        assert status["gpu-h200-02"] == "Error"


def test_dry_run_validates_server_side_and_persists_nothing(article_twin: ClusterTwin) -> None:
    twin = article_twin
    before = twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")
    twin.reset_counts()
    result = _run(twin, _desired(), dry_run=True)
    assert not result.applied and result.not_applied and not result.errors
    after = twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"]["mig"]["strategy"] == "single"
    # every write was sent once, as a dry run (the twin validates and discards it)
    assert sum(_writes(twin.request_counts()).values()) == len(result.not_applied)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "reconcile", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_cli_text_json_and_exit_codes(article_twin_instant: ClusterTwin, tmp_path: Path) -> None:
    article_twin = article_twin_instant
    kc = str(article_twin.kubeconfig)
    inventory = _instant_inventory(tmp_path / "inventory")
    first = _cli("--once", "--kubeconfig", kc, "--inventory", str(inventory))
    assert first.returncode == EXIT_DRIFT, first.stderr
    assert "Plan:" in first.stdout and "MP504" in first.stdout and "Occupancy:" in first.stdout
    article_twin.settle()
    second = _cli("--once", "--kubeconfig", kc, "--inventory", str(inventory), "-o", "json")
    assert second.returncode == EXIT_IN_SYNC, second.stdout[-3000:]
    doc = json.loads(second.stdout)
    assert doc["converged"] is True and doc["plan"]["changes"] == [] and doc["report"]["inSync"] is True

    bad = tmp_path / "bad"
    shutil.copytree(INVENTORY, bad)
    (bad / "cluster.yaml").write_text("apiVersion: migplan/v1\nkind: Cluster\nspec: {migStrategy: sideways}\n")
    article_twin.reset_counts()
    refused = _cli("--once", "--kubeconfig", kc, "--inventory", str(bad), "-o", "json")
    assert refused.returncode == EXIT_ERROR
    assert json.loads(refused.stdout)["refused"] is True
    assert article_twin.request_counts() == {}  # the cluster was not even contacted


def test_gpus_recut_by_hand_are_reapplied_and_converge() -> None:
    desired = _desired()
    with ClusterTwin.from_inventory(INVENTORY, **CLOCK.twin_kwargs()) as twin:
        twin.settle()
        _run(twin, desired)  # adoption: migplan's config names into the ConfigMap ...
        twin.settle()
        _run(twin, desired)  # ... and, once the kubelet has had time to project them, the relabels
        twin.settle()
        assert _run(twin, desired).converged
        twin.inject("gpu-recut:gpu-h200-02:1")  # GPU 1 cut differently behind mig-manager's back
        found = _run(twin, desired)
        assert {f.code for f in found.report.findings if f.node == "gpu-h200-02"} == {"MP501"}  # type: ignore[union-attr]
        # The report says why, in the words of the classification the planner re-applies on (logic/drift/nodestate.py).
        mp501 = [f.message for f in found.report.findings if f.code == "MP501"]  # type: ignore[union-attr]
        assert all("mig-manager reports its config applied" in m for m in mp501)
        # The re-apply alias goes into the ConfigMap first; the node is relabelled to it once it has propagated.
        assert not [c for c in found.applied if c.subject == "node/gpu-h200-02"]
        twin.settle()
        (relabel,) = [c for c in _run(twin, desired).applied if c.subject == "node/gpu-h200-02"]
        assert str((relabel.after or {})["nvidia.com/mig.config"]).endswith("-reapply")
        for _ in range(3):
            twin.settle()
            result = _run(twin, desired)
            if result.converged:
                break
        assert result.converged, [str(f) for f in result.report.findings]  # type: ignore[union-attr]
        node = twin.store.get("nodes", "gpu-h200-02")
        assert node["metadata"]["labels"]["nvidia.com/mig.config"] == result.plan.node_configs["gpu-h200-02"]  # type: ignore[union-attr]
        cm = twin.store.get("configmaps", desired.cluster.gpu_operator.mig_config_map, "gpu-operator")
        assert "-reapply" not in cm["data"]["config.yaml"]  # the alias is gone once no node names it


def test_allow_disruption_holds_pods_drain_cannot_remove_then_applies_once_they_are_gone(tmp_path: Path) -> None:
    """The inventory's pods declare no controller: as `kubectl drain` without --force, migplan does not evict
    them (an evicted bare pod is gone for good): the change is held (MP539, naming them), nothing is cordoned or
    evicted. Once their owners delete them, the relabel goes (no drain needed) and the node converges.
    (The drain itself, with ReplicaSet pods and PodDisruptionBudgets: tests/integration/test_drain_twin.py.)"""
    from datetime import UTC, datetime, timedelta

    root = tmp_path / "inventory"
    shutil.copytree(INVENTORY, root)
    recut_gpu1_to_sevens(root, NODE)
    cluster_file = root / "cluster.yaml"
    cluster_file.write_text(
        cluster_file.read_text().replace(
            "allowDisruption: false",
            "allowDisruption: true\n    configPropagationSeconds: 0  # its own clock below; the twin projects at once",
        )
    )
    desired = _desired(root)
    t0 = datetime(2026, 12, 2, 10, tzinfo=UTC)

    def run(minutes: int) -> CycleResult:
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
        try:
            return reconcile_once(desired=desired, cluster=cluster, now=t0 + timedelta(minutes=minutes))
        finally:
            cluster.close()

    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        first = run(0)
        assert not [c for c in first.applied if c.subject == f"node/{NODE}" or c.kind is Kind.EVICT]
        held = next(f for f in first.report.findings if f.code == "MP539")  # type: ignore[union-attr]
        assert held.pods and "declares no controller" in held.message
        node = twin.store.get("nodes", NODE)
        assert not node["spec"].get("unschedulable")
        for pod in twin.store.list("pods", "default"):  # the workload owners move their pods
            if pod["spec"].get("nodeName") == NODE:
                twin.store.delete("pods", pod["metadata"]["name"], "default", grace_period_seconds=0)
        twin.settle()
        minute = 1
        for _ in range(5):
            result = run(minute)
            twin.settle()
            minute += 1
            if result.converged:
                break
        assert result.converged, [str(f) for f in result.report.findings]  # type: ignore[union-attr]
        node = twin.store.get("nodes", NODE)
        assert not node["spec"].get("unschedulable")
        assert "migplan.io/cordoned" not in (node["metadata"].get("annotations") or {})
        assert twin.store.get("nodes", NODE)["status"]["allocatable"]["nvidia.com/mig-1g.18gb"] == "9"


def test_cli_from_a_git_repo_commits_the_report(article_twin_instant: ClusterTwin, tmp_path: Path) -> None:
    article_twin = article_twin_instant
    repo = _instant_inventory(tmp_path / "inventory-repo")
    git_env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "inventory"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=git_env)
    common = ["--once", "--kubeconfig", str(article_twin.kubeconfig), "--repo", str(repo), "--branch", "main"]
    common += ["--cache-dir", str(tmp_path / "cache")]
    first = _cli(*common)
    assert first.returncode == EXIT_DRIFT, first.stdout + first.stderr
    assert "Source:" in first.stdout and "Report: committed" in first.stdout
    drift_yaml = subprocess.run(
        ["git", "show", "migplan-reports:reports/drift.yaml"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert "kind: DriftReport" in drift_yaml and "MP504" in drift_yaml
    article_twin.settle()
    second = _cli(*common, "-o", "json")
    assert second.returncode == EXIT_IN_SYNC, second.stdout[-2000:] + second.stderr
    doc = json.loads(second.stdout)
    assert doc["source"]["revision"].startswith("main@sha1:") and doc["cycle"]["converged"] is True


def _two_gpu_inventory(root: Path, gpus: list[dict[str, object]], *, allow_disruption: bool = False) -> Path:
    import yaml

    (root / "nodes").mkdir(parents=True)
    cluster = {"migStrategy": "mixed", "apply": {"allowDisruption": allow_disruption}}
    (root / "cluster.yaml").write_text(
        yaml.safe_dump({"apiVersion": "migplan/v1", "kind": "Cluster", "metadata": {"name": "t"}, "spec": cluster})
    )
    node = {"apiVersion": "migplan/v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {"gpus": gpus}}
    (root / "nodes" / "n.yaml").write_text(yaml.safe_dump(node))
    return root


_GPU0_7G = {
    "index": 0,
    "model": "H200-141GB",
    "mig": {"enabled": True, "partitions": [{"profile": "7g.141gb", "owner": "vllm"}]},
}
_GPU1_CUT = {
    "index": 1,
    "model": "H200-141GB",
    "mig": {"enabled": True, "partitions": [{"profile": p} for p in ("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb")]},
}


def test_mode_flip_on_gpu_1_is_held_while_a_pod_runs_on_gpu_0(tmp_path: Path) -> None:
    """mig-parted clears every MIG GPU of the node when any GPU's MIG mode changes (ApplyMigMode): the pod on
    GPU 0's 7g.141gb (a profile GPU 1 never had) blocks turning MIG off on GPU 1."""
    before = _two_gpu_inventory(tmp_path / "before", [_GPU0_7G, _GPU1_CUT])
    after = _two_gpu_inventory(
        tmp_path / "after", [_GPU0_7G, {"index": 1, "model": "H200-141GB", "mig": {"enabled": False}}]
    )
    desired = _desired(after)
    with ClusterTwin.from_inventory(before, **CLOCK.twin_kwargs()) as twin:
        twin.settle()
        result = _run(twin, desired)
        (held,) = [c for c in result.plan.changes if c.subject == "node/n"]  # type: ignore[union-attr]
        assert held.action.value == "skip" and held.blocked_by == ("default/vllm-n-g0-0",)
        assert "MIG mode changes on GPU 1" in held.reason and "GPU clients stopped" in held.reason
        finding = next(f for f in result.report.findings if f.code == "MP519")  # type: ignore[union-attr]
        assert finding.pods == ("default/vllm-n-g0-0",)
        twin.settle()
        config = result.plan.node_configs["n"]  # type: ignore[union-attr]
        assert twin.store.get("nodes", "n")["metadata"]["labels"]["nvidia.com/mig.config"] != config
        # A per-GPU model (only GPU 1 changes, and nothing holds a GPU-1 profile) would have relabelled the
        # node; the twin's mig-manager shows what that does: GPU 0's instance is in use, the apply fails.
        CLOCK.advance(CLOCK.step)  # once the kubelet has projected the new ConfigMap
        twin.store.patch("nodes", "n", {"metadata": {"labels": {"nvidia.com/mig.config": config}}})
        twin.settle()
        assert twin.store.get("nodes", "n")["metadata"]["labels"]["nvidia.com/mig.config.state"] == "failed"
        assert any("In use by another client" in line for line in twin.operator.mig_manager_log["n"])


def test_recut_of_one_partition_is_held_by_a_pod_on_another_partition_of_the_same_gpu(tmp_path: Path) -> None:
    """SetMigConfig replaces every instance of a GPU it re-cuts: merging GPU 0's two 1g.18gb into a 2g.35gb is
    held by the pod on GPU 0's 3g.71gb."""
    gpu0 = {
        "index": 0,
        "model": "H200-141GB",
        "mig": {
            "enabled": True,
            "partitions": [
                {"profile": "3g.71gb", "placement": 4, "owner": "vllm"},
                {"profile": "2g.35gb", "placement": 0},
                {"profile": "1g.18gb", "placement": 2},
                {"profile": "1g.18gb", "placement": 3},
            ],
        },
    }
    recut = {
        "index": 0,
        "model": "H200-141GB",
        "mig": {
            "enabled": True,
            "partitions": [
                {"profile": "3g.71gb", "placement": 4, "owner": "vllm"},
                {"profile": "2g.35gb", "placement": 0},
                {"profile": "2g.35gb", "placement": 2},
            ],
        },
    }
    gpu1 = {"index": 1, "model": "H200-141GB", "mig": {"enabled": True, "partitions": [{"profile": "7g.141gb"}]}}
    before = _two_gpu_inventory(tmp_path / "before", [gpu0, gpu1])
    desired = _desired(_two_gpu_inventory(tmp_path / "after", [recut, gpu1]))
    with ClusterTwin.from_inventory(before, **CLOCK.twin_kwargs()) as twin:
        twin.settle()
        result = _run(twin, desired)
        (held,) = [c for c in result.plan.changes if c.subject == "node/n"]  # type: ignore[union-attr]
        assert held.action.value == "skip" and len(held.blocked_by) == 1
        assert held.blocked_by[0].startswith("default/vllm-n-g0-")  # the pod on GPU 0's 3g.71gb
        assert "re-cuts GPU 0: every partition of it is replaced" in held.reason
