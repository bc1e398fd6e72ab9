"""The drain's pure pieces: kubectl drain's filters, PDB selection, the drain clock, the patches it plans, the
PodDisruptionBudget and eviction-refusal parsing at the adapter edge, and the engine's handling of a refusal.

The plans themselves are table cases under tests/fixtures/planning/ (guard-allow-disruption, guard-admin-cordoned,
drain-*)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from helpers import planning as fixtures
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube.cluster import _eviction_refusal
from reconciler.engine import reconcile_once
from reconciler.logic.planning import drain, planner
from reconciler.model.errors import EvictionRefused
from reconciler.model.inventory import GpuOperatorSettings
from reconciler.model.observed import (
    DRAIN_FOR_ANNOTATION,
    DRAIN_STARTED_ANNOTATION,
    ObservedNode,
    ObservedPdb,
    ObservedPod,
    ObservedState,
    OwnerRef,
    SelectorRequirement,
)
from reconciler.model.plans import Action, Change, Kind

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def _pod(name: str = "p", **kw: Any) -> ObservedPod:
    return ObservedPod(namespace="ml", name=name, node="n", phase="Running", **kw)


def test_kubectl_drain_filters() -> None:
    rs = OwnerRef("ReplicaSet", "web-1")
    assert drain.why_not_drainable(_pod(owner=rs)) is None
    assert drain.why_not_drainable(_pod(owner=OwnerRef("StatefulSet", "db"))) is None
    assert "DaemonSet-managed" in str(drain.why_not_drainable(_pod(owner=OwnerRef("DaemonSet", "probe"))))
    assert "mirror pod" in str(drain.why_not_drainable(_pod(owner=OwnerRef("Node", "n"), mirror=True)))
    assert "no controller" in str(drain.why_not_drainable(_pod()))
    assert "no controller" in str(drain.why_not_drainable(_pod(owner=OwnerRef("ReplicaSet", "x", controller=False))))
    # already terminating: waited for, whatever owns it (skipDeletedFilter comes first)
    assert drain.why_not_drainable(_pod(owner=OwnerRef("DaemonSet", "probe"), terminating=True)) is None
    verdict = drain.classify([_pod("b", owner=rs), _pod("a", terminating=True), _pod("c")])
    assert [p.key for p in verdict.evict] == ["ml/b"]
    assert verdict.terminating == ("ml/a",)
    assert [k for k, _ in verdict.refused] == ["ml/c"]
    assert verdict.pods == ("ml/a", "ml/b", "ml/c")


def test_pdb_selection_follows_the_eviction_subresource() -> None:
    pod = _pod(labels={"app": "web", "tier": "gpu"})
    assert ObservedPdb("ml", "a", match_labels={"app": "web"}).selects(pod)
    assert not ObservedPdb("other", "a", match_labels={"app": "web"}).selects(pod)  # another namespace
    assert not ObservedPdb("ml", "a", match_labels=None).selects(pod)  # no selector: nothing
    assert not ObservedPdb("ml", "a", match_labels={}).selects(pod)  # empty selector: nothing (selector.Empty())
    assert not ObservedPdb("ml", "a", match_labels={"app": "web"}, selector_valid=False).selects(pod)
    exprs = (SelectorRequirement("tier", "In", ("gpu", "cpu")), SelectorRequirement("canary", "DoesNotExist"))
    assert ObservedPdb("ml", "a", match_labels={}, match_expressions=exprs).selects(pod)
    assert not ObservedPdb(
        "ml", "a", match_labels={}, match_expressions=(SelectorRequirement("tier", "NotIn", ("gpu",)),)
    ).selects(pod)
    budgets = [
        ObservedPdb(
            "ml", "zero", match_labels={"app": "web"}, disruptions_allowed=0, desired_healthy=2, current_healthy=2
        ),
        ObservedPdb("ml", "one", match_labels={"app": "web"}, disruptions_allowed=1),
    ]
    assert drain.blocking_pdbs([pod], budgets) == ("ml/zero",)
    assert drain.describe_pdbs(("ml/zero", "ml/gone"), budgets) == "ml/zero (needs 2 healthy pods and has 2), ml/gone"


@pytest.mark.parametrize(
    ("annotations", "started", "unreadable"),
    [
        ({}, None, False),
        ({DRAIN_STARTED_ANNOTATION: "2026-12-02T09:50:00Z", DRAIN_FOR_ANNOTATION: "other"}, None, False),
        ({DRAIN_STARTED_ANNOTATION: "2026-12-02T09:50:00Z", DRAIN_FOR_ANNOTATION: "cfg"}, "09:50", False),
        ({DRAIN_STARTED_ANNOTATION: "yesterday", DRAIN_FOR_ANNOTATION: "cfg"}, None, True),
        ({DRAIN_STARTED_ANNOTATION: "2099-01-01T00:00:00Z", DRAIN_FOR_ANNOTATION: "cfg"}, None, True),
        ({DRAIN_STARTED_ANNOTATION: "2026-13-45T25:61:00Z", DRAIN_FOR_ANNOTATION: "cfg"}, None, True),
    ],
)
def test_drain_clock_believes_only_a_readable_past_start(
    annotations: dict[str, str], started: str | None, unreadable: bool
) -> None:
    clock = drain.drain_clock(ObservedNode("n", annotations=annotations), "cfg", NOW)
    assert (clock.started.strftime("%H:%M") if clock.started else None) == started
    assert (clock.unreadable is not None) is unreadable


def _plan(case: str, now: datetime = NOW) -> Any:
    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read(case, "observed.yaml") or {}, desired)
    return planner.plan(desired, observed, now=now)


def _node_changes(p: Any, node: str = "gpu-a") -> list[Change]:
    return [c for c in p.changes if drain.node_of(c) == node and c.action is not Action.UNCHANGED]


def test_cordon_then_evict_then_wait_with_the_exact_writes() -> None:
    cordon, evict, held = _node_changes(_plan("guard-allow-disruption"))
    assert cordon.kind is Kind.CORDON and cordon.patch is not None
    assert cordon.patch["spec"] == {"unschedulable": True}
    marks = cordon.patch["metadata"]["annotations"]
    assert marks["migplan.io/cordoned"] == "true" and marks[DRAIN_STARTED_ANNOTATION] == "2026-12-02T10:00:00Z"
    assert marks[DRAIN_FOR_ANNOTATION] == held.after[planner.MIG_CONFIG_LABEL]  # type: ignore[index]
    assert evict.kind is Kind.EVICT and evict.action is Action.CREATE
    assert evict.patch == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "reranker-0", "namespace": "ml"},
    }  # no deleteOptions: the pod's own grace period, as kubectl drain without --grace-period
    assert held.action is Action.SKIP and held.code == "MP536" and held.blocked_by == ("ml/reranker-0",)
    assert evict.to_json()["code"] == "MP536"


def test_an_admin_cordon_is_never_made_migplans() -> None:
    start, _, _ = _node_changes(_plan("guard-admin-cordoned"))
    assert start.kind is Kind.CORDON and start.patch is not None
    assert "spec" not in start.patch  # spec.unschedulable untouched
    assert "migplan.io/cordoned" not in start.patch["metadata"]["annotations"]  # never lifted by migplan later


def test_the_relabel_ends_the_drain_and_the_uncordon_forgets_it() -> None:
    (label,) = [c for c in _node_changes(_plan("drain-pods-gone")) if c.kind is Kind.NODE_MIG_CONFIG]
    assert label.action is Action.CONFIGURE and label.patch is not None
    annotations = label.patch["metadata"]["annotations"]
    assert annotations[DRAIN_STARTED_ANNOTATION] is None and annotations[DRAIN_FOR_ANNOTATION] is None


def test_timeout_holds_and_names_pods_and_pdbs() -> None:
    (held,) = _node_changes(_plan("drain-timed-out"))
    assert held.code == "MP538" and held.pdbs == ("ml/reranker",) and held.blocked_by == ("ml/reranker-0",)
    assert "ml/reranker (needs 1 healthy pods and has 1)" in held.reason
    # started 09:44:59: at 09:59:59 the 900 s are not over, the eviction is asked again
    still = _node_changes(_plan("drain-timed-out", datetime(2026, 12, 2, 9, 59, 59, tzinfo=UTC)))
    assert [c.kind for c in still] == [Kind.EVICT, Kind.NODE_MIG_CONFIG]


def test_pdb_from_json_never_trusts_a_hostile_object() -> None:
    ok = kubeobserve.pdb_from_json(
        {
            "metadata": {"name": "web", "namespace": "ml"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2},
        }
    )
    assert (ok.key, ok.disruptions_allowed, ok.selector_valid) == ("ml/web", 1, True)
    for selector in (
        "app=web",
        {"matchLabels": ["app"]},
        {"matchLabels": {"app": 3}},
        {"matchExpressions": [{"key": "app", "operator": "Matches", "values": ["x"]}]},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": "web"}]},
        {"matchExpressions": ["app"]},
    ):
        bad = kubeobserve.pdb_from_json({"metadata": {"name": "b", "namespace": "ml"}, "spec": {"selector": selector}})
        assert not bad.selector_valid, selector
        assert not bad.selects(_pod(labels={"app": "web"}))
    weird = kubeobserve.pdb_from_json(
        {"metadata": {"name": "w", "namespace": "ml"}, "status": {"disruptionsAllowed": "9", "currentHealthy": True}}
    )
    assert (weird.disruptions_allowed, weird.current_healthy) == (0, 0)  # unreadable: allows nothing


def test_gpu_pod_from_json_reads_terminating_mirror_and_controller() -> None:
    res = {"limits": {"nvidia.com/mig-1g.18gb": "1"}}
    pod = kubeobserve.gpu_pod_from_json(
        {
            "metadata": {
                "name": "p",
                "namespace": "ml",
                "deletionTimestamp": "2026-12-02T10:00:00Z",
                "annotations": {"kubernetes.io/config.mirror": "abc"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "r"}],  # not a controller
            },
            "spec": {"nodeName": "n", "containers": [{"name": "m", "resources": res}]},
        }
    )
    assert pod is not None and pod.terminating and pod.mirror
    assert pod.owner == OwnerRef("ReplicaSet", "r", controller=False)


def _api_exception(status: int, body: Any) -> ApiException:
    exc = ApiException(status=status, reason="x")
    exc.body = orjson.dumps(body) if not isinstance(body, bytes) else body
    return exc


def test_eviction_refusals_are_quoted_in_the_servers_words() -> None:
    pdb = {
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web needs 1 healthy"}]},
    }
    assert _eviction_refusal(_api_exception(429, pdb)) == (
        "Cannot evict pod as it would violate the pod's disruption budget.; The disruption budget web needs 1 healthy"
    )
    many = {
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    }
    assert "more than one" in str(_eviction_refusal(_api_exception(500, many)))
    assert _eviction_refusal(_api_exception(500, {"message": "etcd down"})) is None
    assert _eviction_refusal(_api_exception(403, {"message": "forbidden"})) is None
    assert _eviction_refusal(_api_exception(429, b"\xff not json")) is not None  # still a refusal, never a crash
    assert _eviction_refusal(_api_exception(429, ["a", "list"])) is not None


class _Cluster:
    """A ClusterPort whose evictions are refused (a PDB), recording what is written."""

    def __init__(self, observed: ObservedState) -> None:
        self.observed = observed
        self.writes: list[tuple[str, bool]] = []

    def observe(self, ops: GpuOperatorSettings) -> ObservedState:
        return self.observed

    def apply(self, change: Change, *, dry_run: bool = False) -> None:
        if change.kind is Kind.EVICT:
            raise EvictionRefused("Cannot evict pod as it would violate the pod's disruption budget.", pod="ml/p")
        self.writes.append((change.subject, dry_run))


def test_engine_records_a_refused_eviction_and_goes_on() -> None:
    desired = fixtures.desired_state(fixtures.read("guard-allow-disruption", "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read("guard-allow-disruption", "observed.yaml"), desired)
    cluster = _Cluster(observed)
    result = reconcile_once(desired=desired, cluster=cluster, now=NOW)  # type: ignore[arg-type]
    assert not result.errors
    assert [s for s, dry in cluster.writes if not dry] == [
        "configmap/gpu-operator/migplan-mig-parted-config",
        "node/gpu-a",  # the cordon: made; the eviction refused is retried next cycle
    ]
    assert result.refused_evictions == (
        ("gpu-a", "ml/p", "Cannot evict pod as it would violate the pod's disruption budget."),
    )
    assert [c.kind for c in result.not_applied] == [Kind.EVICT]
    refused = [f for f in result.report.findings if f.code == "MP537"]  # type: ignore[union-attr]
    assert refused and refused[0].pods == ("ml/p",) and refused[0].node == "gpu-a"
    assert result.to_json()["refusedEvictions"][0]["pod"] == "ml/p"


def test_a_cordon_lifted_mid_drain_is_put_back_without_restarting_the_clock() -> None:
    cordon, evict, _ = _node_changes(_plan("drain-uncordoned-midway"))
    assert cordon.patch is not None and cordon.patch["spec"] == {"unschedulable": True}
    assert cordon.patch["metadata"]["annotations"][DRAIN_STARTED_ANNOTATION] == "2026-12-02T09:58:00Z"
    assert evict.kind is Kind.EVICT


def _signals(case: str, applied_kinds: tuple[Kind, ...] = ()) -> tuple[Any, Any]:
    from reconciler.controller import signals
    from reconciler.logic.drift import drift

    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read(case, "observed.yaml"), desired)
    analysis = drift.analyze(desired, observed, now=NOW)
    the_plan = planner.plan(desired, observed, now=NOW, rendered=analysis.rendered)
    report = drift.build_report(desired, observed, analysis, the_plan)
    applied = [c for c in the_plan.writes if c.kind in applied_kinds]
    return signals.build(report=report, plan=the_plan, applied=applied, errors=[], cluster_policy="cluster-policy")


def test_events_and_marks_name_the_evicted_and_the_blocking_pods() -> None:
    events, marks = _signals("guard-allow-disruption", (Kind.CORDON, Kind.EVICT))
    (draining,) = [e for e in events if e.reason.value == "Draining"]
    assert draining.regarding.name == "gpu-a" and "ml/reranker-0" in draining.message and not draining.warning
    assert {m.node: m.state.value for m in marks} == {"gpu-a": "Applying"}
    events, marks = _signals("drain-timed-out")
    (blocked,) = [e for e in events if e.reason.value == "DrainBlocked"]
    assert blocked.warning and "MP538" in blocked.message
    assert "ml/reranker-0" in blocked.message and "ml/reranker (needs 1 healthy pods" in blocked.message
    assert {m.node: m.state.value for m in marks} == {"gpu-a": "Held"}
    events, _ = _signals("drain-undrainable")
    (blocked,) = [e for e in events if e.reason.value == "DrainBlocked"]
    assert "ml/notebook: declares no controller" in blocked.message
