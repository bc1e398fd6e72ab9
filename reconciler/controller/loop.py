"""The controller's run loop: scheduler + leader election + HTTP + signals around one cycle callable.

The cycle itself (fetch the inventory, reconcile, commit the report) is injected as `CycleFn`, so this
module is the same shell for the real cycle (reconciler.gitops.GitCycle) and for the tests; it reads
everything it publishes from the cycle's reconciler.outcome.CycleOutcome. What the shell guarantees:
- cycles run one at a time, at start (once this replica leads), every interval (with jitter), on
  SIGHUP and on a verified webhook; a replica that does not lead skips cycles;
- every write the cycle makes goes through `api_client`, a FencedApiClient whose `may_write` is
  `is_leader() and not stopping`: losing the Lease, or SIGTERM, stops writes at the next request;
- a cycle, with its Events and node marks, runs under `cycle_deadline_seconds`: no request of it
  outlives that deadline (adapters/deadline.py), so a server that never answers fails the cycle
  (MP811) instead of stalling the loop;
- a failed cycle (exception, or an outcome with status FAILED) counts towards the backoff;
- after each cycle: metrics, Events and node marks (on change only), one structured log line with
  revision, result and finding codes;
- Python's cycle collector is off while a cycle runs and makes one full pass after it (gcpolicy.py), and the C
  heap's free pages go back to the system after it (heaptrim.py);
- what keeps it from reconciling (no namespace, RBAC, no repository, lost leadership, no API server) is a
  Wait on its WaitBoard (waiting.py): WARNING once with the fix, then slowly; a metric; an Event where one
  can be written; /readyz false while it lasts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.adapters import deadline
from reconciler.adapters.kube import client as kubeclient
from reconciler.adapters.kube.events import KubeSignals
from reconciler.adapters.kube.lease import FencedApiClient, KubeLease
from reconciler.controller import heaptrim, signals
from reconciler.controller.gcpolicy import collector_per_cycle
from reconciler.controller.http import ControllerHttp
from reconciler.controller.leader import LeaderElector
from reconciler.controller.metrics import ControllerMetrics
from reconciler.controller.waiting import (
    API_UNREACHABLE,
    CYCLE,
    FORBIDDEN,
    LEADERSHIP_LOST,
    LEASE,
    NAMESPACE_MISSING,
    REPOSITORY_UNREACHABLE,
    Wait,
    WaitBoard,
    classify_api_failure,
    classify_source,
)
from reconciler.model.cycles import CycleStatus
from reconciler.model.errors import MigplanError
from reconciler.model.redaction import redact
from reconciler.model.signals import EventIntent, NodeMark, ObjectRef, Reason
from reconciler.outcome import CycleContext, CycleOutcome
from reconciler.scheduling import CycleRunner, Scheduler, install_signal_handlers
from reconciler.settings import Settings

log = logging.getLogger("migplan.controller")


__all__ = ["Controller", "CycleContext", "CycleFailed", "CycleFn", "CycleOutcome", "kube_configuration", "run_once"]

CycleFn = Callable[[CycleContext], CycleOutcome]


class CycleFailed(MigplanError):
    code = "MP810"


@dataclass
class _SignalMemory:
    events: tuple[EventIntent, ...] = ()
    marks: dict[str, NodeMark] = field(default_factory=dict)
    seeded: bool = False


class Controller:
    def __init__(
        self,
        settings: Settings,
        cycle: CycleFn,
        *,
        kube_config: Any,  # kubernetes Configuration (reconciler.adapters.kube.client.kube_configuration)
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.settings = settings
        self._cycle_fn = cycle
        self.metrics = metrics or ControllerMetrics()
        for code in (NAMESPACE_MISSING, FORBIDDEN, REPOSITORY_UNREACHABLE, LEADERSHIP_LOST, API_UNREACHABLE):
            self.metrics.waiting.labels(code).set(0)
        self.waits = WaitBoard(
            log=log,
            cadence=settings.backoff_max_seconds,  # the slowest retry: never quieter than that
            on_change=lambda code, on: self.metrics.waiting.labels(code).set(1 if on else 0),
        )
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []
        self.elector: LeaderElector | None = None
        if settings.leader_election:
            # The elector has its own client: its Lease writes must not be fenced by its own verdict.
            lease = KubeLease(
                kubeclient.coordination_v1(kubeclient.api_client(kube_config)),
                namespace=settings.namespace,
                name=settings.lease_name,
            )
            self.elector = LeaderElector(
                lease,
                identity=settings.identity,
                duration=settings.lease_duration_seconds,
                renew_deadline=settings.renew_deadline_seconds,
                retry_period=settings.retry_period_seconds,
                on_started_leading=self._started_leading,
                on_stopped_leading=self._stopped_leading,
                on_trigger=lambda: self.scheduler.trigger("webhook:forwarded"),
                on_round=self._lease_round,
            )
        self.api_client = FencedApiClient(kube_config, self.may_write)
        self._signals = KubeSignals(kubeclient.core_v1(self.api_client), instance=settings.identity)
        self._memory = _SignalMemory()
        self.runner = CycleRunner(
            self._run_cycle,
            backoff_base=settings.backoff_base_seconds,
            backoff_max=settings.backoff_max_seconds,
            after=self._release_heap,
        )
        self.scheduler = Scheduler(self.runner, interval=settings.interval_seconds, jitter=settings.jitter_seconds)
        host, port = settings.listen_host_port
        self.http = ControllerHttp(
            host=host,
            port=port,
            metrics=self.metrics,
            healthy=self.healthy,
            ready=self.ready,
            on_push=self.on_push,
            secret=lambda: settings.webhook_secret.reveal(),
            branch=settings.branch,
            max_body=settings.webhook_max_body_bytes,
            read_timeout=settings.http_read_timeout_seconds,
            max_connections=settings.http_max_connections,
        )
        self.cycles_run = 0
        self._logged_findings: set[tuple[str, str, str]] = set()

    # --- leadership and the write fence -------------------------------------------------------------------

    def may_write(self) -> bool:
        if self.runner.stopping.is_set() or self.stop_event.is_set():
            return False
        return self.elector is None or self.elector.is_leader()

    def _lease_round(self, failure: MigplanError | None) -> None:
        """One election round's answer: a failure that keeps this replica from leading is a Wait."""
        if failure is None:
            self.waits.clear(NAMESPACE_MISSING, FORBIDDEN, API_UNREACHABLE, scope=LEASE)
            return
        wait = classify_api_failure(failure.code, failure.message, namespace=self.settings.namespace)
        if wait is not None:
            self.waits.hold(wait, scope=LEASE)  # no Event: the Lease is what lets this replica write one

    def _started_leading(self) -> None:
        self.waits.clear(LEADERSHIP_LOST, scope=LEASE)
        self.metrics.is_leader.set(1)
        self._memory = _SignalMemory()  # what a previous leader emitted is re-read from the nodes
        self.scheduler.trigger("leader")

    def _stopped_leading(self) -> None:
        self.metrics.is_leader.set(0)
        if self.stop_event.is_set():
            return  # released on shutdown: nothing was lost
        holder = self.elector.holder if self.elector is not None else ""
        self.waits.hold(
            scope=LEASE,
            wait=Wait(
                LEADERSHIP_LOST,
                f"this replica lost the leader Lease {self.settings.namespace}/{self.settings.lease_name} "
                f"(holder now: {holder if holder and holder != self.settings.identity else 'none'})",
                "nothing when another replica leads (its migplan_leader is 1); otherwise see the other waiting "
                "reasons logged: the Lease could not be renewed in time",
            ),
        )

    def on_push(self, reason: str) -> None:
        if self.elector is None or self.elector.is_leader():
            self.scheduler.trigger(reason)
            return
        try:
            self.elector.request_trigger()  # the leader picks it up on its next renew
        except MigplanError as exc:
            log.warning("could not forward the webhook to the leader: %s", exc.message)

    # --- health -------------------------------------------------------------------------------------------

    def healthy(self) -> tuple[bool, str]:
        if not self.scheduler.alive and not self.stop_event.is_set():
            return False, "scheduler not running"
        if self.elector is not None:
            stale = time.monotonic() - self.elector.last_loop
            if stale > max(3 * self.settings.retry_period_seconds, 10.0):
                return False, f"leader election loop stuck for {stale:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        blocking = self.waits.blocking()
        if blocking is not None:
            return False, f"waiting: {blocking.line()}"
        if self.elector is not None:
            contact = self.elector.last_contact
            if contact is None:
                return False, "no answer from the API server yet"
            if time.monotonic() - contact > 3 * self.settings.lease_duration_seconds:
                return False, "API server unreachable"
            return True, "leader" if self.elector.is_leader() else f"standby (leader: {self.elector.holder or '-'})"
        return True, "ok"

    # --- one cycle ----------------------------------------------------------------------------------------

    def _run_cycle(self, trigger: str) -> None:
        with deadline.cycle_deadline(self.settings.cycle_deadline_seconds):
            self._run_cycle_in_time(trigger)

    def _release_heap(self) -> None:
        # The runner calls this after each cycle, once a raised cycle's exception has been handled and dropped (not
        # in a `finally` here, where its traceback would still hold the failed cycle's frames): the cycle's outcome,
        # report files included, is gone, so what the C heap freed goes back to the system and the process holds
        # between cycles what it uses (heaptrim.py).
        heaptrim.release_free_heap()

    def _run_cycle_in_time(self, trigger: str) -> None:
        if not self.may_write():
            self.metrics.count_cycle(None)
            return
        started = time.monotonic()
        log.info("cycle started", extra={"trigger": trigger, "identity": self.settings.identity})
        ctx = CycleContext(trigger, self.api_client, self.may_write, self.settings)
        try:
            with collector_per_cycle():
                outcome = self._cycle_fn(ctx)
        except Exception as exc:
            self.metrics.count_cycle(CycleStatus.FAILED)
            self.metrics.cycle_duration.observe(time.monotonic() - started)
            self.metrics.consecutive_failures.set(self.runner.failures + 1)
            log.error("cycle failed: %s", exc, extra={"trigger": trigger, "code": getattr(exc, "code", "")})
            raise
        finally:
            self.cycles_run += 1
        elapsed = time.monotonic() - started
        self.metrics.cycle_duration.observe(elapsed)
        self.metrics.count_cycle(outcome.status)
        self._cycle_waits(outcome)
        self._publish(outcome)
        drift = outcome.drift_report
        codes = sorted(signals.finding_counts(drift)) if drift else []
        log.info(
            "cycle finished",
            extra={
                "trigger": trigger,
                "result": outcome.status.metric_label,
                "revision": outcome.revision,
                "codes": codes,
                "applied": len(outcome.applied),
                "report": outcome.report.status if outcome.report is not None else "",
                "seconds": round(elapsed, 3),
                "identity": self.settings.identity,
            },
        )
        if outcome.status is CycleStatus.FAILED:
            self.metrics.consecutive_failures.set(self.runner.failures + 1)
            failure = "; ".join(outcome.failures) or outcome.message or "cycle failed"
            del outcome  # the raised error's frame would keep the whole outcome alive past the heap's release
            raise CycleFailed(failure)
        self.metrics.consecutive_failures.set(0)
        self.metrics.last_success.set(time.time())

    def _cycle_waits(self, outcome: CycleOutcome) -> None:
        """What a cycle's outcome says keeps the controller from reconciling: no repository, RBAC refusals."""
        source = outcome.source
        error = source.source_error if source is not None else None
        repo = classify_source(
            has_revision=source is not None and source.revision is not None,
            error_code=error.code if error is not None else None,
            error_message=redact(str(error)) if error is not None else "",
            repo=redact(self.settings.repo),
        )
        refused = None
        if outcome.result is not None:
            refused = next(
                (
                    w
                    for e in outcome.result.errors
                    if (w := classify_api_failure(e.code, e.message, namespace=self.settings.namespace)) is not None
                    and w.code == FORBIDDEN
                ),
                None,
            )
        for code, wait in ((REPOSITORY_UNREACHABLE, repo), (FORBIDDEN, refused)):
            if wait is None:
                self.waits.clear(code, scope=CYCLE)
                continue
            if self.waits.hold(wait, scope=CYCLE) and self.may_write() and not self.settings.dry_run:
                policy = ObjectRef("ClusterPolicy", outcome.cluster_policy, "nvidia.com/v1")
                self._signals.emit([EventIntent(policy, Reason.WAITING, wait.line(), warning=True)])

    def _publish(self, outcome: CycleOutcome) -> None:
        if outcome.revision:
            self.metrics.revision.info({"revision": redact(outcome.revision)})
        self.metrics.nodes_in_flight.set(outcome.nodes_in_flight)
        pushed = outcome.report
        if pushed is not None:
            held_until = pushed.held_until.timestamp() if pushed.held_until is not None else 0.0
            self.metrics.record_report(pushed.status, pushed.pending, now=time.time(), held_until=held_until)
        for kind, n in signals.applied_by_kind(outcome.applied).items():
            self.metrics.applied_changes.labels(kind).inc(n)
        if outcome.plan is not None:
            self.metrics.held_changes.set(len(outcome.plan.skipped))
        report = outcome.drift_report
        if report is None:
            return
        self.metrics.set_findings(signals.finding_counts(report))
        self.metrics.set_partitions(signals.occupancy_rows(report))
        self.metrics.set_node_findings(signals.node_finding_rows(report))
        self.metrics.set_owner_partitions(signals.owner_rows(report))
        self.metrics.set_owner_holdings(signals.owner_holding_rows(report))
        self.metrics.set_observers(signals.observer_counts(report))
        # One log line per finding when it appears (not every cycle while it lasts), naming revision,
        # node and code so a log pipeline can follow a drift without parsing messages.
        current = {(f.node or "", f.code, f.message) for f in report.findings}
        for node, code, message in sorted(current - self._logged_findings):
            log.warning(message, extra={"revision": outcome.revision, "node": node, "code": code})
        self._logged_findings = current
        if self.settings.dry_run or not self.may_write():
            return
        memory = self._memory
        if not memory.seeded:
            try:
                memory.marks = self._signals.read_marks()
            except MigplanError as exc:
                log.warning("could not read node marks: %s", exc.message)
            memory.seeded = True
        events, marks = signals.build(
            report=report,
            plan=outcome.plan,
            applied=outcome.applied,
            errors=outcome.failures,
            cluster_policy=outcome.cluster_policy,
            previously_applying=signals.applying_nodes(memory.marks.values()),
        )
        self._signals.emit(signals.diff_events(memory.events, events))
        changed = signals.changed_marks(memory.marks, marks)
        self._signals.mark(changed)
        memory.events = events
        memory.marks.update({m.node: m for m in marks})

    # --- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> None:
        self.http.start()
        if self.elector is not None:
            t = threading.Thread(target=self.elector.run, args=(self.stop_event,), name="migplan-leader", daemon=True)
            t.start()
            self._threads.append(t)
        # Without election the first cycle runs now; with it, on becoming leader (_started_leading).
        if self.elector is None:
            self.metrics.is_leader.set(1)  # the only writer: a "no leader" alert must stay quiet
        self.scheduler.start(run_now=self.elector is None)
        log.info("controller started", extra={"settings": self.settings.redacted(), "port": self.http.port})

    def request_stop(self) -> None:
        self.runner.stopping.set()  # writes stop now; the running cycle sees may_write() false
        self.stop_event.set()

    def shutdown(self) -> bool:
        self.request_stop()
        finished = self.scheduler.shutdown(grace=self.settings.shutdown_grace_seconds)
        for t in self._threads:
            t.join(timeout=self.settings.retry_period_seconds + 5)  # the elector releases the Lease
        self.http.stop()
        log.info("controller stopped", extra={"cycle_finished": finished})
        return finished

    def run_forever(self) -> int:
        install_signal_handlers(on_reload=lambda: self.on_push("sighup"), on_stop=self.request_stop)
        self.start()
        while not self.stop_event.wait(0.5):
            pass
        return 0 if self.shutdown() else 1


def run_once(settings: Settings, cycle: CycleFn, kube_config: Any) -> CycleOutcome:
    """One cycle now (`migplan run --once`): no election, no HTTP; writes unless settings.dry_run; under the cycle
    deadline, as every cycle of the loop."""
    ctx = CycleContext("once", kubeclient.api_client(kube_config), lambda: not settings.dry_run, settings)
    with deadline.cycle_deadline(settings.cycle_deadline_seconds):
        return cycle(ctx)


# Kept here for callers of the controller module; built in the adapter.
kube_configuration = kubeclient.kube_configuration
