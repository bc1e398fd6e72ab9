"""One cycle at a time per cache directory, across processes: an flock on `<cache_dir>/migplan.lock`.

The cache directory holds state that a cycle reads and then rewrites — the bare Git cache and its
refs, the last-known-good state file, the report outbox with its sequence numbers. Two processes
sharing it (two `migplan reconcile --once`, a CronJob overlapping the controller on one volume)
would each fetch into the same repository, number outbox entries from the same listing and push
the same entry twice or drop one. So every GitOps cycle holds this lock from its fetch to its
report push; a second process waits for it (polling, so the wait is bounded) and, after
`timeout` seconds, gives up with MP830 without having touched anything.

flock(2) locks belong to the open file description: the kernel releases them when the process
dies, so a crashed run never leaves a stale lock behind (unlike a lock file that merely exists).
The file keeps the pid of the last holder, only to name it in the error. Not pure: disk I/O.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reconciler.model.errors import MigplanError

LOCKED = "MP830"  # another process holds the cache directory for longer than the lock timeout
UNUSABLE = "MP831"  # the cache directory cannot be created or its lock file cannot be opened
LOCK_FILE = "migplan.lock"
_POLL_SECONDS = 0.05


class CacheLocked(MigplanError):
    code = LOCKED


class CacheUnusable(MigplanError):
    code = UNUSABLE


def _open(cache_dir: Path) -> int:
    path = cache_dir / LOCK_FILE
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise CacheUnusable(f"cache directory {cache_dir} cannot be used: {exc.strerror or exc}") from exc


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


@contextmanager
def cache_lock(cache_dir: Path, *, timeout: float) -> Iterator[None]:
    """Hold the cache directory's lock for the body; wait at most `timeout` seconds for it."""
    fd = _open(cache_dir)
    try:
        give_up = time.monotonic() + max(timeout, 0.0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= give_up:
                    raise CacheLocked(
                        f"cache directory {cache_dir} is in use by another migplan process{_holder(fd)} "
                        f"for more than {timeout:g}s; nothing was done (run again, or give each run its own "
                        "--cache-dir)"
                    ) from None
                time.sleep(_POLL_SECONDS)
            except OSError as exc:
                raise CacheUnusable(f"cannot lock cache directory {cache_dir}: {exc.strerror or exc}") from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError:
            pass  # the pid is only for the error message of a waiting process
        yield
    finally:
        os.close(fd)  # releases the lock
