"""Leader election over a coordination.k8s.io/v1 Lease (client-go's leaderelection, in small).

Only the holder reconciles. The rules, and why:
- A candidate takes the Lease when it does not exist, when it was released (empty holder), or when
  the holder has not renewed it for `leaseDurationSeconds` *as observed locally*: expiry is measured
  from the moment this replica last saw the record change (monotonic clock), never by comparing the
  holder's renewTime with our wall clock, so clock skew between nodes cannot make two leaders.
- Every write is a PUT with the resourceVersion just read; a 409 means another candidate won the race,
  and we are not the leader (leases.json: the stale-RV PUT gets 409 Conflict).
- The holder renews every `retry_period`. `is_leader()` is true only while the last successful renew
  is younger than `renew_deadline` (< lease duration): a leader cut off from the API stops writing
  before anyone else can take over. A renew that finds another holder or gets 409 drops leadership at
  once. The controller checks `is_leader()` before every write request (FencedApiClient).
- On shutdown the holder releases the Lease (empty holder, 1 s duration), so a successor does not wait
  out the full duration after a rolling update.
- A standby that receives a webhook writes the Lease annotation `migplan.io/trigger`; the leader sees
  a new value on its next renew and starts a cycle (the webhook Service may route to any replica).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from reconciler.adapters.kube.lease import LeaseRecord
from reconciler.model.errors import LeaseConflict, MigplanError

log = logging.getLogger("migplan.leader")


class LeasePort(Protocol):
    def get(self) -> LeaseRecord | None: ...

    def create(self, *, holder: str, duration: int, now: datetime) -> LeaseRecord: ...

    def update(
        self,
        prev: LeaseRecord,
        *,
        holder: str,
        duration: int,
        acquire: datetime | None,
        renew: datetime | None,
        transitions: int,
    ) -> LeaseRecord: ...

    def request_trigger(self, value: str) -> None: ...


def _noop() -> None:
    return None


class LeaderElector:
    def __init__(
        self,
        lease: LeasePort,
        *,
        identity: str,
        duration: int,
        renew_deadline: float,
        retry_period: float,
        on_started_leading: Callable[[], None] = _noop,
        on_stopped_leading: Callable[[], None] = _noop,
        on_trigger: Callable[[], None] = _noop,
        on_round: Callable[[MigplanError | None], None] = lambda _failure: None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lease = lease
        self.identity = identity
        self._duration = duration
        self._renew_deadline = renew_deadline
        self._retry = retry_period
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_trigger = on_trigger
        self._on_round = on_round  # each round's failure (None: it went through), for the controller's WaitBoard
        self._wall = wall
        self._mono = mono
        self._lock = threading.Lock()
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0  # monotonic time the record last changed, as we saw it
        self._last_renew: float | None = None  # monotonic time of our last successful write as holder
        self._leading = False
        self._seen_trigger = ""
        self.last_contact: float | None = None  # monotonic time of the last API answer (for /readyz)
        self.last_loop: float = mono()  # heartbeat of the loop (for /healthz)
        self.transitions_seen = 0

    # --- queries -----------------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        with self._lock:
            if not self._leading or self._last_renew is None:
                return False
            return self._mono() - self._last_renew < self._renew_deadline

    @property
    def holder(self) -> str:
        return self._observed.holder if self._observed else ""

    # --- one round ---------------------------------------------------------------------------------------

    def _set_leading(self, leading: bool) -> None:
        with self._lock:
            was, self._leading = self._leading, leading
            if not leading:
                self._last_renew = None
        if leading and not was:
            log.info("became leader", extra={"identity": self.identity})
            self._on_started()
        elif was and not leading:
            log.warning("lost leadership", extra={"identity": self.identity, "holder": self.holder})
            self._on_stopped()

    def _observe(self, record: LeaseRecord | None) -> None:
        now = self._mono()
        if record is None or self._observed is None or record.resource_version != self._observed.resource_version:
            self._observed_at = now
        self._observed = record
        self.last_contact = now

    def try_acquire_or_renew(self) -> bool:
        """One election round; True when this replica holds the Lease afterwards."""
        try:
            current = self._lease.get()
            self._observe(current)
            now = self._wall()
            if current is None:
                record = self._lease.create(holder=self.identity, duration=self._duration, now=now)
            else:
                mine = current.holder == self.identity
                expired = self._mono() >= self._observed_at + current.duration_seconds
                if not mine and current.holder and not expired:
                    self._on_round(None)  # the API answered: a standby is not waiting on anything
                    self._set_leading(False)
                    return False
                if mine and self._leading and current.trigger and current.trigger != self._seen_trigger:
                    self._seen_trigger = current.trigger
                    log.info("cycle requested through the Lease (forwarded webhook)")
                    self._on_trigger()
                record = self._lease.update(
                    current,
                    holder=self.identity,
                    duration=self._duration,
                    acquire=current.acquire_time if mine else now,
                    renew=now,
                    transitions=current.transitions + (0 if mine else 1),
                )
        except MigplanError as exc:
            # 409 (someone else won) or the API is unreachable: not renewed. is_leader() turns false on
            # its own once renew_deadline passes; a conflict means we certainly lost.
            # DEBUG here: the controller's WaitBoard (on_round) says why at WARNING once, then at a slow cadence.
            log.debug("lease round failed: %s", exc.message, extra={"code": exc.code})
            self._on_round(exc)
            if isinstance(exc, LeaseConflict) and self._leading:
                # A standby's trigger annotation also bumps the resourceVersion: only a new holder
                # means we lost. Our last renew still counts until renew_deadline.
                try:
                    again = self._lease.get()
                    self._observe(again)
                    if again is not None and again.holder == self.identity:
                        return self.is_leader()
                except MigplanError:
                    pass
                self._set_leading(False)
            elif not self.is_leader():
                self._set_leading(False)
            return False
        self._observe(record)
        self._on_round(None)
        with self._lock:
            self._last_renew = self._mono()
        if not self._leading:
            self._seen_trigger = record.trigger  # the first cycle covers anything asked before
        self._set_leading(True)
        return True

    def request_trigger(self) -> None:
        self._lease.request_trigger(self._wall().strftime("%Y-%m-%dT%H:%M:%S.%fZ") + "/" + self.identity)

    def release(self) -> None:
        """Give the Lease up (on shutdown) so a successor need not wait for it to expire."""
        if not self._leading:
            return
        self._set_leading(False)
        try:
            current = self._lease.get()
            if current is not None and current.holder == self.identity:
                self._lease.update(
                    current,
                    holder="",
                    duration=1,
                    acquire=None,
                    renew=self._wall(),
                    transitions=current.transitions,
                )
        except MigplanError as exc:
            log.warning("could not release the lease: %s", exc.message)

    def run(self, stop: threading.Event) -> None:
        """Election loop until `stop` is set; then release."""
        while not stop.is_set():
            self.last_loop = self._mono()
            self.try_acquire_or_renew()
            # Check the deadline between rounds too, so on_stopped fires even while the API hangs.
            if self._leading and not self.is_leader():
                self._set_leading(False)
            stop.wait(self._retry)
        self.release()
