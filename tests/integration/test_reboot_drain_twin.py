"""Reboots are disruption (issue 26 item 2), end to end on the cluster twin.

WITH_REBOOT=true in the ClusterPolicy's spec.migManager.env and a change that turns MIG off on GPU 1 (a MIG mode
flip: mig-manager reboots the node if the mode step fails, mig-parted pkg/mig/reconfigure/reconfigure.go `Run`). No
pod of node `n` holds a GPU; two pods of an application run there. Without allowDisruption the guard holds the change
naming both (MP568), and `migplan plan`'s comment, read from the report the cycle committed, says "may reboot: 2 pods
end". With allowDisruption the drain evicts both through the Eviction API, the PodDisruptionBudget honoured (the
second eviction is refused until the budget allows it), and the label is written only once both are gone. The
operator's DaemonSet pods on the node are never evicted.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.draintwin import GPU0, GPU1_CUT, NODE, pod_disruption_budget, replicaset_pod, write_inventory

from reconciler.adapters.git.reportbranch import parse_report
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.controller import signals
from reconciler.engine import CycleResult, reconcile_once
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.reports.reports import render_drift_yaml
from reconciler.logic.review.mrcomment import PlanSection, render_comment
from reconciler.logic.review.reportoccupancy import observed_from_report
from reconciler.logic.review.revdiff import diff_states, disruptions
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Kind
from reconciler.model.signals import Reason
from reconciler.twin.cluster import ClusterTwin

T0 = datetime(2026, 12, 3, 10, tzinfo=UTC)
GPU1_OFF = {"index": 1, "model": "H200-141GB", "mig": {"enabled": False}}
APP = ("default/emb-0", "default/emb-1")


def _desired(root: Path, gpus: list[dict[str, Any]], *, allow: bool) -> DesiredState:
    write_inventory(root, gpus)
    cluster = yaml.safe_load((root / "cluster.yaml").read_text())
    cluster["spec"]["apply"]["allowDisruption"] = allow
    (root / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    before = write_inventory(tmp_path / "before", [GPU0, GPU1_CUT])
    with ClusterTwin.from_inventory(before, tls=False) as tw:
        env = [{"name": "WITH_REBOOT", "value": "true"}]
        tw.store.patch("clusterpolicies.nvidia.com", "cluster-policy", {"spec": {"migManager": {"env": env}}})
        tw.settle()  # the operator rolls mig-manager with the new env
        replicaset_pod(tw, "emb-0", {})
        replicaset_pod(tw, "emb-1", {})
        tw.settle()
        assert all(tw.store.get("pods", f"emb-{i}", "default")["status"]["phase"] == "Running" for i in (0, 1))
        yield tw


def _cycle(twin: ClusterTwin, desired: DesiredState, minutes: float) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=T0 + timedelta(minutes=minutes))
    finally:
        cluster.close()


def _label(twin: ClusterTwin) -> str:
    return str(twin.store.get("nodes", NODE)["metadata"]["labels"]["nvidia.com/mig.config"])


def _relabel(result: CycleResult) -> Any:
    assert result.plan is not None
    (change,) = [c for c in result.plan.changes if c.kind is Kind.NODE_MIG_CONFIG]
    return change


def test_without_allow_disruption_the_guard_holds_naming_every_pod_a_reboot_ends(
    twin: ClusterTwin, tmp_path: Path
) -> None:
    base = _desired(tmp_path / "base", [GPU0, GPU1_CUT], allow=False)
    target = _desired(tmp_path / "target", [GPU0, GPU1_OFF], allow=False)
    label = _label(twin)

    result = _cycle(twin, target, 0)
    assert not result.errors
    held = _relabel(result)
    assert held.action is Action.SKIP and held.code == "MP568" and held.blocked_by == APP
    assert "may reboot the node: 2 pods end (default/emb-0, default/emb-1)" in held.reason
    assert result.report is not None
    (finding,) = [f for f in result.report.findings if f.code == "MP568"]
    assert finding.pods == APP and finding.node == NODE
    intents, _ = signals.build(
        report=result.report, plan=result.plan, applied=result.applied, errors=[], cluster_policy="cluster-policy"
    )
    (event,) = [i for i in intents if i.reason is Reason.CHANGE_HELD]
    assert "may reboot the node: 2 pods end" in event.message and event.warning
    assert _label(twin) == label and not twin.store.get("nodes", NODE)["spec"].get("unschedulable")
    assert all(not twin.store.get("pods", p.split("/")[1], "default")["metadata"].get("deletionTimestamp") for p in APP)

    # The merge request's plan, from the report the cycle commits (CI has no cluster): "may reboot: 2 pods end".
    document = parse_report(render_drift_yaml(result.report))
    assert not isinstance(document, str)
    assert document["migManager"] == {"withReboot": True, "shutdownHostGpuClients": False}
    diff = diff_states(base, target)
    section = PlanSection(
        cluster="t", root="", base="base", target="target",
        validation=validate_inventory({"cluster.yaml": (tmp_path / "target" / "cluster.yaml").read_bytes()}),
        diff=diff, disrupts=disruptions(diff, base, target, observed_from_report(document)), pods_from="the report",
    )  # fmt: skip
    comment = render_comment([section])
    assert "if the MIG mode change fails): 2 pods end (default/emb-0, default/emb-1)" in comment
    assert "**reboots the node**, and **2** pod(s) end there" in comment


def test_with_allow_disruption_the_drain_evicts_them_all_through_the_budget_before_the_label(
    twin: ClusterTwin, tmp_path: Path
) -> None:
    pod_disruption_budget(twin, min_available=1)  # two healthy pods: one disruption allowed
    twin.settle()
    target = _desired(tmp_path / "target", [GPU0, GPU1_OFF], allow=True)
    label = _label(twin)
    assert twin.store.list("pods", "gpu-operator")  # the operator's DaemonSet pods run on the node too

    first = _cycle(twin, target, 0)
    evicted = sorted(c.subject for c in first.applied if c.kind is Kind.EVICT)
    refused = [pod for _, pod, _ in first.refused_evictions]
    # Both were asked; the API server let one go and refused the other (429: the budget allows one disruption).
    assert len(evicted) + len(refused) == 2 and len(refused) == 1, (evicted, first.refused_evictions)
    assert twin.store.get("nodes", NODE)["spec"]["unschedulable"] is True
    assert _relabel(first).action is Action.SKIP and _label(twin) == label  # not before they are gone
    twin.settle()

    second = _cycle(twin, target, 1)  # the budget still allows nothing: refused again, nothing forced
    assert [pod for _, pod, _ in second.refused_evictions] == refused and _label(twin) == label
    twin.store.patch("poddisruptionbudgets.policy", "emb", {"spec": {"minAvailable": 0}}, "default")
    twin.settle()  # the application's owner relaxes the budget (its replica runs elsewhere)

    third = _cycle(twin, target, 2)
    assert [c.subject for c in third.applied if c.kind is Kind.EVICT] == [f"pod/{refused[0]}"]
    assert _label(twin) == label
    twin.settle()
    assert not [p for p in twin.store.list("pods", "default") if p["metadata"]["name"].startswith("emb")]

    fourth = _cycle(twin, target, 3)
    assert [c.kind for c in fourth.applied if c.subject == f"node/{NODE}"] == [Kind.NODE_MIG_CONFIG]
    assert _label(twin) != label
    every = [c.subject for r in (first, second, third, fourth) for c in r.applied if c.kind is Kind.EVICT]
    assert sorted(every) == [f"pod/{p}" for p in APP]  # the operator's DaemonSet pods were never evicted
