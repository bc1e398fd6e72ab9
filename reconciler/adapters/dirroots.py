"""Find the inventory roots of a directory (reconciler/logic/inventory/inventoryroots.py decides).

Split from rootdiscovery.py so that `migplan validate DIR` never imports pygit2 (about 60 ms of start-up).
Only names are read (directory entries), never file contents, except `migplan-roots.yaml`. Hidden
directories and symbolic links are skipped; the walk stops at MAX_DEPTH and after MAX_ENTRIES entries.
"""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.logic.inventory import inventoryroots
from reconciler.logic.inventory.inventoryroots import CLUSTER_FILE, ROOTS_FILE

MAX_DEPTH = 8
MAX_ENTRIES = 500_000


def dir_roots(top: Path) -> list[str] | str:
    """The inventory roots under directory `top` (relative paths; [""] when `top` is one or none is found),
    or why the roots file cannot be used."""
    if (top / CLUSTER_FILE).exists():
        return [""]
    listing = top / ROOTS_FILE
    if listing.is_file() and not listing.is_symlink():
        try:
            with listing.open("rb") as f:
                data = f.read(inventoryroots.MAX_ROOTS_FILE_BYTES + 1)
        except OSError as exc:
            return f"{ROOTS_FILE}: {exc.strerror or exc}"
        listed = inventoryroots.parse_roots_file(data)
        return f"{ROOTS_FILE}: {listed}" if isinstance(listed, str) else listed
    found: list[str] = []
    seen = 0
    stack: list[tuple[str, str, int]] = [(str(top), "", 0)]
    while stack and seen < MAX_ENTRIES:
        path, prefix, depth = stack.pop()
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            seen += 1
            if e.name.startswith(".") or e.is_symlink():
                continue
            if e.is_dir(follow_symlinks=False) and depth + 1 < MAX_DEPTH:
                stack.append((e.path, f"{prefix}{e.name}/", depth + 1))
            elif e.name == CLUSTER_FILE and e.is_file(follow_symlinks=False):
                found.append(f"{prefix}{e.name}")
    return inventoryroots.roots_from_paths(found) or [""]
