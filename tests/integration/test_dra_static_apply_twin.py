"""The whole re-cut of a DRA-static node on the cluster twin (issue 30 items 1, 2 and 4).

Node `n` sits on a GPUCluster cluster without DynamicMIG; NVIDIA's DRA driver (its chart's kubelet plugin) publishes
the node's static MIG devices. The merge re-cuts GPU 1 into 7 x 1g.18gb, destroying the 2g.35gb a pod holds through
a ResourceClaim. The controller (apply.mode gpu-operator, the default) holds the layout while the claim is allocated
on it (MP519); once the pod is gone it publishes the layout for migplan's node agent (never mig-manager, never a
ClusterPolicy write); the agent re-cuts through NVML; the controller then records and makes one restart of the
node's DRA kubelet plugin (deletes its pod; the DaemonSet recreates it and the plugin republishes); the slices then
publish exactly the plan's devices, name for name, the node is in sync, and the next cycle writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.drastatictwin import GPU0, GPU1_RECUT, NODE, T0, DraStaticTwin, dra_static_twin
from rbacproxy import Authorizer, RbacProxy

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.engine import CycleResult, reconcile_once
from reconciler.logic.drift.drastatic import RESTART_ANNOTATION
from reconciler.logic.planning.agentplan import MigState
from reconciler.model.drift import NodeStatus
from reconciler.model.inventory import GpuOperatorSettings
from reconciler.model.observed import ObservedState
from reconciler.model.plans import Action, Change, Kind
from reconciler.twin.apiserver.kubeconfig import write_kubeconfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.fixture
def dra(tmp_path: Path) -> Iterator[DraStaticTwin]:
    with dra_static_twin(tmp_path) as scenario:
        yield scenario


def _node_writes(result: CycleResult) -> list[Kind]:
    return [c.kind for c in result.applied if c.subject == f"node/{NODE}"]


def _node_status(result: CycleResult) -> NodeStatus:
    assert result.report is not None
    (node,) = [n for n in result.report.nodes if n.name == NODE]
    return node.status


def test_the_whole_recut_of_a_dra_static_node(dra: DraStaticTwin) -> None:
    device = dra.claim_pod("emb-0", "2g.35gb")
    assert len(device) == 1 and "-mig-2g35gb-" in device[0]
    dra.observe()
    desired = dra.desired("after", [GPU0, GPU1_RECUT])
    before = dra.nvml_devices()
    assert dra.published() == before  # the driver published what NVML shows

    # 1. the guard: the claim's pod holds the 2g.35gb the re-cut destroys: nothing published, nothing restarted
    held = dra.cycle(desired, 0)
    assert not held.errors, held.errors
    assert held.plan is not None
    (publication,) = [c for c in held.plan.changes if c.kind is Kind.AGENT_LAYOUT]
    assert publication.action is Action.SKIP and publication.blocked_by == ("default/emb-0",)
    assert publication.code == "MP519"
    assert _node_writes(held) == [] and dra.nvml_devices() == before

    # 2. the pod is gone: the layout is published for the node agent (no relabel for mig-manager)
    dra.end_claim_pod("emb-0")
    dra.observe()
    published = dra.cycle(desired, 1)
    assert not published.errors, published.errors
    assert _node_writes(published) == [Kind.AGENT_LAYOUT]
    assert "nvidia.com/mig.config" not in str([c.patch for c in published.applied])
    assert published.plan is not None and not [c for c in published.plan.changes if c.kind is Kind.NODE_MIG_CONFIG]

    # 3. nothing to restart before the agent has built it
    waiting = dra.cycle(desired, 2)
    assert Kind.RESTART_DRA_PLUGIN not in _node_writes(waiting)

    # 4. the agent re-cuts through NVML; the plugin has not rescanned: its slices still show the old cut
    assert dra.agent() is MigState.SUCCESS
    after = dra.nvml_devices()
    assert after != before and sum("-mig-1g18gb-" in d for d in after if d.startswith("gpu-1-")) == 7
    assert dra.published() == before

    # 5. the restart: recorded, then the plugin's pod deleted; the DaemonSet's new pod republishes
    (plugin,) = dra.plugin_pods()
    restart = dra.cycle(desired, 3)
    assert _node_status(restart) is not NodeStatus.IN_SYNC  # observed before it: MP572/MP573, not the plan yet
    assert not restart.errors, restart.errors
    assert _node_writes(restart) == [Kind.DRA_PLUGIN_RECORD, Kind.RESTART_DRA_PLUGIN]
    (new_plugin,) = dra.plugin_pods()
    assert new_plugin["metadata"]["uid"] != plugin["metadata"]["uid"]
    record = json.loads(dra.twin.store.get("nodes", NODE)["metadata"]["annotations"][RESTART_ANNOTATION])
    assert record["uid"] == plugin["metadata"]["uid"] and record["revision"] == str(desired.revision)
    assert dra.published() == after  # name for name, as NVML shows the plan

    # 6. converged: the slices publish the plan; the next cycles write nothing, and never restart again
    for minute in (5, 10):
        done = dra.cycle(desired, minute)
        assert not done.errors, done.errors
        assert _node_writes(done) == [] and not done.applied
        assert done.report is not None
        assert _node_status(done) is NodeStatus.IN_SYNC, [(f.code, f.message) for f in done.report.findings]
        assert done.converged, (done.report.cluster_findings, done.plan)
    (same_plugin,) = dra.plugin_pods()
    assert same_plugin["metadata"]["uid"] == new_plugin["metadata"]["uid"]

    # never a ClusterPolicy (nor a mig-parted ConfigMap) written on a GPUCluster cluster
    assert dra.cluster_policy_writes == []
    every = [c for r in (held, published, waiting, restart) for c in r.applied]
    assert not [c for c in every if c.kind in (Kind.CLUSTER_POLICY, Kind.MIG_CONFIG_MAP, Kind.RESTART_DEVICE_PLUGIN)]


class _Died(BaseException):
    """The controller process dying in the middle of a write stage (not an error a cycle could report)."""


class _DiesBeforeTheDelete:
    """The cluster as the controller sees it, until the controller dies just before the plugin pod's delete."""

    def __init__(self, cluster: KubeCluster) -> None:
        self._cluster = cluster

    def observe(self, ops: GpuOperatorSettings) -> ObservedState:
        return self._cluster.observe(ops)

    def apply(self, change: Change, *, dry_run: bool = False) -> None:
        if change.kind is Kind.RESTART_DRA_PLUGIN and not dry_run:
            raise _Died
        self._cluster.apply(change, dry_run=dry_run)


def test_a_controller_that_died_between_the_record_and_the_delete_restarts_the_plugin_once(
    dra: DraStaticTwin,
) -> None:
    """The record is written and the controller dies before the delete: the next cycle deletes that same pod (no
    second record); the cycles after it delete nothing, so the plugin is restarted exactly once."""
    dra.observe()
    desired = dra.desired("after", [GPU0, GPU1_RECUT])
    assert _node_writes(dra.cycle(desired, 0)) == [Kind.AGENT_LAYOUT]
    assert dra.agent() is MigState.SUCCESS
    (plugin,) = dra.plugin_pods()
    cluster = KubeCluster.from_kubeconfig(str(dra.twin.kubeconfig))
    try:
        with pytest.raises(_Died):
            reconcile_once(desired=desired, cluster=_DiesBeforeTheDelete(cluster), now=T0 + timedelta(minutes=1))
    finally:
        cluster.close()
    annotations = dra.twin.store.get("nodes", NODE)["metadata"]["annotations"]
    assert json.loads(annotations[RESTART_ANNOTATION])["uid"] == plugin["metadata"]["uid"]  # recorded
    (still,) = dra.plugin_pods()
    assert still["metadata"]["uid"] == plugin["metadata"]["uid"] and dra.published() != dra.nvml_devices()

    resumed = dra.cycle(desired, 2)
    assert not resumed.errors, resumed.errors
    assert _node_writes(resumed) == [Kind.RESTART_DRA_PLUGIN]  # the delete only: the record stands
    (replaced,) = dra.plugin_pods()
    assert replaced["metadata"]["uid"] != plugin["metadata"]["uid"] and dra.published() == dra.nvml_devices()
    for minute in (3, 4):
        assert _node_writes(dra.cycle(desired, minute)) == []
    (same,) = dra.plugin_pods()
    assert same["metadata"]["uid"] == replaced["metadata"]["uid"]


def test_slices_still_stale_after_the_restart_are_a_finding_with_the_way_out(dra: DraStaticTwin) -> None:
    """A plugin that restarts but does not republish the plan (here: its new pod's plugin never starts): within
    the bounded wait the node is only drifted; past it, MP591 names the pod and the commands; never a second
    restart."""
    dra.observe()
    desired = dra.desired("after", [GPU0, GPU1_RECUT])
    dra.cycle(desired, 0)
    assert dra.agent() is MigState.SUCCESS
    dra.twin.dra_driver(NODE).start_plugin = lambda: []  # type: ignore[method-assign]  # a plugin that publishes nothing
    assert _node_writes(dra.cycle(desired, 1)) == [Kind.DRA_PLUGIN_RECORD, Kind.RESTART_DRA_PLUGIN]
    soon = dra.cycle(desired, 3)
    assert _node_writes(soon) == [] and soon.report is not None
    assert not [f for f in soon.report.findings if f.code == "MP591"]
    late = dra.cycle(desired, 1 + 6)
    assert _node_writes(late) == [] and late.report is not None
    (stale,) = [f for f in late.report.findings if f.code == "MP591"]
    assert stale.node == NODE and "kubectl -n nvidia-dra-driver-gpu" in stale.message
    assert _node_status(late) is NodeStatus.ERROR and not late.converged


def _rbac(*files: Path) -> list[dict[str, Any]]:
    return [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]


@pytest.mark.parametrize("with_component", [True, False])
def test_the_restart_needs_exactly_delete_pods_in_the_drivers_namespace(
    dra: DraStaticTwin, tmp_path: Path, with_component: bool
) -> None:
    """deploy/'s controller RBAC plus components/dra-static lets the restart through (one delete, in the driver's
    namespace); without the component the delete is refused by the dry run, so no write of that cycle is made."""
    docs = _rbac(DEPLOY / "base" / "rbac-controller.yaml")
    if with_component:
        docs += _rbac(DEPLOY / "components" / "dra-static" / "rbac-dra.yaml")
    dra.observe()
    desired = dra.desired("after", [GPU0, GPU1_RECUT])
    dra.cycle(desired, 0)
    assert dra.agent() is MigState.SUCCESS
    (plugin,) = dra.plugin_pods()
    sa = ("migplan", "migplan-controller")
    auth = Authorizer(docs, sa_namespace=sa[0], sa_name=sa[1])
    proxy = RbacProxy(dra.twin.api.port, authorizer=auth, user=f"system:serviceaccount:{sa[0]}:{sa[1]}").start()
    try:
        kc = write_kubeconfig(tmp_path / "kubeconfig", proxy.url, dra.twin.api.token)
        cluster = KubeCluster.from_kubeconfig(str(kc))
        try:
            result = reconcile_once(desired=desired, cluster=cluster, now=T0 + timedelta(minutes=1))
        finally:
            cluster.close()
    finally:
        proxy.stop()
    deletes = {str(a) for a, _dry in proxy.calls if a.verb == "delete"}
    assert deletes == {"delete core/pods in nvidia-dra-driver-gpu"}, deletes
    (after,) = dra.plugin_pods()
    if with_component:
        assert proxy.denied == [] and not result.errors, [str(a) for a in proxy.denied]
        assert after["metadata"]["uid"] != plugin["metadata"]["uid"]
    else:
        assert {str(a) for a in proxy.denied} == {"delete core/pods in nvidia-dra-driver-gpu"}
        assert result.errors and "forbidden" in " ".join(e.message for e in result.errors).lower()
        assert after["metadata"]["uid"] == plugin["metadata"]["uid"]
        real = [str(a) for a, dry in proxy.calls if a.verb in ("create", "patch", "delete") and not dry]
        assert real == [], real  # the dry run stopped the record too


def test_without_a_node_observer_the_claim_alone_holds_the_layout(dra: DraStaticTwin) -> None:
    """No observer on the node: the pod asks for no extended resource, so only its ResourceClaim (allocated the
    2g.35gb the re-cut destroys, reserved for it) names it; the publication is held all the same (MP519)."""
    dra.claim_pod("emb-0", "2g.35gb")
    held = dra.cycle(dra.desired("after", [GPU0, GPU1_RECUT]), 0)
    assert held.plan is not None
    (publication,) = [c for c in held.plan.changes if c.kind is Kind.AGENT_LAYOUT]
    assert publication.action is Action.SKIP and publication.blocked_by == ("default/emb-0",), publication
    assert _node_writes(held) == []
    # a claim on a device the layout keeps (GPU 0's 7g.141gb) holds nothing
    dra.end_claim_pod("emb-0")
    dra.claim_pod("emb-1", "7g.141gb")
    goes = dra.cycle(dra.desired("again", [GPU0, GPU1_RECUT]), 1)
    assert _node_writes(goes) == [Kind.AGENT_LAYOUT]


def test_with_allow_disruption_the_claims_pod_is_drained_before_the_layout_is_published(dra: DraStaticTwin) -> None:
    dra.claim_pod("emb-0", "2g.35gb")
    dra.observe()
    first = dra.cycle(dra.desired("after", [GPU0, GPU1_RECUT], allow_disruption=True), 0)
    assert not first.errors, first.errors
    assert first.plan is not None
    # (the DeviceClasses of the plan's profiles are created in the same cycle: issue 30 item 2)
    assert [(c.kind, c.subject) for c in first.applied if c.kind is not Kind.DEVICE_CLASS] == [
        (Kind.CORDON, f"node/{NODE}"),
        (Kind.EVICT, "pod/default/emb-0"),
    ], [str(c) for c in first.plan.changes if c.subject.endswith(NODE)]
    (publication,) = [c for c in first.plan.changes if c.kind is Kind.AGENT_LAYOUT]
    assert publication.action is Action.SKIP and publication.blocked_by == ("default/emb-0",)
    assert dra.cluster_policy_writes == []
