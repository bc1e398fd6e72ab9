"""Report blobs written into a repository's object database: loose when few, as packs when many (issue 29).

`BlobSink(repo)` takes blob contents one at a time (`add(data) -> blob id`, hex) and has every one of them in the
object database when `close()` returns:
- fewer than `bulk_from` distinct blobs (a report where a few pages changed): each is written as a loose object at
  `close()`, as `repo.create_blob` always wrote them (held until then: a few hundred pages, a few MB);
- from `bulk_from` on (the first report at fleet size: 45,000 pages and maps at 5,000 nodes), they are gathered in
  memory and written as packs (pygit2 `PackBuilder`), one each time `pack_bytes` of content is gathered and one at
  `close()`: one pack and its index instead of one zlib stream and one file per blob (figures in
  docs/explanation/scale.md, "The first report written in bulk"). The contents held at once are bounded by
  `pack_bytes` (plus the blob being added), not by the report's size.

Crash safety (the outbox of adapters/git/reports.py needs the blobs on disk before its entry is written): libgit2's
pack writer writes the pack and its index under temporary names and renames them into `objects/pack` before
`PackBuilder.write` returns, so once `close()` returns every blob is there, as a loose object would be. If anything
fails on the way, `close()` (or `add`) raises and the caller writes no entry; packs already written hold only
unreferenced blobs (what `git gc` prunes), and the next cycle renders and writes them again.

The gathered blobs live in an object database of their own: a second handle on the same repository whose only
backend is `_HeldBlobs` (a Python `pygit2.OdbBackend`), so the caller's handle never sees that backend, and the
pack builder reads only those blobs. Every id comes from libgit2 (`create_blob` on one handle or the other);
`pygit2.hash` names a blob held before the switch, and the write checks it gives the same id.

The pack builder's delta search (about two thirds of a pack's CPU) runs in `PACK_THREADS` libgit2 threads while the
caller's thread waits in `PackBuilder.write` (a cffi call, the GIL released); they read the held blobs through
`_HeldBlobs`, whose callbacks pygit2 runs under the GIL from 1.21 on (pyproject's floor). A read that fails in one of
those threads only costs deltas (libgit2 drops that thread's search); the write, on the caller's thread, reads every
object it stores again and fails the pack on an error there. Writing the pack in a thread of migplan's own while the
next pages render was measured slower: its reads wait for the GIL the renderer holds (docs/explanation/scale.md,
"The report's packs: delta search in two threads").

Not pure: writes into the repository's object database (through pygit2 only; Git's files are never written by hand).
"""

from __future__ import annotations

import os

import pygit2
from pygit2.enums import ObjectType

# Distinct new blobs from which a report is written as packs: above a 1%-drift report at 5,000 nodes (50 nodes x
# (1 page + 8 maps) = 450 blobs), which stays loose; a fleet-wide change from about 110 nodes of 8 GPUs goes packed.
BULK_FROM = 1_000
# Content gathered per pack: bounds the memory a bulk write holds (the report is 261 MB at 5,000 nodes). Peak RSS
# grows by about 1.7x this (measured: +14 MB at 8 MiB, +26 MB at 16, +51 MB at 32); 8 MiB makes 7 packs at 1,000
# nodes and about 33 at 5,000, where loose objects made 9,000 and 45,000 files.
PACK_BYTES = 8 * 1024 * 1024


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask where the platform has one (Linux: a container's cpuset,
    taskset), else the host's count. os.cpu_count() counts the host's CPUs whatever the process is limited to."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def pack_threads() -> int:
    """libgit2 threads searching deltas in each pack: one per CPU the process may use (the caller's thread only
    waits meanwhile, so on a single CPU one thread is all there is), at most four (each takes the GIL for every blob
    it reads)."""
    return min(4, usable_cpus())


PACK_THREADS = pack_threads()


class _HeldBlobs(pygit2.OdbBackend):
    """An object database backend in memory: the blobs gathered for the next pack, by id.

    libgit2 calls these methods by name (pygit2's OdbBackend glue); a missing id raises KeyError, which libgit2
    sees as an error (never as "found")."""

    def __init__(self) -> None:
        super().__init__()
        self.objects: dict[pygit2.Oid, bytes] = {}
        self.size = 0

    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        return int(ObjectType.BLOB), self.objects[oid]

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        return int(ObjectType.BLOB), len(self.objects[oid])

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return oid in self.objects

    def write_cb(self, oid: pygit2.Oid, data: bytes, kind: int) -> None:
        if kind != int(ObjectType.BLOB):  # only report blobs come here: anything else is a bug, never stored
            raise ValueError(f"not a blob: object type {kind}")
        if oid not in self.objects:
            self.objects[oid] = bytes(data)
            self.size += len(data)

    def refresh_cb(self) -> None:
        return None

    def clear(self) -> None:
        self.objects = {}
        self.size = 0


class BlobSink:
    """Blobs for one report, written loose or as packs (see the module docstring). Not reusable after close()."""

    def __init__(self, repo: pygit2.Repository, *, bulk_from: int = BULK_FROM, pack_bytes: int = PACK_BYTES) -> None:
        self._repo = repo
        self._bulk_from = max(1, bulk_from)
        self._pack_bytes = max(1, pack_bytes)
        self._waiting: dict[str, bytes] = {}  # before the switch: hex id -> content, written loose at close()
        self._held: _HeldBlobs | None = None
        self._side: pygit2.Repository | None = None
        self.loose = 0  # blobs written as loose objects
        self.packed = 0  # blobs written into packs
        self.packs = 0  # packs written

    def add(self, data: bytes) -> str:
        """The blob id of `data` (hex); the blob is in the object database once close() has returned."""
        if self._side is None:
            oid = str(pygit2.hash(data))
            self._waiting.setdefault(oid, data)
            if len(self._waiting) >= self._bulk_from:
                self._switch()
            return oid
        held = self._held
        assert held is not None
        oid = str(self._side.create_blob(data))
        if held.size >= self._pack_bytes:
            self._write_pack()
        return oid

    def close(self) -> None:
        """Write what is still waiting or held: afterwards every blob added is in the repository."""
        for oid, data in self._waiting.items():
            self._check(oid, self._repo.create_blob(data))
            self.loose += 1
        self._waiting = {}
        if self._held is not None and self._held.objects:
            self._write_pack()
        self._side, self._held = None, None

    def _switch(self) -> None:
        """From here on blobs are gathered for packs: a second handle on the repository, its only backend in memory."""
        held = _HeldBlobs()
        odb = pygit2.Odb()
        odb.add_backend(held, 1)
        side = pygit2.Repository(self._repo.path)
        side.set_odb(odb)
        self._side, self._held = side, held
        waiting, self._waiting = self._waiting, {}
        for oid, data in waiting.items():
            self._check(oid, side.create_blob(data))

    def _write_pack(self) -> None:
        side, held = self._side, self._held
        assert side is not None and held is not None
        builder = pygit2.PackBuilder(side)
        builder.set_threads(PACK_THREADS)  # the delta search only; adding and writing stay on this thread
        for oid in held.objects:
            builder.add(oid)
        # Default location: the repository's objects/pack (its common directory for a linked worktree), the pack
        # and its index renamed into place before this returns.
        builder.write()
        if builder.written_objects_count != len(held.objects):
            raise pygit2.GitError(f"pack written with {builder.written_objects_count} of {len(held.objects)} blobs")
        self.packed += len(held.objects)
        self.packs += 1
        held.clear()

    @staticmethod
    def _check(expected: str, written: pygit2.Oid) -> None:
        if str(written) != expected:  # pygit2.hash and the odb disagree: never name a blob that is not there
            raise pygit2.GitError(f"blob written as {written}, expected {expected}")
