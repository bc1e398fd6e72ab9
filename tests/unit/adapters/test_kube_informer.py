"""kube/informer.py's WatchCache against scripted watch streams: what it applies, when it serves a cycle, and what a
hostile or broken stream makes of it (never a crash, never a stale view: a watch again from the last resourceVersion
applied, or a cache that gives up so the cycle lists).

A fake `open_watch` answers each watch with the next script: a list of raw lines (bytes), or an exception to raise.
Records are (key, name) pairs read from tiny objects, so what the cache holds is plain to assert.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import orjson
import pytest

from reconciler.adapters.kube import informer
from reconciler.adapters.kube.informer import WatchCache, rv_number


class Gone(Exception):
    """What the adapter's open_watch raises for a 410 answer (cluster.ListExpired there)."""


class _Stream:
    def __init__(self, lines: list[bytes], *, cut: bool = False) -> None:
        self.lines = lines
        self.cut = cut
        self.closed = False
        self.released = False

    def stream(self, amt: int) -> Iterator[bytes]:
        yield from self.lines
        if self.cut:
            raise ConnectionResetError("connection reset by peer")

    def close(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        self.released = True


class _Server:
    """Scripted watches; after the scripts run out, every watch blocks until the test ends (a quiet server)."""

    def __init__(self, *scripts: list[bytes] | BaseException | _Stream) -> None:
        self.scripts = list(scripts)
        self.asked: list[str] = []
        self.streams: list[_Stream] = []
        self.quiet = threading.Event()

    def __call__(self, rv: str) -> Any:
        self.asked.append(rv)
        if not self.scripts:
            self.quiet.wait(10)
            return _Stream(
                [b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"' + rv.encode() + b'"}}}\n']
            )
        script = self.scripts.pop(0)
        if isinstance(script, BaseException):
            raise script
        stream = script if isinstance(script, _Stream) else _Stream(script)
        self.streams.append(stream)
        return stream


def _event(kind: str, name: str, rv: int, *, uid: str | None = None, obj_kind: str = "Pod") -> bytes:
    meta = {"name": name, "uid": uid or f"uid-{name}", "resourceVersion": str(rv)}
    return orjson.dumps({"type": kind, "object": {"kind": obj_kind, "metadata": meta}}) + b"\n"


def _bookmark(rv: int) -> bytes:
    return (
        orjson.dumps({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": str(rv)}}}) + b"\n"
    )


def _read(obj: Mapping[str, Any]) -> tuple[str, str]:
    name = obj["metadata"]["name"]
    if name == "unreadable":
        raise KeyError("spec")
    return name, name


def _cache(server: _Server, read: Callable[[Mapping[str, Any]], tuple[str, str] | None] = _read) -> WatchCache[str]:
    return WatchCache(kind="Pod", open_watch=server, read=read, expired=Gone)


def _entries(*names: str, rv: str = "10") -> dict[str, informer.Entry[str]]:
    return {f"uid-{n}": (rv, n, n) for n in names}


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer, "PAUSE", 0.01)
    monkeypatch.setattr(informer, "MIN_WATCH_SECONDS", 0.0)


def _until(done: Callable[[], bool]) -> None:
    ends = time.monotonic() + 10
    while not done():
        assert time.monotonic() < ends
        time.sleep(0.01)


def test_resource_versions_are_integers_only_when_they_are() -> None:
    assert rv_number("0") == 0 and rv_number("123456789") == 123456789
    for bad in ("", "-1", "+1", " 1", "1.0", "١٢", "abc", "1" * 21, None, 12, b"12"):
        assert rv_number(bad) is None, bad


def test_events_set_and_drop_records_and_a_bookmark_makes_the_view_fresh() -> None:
    server = _Server(
        [
            _event("ADDED", "c", 11),
            _event("MODIFIED", "a", 12, uid="uid-a"),
            _event("DELETED", "b", 13),
            _bookmark(20),
        ]
    )
    cache = _cache(server)
    cache.seed(_entries("a", "b"), "10")
    assert cache.view("20", 5) == ["a", "c"]  # in key order
    assert server.asked[0] == "10"  # watched from the list's resourceVersion
    assert server.streams[0].closed and server.streams[0].released  # cut after the bookmark: never reused mid-answer
    assert cache.view("21", 0.05) is None  # not there yet: the cycle lists
    server.quiet.set()
    cache.stop()


def test_a_view_is_never_older_than_its_target() -> None:
    server = _Server([_event("ADDED", "late", 30)])  # no bookmark: the cache knows the server up to 30 only
    cache = _cache(server)
    cache.seed(_entries("a"), "10")
    assert cache.view("31", 0.3) is None
    assert cache.view("30", 5) == ["a", "late"]
    server.quiet.set()
    cache.stop()


def test_opaque_resource_versions_are_never_compared() -> None:
    server = _Server()
    cache = _cache(server)
    cache.seed(_entries("a"), "10")
    assert cache.view("abc", 1) is None
    assert cache.view(None, 1) is None
    cache.seed(_entries("a"), "v10")  # a list whose resourceVersion is not an integer: never watched, never served
    assert cache.broken is not None and "not an integer" in cache.broken
    assert cache.view("5", 1) is None
    server.quiet.set()
    cache.stop()


@pytest.mark.parametrize(
    "garbage",
    [
        b"not json at all\n",
        b"[1, 2, 3]\n",
        b'{"type": "ADDED"}\n',  # no object
        b'{"type": "ADDED", "object": "pod"}\n',
        _event("ADDED", "x", 12, obj_kind="Secret"),  # another kind
        b'{"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "x", "resourceVersion": "12"}}}\n',  # no uid
        _event("ADDED", "unreadable", 12),  # the parse fails
        _event("ADDED", "x", 12).replace(b'"12"', b'"1e3"'),  # a resourceVersion that is not an integer
        b'{"type": "WHATEVER", "object": {"kind": "Pod", "metadata": {"resourceVersion": "12"}}}\n',
        b'{"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "etcd is sad"}}\n',
        _event("ADDED", "x", 5),  # a resourceVersion that goes back
        b"\xff\xfe\x00garbage\n",
    ],
)
def test_a_garbled_line_is_a_watch_again_from_the_last_applied_resource_version(garbage: bytes) -> None:
    server = _Server(
        [_event("ADDED", "good", 11), garbage, _event("ADDED", "lost", 13)],
        [_event("ADDED", "lost", 13), _bookmark(20)],
    )
    cache = _cache(server)
    cache.seed(_entries("a"), "10")
    assert cache.view("20", 5) == ["a", "good", "lost"]
    assert server.asked[:2] == ["10", "11"]  # again from the last event applied before the garbage
    assert server.streams[0].closed  # a connection that stopped mid-answer is closed, not handed back as it is
    assert cache.broken is None
    server.quiet.set()
    cache.stop()


def test_a_huge_line_is_garbage_without_holding_more_than_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer, "MAX_LINE", 1024)
    sent: list[int] = []

    class Endless(_Stream):  # one line that never ends
        def stream(self, amt: int) -> Iterator[bytes]:
            yield b'{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"'
            while len(sent) < 100_000:
                sent.append(1)
                yield b"x" * 600

    server = _Server(Endless([]), [_bookmark(20)])
    cache = _cache(server)
    cache.seed(_entries("a"), "10")
    assert cache.view("20", 5) == ["a"]
    assert server.asked[:2] == ["10", "10"]
    assert len(sent) <= 3  # given up as soon as the line passed the limit
    server.quiet.set()
    cache.stop()


def test_a_dropped_connection_and_a_stream_that_ends_mid_line_are_watched_again() -> None:
    server = _Server(
        _Stream([_event("ADDED", "b", 11), _event("ADDED", "c", 12)[:20]], cut=True),
        [_event("ADDED", "c", 12)[:25]],  # ends in the middle of a line
        ConnectionRefusedError("connection refused"),
        [_event("ADDED", "c", 12), _bookmark(15)],
    )
    cache = _cache(server)
    cache.seed(_entries("a"), "10")
    assert cache.view("15", 5) == ["a", "b", "c"]
    assert server.asked[:4] == ["10", "11", "11", "11"]
    server.quiet.set()
    cache.stop()


def test_a_server_that_bookmarks_at_once_is_not_watched_in_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer, "MIN_WATCH_SECONDS", 0.2)
    server = _Server(*([[_bookmark(10)]] * 1000))
    cache = _cache(server)
    started = time.monotonic()
    cache.seed(_entries("a"), "10")
    time.sleep(0.5)
    cache.stop()
    elapsed = time.monotonic() - started
    # At most one watch per MIN_WATCH_SECONDS (a slow machine only makes fewer), not one per round trip.
    assert 1 <= len(server.asked) <= elapsed / 0.2 + 2
    server.quiet.set()


def test_an_empty_answer_is_a_failure_not_a_hot_loop() -> None:
    server = _Server(*([[]] * informer.MAX_FAILURES))
    cache = _cache(server)
    cache.seed(_entries("a"), "10")
    _until(lambda: cache.broken is not None)
    assert "failed watches in a row" in str(cache.broken)
    assert len(server.asked) == informer.MAX_FAILURES
    assert cache.view("10", 1) is None


@pytest.mark.parametrize(
    "expired",
    [
        [b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}\n'],
        Gone("410 Gone"),
    ],
)
def test_410_gives_up_so_the_next_cycle_lists(expired: list[bytes] | BaseException) -> None:
    server = _Server(expired)
    cache = _cache(server)
    cache.seed(_entries("a"), "10")
    _until(lambda: cache.broken is not None)
    assert "410" in str(cache.broken)
    assert cache.view("10", 1) is None
    assert server.asked == ["10"]  # never watched again from where the server has no events


def test_a_seed_replaces_a_running_watch_whose_events_then_never_land() -> None:
    release = threading.Event()

    class Held(_Stream):
        def stream(self, amt: int) -> Iterator[bytes]:
            release.wait(5)
            yield _event("ADDED", "from-the-old-watch", 99)

    server = _Server(Held([]), [_bookmark(50)])
    cache = _cache(server)
    cache.seed(_entries("a"), "10")
    _until(lambda: len(server.asked) == 1)
    cache.seed(_entries("b", rv="40"), "40")
    release.set()
    assert cache.view("50", 5) == ["b"]
    server.quiet.set()
    cache.stop()


def test_records_worth_nothing_are_not_kept_and_a_relist_reuses_unchanged_ones() -> None:
    def read(obj: Mapping[str, Any]) -> tuple[str, str] | None:
        name = obj["metadata"]["name"]
        return None if name.startswith("idle") else (name, name)

    server = _Server([_event("ADDED", "idle-1", 11), _event("ADDED", "busy", 12), _bookmark(12)])
    cache = _cache(server, read)
    cache.seed({}, "10")
    assert cache.view("12", 5) == ["busy"]
    assert cache.kept("uid-busy", "12") == ("busy", "busy")
    assert cache.kept("uid-busy", "11") is None  # another version: parsed again
    assert cache.kept(None, "12") is None
    server.quiet.set()
    cache.stop()
