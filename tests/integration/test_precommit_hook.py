"""The `.pre-commit-hooks.yaml` hook, run by pre-commit itself against a sample inventory repository.

No network: pre-commit's manifest check reads the file as published, and the sample repository runs the
very hook definition (id, entry, args, files, pass_filenames) as a `repo: local` hook with
`language: system`, so the `migplan` of this environment is used instead of a fresh virtualenv that
`language: python` would build from the index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from gitserver import cluster_yaml, git, node_yaml

ROOT = Path(__file__).parents[2]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
BIN = Path(sys.executable).parent


def _pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("pre-commit", path=str(BIN)) or "pre-commit"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PRE_COMMIT_HOME": str(home),
           "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "MIGPLAN_DEBUG": ""}  # fmt: skip
    return subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False)


def _hook(hook_id: str) -> dict[str, object]:
    hooks = {h["id"]: h for h in yaml.safe_load(MANIFEST.read_text())}
    return dict(hooks[hook_id])


def test_the_manifest_is_valid_for_pre_commit(tmp_path: Path) -> None:
    proc = _pre_commit("validate-manifest", str(MANIFEST), cwd=ROOT, home=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_hook_passes_a_valid_inventory_and_stops_an_invalid_one(tmp_path: Path) -> None:
    hook = _hook("migplan-validate")
    assert hook["entry"] == "migplan validate"
    local = {**hook, "language": "system"}
    repo = tmp_path / "gpu-inventory"
    git("init", "-q", "-b", "main", str(repo))
    (repo / "nodes").mkdir()
    (repo / "cluster.yaml").write_text(cluster_yaml())
    (repo / "nodes/gpu-0.yaml").write_text(node_yaml("gpu-0"))
    (repo / "README.md").write_text("not inventory\n")
    config = {"repos": [{"repo": "local", "hooks": [local]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git("add", "-A", cwd=repo)
    home = tmp_path / "home"
    proc = _pre_commit("run", "--all-files", cwd=repo, home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "migplan validate" in proc.stdout and "Passed" in proc.stdout

    (repo / "nodes/gpu-0.yaml").write_text(node_yaml("gpu-0", profile="9g.99gb"))
    git("add", "-A", cwd=repo)
    proc = _pre_commit("run", "--all-files", cwd=repo, home=home)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Failed" in proc.stdout and "nodes/gpu-0.yaml:" in proc.stdout and "MP302" in proc.stdout

    # A commit that touches no inventory file does not run it (the `files` pattern).
    (repo / "nodes/gpu-0.yaml").write_text(node_yaml("gpu-0"))
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "inventory", cwd=repo)
    (repo / "README.md").write_text("edited\n")
    git("add", "README.md", cwd=repo)
    proc = _pre_commit("run", cwd=repo, home=home)
    assert proc.returncode == 0 and "Skipped" in proc.stdout, proc.stdout + proc.stderr


def test_the_workload_hook_checks_staged_manifests_against_the_plan(tmp_path: Path) -> None:
    """An application repository: the staged Deployment is checked against the plan (here the example
    inventory); a container asking for two devices of one MIG profile stops the commit with MP607."""
    hook = _hook("migplan-check-workloads")
    assert hook["entry"] == "migplan check-workloads" and hook["pass_filenames"] is True
    local = {**hook, "language": "system", "args": ["--inventory", str(ROOT / "inventory")]}
    repo = tmp_path / "app"
    git("init", "-q", "-b", "main", str(repo))
    (repo / "deploy").mkdir()
    manifest = (ROOT / "tests" / "corpus-workloads" / "good-article-pod.yaml").read_text()
    (repo / "deploy" / "pod.yaml").write_text(manifest)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [local]}]}))
    git("add", "-A", cwd=repo)
    home = tmp_path / "home"
    proc = _pre_commit("run", "--all-files", cwd=repo, home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "migplan check-workloads" in proc.stdout and "Passed" in proc.stdout

    (repo / "deploy" / "pod.yaml").write_text(
        manifest.replace("nvidia.com/mig-3g.71gb: 1", "nvidia.com/mig-3g.71gb: 2")
    )
    git("add", "-A", cwd=repo)
    proc = _pre_commit("run", "--all-files", cwd=repo, home=home)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Failed" in proc.stdout and "deploy/pod.yaml:" in proc.stdout and "MP607" in proc.stdout
