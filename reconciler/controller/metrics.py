"""Prometheus metrics of the controller, in their own registry (so tests and two controllers in one
process do not collide). Names follow the Prometheus conventions: `migplan_` prefix, base units,
`_total` for counters, `_seconds` for durations, `_timestamp_seconds` for points in time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reconciler.model.cycles import CYCLE_RESULTS, SKIPPED, CycleStatus
from reconciler.model.plans import Kind

__all__ = ["CONTENT_TYPE_LATEST", "OBSERVER_STATES", "OWNER_HOLDINGS", "REPORT_RESULTS", "ControllerMetrics"]

# ReportOutcome.status values (reconciler.adapters.git.reports), exported as zeros from the start.
REPORT_RESULTS = ("committed", "unchanged", "held", "queued", "refused", "failed")
# The state of a GPU node's observer (reconciler.logic.drift.drift.Analysis.observers), exported as zeros.
OBSERVER_STATES = ("reporting", "silent", "malformed", "absent")
# Owner accounting beyond total/used/free (reconciler.model.drift.OwnerAccount).
OWNER_HOLDINGS = ("held_by_owner", "held_by_other_owners")


class PartitionRows(Collector):
    """`migplan_partitions`, exported from the last cycle's rows as they are (node, profile, total, used).

    A labelled Gauge keeps one child object per series (a lock, a value holder, a labels dict: some 600 bytes):
    three per node and profile, about 30 MB at 5,000 nodes that `migplan run` would hold for nothing between
    scrapes. This keeps the rows, one tuple each, and makes the samples when /metrics is read: the same family,
    help, labels, order and values as the Gauge gave (a (node, profile) given twice keeps its first place and its
    last values, as the Gauge's child did). The rows are replaced as a whole (one reference: a scrape from the
    HTTP thread reads either the old rows or the new ones, never a mix)."""

    NAME = "migplan_partitions"
    HELP = "MIG partitions per node and profile from the last cycle, by state (total, used, free)."

    def __init__(self, registry: CollectorRegistry) -> None:
        self.rows: dict[tuple[str, str], tuple[int, int]] = {}
        registry.register(self)

    def set(self, rows: Iterable[tuple[str, str, int, int]]) -> None:
        self.rows = {(str(node), str(profile)): (total, used) for node, profile, total, used in rows}

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self.NAME, self.HELP, labels=("node", "profile", "state"))]

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=("node", "profile", "state"))
        for (node, profile), (total, used) in self.rows.items():  # free is derived so the three always agree
            family.add_metric((node, profile, "total"), float(total))
            family.add_metric((node, profile, "used"), float(used))
            family.add_metric((node, profile, "free"), float(max(0, total - used)))
        yield family


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.cycle_duration = Histogram(
            "migplan_reconcile_duration_seconds",
            "Duration of one reconcile cycle.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.cycles = Counter(
            "migplan_reconcile_total",
            "Reconcile cycles by result (success, drift, failed, skipped).",
            ["result"],
            registry=r,
        )
        self.findings = Gauge(
            "migplan_drift_findings",
            "Drift findings of the last cycle, by finding code.",
            ["code"],
            registry=r,
        )
        self.partitions = PartitionRows(r)  # per node: rows, not a Gauge child per series (PartitionRows)
        self.nodes_in_flight = Gauge("migplan_nodes_in_flight", "Nodes being reconfigured right now.", registry=r)
        self.revision = Info("migplan_git_revision", "Git revision of the inventory last applied.", registry=r)
        self.last_success = Gauge(
            "migplan_last_success_timestamp_seconds",
            "Unix time of the last successful cycle.",
            registry=r,
        )
        self.is_leader = Gauge(
            "migplan_leader",
            "1 when this replica may write: it holds the leader Lease, or runs without leader election.",
            registry=r,
        )
        self.waiting = Gauge(
            "migplan_waiting",
            "1 while the controller cannot reconcile for this reason (code: reconciler/controller/waiting.py).",
            ["code"],
            registry=r,
        )
        self.consecutive_failures = Gauge(
            "migplan_consecutive_failures", "Failed cycles in a row (drives the backoff).", registry=r
        )
        self.webhooks = Counter(
            "migplan_webhook_requests_total",
            "Webhook requests by provider and outcome.",
            ["provider", "outcome"],
            registry=r,
        )
        # Per node (empty for a cluster-wide finding), code and severity: what the alerts name a node
        # by (apply failed or stuck, drift persisting); migplan_drift_findings stays the cluster total.
        self.node_findings = Gauge(
            "migplan_findings",
            "Drift findings of the last cycle by node (empty: cluster-wide), code and severity.",
            ["node", "code", "severity"],
            registry=r,
        )
        self.owner_partitions = Gauge(
            "migplan_owner_partitions",
            "MIG partitions per inventory owner (empty: unowned) and profile, by state (total, used, free); "
            "used is inferred from the pods' requests, matched to their owner's partitions first.",
            ["owner", "profile", "state"],
            registry=r,
        )
        self.owner_holdings = Gauge(
            "migplan_owner_holdings",
            "Per inventory owner and profile: partitions of the profile its pods hold (held_by_owner), and "
            "pods of other owners holding partitions reserved for it (held_by_other_owners); observed where "
            "the node's observer reports holders, inferred elsewhere.",
            ["owner", "profile", "state"],
            registry=r,
        )
        self.observers = Gauge(
            "migplan_observers",
            "GPU nodes by the state of their node observer (reporting, silent, malformed, absent).",
            ["state"],
            registry=r,
        )
        self.report_pushes = Counter(
            "migplan_report_pushes_total",
            "Report commits by outcome (committed, unchanged, held, queued, refused, failed).",
            ["result"],
            registry=r,
        )
        self.report_outbox = Gauge(
            "migplan_report_outbox_pending",
            "Reports waiting in the outbox to be pushed to the reports branch.",
            registry=r,
        )
        self._held_since = 0.0
        self.report_held_since = Gauge(
            "migplan_report_held_since_timestamp_seconds",
            "Unix time since which the newest report is held back (occupancy-only changes coalesced by "
            "reports.minInterval); 0 when the reports branch holds the newest report.",
            registry=r,
        )
        self.report_held_until = Gauge(
            "migplan_report_held_until_timestamp_seconds",
            "Unix time at which the held-back report is committed at the latest; 0 when none is held.",
            registry=r,
        )
        self.applied_changes = Counter(
            "migplan_applied_changes_total",
            "Writes applied to the cluster, by kind of change (reconciler.model.plans.Kind).",
            ["kind"],
            registry=r,
        )
        self.held_changes = Gauge(
            "migplan_changes_held",
            "Changes of the last cycle's plan held back (disruption guard, maxUnavailableNodes, ordering).",
            registry=r,
        )
        for result in CYCLE_RESULTS:
            self.cycles.labels(result)  # export zeros so rate() works from the first scrape
        for result in REPORT_RESULTS:
            self.report_pushes.labels(result)
        for kind in Kind:
            self.applied_changes.labels(kind.value)
        for state in OBSERVER_STATES:
            self.observers.labels(state)

    def count_cycle(self, status: CycleStatus | None) -> None:
        """One cycle under its `result` label (CycleStatus.metric_label); None: skipped, this replica does
        not lead."""
        self.cycles.labels(SKIPPED if status is None else status.metric_label).inc()

    def set_findings(self, counts: Mapping[str, int]) -> None:
        self.findings.clear()
        for code, n in counts.items():
            self.findings.labels(code).set(n)

    def set_partitions(self, rows: Iterable[tuple[str, str, int, int]]) -> None:
        """rows: (node, profile, total, used); free is derived so the three always agree."""
        self.partitions.set(rows)

    def set_node_findings(self, rows: Iterable[tuple[str, str, str, int]]) -> None:
        """rows: (node or "", code, severity, count)."""
        self.node_findings.clear()
        for node, code, severity, n in rows:
            self.node_findings.labels(node, code, severity).set(n)

    def set_owner_partitions(self, rows: Iterable[tuple[str, str, int, int]]) -> None:
        """rows: (owner or "", profile, total, used), summed over the cluster."""
        self.owner_partitions.clear()
        for owner, profile, total, used in rows:
            self.owner_partitions.labels(owner, profile, "total").set(total)
            self.owner_partitions.labels(owner, profile, "used").set(used)
            self.owner_partitions.labels(owner, profile, "free").set(max(0, total - used))

    def set_owner_holdings(self, rows: Iterable[tuple[str, str, int, int]]) -> None:
        """rows: (owner, profile, partitions its pods hold, pods of other owners on its partitions)."""
        self.owner_holdings.clear()
        for owner, profile, held, others in rows:
            self.owner_holdings.labels(owner, profile, "held_by_owner").set(held)
            self.owner_holdings.labels(owner, profile, "held_by_other_owners").set(others)

    def set_observers(self, counts: Mapping[str, int]) -> None:
        """GPU nodes per observer state; every state is exported (0 when none)."""
        for state in OBSERVER_STATES:
            self.observers.labels(state).set(counts.get(state, 0))

    def record_report(self, result: str, pending: int, *, now: float = 0.0, held_until: float = 0.0) -> None:
        """One cycle's report outcome. A "held" report keeps the held-since time of the first cycle
        that held it; any other outcome (committed, unchanged, queued...) clears both held gauges."""
        self.report_pushes.labels(result).inc()
        if result == "held":
            self._held_since = self._held_since or now
            self.report_held_until.set(held_until)
        else:
            self._held_since = 0.0
            self.report_held_until.set(0)
        self.report_held_since.set(self._held_since)
        if result in ("committed", "unchanged", "held", "queued"):
            # Only these went through the outbox and counted it; refused/failed never reached it.
            self.report_outbox.set(pending)

    def render(self) -> bytes:
        return generate_latest(self.registry)
