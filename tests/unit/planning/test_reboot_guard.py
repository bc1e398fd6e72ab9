"""A change mig-manager may reboot the node for counts every pod a reboot ends (issue 26 item 2): with WITH_REBOOT in
spec.migManager.env, a failed MIG mode step reboots the node (mig-parted pkg/mig/reconfigure/reconfigure.go `Run`).
The guard holds such a change while any such pod runs (MP568, naming how many), and with allowDisruption the drain
evicts them all (PodDisruptionBudgets named, bare pods refused), not only the GPU holders."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from helpers import planning as fixtures

from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import (
    REBOOT_NAMES_CAP,
    NodePods,
    ObservedPdb,
    ObservedPod,
    ObservedState,
    OwnerRef,
)
from reconciler.model.plans import Action, Change, Kind

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
REBOOT = {"WITH_REBOOT": "true"}
MODE_FLIP = "mode-flip-no-gpu-pod"


REPLICA_SET = OwnerRef("ReplicaSet", "web-1")


def _pod(ns: str, name: str, *, owner: OwnerRef | None = REPLICA_SET) -> ObservedPod:
    return ObservedPod(namespace=ns, name=name, node="gpu-a", phase="Running", owner=owner, labels={"app": name})


def _states(
    case: str,
    *,
    env: dict[str, str] | None,
    pods: tuple[ObservedPod, ...],
    count: int | None = None,
    allow: bool = False,
) -> tuple[DesiredState, ObservedState]:
    # MODE_FLIP: guard-mode-flip-other-gpu (GPU 1 goes from MIG to MIG disabled) without its GPU pod, so only the
    # pods a reboot ends can be in the way; the config counts as propagated (another test's subject).
    source = "guard-mode-flip-other-gpu" if case == MODE_FLIP else case
    desired = fixtures.desired_state(fixtures.read(source, "desired.yaml"))
    settings = replace(desired.cluster.apply, allow_disruption=allow, config_propagation_seconds=0)
    desired = replace(desired, cluster=replace(desired.cluster, apply=settings))
    observed = fixtures.observed_state(fixtures.read(source, "observed.yaml") or {}, desired)
    assert observed.cluster_policy is not None
    if case == MODE_FLIP:
        observed = replace(observed, pods=())
    bare = tuple(p for p in pods if p.owner is None)
    named = tuple(sorted(pods, key=lambda p: p.key))[:REBOOT_NAMES_CAP]
    ends = NodePods(
        count=len(pods) if count is None else count,
        names=tuple(p.key for p in named),
        unreplicated_names=tuple(p.key for p in bare),
        unreplicated_count=len(bare),
        details=lambda: (named, bare),
    )
    observed = replace(
        observed,
        cluster_policy=replace(observed.cluster_policy, mig_manager_env=env or {}),
        node_pods={"gpu-a": ends} if pods else {},
    )
    return desired, observed


def _node_changes(desired: DesiredState, observed: ObservedState) -> list[Change]:
    plan = planner.plan(desired, observed, now=NOW)
    return [c for c in plan.changes if c.subject == "node/gpu-a" or c.kind is Kind.EVICT]


WEB = (_pod("web", "api-0"), _pod("web", "api-1"), _pod("batch", "etl-0"))


def _one_relabel(changes: list[Change]) -> Change:
    (change,) = [c for c in changes if c.kind is Kind.NODE_MIG_CONFIG]
    return change


def test_with_reboot_a_mode_flip_is_held_for_every_pod_the_reboot_ends() -> None:
    # No pod of gpu-a holds a GPU (the case's pods are elsewhere); three web pods run there.
    desired, observed = _states(MODE_FLIP, env=REBOOT, pods=WEB)
    change = _one_relabel(_node_changes(desired, observed))
    assert change.action is Action.SKIP and change.code == "MP568"
    assert "may reboot the node: 3 pods end (batch/etl-0, web/api-0, web/api-1)" in change.reason
    assert change.blocked_by == ("batch/etl-0", "web/api-0", "web/api-1")
    report = drift.blocked_findings(planner.plan(desired, observed, now=NOW))
    (held,) = [f for f in report if f.code == "MP568"]
    assert "3 pods end" in held.message and held.pods == change.blocked_by


def test_without_with_reboot_the_same_pods_are_not_in_the_way() -> None:
    desired, observed = _states(MODE_FLIP, env=None, pods=WEB)
    change = _one_relabel(_node_changes(desired, observed))
    assert change.action is Action.CONFIGURE and not change.blocked_by


def test_with_reboot_false_is_not_a_reboot() -> None:
    desired, observed = _states(MODE_FLIP, env={"WITH_REBOOT": "false"}, pods=WEB)
    assert _one_relabel(_node_changes(desired, observed)).action is Action.CONFIGURE


def test_without_a_mode_flip_the_reboot_pods_are_not_counted() -> None:
    # guard-unaffected-gpu re-cuts a GPU nobody uses; no MIG mode changes, so the mode step cannot fail.
    desired, observed = _states("guard-unaffected-gpu", env=REBOOT, pods=WEB)
    change = _one_relabel(_node_changes(desired, observed))
    assert change.action is Action.CONFIGURE and "WITH_REBOOT" not in change.reason


def test_the_count_is_whole_past_the_named_pods() -> None:
    many = tuple(_pod("web", f"api-{i:03d}") for i in range(REBOOT_NAMES_CAP))
    desired, observed = _states(MODE_FLIP, env=REBOOT, pods=many, count=137)
    change = _one_relabel(_node_changes(desired, observed))
    assert "137 pods end" in change.reason and f"and {137 - REBOOT_NAMES_CAP} more" in change.reason
    assert len(change.blocked_by) == REBOOT_NAMES_CAP


def test_allow_disruption_drains_every_pod_the_reboot_ends_before_the_label() -> None:
    desired, observed = _states(MODE_FLIP, env=REBOOT, pods=WEB, allow=True)
    changes = _node_changes(desired, observed)
    evicted = sorted(c.subject for c in changes if c.kind is Kind.EVICT)
    assert evicted == ["pod/batch/etl-0", "pod/web/api-0", "pod/web/api-1"]
    assert any(c.kind is Kind.CORDON and c.action is Action.CONFIGURE for c in changes)
    relabel = _one_relabel(changes)
    assert relabel.action is Action.SKIP and "the node may reboot: 3 pods end" in relabel.reason


def test_the_drain_names_a_budget_that_allows_no_disruption() -> None:
    desired, observed = _states(MODE_FLIP, env=REBOOT, pods=WEB, allow=True)
    pdb = ObservedPdb(
        namespace="web",
        name="api-pdb",
        match_labels={"app": "api-0"},
        disruptions_allowed=0,
        desired_healthy=1,
        current_healthy=1,
    )
    changes = _node_changes(desired, replace(observed, pdbs=(pdb,)))
    relabel = _one_relabel(changes)
    assert relabel.code == "MP537" and relabel.pdbs == ("web/api-pdb",)


def test_a_bare_pod_the_reboot_would_end_for_good_refuses_the_drain() -> None:
    pods = (*WEB, _pod("ops", "debug", owner=None))
    desired, observed = _states(MODE_FLIP, env=REBOOT, pods=pods, allow=True)
    changes = _node_changes(desired, observed)
    relabel = _one_relabel(changes)
    assert relabel.code == "MP539" and relabel.blocked_by == ("ops/debug",)
    assert not [c for c in changes if c.kind is Kind.EVICT]


def test_once_the_pods_are_gone_the_label_goes() -> None:
    desired, observed = _states(MODE_FLIP, env=REBOOT, pods=(), allow=True)
    relabel = _one_relabel(_node_changes(desired, observed))
    assert relabel.action is Action.CONFIGURE and "WITH_REBOOT" in relabel.reason
