"""Drain, not only cordon (issue 11 item 5), end to end on the cluster twin.

allowDisruption: true and a re-cut of GPU 1 held by a pod: migplan cordons the node, evicts the pod through the
Eviction API (the twin's pods/eviction, PodDisruptionBudgets honoured), relabels once the pod is gone and
uncordons after mig-manager's success; Events and the report name the pod. With a PodDisruptionBudget allowing
no disruption the change is held, the PDB named, nothing deleted, and past drainTimeoutSeconds still nothing is
forced.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.draintwin import GPU0, GPU1_CUT, GPU1_RECUT, pod_disruption_budget, replicaset_pod, write_inventory
from kubernetes import client

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.events import KubeSignals
from reconciler.commands.reconcile import load_desired
from reconciler.controller import signals
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Kind
from reconciler.twin.cluster import ClusterTwin

T0 = datetime(2026, 12, 2, 10, tzinfo=UTC)


def _inventory(root: Path, gpus: list[dict[str, Any]]) -> Path:
    return write_inventory(root, gpus)


def _desired(root: Path) -> DesiredState:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


_pod = replicaset_pod
_pdb = pod_disruption_budget


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(_inventory(tmp_path / "before", [GPU0, GPU1_CUT]), tls=False) as tw:
        tw.settle()
        _pod(tw, "emb-0", {"nvidia.com/mig-2g.35gb": "1"})  # GPU 1's only 2g.35gb: the re-cut destroys it
        _pod(tw, "emb-1", {})  # the application's other replica, holding no GPU
        tw.settle()
        assert tw.store.get("pods", "emb-0", "default")["status"]["phase"] == "Running"
        yield tw


def _cycle(twin: ClusterTwin, desired: DesiredState, minutes: float) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=T0 + timedelta(minutes=minutes))
    finally:
        cluster.close()


def _events(twin: ClusterTwin, result: CycleResult) -> list[dict[str, Any]]:
    """What the controller loop writes after the cycle: Events about the node (controller/loop.py)."""
    assert result.report is not None
    intents, _ = signals.build(
        report=result.report,
        plan=result.plan,
        applied=result.applied,
        errors=[str(e) for e in result.errors],
        cluster_policy="cluster-policy",
    )
    cfg = client.Configuration()
    cfg.host = twin.url
    cfg.api_key = {"authorization": f"Bearer {twin.api.token}"}
    with client.ApiClient(cfg) as api:
        KubeSignals(client.CoreV1Api(api), instance="test").emit(intents)
    return [e for e in twin.store.list("events", "default") if e["involvedObject"]["name"] == "n"]


def _node(twin: ClusterTwin) -> dict[str, Any]:
    node: dict[str, Any] = twin.store.get("nodes", "n")
    return node


def test_drain_evicts_through_the_pdb_applies_and_uncordons(twin: ClusterTwin, tmp_path: Path) -> None:
    _pdb(twin, min_available=1)  # two healthy pods: one disruption allowed
    assert twin.store.get("poddisruptionbudgets.policy", "emb", "default")["status"]["disruptionsAllowed"] == 1
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT]))

    first = _cycle(twin, desired, 0)
    assert not first.errors and first.refused_evictions == ()
    node_changes = [(c.kind, c.subject) for c in first.applied if c.kind in (Kind.CORDON, Kind.EVICT)]
    assert node_changes == [(Kind.CORDON, "node/n"), (Kind.EVICT, "pod/default/emb-0")]
    (held,) = [c for c in first.plan.changes if c.kind is Kind.NODE_MIG_CONFIG]  # type: ignore[union-attr]
    assert held.action is Action.SKIP and held.blocked_by == ("default/emb-0",)  # the relabel waits
    draining = next(f for f in first.report.findings if f.code == "MP536")  # type: ignore[union-attr]
    assert draining.pods == ("default/emb-0",) and "evicted this cycle: default/emb-0" in draining.message
    events = _events(twin, first)
    assert any(e["reason"] == "Draining" and "default/emb-0" in e["message"] for e in events), events
    assert _node(twin)["spec"]["unschedulable"] is True
    left = {p["metadata"]["name"]: p for p in twin.store.list("pods", "default")}
    assert "emb-0" not in left or left["emb-0"]["metadata"].get("deletionTimestamp")  # evicted (graceful)
    assert twin.store.get("pods", "emb-1", "default")["status"]["phase"] == "Running"  # not on what is destroyed

    twin.settle()  # the twin's kubelet finishes the termination
    assert [
        p["metadata"]["name"] for p in twin.store.list("pods", "default") if p["metadata"]["name"].startswith("emb")
    ] == ["emb-1"]
    second = _cycle(twin, desired, 1)
    assert [c.kind for c in second.applied if c.subject == "node/n"] == [Kind.NODE_MIG_CONFIG]
    annotations = _node(twin)["metadata"].get("annotations") or {}
    assert "migplan.io/drain-started-at" not in annotations  # the relabel ends the drain
    assert annotations.get("migplan.io/cordoned") == "true"  # still cordoned until mig-manager succeeds
    twin.settle()
    result = second
    for minute in range(2, 6):
        result = _cycle(twin, desired, minute)
        twin.settle()
        if result.converged:
            break
    assert result.converged, [str(f) for f in result.report.findings]  # type: ignore[union-attr]
    node = _node(twin)
    assert not node["spec"].get("unschedulable")
    assert not any(k.startswith("migplan.io/cordoned") or "drain" in k for k in node["metadata"].get("annotations", {}))
    assert node["status"]["allocatable"]["nvidia.com/mig-1g.18gb"] == "7"


def test_a_pdb_allowing_no_disruption_holds_the_change_and_nothing_is_forced(twin: ClusterTwin, tmp_path: Path) -> None:
    _pdb(twin, min_available=2)  # two healthy pods, two needed: no disruption allowed
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT]))
    label = _node(twin)["metadata"]["labels"]["nvidia.com/mig.config"]
    twin.reset_counts()

    first = _cycle(twin, desired, 0)
    assert not first.errors  # a refused eviction is not a failed cycle: it is asked again next cycle
    ((node, pod, message),) = first.refused_evictions
    assert (node, pod) == ("n", "default/emb-0")
    assert "Cannot evict pod as it would violate the pod's disruption budget." in message
    assert "The disruption budget emb needs 2 healthy pods and has 2 currently" in message
    codes = {f.code: f for f in first.report.findings}  # type: ignore[union-attr]
    assert codes["MP537"].pods == ("default/emb-0",)
    pdb_finding = next(
        f
        for f in first.report.findings  # type: ignore[union-attr]
        if f.code == "MP537" and "PodDisruptionBudgets allowing no disruption" in f.message
    )
    assert "default/emb (needs 2 healthy pods and has 2)" in pdb_finding.message
    events = _events(twin, first)
    blocked = [e for e in events if e["reason"] == "DrainBlocked"]
    assert blocked and "default/emb-0" in blocked[0]["message"] and blocked[0]["type"] == "Warning"
    twin.settle()
    assert not twin.store.get("pods", "emb-0", "default")["metadata"].get("deletionTimestamp")

    for minute in (3, 6):  # asked again each cycle, refused each time
        assert _cycle(twin, desired, minute).refused_evictions
        twin.settle()
    late = _cycle(twin, desired, 11)  # drainTimeoutSeconds 600 are over
    assert late.refused_evictions == () and not [c for c in late.applied if c.kind is Kind.EVICT]
    (held,) = [c for c in late.plan.changes if c.kind is Kind.NODE_MIG_CONFIG]  # type: ignore[union-attr]
    assert held.action is Action.SKIP and held.code == "MP538" and held.pdbs == ("default/emb",)
    timed_out = next(f for f in late.report.findings if f.code == "MP538")  # type: ignore[union-attr]
    assert timed_out.pods == ("default/emb-0",) and "default/emb" in timed_out.message
    assert "nothing is deleted by force" in timed_out.message
    twin.settle()
    pods = {p["metadata"]["name"]: p for p in twin.store.list("pods", "default")}
    assert not pods["emb-0"]["metadata"].get("deletionTimestamp") and "emb-1" in pods
    assert _node(twin)["metadata"]["labels"]["nvidia.com/mig.config"] == label  # never relabelled
    counts = twin.request_counts()
    assert not [k for k in counts if k[0] == "DELETE" and k[1].startswith("pods")]  # never a delete
    assert counts.get(("POST", "pods/eviction", "create"), 0) == 2 * 3  # dry run + real, three cycles


def test_an_evicted_deployment_pod_is_replaced_and_waits_for_the_uncordon(twin: ClusterTwin, tmp_path: Path) -> None:
    """The replacement of an evicted pod (the twin's ReplicaSet-controller stand-in) is created at once, stays
    Pending while the only node is cordoned, and runs on the re-cut GPU once migplan uncordons."""
    res = {"nvidia.com/mig-1g.18gb": "1"}
    template = {"name": "m", "image": "registry.example/web:1", "resources": {"requests": res, "limits": res}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [template]}},
        },
    }
    created = twin.store.create("deployments.apps", deployment, "default")
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": created["metadata"]["uid"]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "labels": {"app": "web"}, "ownerReferences": [{**owner, "controller": True}]},
        "spec": {"nodeName": "n", "containers": [template]},
    }
    twin.store.create("pods", pod, "default")
    twin.settle()
    desired = _desired(_inventory(tmp_path / "after", [GPU0, GPU1_RECUT]))

    first = _cycle(twin, desired, 0)
    evicted = sorted(c.subject for c in first.applied if c.kind is Kind.EVICT)
    assert evicted == ["pod/default/emb-0", "pod/default/web-0"]
    twin.settle()
    web = [p for p in twin.store.list("pods", "default") if p["metadata"]["name"].startswith("web-")]
    (replacement,) = web
    assert replacement["metadata"]["name"] != "web-0" and not replacement["spec"].get("nodeName")
    (scheduled,) = [c for c in replacement["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled["status"] == "False" and "node(s) were unschedulable" in scheduled["message"]

    result = first
    for minute in range(1, 8):
        result = _cycle(twin, desired, minute)
        twin.settle()
        if result.converged:
            break
    assert result.converged, [str(f) for f in result.report.findings]  # type: ignore[union-attr]
    running = twin.store.get("pods", replacement["metadata"]["name"], "default")
    assert running["spec"]["nodeName"] == "n" and running["status"]["phase"] == "Running"
