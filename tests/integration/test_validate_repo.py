"""`migplan validate --repo R --rev REV`: a Git revision, over git://, read without a work tree."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitserver import GitDaemon, git, make_bare, seed

from reconciler.resources import inventory_dir


def _inventory_files() -> dict[str, str]:
    root = inventory_dir()
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*.yaml")}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str, Path]]:
    root = tmp_path_factory.mktemp("validate-repo")
    srv = root / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    work = root / "work"
    files = {f"clusters/par1/{k}": v for k, v in _inventory_files().items()}
    good = seed(bare, work, files, message="inventory")
    node = files["clusters/par1/nodes/gpu-h200-01.yaml"]
    assert "placement: 4" in node
    bad = seed(bare, work, {"clusters/par1/nodes/gpu-h200-01.yaml": node.replace("placement: 4", "placement: 0")},
               message="move the 3g onto the 2g")  # fmt: skip
    git("tag", "v1", good, cwd=work)
    git("push", "-q", "origin", "v1", cwd=work)
    daemon = GitDaemon(srv).start()
    try:
        yield daemon.url("inv"), good, bad, root / "cache"
    finally:
        daemon.stop()


def _validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", *args], capture_output=True, text=True, timeout=120
    )


def test_valid_tag_over_git_daemon(served: tuple[str, str, str, Path]) -> None:
    url, good, _bad, cache = served
    args = ("--repo", url, "--rev", "v1", "--path", "clusters/par1", "--cache-dir", str(cache))
    proc = _validate(*args, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["valid"] is True
    text = _validate(*args).stdout
    assert f"v1@sha1:{good}:clusters/par1: valid" in text


def test_invalid_head_names_file_and_line(served: tuple[str, str, str, Path]) -> None:
    url, _good, bad, cache = served
    proc = _validate("--repo", url, "--rev", "main", "--path", "clusters/par1", "--cache-dir", str(cache))
    assert proc.returncode == 1
    assert f"main@sha1:{bad}" in proc.stdout
    assert "nodes/gpu-h200-01.yaml:18: error MP307" in proc.stdout


def test_annotations_name_the_file_relative_to_the_repository(served: tuple[str, str, str, Path]) -> None:
    url, _good, _bad, cache = served
    args = ("--repo", url, "--rev", "main", "--path", "clusters/par1", "--cache-dir", str(cache))
    proc = _validate(*args, "-o", "github")
    assert proc.returncode == 1
    assert "::error file=clusters/par1/nodes/gpu-h200-01.yaml,line=18,title=MP307::" in proc.stdout
    sarif = json.loads(_validate(*args, "-o", "sarif").stdout)
    located = {
        (loc["artifactLocation"]["uri"], loc["region"]["startLine"])
        for r in sarif["runs"][0]["results"]
        if r["ruleId"] == "MP307"
        for loc in [r["locations"][0]["physicalLocation"]]
    }
    assert ("clusters/par1/nodes/gpu-h200-01.yaml", 18) in located


def test_unknown_revision_and_missing_root_are_io_errors(served: tuple[str, str, str, Path]) -> None:
    url, _good, _bad, cache = served
    proc = _validate("--repo", url, "--rev", "nope", "--cache-dir", str(cache))
    assert proc.returncode == 2 and "MP704" in proc.stderr
    proc = _validate("--repo", url, "--rev", "main", "--path", "clusters/lon1", "--cache-dir", str(cache))
    assert proc.returncode == 2 and "MP705" in proc.stderr


def test_unreachable_remote_is_an_io_error(tmp_path: Path) -> None:
    proc = _validate("--repo", "git://127.0.0.1:9/none.git", "--cache-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "MP70" in proc.stderr


def test_root_and_repo_are_exclusive(tmp_path: Path) -> None:
    proc = _validate(str(tmp_path), "--repo", "x")
    assert proc.returncode == 2 and "either ROOT or --repo" in proc.stderr
