"""What cannot be read is an error, never an empty inventory (issue 10, family 5).

Both loaders: the directory reader (reconciler.adapters.fsinventory) and the Git-tree reader
(reconciler.adapters.git.source, served by git daemon over git://). Each odd entry is an MP420 error
naming its path; validation fails, so nothing is applied; nothing hangs (FIFOs and devices are never
opened for reading).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from gitserver import GitDaemon, make_bare

from reconciler.adapters import fsinventory
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.resources import inventory_dir

EXAMPLE = inventory_dir()


@pytest.fixture()
def example(tmp_path: Path) -> Path:
    root = tmp_path / "inv"
    shutil.copytree(EXAMPLE, root)
    return root


def _mp420(root: Path) -> list[str]:
    result = validate_inventory(read_inventory_dir(root))
    assert not result.valid and result.desired is None
    return [d.file or "" for d in result.errors if d.code == "MP420"]


def test_nodes_as_a_symlink_is_refused_not_empty(example: Path) -> None:
    real = example.parent / "elsewhere"
    shutil.move(str(example / "nodes"), real)
    os.symlink(real, example / "nodes")
    assert _mp420(example) == ["nodes"]


def test_nodes_as_a_plain_file_is_refused(example: Path) -> None:
    shutil.rmtree(example / "nodes")
    (example / "nodes").write_text("not a folder\n")
    assert _mp420(example) == ["nodes"]


def test_a_folder_where_cluster_yaml_or_a_node_file_belongs(example: Path) -> None:
    (example / "cluster.yaml").unlink()
    (example / "cluster.yaml").mkdir()
    (example / "cluster.yaml" / "x.yaml").write_text("a: 1\n")
    node = example / "nodes" / "gpu-h100-01.yaml"
    node.unlink()
    node.mkdir()
    (node / "README").write_text("x\n")
    assert sorted(set(_mp420(example))) == ["cluster.yaml/x.yaml", "nodes/gpu-h100-01.yaml"]


def test_fifo_and_device_are_reported_and_never_block(example: Path) -> None:
    os.mkfifo(example / "nodes" / "pipe.yaml")  # opening it for reading would block forever
    os.mknod(example / "nodes" / "dev.yaml", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    assert sorted(_mp420(example)) == ["nodes/dev.yaml", "nodes/pipe.yaml"]


def test_a_fifo_swapped_in_after_the_listing_does_not_hang(example: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The race the O_NONBLOCK open closes: stat said "regular file", then a FIFO took its place.
    target = example / "nodes" / "gpu-h100-01.yaml"
    real_read_file = fsinventory._read_file

    def swap(path: str, rel: str, out: fsinventory.InventoryFiles, limit: int) -> None:
        if path == str(target):
            target.unlink()
            os.mkfifo(target)
        real_read_file(path, rel, out, limit)

    monkeypatch.setattr(fsinventory, "_read_file", swap)
    assert _mp420(example) == ["nodes/gpu-h100-01.yaml"]


def test_non_utf8_file_name_is_reported_printably(example: Path) -> None:
    fd = os.open(os.fsencode(example / "nodes") + b"/gpu-\xff.yaml", os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    assert _mp420(example) == ["nodes/gpu-\\xff.yaml"]


def test_thousands_of_nested_directories(example: Path) -> None:
    depth = 3000  # deeper than PATH_MAX allows to name in one path
    fd = os.open(example / "nodes", os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
    try:
        (problem,) = _mp420(example)
        assert problem.startswith("nodes/d/d/")
    finally:
        subprocess.run(["rm", "-rf", str(example / "nodes" / "d")], check=True, timeout=60)


def test_unreadable_file_and_directory(example: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, for whom chmod 000 changes nothing: make the OS refuse at the adapter seam.
    denied_dir = str(example / "layouts")
    denied_file = str(example / "nodes" / "gpu-h200-01.yaml")
    real_scandir, real_open = os.scandir, os.open

    def scandir(path: str) -> object:
        if str(path) == denied_dir:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_scandir(path)

    def open_(path: str, flags: int, *args: object, **kw: object) -> int:
        if str(path) == denied_file:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(fsinventory.os, "scandir", scandir)
    monkeypatch.setattr(fsinventory.os, "open", open_)
    result = validate_inventory(read_inventory_dir(example))
    assert not result.valid
    found = {(d.file, d.code) for d in result.errors}
    assert {("layouts", "MP420"), ("nodes/gpu-h200-01.yaml", "MP420")} <= found
    assert all("Permission denied" in d.message for d in result.errors if d.code == "MP420")


def test_odd_entries_outside_the_inventory_are_not_errors(example: Path) -> None:
    os.symlink("/etc/hostname", example / "README.link")
    os.mkfifo(example / "notes.pipe")
    assert validate_inventory(read_inventory_dir(example)).valid


def test_cli_validate_exits_1_naming_the_path(example: Path) -> None:
    os.mkfifo(example / "nodes" / "pipe.yaml")
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(example), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert [(e["code"], e["file"]) for e in errors] == [("MP420", "nodes/pipe.yaml")]


# --- the Git-tree loader, over git:// ----------------------------------------------------------------


def _git(*args: str, cwd: Path, data: bytes | None = None) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, check=True, timeout=60)
    return out.stdout.decode().strip()


def _example_tree(repo: pygit2.Repository, *, skip: frozenset[str] = frozenset()) -> pygit2.TreeBuilder:
    """A TreeBuilder of the example inventory's root, each top-level entry in `skip` left out."""
    top = repo.TreeBuilder()
    for entry in sorted(EXAMPLE.iterdir()):
        if entry.name in skip or entry.name.startswith("."):
            continue
        if entry.is_dir():
            sub = repo.TreeBuilder()
            for f in sorted(entry.iterdir()):
                sub.insert(f.name, repo.create_blob(f.read_bytes()), pygit2.GIT_FILEMODE_BLOB)
            top.insert(entry.name, sub.write(), pygit2.GIT_FILEMODE_TREE)
        else:
            top.insert(entry.name, repo.create_blob(entry.read_bytes()), pygit2.GIT_FILEMODE_BLOB)
    return top


def _commit(repo: pygit2.Repository, branch: str, tree: pygit2.Oid) -> None:
    sig = pygit2.Signature("t", "t@example.com", 0, 0)
    repo.create_commit(f"refs/heads/{branch}", sig, sig, branch, tree, [])


def _nodes_tree(repo: pygit2.Repository) -> pygit2.TreeBuilder:
    sub = repo.TreeBuilder()
    for f in sorted((EXAMPLE / "nodes").iterdir()):
        sub.insert(f.name, repo.create_blob(f.read_bytes()), pygit2.GIT_FILEMODE_BLOB)
    return sub


@pytest.fixture(scope="module")
def odd_trees(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("odd-trees")
    bare = make_bare(root, "inv")
    repo = pygit2.Repository(str(bare))

    top = _example_tree(repo, skip=frozenset({"nodes"}))
    top.insert("nodes", repo.create_blob(b"not a folder\n"), pygit2.GIT_FILEMODE_BLOB)
    _commit(repo, "nodes-blob", top.write())

    top = _example_tree(repo, skip=frozenset({"nodes"}))
    top.insert("nodes", repo.create_blob(b"elsewhere"), pygit2.GIT_FILEMODE_LINK)
    top.insert("elsewhere", _nodes_tree(repo).write(), pygit2.GIT_FILEMODE_TREE)
    _commit(repo, "nodes-symlink", top.write())

    top = _example_tree(repo, skip=frozenset({"cluster.yaml"}))
    inner = repo.TreeBuilder()
    inner.insert("x.yaml", repo.create_blob((EXAMPLE / "cluster.yaml").read_bytes()), pygit2.GIT_FILEMODE_BLOB)
    top.insert("cluster.yaml", inner.write(), pygit2.GIT_FILEMODE_TREE)
    _commit(repo, "cluster-tree", top.write())

    top = _example_tree(repo, skip=frozenset({"nodes"}))
    nodes = _nodes_tree(repo)
    nodes.insert("sub.yaml", pygit2.Oid(hex="1" * 40), pygit2.GIT_FILEMODE_COMMIT)  # a submodule's commit
    top.insert("nodes", nodes.write(), pygit2.GIT_FILEMODE_TREE)
    _commit(repo, "submodule", top.write())

    deep = repo.TreeBuilder()
    deep.insert("x.yaml", repo.create_blob(b"a: 1\n"), pygit2.GIT_FILEMODE_BLOB)
    oid = deep.write()
    for _ in range(3000):
        level = repo.TreeBuilder()
        level.insert("d", oid, pygit2.GIT_FILEMODE_TREE)
        oid = level.write()
    top = _example_tree(repo)
    top.insert("deep", oid, pygit2.GIT_FILEMODE_TREE)
    _commit(repo, "deep", top.write())

    # A non-UTF-8 name: pygit2 only takes str names, git mktree takes raw bytes.
    nodes_oid = str(_nodes_tree(repo).write())
    listing = _git("ls-tree", nodes_oid, cwd=bare).encode()
    blob = _git("hash-object", "-w", "--stdin", cwd=bare, data=b"kind: Node\n")
    odd_nodes = _git("mktree", cwd=bare, data=listing + b"\n100644 blob " + blob.encode() + b"\tgpu-\xff.yaml\n")
    top = _example_tree(repo, skip=frozenset({"nodes"}))
    top.insert("nodes", pygit2.Oid(hex=odd_nodes), pygit2.GIT_FILEMODE_TREE)
    _commit(repo, "non-utf8", top.write())

    daemon = GitDaemon(root).start()
    try:
        yield daemon.url("inv"), root / "cache"
    finally:
        daemon.stop()


@pytest.mark.parametrize(
    ("branch", "path"),
    [
        ("nodes-blob", "nodes"),
        ("nodes-symlink", "nodes"),
        ("cluster-tree", "cluster.yaml/x.yaml"),
        ("submodule", "nodes/sub.yaml"),
        ("deep", "deep/d/d/d"),
        ("non-utf8", "nodes/gpu-\\xff.yaml"),
    ],
)
def test_git_tree_oddities_are_mp420_with_their_path(odd_trees: tuple[str, Path], branch: str, path: str) -> None:
    url, cache = odd_trees
    args = ["validate", "--repo", url, "--rev", branch, "--cache-dir", str(cache), "-o", "json"]
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["valid"] is False
    files = [e["file"] for e in doc["errors"] if e["code"] == "MP420"]
    assert any(f.startswith(path) for f in files), doc["errors"]
