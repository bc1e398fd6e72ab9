"""The API server twin formats its responses' Date header once per second instead of once per response (its own CPU,
not what it models): the text must be what http.server's own date_time_string gives at every moment, whole seconds,
fractions, the last microseconds of a second (which formatdate's rounding carries over), in any order."""

from __future__ import annotations

import email.utils
import random
import time
from http.server import BaseHTTPRequestHandler

import pytest

from reconciler.twin.apiserver import server


def _handler() -> server._Handler:
    return server._Handler.__new__(server._Handler)  # no request: only the method is used


def _moments() -> list[float]:
    base = [0.0, 1.0, 59.5, 1_700_000_000.0, 1_767_225_599.0, 4_102_444_799.0]
    tails = [0.0, 1e-6, 0.25, 0.5, 0.998, 0.998999, 0.9989999, 0.999, 0.9994999, 0.9995, 0.9999994, 0.9999995]
    tails += [0.9999996, 0.99999999]
    out = [b + t for b in base for t in tails]
    rng = random.Random(29)
    out += [rng.uniform(0, 4_102_444_799) for _ in range(2000)]
    start = 1_767_225_590.0
    out += [start + i / 7 for i in range(200)]  # a run through consecutive seconds, as a busy server sees them
    rng.shuffle(out[-200:])
    return out


MOMENTS = _moments()


def test_the_date_text_is_http_servers_at_every_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    handler = _handler()
    stdlib = BaseHTTPRequestHandler.date_time_string
    for moment in MOMENTS:
        monkeypatch.setattr(time, "time", lambda moment=moment: moment)
        assert handler.date_time_string() == stdlib(handler, moment), moment
        assert handler.date_time_string() == stdlib(handler, moment), moment  # from the cache, the second time


def test_a_given_timestamp_is_formatted_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_000.5)
    handler = _handler()
    handler.date_time_string()  # caches second 1000
    assert handler.date_time_string(5.0) == BaseHTTPRequestHandler.date_time_string(handler, 5.0)
    assert handler.date_time_string(5.0) == "Thu, 01 Jan 1970 00:00:05 GMT"


def test_the_last_microsecond_of_a_second_is_not_taken_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    handler = _handler()
    monkeypatch.setattr(time, "time", lambda: 41.5)
    assert handler.date_time_string() == "Thu, 01 Jan 1970 00:00:41 GMT"
    monkeypatch.setattr(time, "time", lambda: 41.9999996)  # formatdate rounds it to second 42
    assert handler.date_time_string() == "Thu, 01 Jan 1970 00:00:42 GMT"


def test_a_second_is_formatted_once_for_every_response_in_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    real = email.utils.formatdate

    def counted(timeval: float | None = None, localtime: bool = False, usegmt: bool = False) -> str:
        calls.append(timeval or 0.0)
        return real(timeval, localtime, usegmt)

    monkeypatch.setattr(email.utils, "formatdate", counted)
    monkeypatch.setattr(server, "_DATE_TEXT", [(-1, "")])
    handler = _handler()
    for moment in (77.0, 77.25, 77.5, 77.75, 77.998):
        monkeypatch.setattr(time, "time", lambda moment=moment: moment)
        assert handler.date_time_string() == "Thu, 01 Jan 1970 00:01:17 GMT"
    assert len(calls) == 1
