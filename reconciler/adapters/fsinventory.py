"""Read an inventory root from a directory into a mapping of relative path -> bytes.

I/O adapter (the file system); no parsing. It never leaves the root: symbolic links are skipped,
never followed, hidden entries (.git, .github, editors' swap files) are skipped, and each file is read with a bound of
MAX_FILE_BYTES + 1 bytes, so an oversized file costs at most that much memory and the validator's
size rule (MP101) still fires on it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from reconciler.logic.yamldocs import MAX_FILE_BYTES

MAX_FILES = 100_000  # a 5,000-node inventory has ~5,000 files; more is a wrong root


class InventoryReadError(OSError):
    """The root cannot be read as an inventory (missing, not a directory, too many files)."""


def read_inventory_dir(root: Path, *, limit: int = MAX_FILE_BYTES) -> Mapping[str, bytes]:
    """Every regular file under `root`, keyed by '/'-separated relative path.

    Symbolic links are skipped, never followed: following one could read outside the root, and in a
    Git repository (what the controller reads) a link is not the file a reviewer saw. Raises
    InventoryReadError when the root is missing or not a directory."""
    root = Path(root)
    try:
        st = root.stat()
    except OSError as exc:
        raise InventoryReadError(f"cannot read inventory root {root}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise InventoryReadError(f"inventory root {root} is not a directory")
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        # Hidden folders (.git, .github) are never inventory; prune them before descending.
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir.replace(os.sep, '/')}/{name}"
            try:
                # O_NOFOLLOW: a symlink swapped in after the walk still cannot lead outside the root.
                fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            except OSError:
                continue  # a symlink (ELOOP) or a file that vanished: not part of the inventory
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                out[rel] = _read_bounded(fd, limit + 1)
            finally:
                os.close(fd)
            if len(out) > MAX_FILES:
                raise InventoryReadError(f"inventory root {root} holds more than {MAX_FILES} files")
    return out


def _read_bounded(fd: int, most: int) -> bytes:
    # os.read in a loop, not a file object: a small file is one system call, and 5,000 files
    # add up. Stops at `most` bytes whatever the file's size.
    chunks: list[bytes] = []
    left = most
    while left > 0:
        want = min(left, 1 << 20)
        chunk = os.read(fd, want)
        chunks.append(chunk)
        left -= len(chunk)
        if len(chunk) < want:
            break  # a short read of a regular file is its end: spare the extra call
    return b"".join(chunks)
