"""NVIDIA's DRA driver installed by its own Helm chart, without the GPU Operator (issue 27 item 2, last signal).

The chart's kubelet-plugin DaemonSet carries the driver's feature gates in the `gpus` container's FEATURE_GATES env
(reconciler/twin/dra.py `kubelet_plugin_daemonset`). With DynamicMIG on, the driver lays out the nodes its pods run
on as soon as its plugin starts: migplan must leave such a node alone (MP570) before any ResourceSlice is published.
With the gate off migplan writes; with a gate string the driver itself would refuse, migplan reports MP579 and
writes nothing there.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers.draintwin import GPU0, GPU1_CUT, GPU1_RECUT, NODE, write_inventory

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.drift import NodeStatus
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Kind
from reconciler.twin.cluster import ClusterTwin

T0 = datetime(2026, 12, 2, 10, tzinfo=UTC)
DAEMONSET = "nvidia-dra-driver-gpu/dra-driver-nvidia-gpu-kubelet-plugin"


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(write_inventory(tmp_path / "before", [GPU0, GPU1_CUT]), tls=False) as tw:
        tw.settle()
        yield tw


def _cycle(twin: ClusterTwin, tmp_path: Path, mode: str | None = None) -> CycleResult:
    desired, diagnostics = load_desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], mode=mode))
    assert desired is not None, [str(d) for d in diagnostics]
    assert isinstance(desired, DesiredState)
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=T0)
    finally:
        cluster.close()


def _node_written(twin: ClusterTwin, result: CycleResult) -> list[Kind]:
    return [c.kind for c in result.applied if c.subject == f"node/{NODE}"]


@pytest.mark.parametrize("mode", [None, "agent"])
def test_a_driver_daemonset_with_dynamic_mig_leaves_its_node_alone_before_any_slice(
    twin: ClusterTwin, tmp_path: Path, mode: str | None
) -> None:
    twin.install_dra_driver_chart([NODE], "DynamicMIG=true,")  # the chart's rendering; nothing published yet
    assert not twin.store.list("resourceslices.resource.k8s.io")
    meta_before = twin.store.get("nodes", NODE)["metadata"]
    result = _cycle(twin, tmp_path, mode)
    assert not result.errors
    assert _node_written(twin, result) == []
    meta = twin.store.get("nodes", NODE)["metadata"]
    assert meta.get("labels") == meta_before.get("labels") and meta.get("annotations") == meta_before.get("annotations")
    assert result.plan is not None
    (held,) = [c for c in result.plan.changes if c.subject == f"node/{NODE}"]
    assert held.action is Action.SKIP and held.code == "MP570"
    assert result.report is not None
    (node,) = [n for n in result.report.nodes if n.name == NODE]
    (conflict,) = [f for f in node.findings if f.code == "MP570"]
    assert f"DaemonSet {DAEMONSET}" in conflict.message
    assert node.status is NodeStatus.ERROR


def test_a_driver_daemonset_on_other_nodes_does_not_hold_this_one(twin: ClusterTwin, tmp_path: Path) -> None:
    twin.install_dra_driver_chart([], "DynamicMIG=true,")  # its nodeSelector matches no node: no pod
    assert _node_written(twin, _cycle(twin, tmp_path)) == [Kind.NODE_MIG_CONFIG]


@pytest.mark.parametrize("gates", ["DynamicMIG=false,", "MPSSupport=true,", None])
def test_a_driver_daemonset_without_dynamic_mig_lets_migplan_write(
    twin: ClusterTwin, tmp_path: Path, gates: str | None
) -> None:
    twin.install_dra_driver_chart([NODE], gates)
    result = _cycle(twin, tmp_path)
    assert not result.errors
    assert _node_written(twin, result) == [Kind.NODE_MIG_CONFIG]
    assert result.report is not None
    assert not [f for n in result.report.nodes for f in n.findings if f.code in ("MP570", "MP579")]


@pytest.mark.parametrize("gates", ["DynamicMIG=yes", "DynamicMIG", "DynamicMIG=true,Oops"])
def test_a_driver_daemonset_whose_gates_cannot_be_read_is_named_and_nothing_is_written(
    twin: ClusterTwin, tmp_path: Path, gates: str
) -> None:
    twin.install_dra_driver_chart([NODE], gates)
    result = _cycle(twin, tmp_path)
    assert not result.errors
    assert _node_written(twin, result) == []
    assert result.report is not None
    (unread,) = [f for f in result.report.findings if f.code == "MP579"]
    assert DAEMONSET in unread.message and "FEATURE_GATES" in unread.message
