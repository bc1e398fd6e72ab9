"""A watch-fed cache of one collection (nodes, or pods in all namespaces) for `migplan run`.

client-go's reflector (staging/src/k8s.io/client-go/tools/cache/reflector.go, `ListAndWatch` and
`watchHandler`) cut to what migplan needs, and never trusted blindly:
- Seeded by a full LIST the cycle makes anyway (KubeCluster.observe, through `_fold`: page decoding, retries,
  timeouts and the cycle's deadline as for every list): the records read from it, keyed by uid, and the list's
  resourceVersion. A thread then watches from that resourceVersion with `allowWatchBookmarks`, through the
  adapter's ApiClient (a rawapi list method with `watch=True`, answered raw and read line by line). ADDED and
  MODIFIED set a uid's record (`read`: the adapter's parse, so the cache keeps parsed records, never raw JSON),
  DELETED drops it, BOOKMARK only moves the resourceVersion.
- Each watch asks for WATCH_SECONDS (`timeoutSeconds`): the API server sends a bookmark 2 s before a watch's
  timeout (the watch cache's `cacheWatcher.nextBookmarkTime`; recorded in tests/reference/kube-apiserver/
  watch.json, step watch-bookmarks): about a second in. Once it has it, the thread ends that watch (its connection
  closed) and opens the next from the bookmark's resourceVersion, so the cache learns the server's current
  resourceVersion about once a second even when nothing in its collection changes (one watch request a second).
- A stream that ends or breaks, or a line that is not an event of the watched kind (not JSON, no object, another
  kind, a resourceVersion that is not an unsigned integer, a line past MAX_LINE): watched again from the last
  resourceVersion applied, after a pause that grows. An ERROR 410 (Gone / Expired: the server no longer has the
  events after our resourceVersion), or MAX_FAILURES failures in a row: the cache gives up (`broken`) and the next
  cycle lists afresh, as the reflector relists on 410.
- `view(target, wait)`: the records in the order a LIST gives them, only once the cache is known to be at or past
  `target` — the resourceVersion of a cheap LIST (limit=1) the cycle makes first — waiting at most `wait` seconds;
  else None, and the cycle lists. resourceVersions are opaque by contract: compared as integers only when both
  are unsigned integers, anything else is None (a list). A write the last cycle made has a resourceVersion below
  the next cycle's target, so the next cycle sees it or lists: never a decision on a view older than the cycle.

Thread-safe: the watch thread writes, a cycle reads, under one condition variable. A record is made outside the
lock (the parse is the CPU) and stored under it. No kubernetes import: the adapter hands in how to open a watch.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import orjson

Json = Mapping[str, Any]
R = TypeVar("R")

WATCH_SECONDS = 3  # timeoutSeconds of each watch: a bookmark about 1 s in, then the next watch
FRESH_WAIT = 5.0  # seconds a cycle waits at most for the watch to reach its target before it lists
MAX_LINE = 8 * 1024 * 1024  # bytes: an event line past this is garbage (etcd keeps objects under 1.5 MiB)
MAX_FAILURES = 5  # failed watches in a row before the cache gives up and the next cycle lists
PAUSE = 0.2  # seconds before watching again after a failure, times the failures in a row
MIN_WATCH_SECONDS = 0.5  # a new watch at most this often (the API server's bookmark comes ~1 s in)
_MAX_RV_DIGITS = 20  # an etcd revision is an int64: 19 digits
Uid = str | bytes  # a uid as the cache keys it (compact_uid)


def rv_number(rv: object) -> int | None:
    """A resourceVersion as an integer when it is one (ASCII digits only, at most 20), else None."""
    if isinstance(rv, str) and 0 < len(rv) <= _MAX_RV_DIGITS and rv.isascii() and rv.isdigit():
        return int(rv)
    return None


def compact_rv(rv: object) -> object:
    """A resourceVersion as the cache keeps it, only to compare: an int when it is a decimal integer written as one
    (ASCII digits, at most 20, no leading zero), else as it is. 28 bytes instead of some 55 per kept object, and never
    equal to another resourceVersion: an int is never equal to a str, and only the int's own written form becomes it."""
    if (
        type(rv) is str
        and 0 < len(rv) <= _MAX_RV_DIGITS
        and rv.isdigit()
        and rv.isascii()
        and (rv[0] != "0" or rv == "0")
    ):
        return int(rv)
    return rv


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").fullmatch


def compact_uid(uid: str) -> Uid:
    """A uid as the cache keys it: its 16 bytes when it is a UUID as the API server writes it (lowercase hex,
    hyphenated: apimachinery's `uuid.NewUUID`), else the string as it is. 49 bytes instead of 85 per kept object;
    two different uids never share a key (only that one written form is converted, and bytes never equal a str)."""
    return bytes.fromhex(uid.replace("-", "")) if len(uid) == 36 and _UUID(uid) else uid


class Garbled(Exception):
    """A line of the stream that is not an event of the watched kind: the watch starts again from the last RV."""


class Expired(Exception):
    """ERROR 410 in the stream: the events after our resourceVersion are gone; only a fresh LIST helps."""


class _Replaced(Exception):
    """The cache was seeded again or stopped while this watch ran: its thread ends."""


# One kept object: (resourceVersion, key in LIST order, record), under its uid; both as `entry` writes them.
Entry = tuple[object, str, R]


def entry(uid: str, rv: str, key: str, record: R) -> tuple[Uid, Entry[R]]:
    """(uid, entry) of one object as the cache keeps them (compact_uid, compact_rv): what `seed` takes."""
    return compact_uid(uid), (compact_rv(rv), key, record)


class WatchCache(Generic[R]):
    """One collection's records, fed by a watch thread, read by cycles only when known fresh (module docstring).

    `open_watch(rv)` opens a watch from rv and returns the raw, unread response (it has `stream(amt)` and
    `release_conn()`, as urllib3's); `expired` is the exception type it raises for a 410 answer. `read(obj)` makes
    (key, record) of one object, or None for an object worth nothing to the observation (not kept); it may raise on
    an object it cannot read (the line is then garbage)."""

    def __init__(
        self,
        *,
        kind: str,
        open_watch: Callable[[str], Any],
        read: Callable[[Json], tuple[str, R] | None],
        expired: type[BaseException],
    ) -> None:
        self.kind = kind
        self._open_watch = open_watch
        self._read = read
        self._expired = expired
        self._cond = threading.Condition()
        self._items: dict[Uid, Entry[R]] = {}
        self._rv: str | None = None
        self._broken: str | None = "not listed yet"
        self._generation = 0
        self._thread: threading.Thread | None = None
        self._order: list[Uid] | None = None  # uids sorted by key; None after an object came or went
        self.watches = 0  # watches opened (for tests and logs)
        self.failures = 0  # failed watches in a row

    # --- the cycle's side -------------------------------------------------------------------------

    @property
    def broken(self) -> str | None:
        """Why the cache cannot serve a cycle now (None: it can, once fresh)."""
        with self._cond:
            return self._reason()

    def _reason(self) -> str | None:
        if self._broken is not None:
            return self._broken
        if self._thread is None or not self._thread.is_alive():
            return "the watch thread is not running"
        return None

    def view(self, target: str | None, wait: float) -> list[R] | None:
        """The records in LIST order once the cache has reached `target`, waiting at most `wait` seconds; None when
        it does not (broken, too slow, or resourceVersions that are not integers): the cycle then lists."""
        want = rv_number(target)
        if want is None:
            return None
        ends = time.monotonic() + max(wait, 0.0)
        with self._cond:
            while True:
                if self._reason() is not None:
                    return None
                have = rv_number(self._rv)
                if have is None:
                    return None
                if have >= want:
                    break
                left = ends - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            items = self._items
            if self._order is None:
                self._order = sorted(items, key=lambda uid: items[uid][1])
            return [items[uid][2] for uid in self._order]

    def kept(self, uid: object, rv: object) -> tuple[str, R] | None:
        """(key, record) kept for exactly this (uid, resourceVersion), for a relist not to parse it again: the same
        key can only stand for the same object (kube/observe.py ParseMemo says why)."""
        if not isinstance(uid, str) or not isinstance(rv, str):
            return None
        return self.kept_at(compact_uid(uid), compact_rv(rv))

    def kept_at(self, uid: Uid, rv: object) -> tuple[str, R] | None:
        """`kept` for a uid and resourceVersion already as the cache keeps them (compact_uid, compact_rv)."""
        kept = self._items.get(uid)  # one dict read: atomic, whatever the watch thread does
        return (kept[1], kept[2]) if kept is not None and kept[0] == rv else None

    def stop(self) -> None:
        """Forget the watch (its thread ends at its next line or stream end); the cache serves nothing until seeded."""
        with self._cond:
            self._generation += 1
            self._broken = "stopped"
            self._cond.notify_all()

    def seed(self, items: dict[Uid, Entry[R]], rv: str | None) -> None:
        """Take what a full LIST read (uid -> entry, as `entry` makes them) at resourceVersion `rv`, and watch from
        there."""
        with self._cond:
            self._generation += 1
            generation = self._generation
            self._items, self._order, self._rv = items, None, rv
            if rv_number(rv) is None:  # opaque: never known fresh, so never watched
                self._broken = f"the list's resourceVersion {str(rv)[:40]!r} is not an integer"
                self._cond.notify_all()
                return
            self._broken = None
            self._thread = threading.Thread(
                target=self._run, args=(generation,), name=f"migplan-watch-{self.kind.lower()}", daemon=True
            )
            self._thread.start()
            self._cond.notify_all()

    # --- the watch thread -------------------------------------------------------------------------

    def _run(self, generation: int) -> None:
        try:
            self._watch_loop(generation)
        except _Replaced:
            return
        except BaseException as exc:  # a bug must not leave a cache that looks alive
            self._give_up(generation, f"the watch thread failed: {type(exc).__name__}: {exc}")

    def _watch_loop(self, generation: int) -> None:
        failures = 0  # this watch's own (a replaced one's never count against its successor)
        while True:
            with self._cond:
                self._check(generation)
                rv = self._rv
                self.failures = failures
                assert rv is not None
            lines = 0
            opened = time.monotonic()
            try:
                self.watches += 1
                resp = self._open_watch(rv)
                whole = True
                try:
                    for line in _lines(resp):
                        lines += 1
                        if self._apply(line, generation) == "BOOKMARK":
                            # The server is known to this point; the next bookmark comes a second into the next
                            # watch, not at this one's end: watch again now.
                            whole = False
                            break
                except BaseException:
                    whole = False
                    raise
                finally:
                    _done(resp, whole=whole)
                if lines == 0:  # a watch always brings a bookmark at least: an empty answer is not one
                    raise Garbled("the watch answered nothing")
                failures = 0
                # Never more than a watch every MIN_WATCH_SECONDS, whatever the server: one that answers with a
                # bookmark at once (not what the API server does) must not make a loop of requests.
                time.sleep(max(0.0, MIN_WATCH_SECONDS - (time.monotonic() - opened)))
                continue
            except _Replaced:
                raise
            except Expired as exc:
                self._give_up(generation, f"the watch expired (410): {exc}")
                return
            except Exception as exc:
                if isinstance(exc, self._expired):
                    self._give_up(generation, f"the watch expired (410): {exc}")
                    return
                failures += 1
                if failures >= MAX_FAILURES:
                    self._give_up(generation, f"{failures} failed watches in a row, the last: {exc}")
                    return
            time.sleep(PAUSE * failures)

    def _check(self, generation: int) -> None:
        if generation != self._generation:
            raise _Replaced

    def _give_up(self, generation: int, why: str) -> None:
        with self._cond:
            if generation == self._generation:
                self._broken = why[:300]
                self._cond.notify_all()

    def _apply(self, line: bytes, generation: int) -> str:
        """One event line: the record made here, stored under the lock (if the cache is still this watch's).
        Returns the event's type."""
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise Garbled(f"not JSON: {exc}") from None
        if not isinstance(event, dict):
            raise Garbled("an event that is not an object")
        kind, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            raise Garbled(f"a {str(kind)[:20]} event without an object")
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Expired(str(obj.get("message"))[:200])
            raise Garbled(f"ERROR event: {str(obj.get('message'))[:200]}")
        if obj.get("kind") != self.kind:
            raise Garbled(f"a {str(obj.get('kind'))[:40]} in a watch of {self.kind}")
        meta = obj.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        number = rv_number(rv)
        if number is None:
            raise Garbled(f"resourceVersion {str(rv)[:40]!r} is not an integer")
        assert isinstance(meta, dict) and isinstance(rv, str)
        if kind == "BOOKMARK":
            self._store(generation, rv, number)
            return "BOOKMARK"
        uid = meta.get("uid")
        if not isinstance(uid, str) or not uid:
            raise Garbled(f"a {kind} event without a uid")
        if kind == "DELETED":
            self._store(generation, rv, number, uid=uid)
        elif kind in ("ADDED", "MODIFIED"):
            try:
                made = self._read(obj)
            except Exception as exc:
                raise Garbled(f"an object that cannot be read: {type(exc).__name__}: {exc}") from None
            self._store(generation, rv, number, uid=uid, made=made, keep=True)
        else:
            raise Garbled(f"an event of type {str(kind)[:20]!r}")
        return str(kind)

    def _store(
        self,
        generation: int,
        rv: str,
        number: int,
        *,
        uid: str | None = None,
        made: tuple[str, R] | None = None,
        keep: bool = False,
    ) -> None:
        with self._cond:
            self._check(generation)
            have = rv_number(self._rv)
            if have is not None and number < have:
                raise Garbled(f"resourceVersion {rv} after {self._rv}: a stream that goes back")
            if uid is not None:
                if keep and made is not None:
                    at, kept = entry(uid, rv, made[0], made[1])
                    if at not in self._items:
                        self._order = None
                    self._items[at] = kept
                elif self._items.pop(compact_uid(uid), None) is not None:
                    self._order = None
            self._rv = rv
            self._cond.notify_all()


def _done(resp: Any, *, whole: bool) -> None:
    """Hand a watch's connection back: as it is when the stream was read to its end, else closed first (a
    connection in the middle of an answer must never serve another request)."""
    with contextlib.suppress(Exception):
        if not whole:
            resp.close()
        resp.release_conn()


def _lines(resp: Any) -> Iterator[bytes]:
    """The stream's lines as they come (each event is one line), none longer than MAX_LINE. Read in chunks as the
    server flushes them (urllib3's `stream` yields each HTTP chunk at once), kept in one growing buffer."""
    buffer = bytearray()
    for chunk in resp.stream(64 * 1024):
        scan = len(buffer)  # a newline can only be in what just came
        buffer += chunk
        start = 0
        while True:
            end = buffer.find(b"\n", scan)
            if end < 0:
                break
            line = bytes(buffer[start:end])
            start = scan = end + 1
            if line.strip():
                yield line
        del buffer[:start]
        if len(buffer) > MAX_LINE:
            raise Garbled(f"a line longer than {MAX_LINE} bytes")
    if bytes(buffer).strip():
        raise Garbled("the stream ended in the middle of a line")
