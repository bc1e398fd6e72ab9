"""The pages of a bulk report rendered and written by two processes: this one and one forked child (issue 29).

The first report at fleet size renders and writes tens of thousands of pages while nothing else runs: one Python
thread renders, digests and hands blobs to a BlobSink (adapters/git/packwrite.py), and libgit2's delta search takes
the second core only while a pack is written. `render_in_two(repo, todo)` splits the pages to render between this
process (even positions) and a child made by `os.fork` (odd positions): the pages are closures over the report,
which a fork inherits as it is (copy-on-write) where a spawned process would need them pickled. Each process writes
its share through its own BlobSink on its own pygit2 handle of the same repository (distinct packs: libgit2 writes
each under a temporary name and renames it into `objects/pack`).

The child sends the blob id of each page of its share back through a pipe (JSON: the paths, the ids, how many it
packed) and leaves with `os._exit` (no atexit handlers, no flush of buffers it inherited). The parent takes the ids
only when all of these hold: the child exited with status 0, the reply parses and names exactly the paths of the
share in order, each id is 40 hex digits, and each is a blob in the object database (libgit2 rescans `objects/pack` on a
miss). Otherwise (a crash, SIGKILL, an exception, garbage or a short reply, a child past its time) the parent kills
and reaps the child and renders the child's share itself: the result is the same, only slower. A child still
running when the cycle's deadline (adapters/deadline.py) passes is killed and the report fails instead (TimeoutError,
which store_report returns as its GIT_FAILED failure): nothing names a blob that is not in the object database.
A fork refused (EAGAIN, ENOMEM) leaves every page to the parent.

Forking is safe only where no other thread can hold a lock the child would need: `may_fork()` asks for exactly one
thread (Python's count and, where /proc shows them, the process's tasks, libgit2's and C libraries' included), a
platform with `os.fork` and at least two CPUs this process may run on. Elsewhere store_report keeps one process.

Not pure: forks, writes into the repository's object database (through pygit2), reads and writes a pipe.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pygit2
from pygit2.enums import ObjectType

from reconciler.adapters import deadline
from reconciler.adapters.git.packwrite import BlobSink
from reconciler.logic.reports.reports import PageSource

log = logging.getLogger("migplan.report")

# Seconds the child may take when no cycle deadline is set (`reconcile --once` always has one: --deadline, 30 s).
CHILD_TIMEOUT = 600.0
# Reply bytes per page the parent reads at most (a path and an id, JSON-quoted) beyond a fixed allowance: a child
# that sends more is not ours to believe, and is not read to the end.
_REPLY_PER_PAGE = 1_200
_REPLY_BASE = 4_096
_HEX_ID = re.compile(r"[0-9a-f]{40}")


class _ChildFailed(Exception):
    """The child's share cannot be taken from it: the reason, for the log."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """The blob id of each page rendered (in the order given) and how it was written."""

    ids: list[str]
    packed: int  # blobs written into packs, by both processes
    forked: bool  # the child's share came from the child (False: the parent rendered it after a failed child)
    child_maxrss_kb: int  # the child's peak RSS (wait4's ru_maxrss, KiB on Linux); 0 without a child's reply


def may_fork() -> bool:
    """Whether this process may fork a renderer now: `os.fork` exists, two CPUs at least, one thread only."""
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return False
    try:
        if len(os.sched_getaffinity(0)) < 2:
            return False
    except OSError:
        return False
    if threading.active_count() != 1:
        return False
    tasks = Path("/proc/self/task")  # threads Python does not count (libgit2's, a C library's), where Linux shows them
    if not Path("/proc").is_dir():
        return True  # no /proc: Python's count is all there is
    try:
        return len(os.listdir(tasks)) == 1
    except OSError:
        return False


def render_in_two(repo: pygit2.Repository, todo: Sequence[PageSource], *, pack_bytes: int) -> Rendered:
    """Render and write every page of `todo` (see the module docstring); every id returned is in `repo`'s object
    database. Raises pygit2.GitError or OSError (TimeoutError past the cycle deadline) as a BlobSink does."""
    mine, theirs = list(todo[0::2]), list(todo[1::2])
    # Each process holds half of `pack_bytes` for its next pack: the pair holds what one process would (measured at
    # 1,000 nodes: the parent's peak RSS as in one process, the child's private memory 26 MB instead of 32).
    half = max(1, pack_bytes // 2)
    left = deadline.remaining()
    until = time.monotonic() + (CHILD_TIMEOUT if left is None else min(CHILD_TIMEOUT, left))
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:  # no process to be had (EAGAIN, ENOMEM): one process, as where forking is not safe
        os.close(read_end)
        os.close(write_end)
        log.warning("report pages: cannot fork a renderer (%s); all pages are rendered here", exc)
        alone = BlobSink(repo, bulk_from=1, pack_bytes=pack_bytes)
        ids = [alone.add(page.render()) for page in todo]
        alone.close()
        return Rendered(ids=ids, packed=alone.packed, forked=False, child_maxrss_kb=0)
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _child(repo.path, theirs, write_end, half)
    os.close(write_end)
    reaped = False
    try:
        sink = BlobSink(repo, bulk_from=1, pack_bytes=half)  # bulk already: packs from the first blob
        own = [sink.add(page.render()) for page in mine]
        try:
            reply = _read_reply(read_end, until, len(theirs))
            status, maxrss = _reap(pid, until)
            reaped = True
            child_ids, child_packed = _take(repo, reply, status, [p.path for p in theirs])
            forked = True
        except _ChildFailed as exc:
            if not reaped:
                _kill(pid)
                reaped = True
            past = deadline.remaining()
            if past is not None and past <= 0:
                raise TimeoutError(f"the forked report renderer ran past the cycle deadline ({exc})") from exc
            log.warning("report pages: the forked renderer failed (%s); its pages are rendered here", exc)
            child_ids, child_packed, maxrss, forked = [sink.add(page.render()) for page in theirs], 0, 0, False
        sink.close()
    finally:
        os.close(read_end)
        if not reaped:
            _kill(pid)
    ids = [""] * len(todo)
    ids[0::2], ids[1::2] = own, child_ids
    return Rendered(ids=ids, packed=sink.packed + child_packed, forked=forked, child_maxrss_kb=maxrss)


def _child(path: str, share: list[PageSource], out: int, pack_bytes: int) -> NoReturn:
    """Render and write `share` on a handle of its own, reply through `out`, and leave without cleaning up: the
    parent's atexit handlers, buffers and finalizers are the parent's."""
    code = 1
    try:
        rendered = False
        try:
            sink = BlobSink(pygit2.Repository(path), bulk_from=1, pack_bytes=pack_bytes)
            ids = [sink.add(page.render()) for page in share]
            sink.close()
            reply: dict[str, object] = {"paths": [p.path for p in share], "ids": ids, "packed": sink.packed}
            rendered = True
        except Exception as exc:  # told to the parent, which renders the share itself; never a traceback
            reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        data = _reply_bytes(reply)
        while data:
            data = data[os.write(out, data) :]
        code = 0 if rendered else 1
    finally:
        os._exit(code)  # also after an exception here (a parent gone: EPIPE) or an interrupt


def _reply_bytes(reply: dict[str, object]) -> bytes:
    return json.dumps(reply, separators=(",", ":")).encode()


def _read_reply(fd: int, until: float, pages: int) -> bytes:
    """The child's reply, read to the end of the pipe, within `until` and the size a reply of `pages` can have."""
    limit = _REPLY_BASE + _REPLY_PER_PAGE * pages
    chunks: list[bytes] = []
    size = 0
    while True:
        left = until - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0.0))
        if not ready:
            if left <= 0:
                raise _ChildFailed("no reply in time")
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise _ChildFailed(f"a reply longer than {limit} bytes")
        chunks.append(chunk)


def _reap(pid: int, until: float) -> tuple[int, int]:
    """The child's exit status and peak RSS once it has exited (it has closed the pipe: it is leaving)."""
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done == pid:
            return status, int(usage.ru_maxrss)
        if time.monotonic() >= until:
            raise _ChildFailed("still running after its reply")
        time.sleep(0.005)


def _kill(pid: int) -> None:
    """Stop the child and reap it (never a zombie left behind)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _take(repo: pygit2.Repository, reply: bytes, status: int, paths: list[str]) -> tuple[list[str], int]:
    """The child's ids and packed count, when its exit and its reply can be believed (see the module docstring)."""
    code = os.waitstatus_to_exitcode(status)
    try:
        doc = json.loads(reply)
    except ValueError:
        doc = None
    if code != 0:
        said = doc.get("error") if isinstance(doc, dict) else None
        raise _ChildFailed(f"exit status {code}" + (f": {said}" if isinstance(said, str) else ""))
    if not isinstance(doc, dict) or doc.get("paths") != paths:
        raise _ChildFailed("a reply that is not the share's paths")
    ids, packed = doc.get("ids"), doc.get("packed")
    if not isinstance(ids, list) or len(ids) != len(paths) or type(packed) is not int or not 0 <= packed <= len(ids):
        raise _ChildFailed("a reply without one id per page")
    for oid in ids:
        if not isinstance(oid, str) or _HEX_ID.fullmatch(oid) is None:
            raise _ChildFailed("a reply with a malformed blob id")
        # The object's header, not the object (`oid in repo` inflates it: 40 times the time); a miss rescans
        # objects/pack first, where the child's packs are new.
        try:
            kind = repo.odb.read_header(oid)[0]
        except (KeyError, ValueError, pygit2.GitError):
            raise _ChildFailed(f"blob {oid} is not in the object database") from None
        if kind != ObjectType.BLOB:
            raise _ChildFailed(f"{oid} is not a blob")
    return ids, packed
