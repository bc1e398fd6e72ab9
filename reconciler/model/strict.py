"""Strict readers for values migplan reads back from objects anyone with write access may edit.

Pure: stdlib only. Annotations and labels on a Node are not migplan's to trust: an admin, another
controller or an attacker may leave a timestamp without a UTC offset, `Infinity`, a 100,000-deep
JSON document or a 5,000-digit number there. Each reader here either returns a value migplan can
reason about or raises StrictValueError with a one-line reason; none raises anything else
(RecursionError, OverflowError, TypeError) and none costs more than linear time in a bounded input.
Callers turn the error into a finding on that node (MP530) or a terminal agent state, and act on
nothing they had to guess.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

MAX_JSON_BYTES = 256 * 1024  # Kubernetes caps all annotations of an object at 256 KiB together
MAX_JSON_DEPTH = 16  # migplan's own documents nest 5 levels
MAX_JSON_INT_DIGITS = 18  # every integer migplan writes fits in an int64
# RFC 3339 date-time (section 5.6), the form migplan writes and Kubernetes uses: an explicit offset
# is required, so a naive "2026-01-01T00:00:00" is refused rather than silently taken as local time.
_RFC3339 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})(?P<frac>\.[0-9]{1,9})?"
    r"(?P<offset>[Zz]|[+-][0-9]{2}:[0-9]{2})"
)


class StrictValueError(ValueError):
    """A value read from the cluster is malformed; the message says why, in one line."""


def short(value: object, limit: int = 60) -> str:
    """A bounded, printable rendering of a hostile value for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_timestamp(text: object) -> datetime:
    """An RFC 3339 timestamp with a UTC offset, as an aware datetime."""
    if not isinstance(text, str):
        raise StrictValueError(f"a timestamp is a string, not {type(text).__name__}")
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise StrictValueError(f"{short(text)} is not an RFC 3339 timestamp with a UTC offset")
    frac = (m["frac"] or "")[:7]  # fromisoformat takes at most microseconds
    offset = "+00:00" if m["offset"] in ("Z", "z") else m["offset"]
    try:
        return datetime.fromisoformat(f"{m['date']}T{m['time']}{frac[:7]}{offset}")
    except ValueError as exc:  # 2026-13-45T25:61:00Z: the shape is right, the calendar is not
        raise StrictValueError(f"{short(text)} is not a valid date and time: {exc}") from exc


def _refuse_constant(name: str) -> Any:
    raise StrictValueError(f"{name} is not JSON")


def _bounded_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_JSON_INT_DIGITS:
        raise StrictValueError(f"integer with {len(digits)} digits is too large")
    return int(text)


def _depth_ok(text: str, limit: int) -> bool:
    # Brackets inside strings count too: an over-estimate, which only refuses what no migplan
    # document holds. One linear pass, before the recursive decoder ever sees the text.
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def loads_json(text: object, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode a JSON annotation: RFC 8259 only (no NaN/Infinity), bounded size, depth and integers."""
    if not isinstance(text, str):
        raise StrictValueError(f"expected JSON text, not {type(text).__name__}")
    if len(text) > max_bytes:
        raise StrictValueError(f"JSON of {len(text)} characters is larger than {max_bytes}")
    if not _depth_ok(text, max_depth):
        raise StrictValueError(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_bounded_int)
    except StrictValueError:
        raise
    except (ValueError, RecursionError, OverflowError, TypeError) as exc:
        raise StrictValueError(f"not valid JSON: {str(exc)[:120]}") from exc


def require_int(value: object, what: str, *, low: int = 0, high: int = 2**31 - 1) -> int:
    """An integer (not a bool, not a float) within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise StrictValueError(f"{what} must be an integer, not {short(value)}")
    if not low <= value <= high:
        raise StrictValueError(f"{what} is {value}, outside {low}..{high}")
    return value


def require_bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise StrictValueError(f"{what} must be true or false, not {short(value)}")
    return value


def require_str(value: object, what: str, *, max_len: int = 256) -> str:
    if not isinstance(value, str):
        raise StrictValueError(f"{what} must be a string, not {short(value)}")
    if len(value) > max_len:
        raise StrictValueError(f"{what} is longer than {max_len} characters")
    return value


def require_list(value: object, what: str, *, max_len: int = 1024) -> list[Any]:
    if not isinstance(value, list):
        raise StrictValueError(f"{what} must be a list, not {short(value)}")
    if len(value) > max_len:
        raise StrictValueError(f"{what} has more than {max_len} items")
    return value


def require_mapping(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StrictValueError(f"{what} must be a mapping, not {short(value)}")
    return value
