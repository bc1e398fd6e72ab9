"""Read an inventory root from a directory into a mapping of relative path -> bytes.

I/O adapter (the file system); no parsing. It never leaves the root: symbolic links are never
followed, hidden entries (.git, .github, editors' swap files) are skipped, and each file is read with a
bound of MAX_FILE_BYTES + 1 bytes, so an oversized file costs at most that much memory and the
validator's size rule (MP101) still fires on it.

What cannot be read is recorded, never dropped (InventoryFiles.unreadable; validation reports it as
MP420 and refuses the inventory): a directory or file that cannot be opened, a symbolic link, a FIFO,
socket or device (never opened: it is stat'ed first and files are opened O_NONBLOCK, so nothing
hangs), a name that is not UTF-8, directories nested deeper than MAX_DEPTH. The walk is iterative
(no recursion limit to hit) and stops descending at MAX_DEPTH.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from reconciler.logic.inventory.yamldocs import MAX_FILE_BYTES
from reconciler.model.inventory import InventoryFiles

MAX_FILES = 100_000  # a 5,000-node inventory has ~5,000 files; more is a wrong root
MAX_DEPTH = 16  # the format needs 2 levels (nodes/<node>.yaml); a repository rarely needs more than a few
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class InventoryReadError(OSError):
    """The root cannot be read as an inventory (missing, not a directory, too many files)."""


def printable_name(name: str) -> str:
    """A file name as text that can be printed and committed: bytes that are not UTF-8 (decoded by
    Python as surrogates) are shown as \\xNN escapes."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def read_inventory_dir(root: Path, *, limit: int = MAX_FILE_BYTES) -> InventoryFiles:
    """Every regular file under `root`, keyed by '/'-separated relative path, and what could not be read.

    Symbolic links are never followed: following one could read outside the root, and in a Git
    repository (what the controller reads) a link is not the file a reviewer saw. Raises
    InventoryReadError when the root is missing or not a directory."""
    root = Path(root)
    try:
        st = root.stat()
    except OSError as exc:
        raise InventoryReadError(f"cannot read inventory root {root}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise InventoryReadError(f"inventory root {root} is not a directory")
    out = InventoryFiles()
    stack: list[tuple[str, str, int]] = [(str(root), "", 0)]
    while stack:
        dirpath, rel_dir, depth = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError as exc:
            out.unreadable[rel_dir or "."] = f"cannot read the directory: {_why(exc)}"
            continue
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue  # hidden folders (.git, .github) and files are never inventory
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not name.isascii() and printable_name(name) != name:  # an ASCII name is printable as it is
                shown = printable_name(name)
                out.unreadable[f"{rel_dir}/{shown}" if rel_dir else shown] = "the file name is not UTF-8"
                continue
            # The directory listing's file type tells a regular file without a stat call (5,000 files add up);
            # _read_file checks it again on the open descriptor. Anything else is stat'ed, as before.
            if not entry.is_file(follow_symlinks=False):
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError as exc:
                    out.unreadable[rel] = f"cannot stat: {_why(exc)}"
                    continue
                if stat.S_ISLNK(mode):
                    out.unreadable[rel] = "a symbolic link (never followed)"
                    continue
                if stat.S_ISDIR(mode):
                    if depth + 1 >= MAX_DEPTH:
                        out.unreadable[rel] = f"directories nested deeper than {MAX_DEPTH} levels"
                    else:
                        stack.append((entry.path, rel, depth + 1))
                    continue
                if not stat.S_ISREG(mode):
                    out.unreadable[rel] = "not a regular file (a FIFO, socket or device): not read"
                    continue
            _read_file(entry.path, rel, out, limit)
            if len(out) > MAX_FILES:
                raise InventoryReadError(f"inventory root {root} holds more than {MAX_FILES} files")
    return out


def _read_file(path: str, rel: str, out: InventoryFiles, limit: int) -> None:
    try:
        # O_NOFOLLOW: a symlink swapped in after the stat still cannot lead outside the root;
        # O_NONBLOCK: neither can a FIFO swapped in make the open hang.
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    except FileNotFoundError:
        return  # vanished since the listing: not part of the inventory
    except OSError as exc:
        out.unreadable[rel] = f"cannot open: {_why(exc)}"
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            out.unreadable[rel] = "not a regular file (a FIFO, socket or device): not read"
            return
        out[rel] = _read_bounded(fd, limit + 1, st.st_size)
    except OSError as exc:
        out.unreadable[rel] = f"cannot read: {_why(exc)}"
    finally:
        os.close(fd)


def _read_bounded(fd: int, most: int, size: int) -> bytes:
    # os.read in a loop, not a file object: a small file is one system call, and 5,000 files
    # add up. Stops at `most` bytes whatever the file's size. The first read asks for the size
    # fstat gave plus one byte (a file that grew since is read on, 1 MiB at a time): os.read
    # allocates what it is asked for, and asking for 1 MiB per small file cost 5x the reads.
    chunks: list[bytes] = []
    left = most
    want = min(left, size + 1)
    while left > 0:
        chunk = os.read(fd, want)
        chunks.append(chunk)
        left -= len(chunk)
        if len(chunk) < want:
            break  # a short read of a regular file is its end: spare the extra call
        want = min(left, 1 << 20)
    return b"".join(chunks)
