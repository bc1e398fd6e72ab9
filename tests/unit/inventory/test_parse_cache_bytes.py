"""What a ParseCache keeps between runs (issue 29, `runrss4`): each file's results, never the file's bytes (a
controller keeps its cache between cycles; the bytes are read again when a file changes). A fast-path file whose
cross-file diagnostic needs the exact `layout:` line reads it from the files being validated, on a cache hit too."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.logic.inventory.validation import ParseCache, validate_inventory


def _reachable(root: object) -> list[object]:
    seen: set[int] = set()
    out: list[object] = []
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ == "module":
            continue
        seen.add(id(obj))
        out.append(obj)
        todo.extend(gc.get_referents(obj))
    return out


def _fleet() -> dict[str, bytes]:
    """The example inventory and 200 more node files of the same shapes (their bytes all distinct objects)."""
    files = {p: b for p, b in read_inventory_dir(resources.inventory_dir()).items()}
    node = files["nodes/gpu-a100-01.yaml"]
    for i in range(200):
        files[f"nodes/gpu-extra-{i:03d}.yaml"] = node.replace(b"gpu-a100-01", f"gpu-extra-{i:03d}".encode())
    return files


def test_the_cache_keeps_no_file_bytes() -> None:
    files = _fleet()
    cache = ParseCache()
    first = validate_inventory(files, cache=cache)
    assert first.valid and len(cache) == len([p for p in files if p.endswith(".yaml")])
    data = {id(b) for b in files.values()}
    held = [o for o in _reachable(cache) if isinstance(o, bytes) and (id(o) in data or len(o) > 200)]
    assert held == []  # neither the files' own bytes nor copies of them
    # and what the cache keeps is enough: a second run over equal files (other objects) parses nothing
    again = {p: bytes(bytearray(b)) for p, b in files.items()}
    parses = cache.parses
    second = validate_inventory(again, cache=cache)
    assert cache.parses == parses and second == first


def test_a_cached_fast_path_file_still_names_the_exact_layout_line(tmp_path: Path) -> None:
    dest = tmp_path / "inv"
    shutil.copytree(resources.inventory_dir(), dest)
    files = read_inventory_dir(dest)
    cache = ParseCache()
    assert validate_inventory(files, cache=cache).valid
    del files["layouts/a100-balanced.yaml"]
    parses = cache.parses
    result = validate_inventory(files, cache=cache)
    assert cache.parses == parses  # the node file came from the cache
    got = sorted((d.code, d.file, d.line) for d in result.errors)
    assert got == [("MP407", "nodes/gpu-a100-01.yaml", 12), ("MP407", "nodes/gpu-a100-01.yaml", 15)]
