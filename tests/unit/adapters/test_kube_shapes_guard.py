"""The guard of the typed page decode (kube/shapes.py `_typed_safe`) says "decode in full" for exactly the pages
holding a run of 17 digits, a number's exponent of three digits or more, or bytes that are not UTF-8: checked
against a reference written on the raw bytes (no translated copy), on pages where the hex uids put many near
misses (`3e000a`) before the one match, and on random text of the few bytes that matter."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.kube import shapes

# The same rule read straight off the raw bytes: slower (no literal prefix), but nothing shared with the guard.
_RAW_RISK = re.compile(rb"[0-9]{17}|[0-9][eE][+-]?[0-9]{3,}[,}\]\s]")


def _reference_safe(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _RAW_RISK.search(data) is None


def _page(uids: int, tail: bytes) -> bytes:
    """A pod page whose uids hold `e` and three digits (each a near miss: no number ends there), then `tail`."""
    items = b",".join(b'{"metadata":{"uid":"3e000a1e-9e12-4e345-%d"}}' % i for i in range(uids))
    return b'{"metadata":{},"items":[' + items + b"," + tail + b"]}"


@pytest.mark.parametrize(
    ("tail", "safe"),
    [
        (b'{"x":1}', True),
        (b'{"x":1e999}', False),
        (b'{"x":2.5E-0300}', False),
        (b'{"x":1e+999 }', False),
        (b'{"x":[1e999]}', False),
        (b'{"x":1e99}', True),  # two digits: within a double, both parsers agree
        (b'{"x":"1e999"}', True),  # inside a string, followed by a quote: not a number
        (b'{"x":"1e999,"}', False),  # a false match: only costs the full decode
        (b'{"x":12345678901234567}', False),
        (b'{"x":1234567890123456}', True),
        (b'{"x":"\xff"}', False),
    ],
)
def test_one_risky_number_after_many_near_misses_is_found(tail: bytes, safe: bool) -> None:
    data = _page(2000, tail)
    assert shapes._typed_safe(data) is safe
    assert _reference_safe(data) is safe


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([b"0", b"7", b"e", b"E", b"+", b"-", b",", b"}", b"]", b" ", b"\n", b'"', b"a", b"."])))
def test_the_guard_is_the_raw_rule(parts: list[bytes]) -> None:
    data = b"".join(parts)
    assert shapes._typed_safe(data) is _reference_safe(data)
