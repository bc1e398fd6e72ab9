"""The engine's write pool: plan order kept under concurrency, exact reporting when a node group fails.

A recording fake cluster serves the writes with small random delays from several threads and checks
the order guarantees as the writes arrive: ConfigMap -> ClusterPolicy -> DaemonSet -> nodes -> the
ConfigMap clean-up, per node cordon -> label -> uncordon, never two writes of one node at once, and
never more than writeConcurrency writes in flight.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from helpers import planning as fixtures

from reconciler.engine import Cycle, apply_plan, dry_run_selection, relabel_only
from reconciler.logic.planning import writeorder
from reconciler.model.errors import MigplanError, Transient
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Change, Kind, Plan

NOW = datetime(2026, 12, 2, 10, tzinfo=UTC)
CM = "configmap/gpu-operator/migplan-mig-parted-config"


def _desired(concurrency: int) -> DesiredState:
    desired = fixtures.desired_state(fixtures.read("article-single-strategy", "desired.yaml"))
    apply = dataclasses.replace(desired.cluster.apply, write_concurrency=concurrency)
    return dataclasses.replace(desired, cluster=dataclasses.replace(desired.cluster, apply=apply))


def _node_writes(name: str, *, cordon: bool) -> list[Change]:
    subject = f"node/{name}"
    out = []
    if cordon:
        out.append(Change(subject, Action.CONFIGURE, Kind.CORDON, patch={"spec": {"unschedulable": True}}))
    out.append(Change(subject, Action.CONFIGURE, Kind.NODE_MIG_CONFIG, patch={"metadata": {"labels": {"l": name}}}))
    if cordon:
        out.append(Change(subject, Action.CONFIGURE, Kind.UNCORDON, patch={"spec": {"unschedulable": False}}))
    return out


def _plan(nodes: int) -> Plan:
    changes = [
        Change(CM, Action.CONFIGURE, Kind.MIG_CONFIG_MAP, patch={"data": {"config.yaml": "a"}}),
        Change("clusterpolicy/cluster-policy", Action.CONFIGURE, Kind.CLUSTER_POLICY, patch={"spec": {}}),
        Change("daemonset/gpu-operator/ds", Action.CONFIGURE, Kind.RESTART_DEVICE_PLUGIN, patch={"spec": {}}),
        Change("node/held", Action.SKIP, Kind.NODE_MIG_CONFIG, reason="maxUnavailableNodes"),
    ]
    for i in range(nodes):
        changes.extend(_node_writes(f"n{i:03d}", cordon=i % 3 == 0))
    changes.append(Change(CM, Action.CONFIGURE, Kind.MIG_CONFIG_MAP, patch={"data": {"config.yaml": "b"}}))
    return Plan(changes=tuple(changes))


class OrderCheckingCluster:
    """Records every write; asserts the plan's order guarantees as writes arrive (from any thread)."""

    def __init__(
        self, plan: Plan, *, limit: int, fail: set[tuple[str, Kind]] | None = None, fail_delay: float = 0.0
    ) -> None:
        self.lock = threading.Lock()
        self.fail_delay = fail_delay  # how late a failing write answers
        self.limit = limit
        self.fail = fail or set()
        self.real: list[Change] = []  # the real writes the "server" accepted, in arrival order
        self.dry: list[Change] = []
        self.in_flight = 0
        self.peak = 0
        self.busy: set[str] = set()  # subjects with a write in flight
        self.violations: list[str] = []
        writes = plan.writes
        self.node_order = {
            s: [c.kind for c in writes if c.subject == s]
            for s in {c.subject for c in writes if c.subject[:5] == "node/"}
        }
        self.nodes_total = sum(1 for c in writes if c.subject.startswith("node/"))
        self.rng = random.Random(7)

    def observe(self, ops: Any) -> Any:  # pragma: no cover - apply_plan never observes
        raise AssertionError("not used")

    def apply(self, change: Change, *, dry_run: bool = False) -> None:
        with self.lock:
            if dry_run:
                self.dry.append(change)
                return
            self._check_before(change)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.busy.add(change.subject)
            failing = (change.subject, change.kind) in self.fail
            delay = self.fail_delay if failing else self.rng.uniform(0, 0.004)
        time.sleep(delay)
        with self.lock:
            self.in_flight -= 1
            self.busy.discard(change.subject)
            if (change.subject, change.kind) in self.fail:
                raise Transient(f"{change.subject}: HTTP 500: etcdserver: request timed out", code="MP554")
            self.real.append(change)

    def _check_before(self, change: Change) -> None:
        done_subjects = [c.subject for c in self.real]
        nodes_done = sum(1 for s in done_subjects if s.startswith("node/"))
        if self.in_flight >= self.limit:
            self.violations.append(f"more than {self.limit} writes in flight")
        if change.subject in self.busy:
            self.violations.append(f"two writes of {change.subject} at once")
        if change.subject.startswith("node/"):
            if not {CM, "clusterpolicy/cluster-policy", "daemonset/gpu-operator/ds"} <= set(done_subjects):
                self.violations.append(f"{change.subject} before the ConfigMap, ClusterPolicy and DaemonSet")
            made = [c.kind for c in self.real if c.subject == change.subject]
            expected = self.node_order[change.subject]
            if expected[: len(made) + 1] != [*made, change.kind]:
                self.violations.append(f"{change.subject}: {change.kind} after {made}, plan says {expected}")
        elif change.kind is Kind.MIG_CONFIG_MAP and CM in done_subjects and nodes_done < self.nodes_total:
            self.violations.append("ConfigMap clean-up before every node write")
        elif change.kind is Kind.CLUSTER_POLICY and CM not in done_subjects:
            self.violations.append("ClusterPolicy before the ConfigMap")
        elif change.kind is Kind.RESTART_DEVICE_PLUGIN and "clusterpolicy/cluster-policy" not in done_subjects:
            self.violations.append("DaemonSet before the ClusterPolicy")


def _run(plan: Plan, cluster: OrderCheckingCluster, concurrency: int) -> tuple[Cycle, MigplanError | None]:
    c = Cycle(desired=_desired(concurrency), cluster=cluster, now=NOW, dry_run=False)
    c.plan = plan
    try:
        apply_plan(c)
    except Exception as exc:  # the engine's _StepFailed: message and code as reconcile_once records them
        return c, MigplanError(str(exc), code=getattr(exc, "code", None))
    return c, None


def test_stages_split_the_plan_by_barrier_and_group_node_writes_in_plan_order() -> None:
    plan = _plan(5)
    stages = writeorder.stages(plan.writes)
    assert [len(s.groups) for s in stages] == [1, 1, 1, 5, 1]
    assert [w for s in stages for w in s.writes] == list(plan.writes)  # every write once, in plan order
    assert [c.kind for c in stages[3].groups[0]] == [Kind.CORDON, Kind.NODE_MIG_CONFIG, Kind.UNCORDON]


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_order_guarantees_hold_under_the_pool(concurrency: int) -> None:
    plan = _plan(60)
    cluster = OrderCheckingCluster(plan, limit=concurrency)
    c, error = _run(plan, cluster, concurrency)
    assert error is None and cluster.violations == []
    assert c.applied == list(plan.writes) and c.not_applied == []  # reported in plan order
    assert sorted(map(id, cluster.real)) == sorted(map(id, plan.writes))
    # the pool really overlaps node writes (and never exceeds its bound: checked as writes arrive)
    assert (cluster.peak > 1) == (concurrency > 1)
    # the dry run covers every write but the label-only relabels, of which one per distinct label set
    relabels = [w for w in plan.writes if relabel_only(w)]
    assert len(relabels) == 60 and len({str(w.patch) for w in relabels}) == 60
    assert sorted(map(id, cluster.dry)) == sorted(map(id, plan.writes))  # here every label differs


def test_one_relabel_per_label_set_is_dry_run_for_all() -> None:
    same = [
        Change(f"node/s{i}", Action.CONFIGURE, Kind.NODE_MIG_CONFIG, patch={"metadata": {"labels": {"l": "a"}}})
        for i in range(5)
    ]
    other = Change("node/t", Action.CONFIGURE, Kind.NODE_MIG_CONFIG, patch={"metadata": {"labels": {"l": "b"}}})
    cordon = Change("node/s1", Action.CONFIGURE, Kind.CORDON, patch={"spec": {"unschedulable": True}})
    writes = (same[0], cordon, *same[1:], other)
    assert dry_run_selection(writes) == (same[0], cordon, other)
    assert not relabel_only(cordon)


@pytest.mark.parametrize(
    ("subject", "kind", "patch", "label_only"),
    [
        ("node/a", Kind.NODE_MIG_CONFIG, {"metadata": {"labels": {"l": "a"}}}, True),
        ("node/a", Kind.NODE_MIG_CONFIG, {"metadata": {"labels": {"l": "a"}, "annotations": {"x": "1"}}}, True),
        # anything beyond labels/annotations needs its own dry run
        ("node/a", Kind.NODE_MIG_CONFIG, {"metadata": {"labels": {"l": "a"}}, "spec": {"unschedulable": True}}, False),
        ("node/a", Kind.NODE_MIG_CONFIG, {"metadata": {"labels": {"l": "a"}, "finalizers": ["x"]}}, False),
        ("node/a", Kind.NODE_MIG_CONFIG, {"metadata": ["labels"]}, False),
        ("node/a", Kind.UNCORDON, {"spec": {"unschedulable": None}}, False),
        # not a Node: the same body on another kind is dry-run on its own
        ("configmap/ns/a", Kind.MIG_CONFIG_MAP, {"metadata": {"labels": {"l": "a"}}}, False),
    ],
)
def test_only_label_and_annotation_node_patches_skip_their_own_dry_run(
    subject: str, kind: Kind, patch: dict[str, object], label_only: bool
) -> None:
    change = Change(subject, Action.CONFIGURE, kind, patch=patch)
    assert relabel_only(change) is label_only
    twin = Change(subject + "x", Action.CONFIGURE, kind, patch=patch)
    # a second write with the same labels is left out of the dry run only when both may skip it
    assert len(dry_run_selection((change, twin))) == (1 if label_only else 2)


def test_a_failed_node_group_keeps_the_report_of_every_write_made_elsewhere() -> None:
    plan = _plan(60)
    cluster = OrderCheckingCluster(plan, limit=8, fail={("node/n006", Kind.NODE_MIG_CONFIG)})
    c, error = _run(plan, cluster, 8)
    assert error is not None and error.code == "MP554"
    assert cluster.violations == []
    # exactly what the cluster accepted is reported applied, the rest of the plan not applied, both in plan order
    accepted = {id(w) for w in cluster.real}
    assert [id(w) for w in c.applied] == [id(w) for w in plan.writes if id(w) in accepted]
    assert [id(w) for w in c.not_applied] == [id(w) for w in plan.writes if id(w) not in accepted]
    # the failed group stopped at its failure: n006 was cordoned, its label and uncordon were not made
    n006 = [w.kind for w in c.applied if w.subject == "node/n006"]
    assert n006 == [Kind.CORDON]
    # groups already started ran to their end: no node left between its cordon and its uncordon elsewhere
    for subject in {w.subject for w in c.applied if w.subject.startswith("node/") and w.subject != "node/n006"}:
        made = [w.kind for w in c.applied if w.subject == subject]
        assert made in ([Kind.NODE_MIG_CONFIG], [Kind.CORDON, Kind.NODE_MIG_CONFIG, Kind.UNCORDON]), subject
    # groups not started did not start, and the stage after the nodes (ConfigMap clean-up) was not made
    assert len({w.subject for w in c.applied if w.subject.startswith("node/")}) < 60
    assert c.not_applied[-1].patch == {"data": {"config.yaml": "b"}}
    assert f"{len(c.applied)} of {len(plan.writes)} write(s) made" in error.message
    assert error.message.startswith("node/n006: node/n006: HTTP 500")


def test_failures_in_several_groups_name_the_first_in_plan_order() -> None:
    plan = _plan(12)
    fail = {("node/n004", Kind.NODE_MIG_CONFIG), ("node/n001", Kind.NODE_MIG_CONFIG)}
    # 12 groups on 16 threads, failures answered late: every group has started before any fails
    cluster = OrderCheckingCluster(plan, limit=16, fail=fail, fail_delay=0.05)
    c, error = _run(plan, cluster, 16)
    assert error is not None and error.message.startswith("node/n001:")
    assert "1 other node group(s) failed as well" in error.message
    assert {w.subject for w in c.not_applied if w.kind is Kind.NODE_MIG_CONFIG} == {"node/n001", "node/n004"}
