"""When cycles run: the only module that imports APScheduler (3.x).

A thin shell around one callable cycle (kube-downscaler's loop, gitops-engine's ticker + HTTP trigger):
- an interval job with jitter, `max_instances=1`, `coalesce=True` (missed runs collapse into one) and
  `next_run_time=now` (a cycle right at start);
- `trigger(reason)` for SIGHUP and the webhook: a one-shot run now. If a cycle is already running, the
  trigger is remembered and a new cycle starts right after the current one ends — never two at once,
  and a push that lands mid-cycle is not lost;
- exponential backoff after consecutive failures: interval ticks are skipped until
  base*2^(failures-1) (capped) has passed since the last failure; explicit triggers are not held back
  (a push is the likeliest fix);
- graceful stop: no new cycle starts, the running one is told to stop (`runner.stopping`, which the
  controller's may-write check reads before every write) and given `grace` seconds to finish.

`CycleRunner` does the bookkeeping (one-at-a-time lock, failure count, history of start/end times used
by the soak test to prove there is no overlap) and is usable without a scheduler (`--once`, tests).
"""

from __future__ import annotations

import collections
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from reconciler.model.errors import MigplanError

log = logging.getLogger("migplan.scheduling")

JOB_ID = "migplan-cycle"
TRIGGER_JOB_ID = "migplan-trigger"


@dataclass(frozen=True, slots=True)
class CycleRecord:
    trigger: str  # "start", "interval", "sighup", "webhook", …
    started: float  # time.monotonic()
    ended: float
    ok: bool
    error: str | None = None

    @property
    def duration(self) -> float:
        return self.ended - self.started


def backoff_delay(failures: int, *, base: float, cap: float) -> float:
    """Seconds to wait after `failures` consecutive failures (0 when the last cycle succeeded)."""
    if failures <= 0:
        return 0.0
    return float(min(cap, base * (2 ** min(failures - 1, 30))))


class CycleRunner:
    """Runs the cycle callable one at a time and remembers how it went."""

    def __init__(
        self,
        cycle: Callable[[str], Any],
        *,
        backoff_base: float = 10.0,
        backoff_max: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        history: int = 2000,
        after: Callable[[], object] | None = None,
    ) -> None:
        self._cycle = cycle
        # Called after each cycle that ran, once its exception (if any) is handled and dropped: nothing of the
        # cycle is reachable any more, a failed one's frames included (the controller gives its heap back then).
        self._after = after
        self._base = backoff_base
        self._cap = backoff_max
        self._clock = clock
        self._lock = threading.Lock()
        self._state = threading.Lock()
        self.failures = 0
        self.last_failure: float | None = None
        self.last_success: float | None = None
        self.pending_trigger: str | None = None
        self.history: collections.deque[CycleRecord] = collections.deque(maxlen=history)
        self.stopping = threading.Event()
        self.skipped_busy = 0
        self.skipped_backoff = 0

    @property
    def running(self) -> bool:
        return self._lock.locked()

    def backoff_remaining(self) -> float:
        with self._state:
            if not self.failures or self.last_failure is None:
                return 0.0
            wait = backoff_delay(self.failures, base=self._base, cap=self._cap)
            return max(0.0, self.last_failure + wait - self._clock())

    def run(self, trigger: str) -> CycleRecord | None:
        """One cycle now, unless one is running (then it is queued) or we are backing off (interval only)."""
        if self.stopping.is_set():
            return None
        if trigger == "interval" and self.backoff_remaining() > 0:
            self.skipped_backoff += 1
            log.info("cycle skipped: backing off", extra={"failures": self.failures})
            return None
        if not self._lock.acquire(blocking=False):
            with self._state:
                self.skipped_busy += 1
                # Explicit triggers (push, SIGHUP) are kept; an interval tick is just coalesced away.
                if trigger != "interval":
                    self.pending_trigger = trigger
            return None
        started = self._clock()
        ok, error = True, None
        try:
            self._cycle(trigger)
        except MigplanError as exc:  # a failure migplan foresaw: a value with a code, said in one line
            ok, error = False, f"{type(exc).__name__}: {exc}"
            log.error("cycle failed: %s", exc, extra={"trigger": trigger, "code": exc.code})
        except Exception as exc:  # the loop must survive anything a cycle does; a bug gets its traceback
            ok, error = False, f"{type(exc).__name__}: {exc}"
            log.exception("cycle failed", extra={"trigger": trigger})
        finally:
            ended = self._clock()
            with self._state:
                if ok:
                    self.failures = 0
                    self.last_success = ended
                else:
                    self.failures += 1
                    self.last_failure = ended
            record = CycleRecord(trigger, started, ended, ok, error)
            self.history.append(record)
            self._lock.release()
        # Past the except blocks: a raised cycle's exception, and with it its traceback's frames, is gone.
        if self._after is not None:
            self._after()
        return record

    def take_pending(self) -> str | None:
        with self._state:
            pending, self.pending_trigger = self.pending_trigger, None
            return pending

    def wait_idle(self, timeout: float) -> bool:
        """True when no cycle is running (waiting up to `timeout` seconds for the current one)."""
        if self._lock.acquire(timeout=max(0.0, timeout)):
            self._lock.release()
            return True
        return False


class Scheduler:
    """APScheduler wiring: interval with jitter, immediate first run, triggers, graceful shutdown."""

    def __init__(self, runner: CycleRunner, *, interval: float, jitter: float = 0.0) -> None:
        self.runner = runner
        self._interval = interval
        self._jitter = jitter
        self._sched = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
        )

    @property
    def alive(self) -> bool:
        """The scheduler thread is running (for /healthz)."""
        return bool(self._sched.running)

    def _tick(self, trigger: str) -> None:
        self.runner.run(trigger)
        # A trigger that arrived while the cycle ran gets its own cycle now, not at the next tick.
        pending = self.runner.take_pending()
        if pending is not None and not self.runner.stopping.is_set():
            self.trigger(pending)

    def start(self, *, run_now: bool = True) -> None:
        self._sched.start()
        # next_run_time=None would add the job *paused* (APScheduler 3): leave it out to start at now+interval.
        first: dict[str, Any] = {"next_run_time": datetime.now(UTC)} if run_now else {}
        self._sched.add_job(
            self._tick,
            "interval",
            seconds=self._interval,
            jitter=self._jitter or None,
            id=JOB_ID,
            kwargs={"trigger": "interval"},
            **first,
        )

    def trigger(self, reason: str) -> None:
        """Run a cycle as soon as possible (coalesced with any trigger not yet started)."""
        if self.runner.stopping.is_set():
            return
        try:
            self._sched.add_job(
                self._tick,
                "date",
                run_date=datetime.now(UTC),
                id=TRIGGER_JOB_ID,
                replace_existing=True,
                kwargs={"trigger": reason},
            )
        except Exception:  # scheduler already shut down
            log.debug("trigger ignored: scheduler stopped", exc_info=True)

    def shutdown(self, *, grace: float) -> bool:
        """Stop starting cycles, give the running one `grace` seconds; True if it finished in time."""
        self.runner.stopping.set()
        for job_id in (JOB_ID, TRIGGER_JOB_ID):
            try:
                self._sched.remove_job(job_id)
            except Exception:
                log.debug("job %s already gone", job_id)
        finished = self.runner.wait_idle(grace)
        if not finished:
            log.warning("shutdown: the running cycle did not finish in %.0fs; abandoning it", grace)
        self._sched.shutdown(wait=finished)
        return finished


def install_signal_handlers(*, on_reload: Callable[[], None], on_stop: Callable[[], None]) -> None:
    """SIGHUP → a cycle now; SIGTERM/SIGINT → graceful stop. Call from the main thread."""

    def _hup(signum: int, frame: FrameType | None) -> None:
        log.info("SIGHUP: triggering a cycle")
        on_reload()

    def _term(signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: shutting down", signal.Signals(signum).name)
        on_stop()

    signal.signal(signal.SIGHUP, _hup)
    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
