"""`apply.mode: agent` end to end: the controller's cycle publishes each node's desired layout
(`migplan.io/mig-desired`, exact placements), the node agents (NVML twin behind the real adapter) apply
it and publish what they observe; a Git push changes one node's layout and only that node's annotation
is rewritten; the agent applies the change, touching only what differs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from gitserver import git
from kubernetes import client

from reconciler.adapters.kube import agentmode as kubeagentmode
from reconciler.adapters.kube.agentmode import KubeNodeState, decode_desired, read_agent_state
from reconciler.adapters.nvml import NvmlGpu
from reconciler.agent import actuate_once
from reconciler.controller.loop import CycleContext, kube_configuration
from reconciler.gitops import GitCycle
from reconciler.logic.planning.agentplan import MigState, plan_node
from reconciler.model.cycles import CycleStatus
from reconciler.resources import inventory_dir
from reconciler.settings import load_settings
from reconciler.twin.cluster import ClusterTwin


def _agent_mode_repo(tmp_path: Path) -> Path:
    """The example inventory in `apply.mode: agent`, committed to a local repository."""
    repo = tmp_path / "inventory"
    shutil.copytree(inventory_dir(), repo)
    cluster_yaml = repo / "cluster.yaml"
    cluster_yaml.write_text(cluster_yaml.read_text().replace("mode: gpu-operator", "mode: agent"))
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "inventory (agent mode)", cwd=repo)
    return repo


def test_agent_mode_publish_apply_push(tmp_path: Path) -> None:
    repo = _agent_mode_repo(tmp_path)
    with ClusterTwin.from_inventory(repo) as twin:
        twin.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "migplan"}})
        settings = load_settings(
            env={},
            flags={"repo": str(repo), "cache_dir": str(tmp_path / "cache"), "kubeconfig": str(twin.kubeconfig)},
        )
        api = client.ApiClient(kube_configuration(str(twin.kubeconfig)))
        core: Any = client.CoreV1Api(api)
        cycle = GitCycle(settings)
        outcome = cycle(CycleContext("test", api, lambda: True, settings))
        assert outcome.status is not CycleStatus.FAILED, outcome.failures
        head = git("rev-parse", "HEAD", cwd=repo)
        nodes = [n.metadata.name for n in core.list_node().items if n.metadata.name.startswith("gpu-")]
        assert len(nodes) == 4
        for node in nodes:
            ann = core.read_node(node).metadata.annotations
            desired = decode_desired(node, ann[kubeagentmode.DESIRED])
            assert desired.revision == f"main@sha1:{head}"
            assert all(p.placement.size > 0 for g in desired.gpus for p in g.partitions)
            with NvmlGpu(nvml=twin.nvml(node)) as gpus:
                result = actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=node)
            assert result.state is MigState.SUCCESS, (node, result.reason)
            state, _, observed = read_agent_state(core.read_node(node))
            assert state is MigState.SUCCESS and observed is not None
            assert plan_node(desired.gpus, observed).is_empty

        # An unchanged revision: the cycle rewrites no annotation.
        twin.api.reset_counts()
        cycle(CycleContext("test", api, lambda: True, settings))
        assert twin.api.request_counts().get(("PATCH", "nodes", "patch"), 0) == 0

        # A push recuts gpu-h200-02's GPU 1 into 7 x 1g.18gb: only that node's annotation changes.
        node_file = repo / "nodes" / "gpu-h200-02.yaml"
        text = node_file.read_text()
        marker = "    - index: 1\n      model: NVIDIA-H200\n      layout: h200-balanced\n"
        assert marker in text
        ones = "".join("          - {profile: 1g.18gb}\n" for _ in range(7))
        node_file.write_text(
            text.replace(marker, "    - index: 1\n      model: NVIDIA-H200\n      mig:\n        enabled: true\n"
                         f"        partitions:\n{ones}")
        )  # fmt: skip
        git("commit", "-q", "-am", "recut gpu-h200-02 gpu 1", cwd=repo)
        twin.api.reset_counts()
        outcome = cycle(CycleContext("test", api, lambda: True, settings))
        assert outcome.status is not CycleStatus.FAILED, outcome.failures
        # One node's annotation: the plan's change, sent dry-run (dryRun=All) and then for real.
        assert twin.api.request_counts().get(("PATCH", "nodes", "patch"), 0) == 2
        node = "gpu-h200-02"
        desired = decode_desired(node, core.read_node(node).metadata.annotations[kubeagentmode.DESIRED])
        with NvmlGpu(nvml=twin.nvml(node)) as gpus:
            before = gpus.observe()
            result = actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=node)
            after = gpus.observe()
        assert result.state is MigState.SUCCESS, result.reason
        assert {s.gpu for s in result.executed} == {1}  # GPU 0 untouched
        assert before[0] == after[0]
        assert sorted(i.profile for i in after[1].instances) == ["1g.18gb"] * 7
        assert plan_node(desired.gpus, after).is_empty


def test_reconcile_once_from_a_directory_publishes_the_layouts_too(tmp_path: Path) -> None:
    """Every entry point runs the same cycle: `reconcile --once --inventory` publishes the agents' layouts
    exactly as the controller does, dry-run prints them, and a second run writes nothing."""
    from click.testing import CliRunner

    from reconciler.catalog import load_catalog
    from reconciler.cli import cli
    from reconciler.commands.reconcile import load_desired
    from reconciler.logic.planning.agentplan import desired_from_node_spec

    inv = tmp_path / "inventory"
    shutil.copytree(inventory_dir(), inv)
    (inv / "cluster.yaml").write_text((inv / "cluster.yaml").read_text().replace("mode: gpu-operator", "mode: agent"))
    desired, _ = load_desired(inv)
    assert desired is not None
    with ClusterTwin.from_inventory(inv) as twin:
        twin.settle()
        args = ["reconcile", "--once", "--kubeconfig", str(twin.kubeconfig), "--inventory", str(inv)]
        dry = CliRunner().invoke(cli, [*args, "--dry-run"])
        assert dry.exit_code == 1, dry.output
        assert dry.output.count("publish the node's layout for its migplan agent") == len(desired.nodes), dry.output
        core: Any = client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))
        assert all(kubeagentmode.DESIRED not in (n.metadata.annotations or {}) for n in core.list_node().items)

        first = CliRunner().invoke(cli, args)
        assert first.exit_code in (0, 1), first.output
        for name, plan in desired.nodes.items():
            want, _ = desired_from_node_spec(plan, revision=str(desired.revision), catalog=load_catalog())
            got = decode_desired(name, core.read_node(name).metadata.annotations[kubeagentmode.DESIRED])
            assert got.gpus == want.gpus
        twin.api.reset_counts()
        CliRunner().invoke(cli, args)
        assert twin.api.request_counts().get(("PATCH", "nodes", "patch"), 0) == 0


def test_reconcile_once_from_a_repository_publishes_the_layouts_too(tmp_path: Path) -> None:
    """`reconcile --once --repo` runs the controller's cycle (reconciler.gitops): in agent mode it
    publishes every node's layout at the repository's revision, commits the report back, and a second
    run rewrites no annotation."""
    from click.testing import CliRunner

    from reconciler.catalog import load_catalog
    from reconciler.cli import cli
    from reconciler.commands.reconcile import load_desired
    from reconciler.logic.planning.agentplan import desired_from_node_spec

    repo = _agent_mode_repo(tmp_path)
    head = git("rev-parse", "HEAD", cwd=repo)
    desired, _ = load_desired(repo)
    assert desired is not None
    with ClusterTwin.from_inventory(repo) as twin:
        twin.settle()
        args = ["reconcile", "--once", "--kubeconfig", str(twin.kubeconfig), "--repo", str(repo),
                "--cache-dir", str(tmp_path / "cache")]  # fmt: skip
        core: Any = client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))
        assert all(kubeagentmode.DESIRED not in (n.metadata.annotations or {}) for n in core.list_node().items)

        first = CliRunner().invoke(cli, args)
        assert first.exit_code in (0, 1), first.output
        assert f"applying main@sha1:{head}" in first.output, first.output
        for name, spec in desired.nodes.items():
            want, _ = desired_from_node_spec(spec, revision=f"main@sha1:{head}", catalog=load_catalog())
            got = decode_desired(name, core.read_node(name).metadata.annotations[kubeagentmode.DESIRED])
            assert got.revision == f"main@sha1:{head}"
            assert got.gpus == want.gpus, name
        assert "reports/drift.yaml" in git("ls-tree", "-r", "--name-only", "migplan-reports", cwd=repo).splitlines()

        twin.api.reset_counts()
        again = CliRunner().invoke(cli, args)
        assert again.exit_code in (0, 1), again.output
        assert twin.api.request_counts().get(("PATCH", "nodes", "patch"), 0) == 0


def test_agent_mode_publishes_no_layout_to_a_node_whose_observation_is_malformed(tmp_path: Path) -> None:
    repo = _agent_mode_repo(tmp_path)
    with ClusterTwin.from_inventory(repo) as twin:
        twin.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "migplan"}})
        settings = load_settings(
            env={},
            flags={"repo": str(repo), "cache_dir": str(tmp_path / "cache"), "kubeconfig": str(twin.kubeconfig)},
        )
        api = client.ApiClient(kube_configuration(str(twin.kubeconfig)))
        core: Any = client.CoreV1Api(api)
        bad = "gpu-h200-02"
        core.patch_node(bad, {"metadata": {"annotations": {kubeagentmode.OBSERVED: '{"version":"v2","gpus":7}'}}})
        outcome = GitCycle(settings)(CycleContext("test", api, lambda: True, settings))
        assert outcome.status is not CycleStatus.FAILED, outcome.failures
        assert outcome.drift_report is not None
        assert any(f.code == "MP547" and f.node == bad for f in outcome.drift_report.findings)
        for n in core.list_node().items:
            if n.metadata.name.startswith("gpu-"):
                published = kubeagentmode.DESIRED in (n.metadata.annotations or {})
                assert published == (n.metadata.name != bad), n.metadata.name
