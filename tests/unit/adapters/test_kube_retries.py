"""with_retries (adapters/kube/cluster.py): how many calls, which error comes out, how long between attempts.

The first attempt runs outside tenacity and a retryable failure is replayed as the loop's first attempt; these
tests hold the loop's contract (attempts, Retry-After, no retry of a conflict or a refusal) whatever the path.
"""

from __future__ import annotations

import time

import pytest

from reconciler.adapters.kube import cluster as kube

SERVER_BUSY = "the server is busy"


class Calls:
    """A fn that fails with the given errors in turn, then answers 'ok'; counts its calls and their times."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.times: list[float] = []

    def __call__(self) -> str:
        self.times.append(time.monotonic())
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_a_first_success_is_one_call() -> None:
    fn = Calls()
    assert kube.with_retries(fn) == "ok"
    assert len(fn.times) == 1


def test_a_transient_failure_is_retried_after_the_backoff_and_the_answer_returned() -> None:
    fn = Calls(kube.ApiUnavailable(SERVER_BUSY))
    assert kube.with_retries(fn) == "ok"
    assert len(fn.times) == 2
    assert fn.times[1] - fn.times[0] >= 0.19  # the first backoff step (0.2 s), as tenacity's loop waits it


def test_every_attempt_failing_raises_the_last_error_after_exactly_attempts_calls() -> None:
    errors = [kube.ApiUnavailable(f"busy {i}") for i in range(3)]
    fn = Calls(*errors)
    with pytest.raises(kube.ApiUnavailable) as caught:
        kube.with_retries(fn, attempts=2)
    assert len(fn.times) == 2
    assert caught.value is errors[1]  # the last attempt's error, not the first one replayed


def test_a_conflict_or_a_refusal_is_raised_at_once() -> None:
    for error in (kube.ApiConflict("stale"), kube.ApiRequestFailed("forbidden"), ValueError("a bug")):
        fn = Calls(error)
        with pytest.raises(type(error)) as caught:
            kube.with_retries(fn)
        assert caught.value is error and len(fn.times) == 1


def test_retry_after_zero_is_retried_up_to_client_gos_limit() -> None:
    limit = kube.RETRY_AFTER_MAX_RETRIES + 1
    fn = Calls(*[kube.Throttled("429", retry_after=0) for _ in range(limit + 5)])
    with pytest.raises(kube.Throttled):
        kube.with_retries(fn)
    assert len(fn.times) == limit  # more than `attempts`: Retry-After has its own budget

    fn = Calls(*[kube.Throttled("429", retry_after=0) for _ in range(limit - 1)])
    assert kube.with_retries(fn) == "ok"
    assert len(fn.times) == limit
