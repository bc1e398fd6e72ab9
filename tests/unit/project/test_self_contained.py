"""The repository stands alone: no tracked file refers to a path outside the clone.

A user's clone has nothing beside it, so a test, script, comment or document that reads (or tells a reader
to look at) `../shared`, an absolute path of the machine it was written on, or a relative path climbing
above the repository root breaks for every new user. This walks every file `git ls-files` lists.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[3]

# Spellings of "somewhere outside the clone" that no file may contain.
FORBIDDEN = [
    (re.compile(r"\.\./shared\b"), "../shared (a directory beside the clone)"),
    (re.compile(r"(?<![\w/.-])shared/(?:reference|DESIGN\.md|STYLE\.md|hooks|000_)"), "the steering shared/ folder"),
    (re.compile(r"(?<![\w.-])/work/"), "an absolute path of the development machine"),
    (re.compile(r"MIGPLAN_REFERENCE_DIR"), "an override pointing at reference data outside the clone"),
    (re.compile(r"\b(?:REPO|REPO_ROOT|ROOT|root|repo)\.parent\b"), "the directory above the repository root"),
]
# A relative path that climbs: resolved from the file's own directory it must stay inside the repository.
CLIMB = re.compile(r"(?<![\w.])((?:\.\./)+)[\w.-]*")
# `Path(__file__)...parents[N]` must not reach above the root either.
PARENTS = re.compile(r"__file__\)\.resolve\(\)\.parents\[(\d+)\]")
# yaml-language-server modelines are relative to the inventory file they head, wherever it is copied (a
# Markdown example, a generated benchmark fleet): they are checked where they stand in a real inventory.
MODELINE = re.compile(r"yaml-language-server: \$schema=\S+")


def _tracked_text_files() -> list[PurePosixPath]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    files = []
    for raw in out.split(b"\0"):
        if not raw:
            continue
        path = REPO / raw.decode()
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # deleted in the work tree, not yet committed
            continue
        if b"\0" in data[:8192]:
            continue  # binary
        files.append(PurePosixPath(raw.decode()))
    return files


FILES = _tracked_text_files()


def _escapes(rel_file: PurePosixPath, climb: str) -> bool:
    depth = len(rel_file.parent.parts)
    return climb.count("../") > depth


def test_the_walk_sees_the_repository() -> None:
    names = {str(f) for f in FILES}
    assert "pyproject.toml" in names and "tests/unit/project/test_self_contained.py" in names
    assert len(FILES) > 100


@pytest.mark.parametrize("rel", FILES, ids=str)
def test_no_reference_outside_the_repository(rel: PurePosixPath) -> None:
    if rel == PurePosixPath("tests/unit/project/test_self_contained.py"):
        return  # this file spells the patterns it looks for
    text = (REPO / rel).read_text("utf-8", errors="replace")
    problems = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for pattern, why in FORBIDDEN:
            if pattern.search(line):
                problems.append(f"{rel}:{lineno}: {why}: {line.strip()[:120]}")
        scan = MODELINE.sub("", line)
        for m in CLIMB.finditer(scan):
            if _escapes(rel, m.group(1)):
                problems.append(f"{rel}:{lineno}: {m.group(0)!r} climbs above the repository root")
        for m in PARENTS.finditer(line):
            if int(m.group(1)) > len(rel.parent.parts):
                problems.append(f"{rel}:{lineno}: parents[{m.group(1)}] is above the repository root")
    assert not problems, "\n".join(problems)


def test_inventory_modelines_resolve_to_the_schemas() -> None:
    checked = 0
    for rel in FILES:
        if rel.parts[0] != "inventory" or rel.suffix != ".yaml":
            continue
        m = MODELINE.search((REPO / rel).read_text("utf-8"))
        assert m, f"{rel} has no yaml-language-server modeline"
        target = (REPO / rel).parent / m.group(0).split("=", 1)[1]
        assert target.resolve().is_file() and REPO in target.resolve().parents, f"{rel}: {target} is not a schema"
        checked += 1
    assert checked >= 4


def test_the_check_catches_what_it_should() -> None:
    """The patterns themselves can fail: each bad spelling is caught, each good one is not."""
    assert any(p.search("see ../shared/reference/x") for p, _ in FORBIDDEN)
    assert any(p.search("copied from shared/reference/nvidia/") for p, _ in FORBIDDEN)
    assert any(p.search('REPO_ROOT.parent / "x"') for p, _ in FORBIDDEN)
    assert not any(p.search("tests/reference/stack-facts.md") for p, _ in FORBIDDEN)
    assert _escapes(PurePosixPath("tests/unit/x.py"), "../../../")
    assert not _escapes(PurePosixPath("deploy/overlays/example/k.yaml"), "../../")
