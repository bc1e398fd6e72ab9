"""A watch-fed cache keeps each object's uid and resourceVersion compact (issue 29, memory): a server's UUID as its
16 bytes, a decimal resourceVersion as an int. Only the one written form of each is converted, so two different uids
or resourceVersions never compare equal; everything else is kept as it came.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from reconciler.adapters.kube import informer
from reconciler.adapters.kube.informer import WatchCache, compact_rv, compact_uid

UID = "0f8fad5b-d9cb-469f-a165-70867728950e"


def test_a_server_uuid_is_its_16_bytes_and_nothing_else_is() -> None:
    assert compact_uid(UID) == uuid.UUID(UID).bytes
    for other in (
        UID.upper(),  # the same hex in capitals: another uid as the API compares them, so another key
        UID.replace("-", ""),
        UID.replace("-", " "),
        " " + UID[1:],
        UID[:-1] + "g",
        UID + "0",
        "uid-a",
        "",
    ):
        assert compact_uid(other) == other
    assert len({compact_uid(u) for u in (UID, UID.upper(), UID.replace("-", " "))}) == 3


def test_a_decimal_resource_version_is_an_int_and_nothing_else_is() -> None:
    assert compact_rv("12345") == 12345 and compact_rv("0") == 0
    for other in ("012", "00", "", "1" * 21, "١٢", "12a", " 12", "-1"):
        assert compact_rv(other) == other
    assert compact_rv("12") != compact_rv("012")


class _Stream:
    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines

    def stream(self, amt: int) -> Iterator[bytes]:
        yield from self.lines

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _event(kind: str, name: str, rv: int, uid: str) -> bytes:
    meta = {"name": name, "uid": uid, "resourceVersion": str(rv)}
    return orjson.dumps({"type": kind, "object": {"kind": "Pod", "metadata": meta}}) + b"\n"


def _bookmark(rv: int) -> bytes:
    meta = {"resourceVersion": str(rv)}
    return orjson.dumps({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": meta}}) + b"\n"


def test_the_cache_keeps_compact_keys_and_still_follows_each_object() -> None:
    other = UID.upper()  # not a server's form: kept as a string, a key of its own
    scripts = [
        [_event("ADDED", "a", 11, UID), _event("ADDED", "b", 12, other), _bookmark(12)],
        [_event("DELETED", "a", 13, UID), _bookmark(13)],
    ]
    quiet = threading.Event()

    def open_watch(rv: str) -> Any:
        if scripts:
            return _Stream(scripts.pop(0))
        quiet.wait(10)
        return _Stream([_bookmark(int(rv))])

    def read(obj: Mapping[str, Any]) -> tuple[str, str]:
        name = obj["metadata"]["name"]
        return name, name

    cache: WatchCache[str] = WatchCache(kind="Pod", open_watch=open_watch, read=read, expired=LookupError)
    at, seeded = informer.entry(UID, "10", "a", "a")
    cache.seed({at: seeded}, "10")
    try:
        assert cache.view("12", 5) == ["a", "b"]
        kept = dict(cache._items)  # what the cache holds per object: compact keys and versions
        assert kept == {uuid.UUID(UID).bytes: (11, "a", "a"), other: (12, "b", "b")}
        assert cache.kept(UID, "11") == ("a", "a") and cache.kept(other, "12") == ("b", "b")
        assert (
            cache.kept(UID, "011") is None and cache.kept(UID, "12") is None and cache.kept(UID.upper(), "11") is None
        )
        assert cache.kept(UID, 11) is None  # not a resourceVersion a server writes
        assert cache.view("13", 5) == ["b"]  # the DELETED event's uid finds its compact key
    finally:
        quiet.set()
        cache.stop()
