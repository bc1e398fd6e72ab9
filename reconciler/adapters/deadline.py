"""The cycle deadline: an instant after which no request of the current cycle may still run.

A server that accepts a connection and never answers must not stall a cycle, let alone the
controller. Two layers bound every network call of a cycle:
- each request has its own timeout (Kubernetes: `TimeoutApiClient`; Git: libgit2's connect and
  server timeouts, set per operation in adapters/git/source.py);
- a cycle runs under `cycle_deadline(seconds)`: every request's timeout is cut to the time left, a
  request started after the deadline fails at once with `DeadlineExceeded` (MP811), and retry loops
  stop there instead of trying again.

The deadline is held in a context variable, so it follows the cycle through the engine without a
parameter on every pure function in between, and stays with the thread that runs the cycle (the
scheduler's worker): the HTTP server's threads and the leader elector are never cut by it.
Deadlines nest: an inner one never extends an outer one. Reads the monotonic clock; no other I/O.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from reconciler.model.errors import MigplanError

CODE = "MP811"

_DEADLINE: ContextVar[float | None] = ContextVar("migplan_cycle_deadline", default=None)


class DeadlineExceeded(MigplanError):
    """The cycle's time is up: the request was not sent (or was cut short). Not retried."""

    code = CODE


@contextmanager
def cycle_deadline(seconds: float | None) -> Iterator[None]:
    """Run the body under a deadline `seconds` from now (None or 0: no new deadline)."""
    if not seconds:
        yield
        return
    ends = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(ends if outer is None else min(outer, ends))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left before the deadline (negative once past), or None outside any deadline."""
    ends = _DEADLINE.get()
    return None if ends is None else ends - time.monotonic()


def check(what: str) -> None:
    """Raise DeadlineExceeded when the deadline has passed; `what` names the request refused."""
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceeded(f"{what}: the cycle ran past its deadline; request not sent")


def clamp(timeout: float, what: str) -> float:
    """`timeout` cut to the time left (at least a few milliseconds), or DeadlineExceeded when none is."""
    check(what)
    left = remaining()
    return timeout if left is None else max(min(timeout, left), 0.01)
