"""The report's packs searched for deltas by libgit2's threads (issue 29): while the caller waits in the pack write,
libgit2's own threads read the held blobs back through the Python backend (pygit2 takes the GIL for them), the pack
still holds deltas, and every blob reads back from a fresh handle once close() returns.

Real repositories and real pack writes; the only patched code records which thread read a held blob."""

from __future__ import annotations

import hashlib
import threading
import zlib
from pathlib import Path
from typing import Any

import pygit2

from reconciler.adapters.git import packwrite
from reconciler.adapters.git.packwrite import BlobSink


def _contents(n: int) -> list[bytes]:
    """Alike, as a fleet's node pages are: the same 2 KB of lines (hashes: zlib alone keeps most of it), one line
    differing per page, so each is a small delta of another."""
    shared = [hashlib.sha256(str(k).encode()).hexdigest().encode() + b"\n" for k in range(30)]
    return [b"".join([*shared[:15], f"node-{i:04d}\n".encode(), *shared[15:]]) for i in range(n)]


def _pack_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path / "objects" / "pack").glob("*.pack"))


def test_the_delta_search_reads_the_held_blobs_from_libgit2_threads(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "r"
    repo = pygit2.init_repository(str(path), bare=True)
    readers: list[int] = []
    read = packwrite._HeldBlobs.read_cb

    def recorded(self: packwrite._HeldBlobs, oid: pygit2.Oid) -> tuple[int, bytes]:
        readers.append(threading.get_ident())  # an id only: no threading.Thread object for libgit2's threads
        return read(self, oid)

    monkeypatch.setattr(packwrite._HeldBlobs, "read_cb", recorded)
    # Two search threads whatever this machine's CPUs (one CPU gives one: the search then runs on the caller's thread).
    monkeypatch.setattr(packwrite, "PACK_THREADS", 2)
    contents = _contents(80)
    sink = BlobSink(repo, bulk_from=5, pack_bytes=60_000)
    ids = [sink.add(data) for data in contents]
    sink.close()
    assert sink.packed == 80 and sink.packs >= 2
    caller = threading.get_ident()
    assert caller in readers  # the write reads what it stores on the caller's thread...
    assert set(readers) - {caller}  # ...the delta search read them from libgit2's threads
    fresh = pygit2.Repository(str(path))
    for oid, data in zip(ids, contents, strict=True):
        assert bytes(fresh[oid].peel(pygit2.Blob).data) == data
    # deltas were found: the packs are a fraction of the blobs compressed one by one
    assert _pack_bytes(path) * 4 < sum(len(zlib.compress(data)) for data in contents)
