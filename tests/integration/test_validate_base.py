"""`migplan validate --repo R --rev REV --base BASE`: a placement-only change under apply.mode gpu-operator is
warning MP414 at validate time too (issue 28 item 4), with the file and line of the moved partition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from gitserver import cluster_yaml, git, node_yaml

from reconciler.cli import cli

MOVED = """apiVersion: migplan/v1
kind: Node
metadata: {name: gpu-1}
spec:
  gpus:
    - index: 0
      model: H200-141GB
      mig:
        enabled: true
        partitions:
          - {profile: 3g.71gb, placement: 4, owner: svc-a}
          - {profile: 2g.35gb, placement: 2, owner: embeddings}
          - {profile: 1g.18gb, placement: 0}
          - {profile: 1g.18gb, placement: 1}
"""


def _commit(work: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", message, cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    work = tmp_path / "inv"
    git("init", "-q", "-b", "main", str(work))
    files = {"clusters/a/cluster.yaml": cluster_yaml()}
    files |= {f"clusters/a/nodes/gpu-{i}.yaml": node_yaml(f"gpu-{i}") for i in range(2)}
    base = _commit(work, files, "base")
    moved = _commit(work, {"clusters/a/nodes/gpu-1.yaml": MOVED}, "move the 2g.35gb of gpu-1")
    return work, base, moved


def _validate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["validate", *args])
    return result.exit_code, result.output


def test_placement_only_change_warns_against_its_base(repo: tuple[Path, str, str]) -> None:
    work, base, moved = repo
    code, out = _validate("--repo", str(work), "--rev", moved, "--base", base, "--path", "clusters/a", "-o", "json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["valid"] is True
    (warning,) = [w for w in doc["warnings"] if w["code"] == "MP414"]
    assert (warning["file"], warning["line"]) == ("nodes/gpu-1.yaml", 12)
    assert "node gpu-1 GPU 0: placement-only change" in warning["message"]
    assert "spec.apply.mode: agent" in warning["message"]


def test_without_base_or_against_itself_nothing_is_said(repo: tuple[Path, str, str]) -> None:
    work, _base, moved = repo
    for extra in ((), ("--base", moved)):
        code, out = _validate("--repo", str(work), "--rev", moved, "--path", "clusters/a", "-o", "json", *extra)
        assert code == 0, out
        assert [w for w in json.loads(out)["warnings"] if w["code"] == "MP414"] == []


def test_under_agent_mode_the_move_is_applied_so_no_warning(tmp_path: Path) -> None:
    work = tmp_path / "inv"
    git("init", "-q", "-b", "main", str(work))
    agent = cluster_yaml().replace("spec:\n", "spec:\n  apply: {mode: agent}\n", 1)
    assert "mode: agent" in agent
    files = {"clusters/a/cluster.yaml": agent, "clusters/a/nodes/gpu-1.yaml": node_yaml("gpu-1")}
    base = _commit(work, files, "base")
    moved = _commit(work, {"clusters/a/nodes/gpu-1.yaml": MOVED}, "move")
    code, out = _validate("--repo", str(work), "--rev", moved, "--base", base, "--path", "clusters/a", "-o", "json")
    assert code == 0, out
    assert [w for w in json.loads(out)["warnings"] if w["code"] == "MP414"] == []


def test_a_root_new_at_the_target_is_compared_with_nothing(repo: tuple[Path, str, str]) -> None:
    work, base, _moved = repo
    new = _commit(work, {"clusters/b/cluster.yaml": cluster_yaml(), "clusters/b/nodes/gpu-1.yaml": MOVED}, "new root")
    code, out = _validate("--repo", str(work), "--rev", new, "--base", base, "--path", "clusters/b", "-o", "json")
    assert code == 0, out
    assert [w for w in json.loads(out)["warnings"] if w["code"] == "MP414"] == []


def test_an_unknown_base_is_an_error_and_base_needs_repo(repo: tuple[Path, str, str]) -> None:
    work, _base, moved = repo
    code, out = _validate("--repo", str(work), "--rev", moved, "--base", "no-such-rev", "--path", "clusters/a")
    assert code == 2 and "no-such-rev" in out
    code, out = _validate("--base", "main")
    assert code == 2 and "--base need --repo" in out
