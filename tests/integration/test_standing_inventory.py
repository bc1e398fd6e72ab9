"""No false green: `validate` and `check-workloads` without an inventory argument judge the inventory the user stands
in (or above it, up to the Git work tree's top), say so and exit 2 outside any, and use the embedded example only
when asked for by name (`--example`). Run as a user runs them: a real process in a real working directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventory"
ARTICLE_POD = REPO / "tests" / "corpus-workloads" / "good-article-pod.yaml"  # 3g.71gb: the example offers it

# An inventory of the user's own, valid, that offers no 3g.71gb: the example's verdict on the pod would differ.
OWN_CLUSTER = "apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: own}\nspec:\n  migStrategy: mixed\n"
OWN_NODE = """apiVersion: migplan/v1
kind: Node
metadata: {name: gpu-own-01}
spec:
  gpus:
    - index: 0
      model: H100-80GB
      mig:
        enabled: true
        partitions:
          - {profile: 1g.10gb}
          - {profile: 1g.10gb}
"""


def _migplan(cwd: Path, *args: str, ceiling: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GIT_CEILING_DIRECTORIES", None)
    if ceiling is not None:
        env["GIT_CEILING_DIRECTORIES"] = str(ceiling)
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _broken_copy(tmp_path: Path) -> Path:
    """The example with one profile misspelt: a user's own inventory, broken on a known line."""
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    node = inv / "nodes" / "gpu-h200-01.yaml"
    node.write_text(node.read_text().replace("{profile: 2g.35gb, placement: 0", "{profile: 2g.35gbb, placement: 0"))
    return inv


def _own(tmp_path: Path) -> Path:
    inv = tmp_path / "own"
    (inv / "nodes").mkdir(parents=True)
    (inv / "cluster.yaml").write_text(OWN_CLUSTER)
    (inv / "nodes" / "gpu-own-01.yaml").write_text(OWN_NODE)
    return inv


def test_validate_inside_a_broken_inventory_judges_it_not_the_example(tmp_path: Path) -> None:
    inv = _broken_copy(tmp_path)
    for where in (inv, inv / "nodes", inv / "layouts"):
        run = _migplan(where, "validate", ceiling=tmp_path)
        assert run.returncode == 1, run.stdout + run.stderr
        assert "nodes/gpu-h200-01.yaml:" in run.stdout and "error MP205" in run.stdout
        assert run.stdout.rstrip().splitlines()[-1].startswith(f"{inv}: INVALID:"), run.stdout
    assert _migplan(inv, "validate", "--example", ceiling=tmp_path).returncode == 0  # the example is still green


def test_validate_in_an_empty_directory_says_so_and_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run = _migplan(empty, "validate", ceiling=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert "error MP413: not inside an inventory" in run.stderr and str(empty) in run.stderr
    assert "migplan validate --example" in run.stderr and "GIT_CEILING_DIRECTORIES" in run.stderr
    for output in ("json", "github", "sarif"):  # no format prints a verdict for an inventory nobody named
        other = _migplan(empty, "validate", "-o", output, ceiling=tmp_path)
        assert other.returncode == 2 and other.stdout == "", output


def test_the_walk_stops_at_the_top_of_the_git_work_tree(tmp_path: Path) -> None:
    """A cluster.yaml above the repository is another project's: never taken, as git never takes a parent's .git."""
    shutil.copytree(EXAMPLE, tmp_path, dirs_exist_ok=True)  # a valid inventory above the repository
    repo = tmp_path / "work"
    (repo / "docs").mkdir(parents=True)
    (repo / ".git").mkdir()
    run = _migplan(repo / "docs", "validate")
    assert run.returncode == 2, run.stdout
    assert f"looked up to {repo}, the top of the Git work tree" in run.stderr


def test_a_roots_file_above_validates_every_root(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    shutil.copytree(EXAMPLE, tmp_path / "clusters" / "prod")
    _own(tmp_path / "clusters")
    (tmp_path / "migplan-roots.yaml").write_text("roots: [clusters/prod, clusters/own]\n")
    (tmp_path / "docs").mkdir()
    run = _migplan(tmp_path / "docs", "validate")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# inventory root clusters/prod\n" in run.stdout and "# inventory root clusters/own\n" in run.stdout


def test_check_workloads_inside_an_inventory_uses_its_plan(tmp_path: Path) -> None:
    own = _own(tmp_path)
    run = _migplan(own / "nodes", "check-workloads", str(ARTICLE_POD), ceiling=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "error MP606" in run.stdout and f"against the plan at {own}:" in run.stdout
    example = _migplan(own, "check-workloads", "--example", str(ARTICLE_POD), ceiling=tmp_path)
    assert example.returncode == 0, example.stdout + example.stderr  # the example offers 3g.71gb


def test_check_workloads_inside_a_broken_inventory_refuses_the_plan(tmp_path: Path) -> None:
    inv = _broken_copy(tmp_path)
    run = _migplan(inv, "check-workloads", str(ARTICLE_POD), ceiling=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert "error MP621: the plan at" in run.stderr and str(inv) in run.stderr and "MP205" in run.stderr


def test_check_workloads_in_an_empty_directory_says_so_and_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run = _migplan(empty, "check-workloads", str(ARTICLE_POD), ceiling=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert "error MP413: not inside an inventory" in run.stderr
    assert "migplan check-workloads PATH --example" in run.stderr


def test_check_workloads_in_a_repository_of_several_roots_asks_which(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    _own(tmp_path / "clusters")
    (tmp_path / "migplan-roots.yaml").write_text("roots: [clusters/own]\n")
    run = _migplan(tmp_path, "check-workloads", str(ARTICLE_POD))
    assert run.returncode == 2 and "several inventory roots" in run.stderr and "--inventory" in run.stderr


def test_example_and_a_named_inventory_together_is_a_usage_error(tmp_path: Path) -> None:
    run = _migplan(tmp_path, "validate", "--example", str(EXAMPLE))
    assert run.returncode == 2 and "--example" in run.stderr
    run = _migplan(tmp_path, "check-workloads", "--example", "--inventory", str(EXAMPLE), str(ARTICLE_POD))
    assert run.returncode == 2 and "--example" in run.stderr
