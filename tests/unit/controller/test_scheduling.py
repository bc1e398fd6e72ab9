"""Scheduling: one cycle at a time, immediate first run, triggers not lost, backoff, graceful stop."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from reconciler.scheduling import CycleRunner, Scheduler, backoff_delay, install_signal_handlers


def no_overlap(runner: CycleRunner) -> bool:
    spans = sorted((r.started, r.ended) for r in runner.history)
    return all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))


def test_backoff_grows_and_is_capped() -> None:
    assert [backoff_delay(n, base=10, cap=300) for n in range(7)] == [0, 10, 20, 40, 80, 160, 300]
    assert backoff_delay(500, base=10, cap=300) == 300


def test_runner_never_overlaps_and_keeps_explicit_triggers() -> None:
    gate = threading.Event()
    calls: list[str] = []

    def cycle(trigger: str) -> None:
        calls.append(trigger)
        gate.wait(2)

    runner = CycleRunner(cycle)
    t = threading.Thread(target=runner.run, args=("start",))
    t.start()
    while not runner.running:
        time.sleep(0.001)
    assert runner.run("interval") is None  # coalesced away
    assert runner.run("webhook") is None  # remembered
    gate.set()
    t.join()
    assert calls == ["start"]
    assert runner.take_pending() == "webhook" and runner.take_pending() is None
    assert runner.skipped_busy == 2


def test_failures_back_off_interval_ticks_but_not_triggers() -> None:
    now = [100.0]
    outcomes = iter([RuntimeError("api down"), RuntimeError("api down"), None, None])

    def cycle(trigger: str) -> None:
        exc = next(outcomes)
        if exc:
            raise exc

    runner = CycleRunner(cycle, backoff_base=10, backoff_max=60, clock=lambda: now[0])
    rec = runner.run("start")
    assert rec is not None and not rec.ok and "api down" in (rec.error or "")
    assert runner.failures == 1 and runner.backoff_remaining() == 10
    assert runner.run("interval") is None and runner.skipped_backoff == 1
    now[0] += 10.5
    assert runner.run("interval") is not None  # second failure
    assert runner.failures == 2 and runner.backoff_remaining() == 20
    rec = runner.run("webhook")  # a push is tried at once
    assert rec is not None and rec.ok and runner.failures == 0 and runner.backoff_remaining() == 0


@pytest.fixture
def scheduler_factory() -> Iterator[list[Scheduler]]:
    made: list[Scheduler] = []
    yield made
    for s in made:
        s.shutdown(grace=2)


def test_scheduler_runs_at_once_then_on_interval_without_overlap(scheduler_factory: list[Scheduler]) -> None:
    def cycle(trigger: str) -> None:
        time.sleep(0.03)

    runner = CycleRunner(cycle)
    sched = Scheduler(runner, interval=0.1, jitter=0.02)
    scheduler_factory.append(sched)
    t0 = time.monotonic()
    sched.start()
    deadline = time.monotonic() + 5
    while len(runner.history) < 5 and time.monotonic() < deadline:
        sched.trigger("webhook")  # hammer it with triggers too: still one at a time
        time.sleep(0.01)
    assert len(runner.history) >= 5
    first = runner.history[0]
    assert first.trigger == "interval" and first.started - t0 < 0.5  # immediate first run
    assert {r.trigger for r in runner.history} >= {"interval", "webhook"}
    assert no_overlap(runner)


def test_trigger_during_a_cycle_runs_right_after_it(scheduler_factory: list[Scheduler]) -> None:
    started = threading.Event()
    release = threading.Event()

    def cycle(trigger: str) -> None:
        if trigger == "interval":
            started.set()
            release.wait(3)

    runner = CycleRunner(cycle)
    sched = Scheduler(runner, interval=60)
    scheduler_factory.append(sched)
    sched.start()
    assert started.wait(3)
    sched.trigger("webhook")
    time.sleep(0.1)
    assert [r.trigger for r in runner.history] == []
    release.set()
    deadline = time.monotonic() + 3
    while len(runner.history) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.trigger for r in runner.history] == ["interval", "webhook"]
    assert no_overlap(runner)


def test_shutdown_finishes_or_abandons_the_cycle() -> None:
    done = threading.Event()

    def quick(trigger: str) -> None:
        time.sleep(0.2)
        done.set()

    runner = CycleRunner(quick)
    sched = Scheduler(runner, interval=60)
    assert not sched.alive
    sched.start()
    assert sched.alive
    time.sleep(0.05)
    assert sched.shutdown(grace=3) is True and done.is_set()
    assert not sched.alive
    assert runner.run("webhook") is None  # nothing starts after a stop

    stop_seen = threading.Event()

    def slow(trigger: str) -> None:
        while not runner2.stopping.is_set():
            time.sleep(0.01)
        stop_seen.set()
        time.sleep(2)  # ignores the request to stop in time

    runner2 = CycleRunner(slow)
    sched2 = Scheduler(runner2, interval=60)
    sched2.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    assert sched2.shutdown(grace=0.3) is False
    assert time.monotonic() - t0 < 1.5 and stop_seen.is_set()


def test_signal_handlers_trigger_and_stop() -> None:
    hups: list[int] = []
    stops: list[int] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)}
    try:
        install_signal_handlers(on_reload=lambda: hups.append(1), on_stop=lambda: stops.append(1))
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert hups == [1] and stops == [1]
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_without_an_immediate_run_the_interval_still_ticks(scheduler_factory: list[Scheduler]) -> None:
    runner = CycleRunner(lambda trigger: None)
    sched = Scheduler(runner, interval=0.1)
    scheduler_factory.append(sched)
    sched.start(run_now=False)
    time.sleep(0.05)
    assert len(runner.history) == 0
    deadline = time.monotonic() + 3
    while len(runner.history) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(runner.history) >= 3
