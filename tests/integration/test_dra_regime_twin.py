"""Who writes a DRA node's MIG layout, end to end on the cluster twin (issue 27 item 2).

NVIDIA's DRA driver twin publishes node `n`'s ResourceSlices when its plugin starts. Under DynamicMIG it owns the
node's layout (it destroyed the partitions it did not create): the controller, handed a plan that re-cuts GPU 1,
writes nothing on the node and the report names both writers (MP570), in gpu-operator and in agent mode. Under
static MIG the driver publishes the partitions that exist, and drift is the plan against those devices name for
name (MP572/MP573), not against nvidia.com/mig-* counts a DRA node does not advertise.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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


def _desired(root: Path) -> DesiredState:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(write_inventory(tmp_path / "before", [GPU0, GPU1_CUT]), tls=False) as tw:
        tw.settle()
        yield tw


def _cycle(twin: ClusterTwin, desired: DesiredState) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=T0)
    finally:
        cluster.close()


def _node_report(result: CycleResult) -> Any:
    assert result.report is not None
    (node,) = [n for n in result.report.nodes if n.name == NODE]
    return node


def _gpu1(twin: ClusterTwin) -> list[tuple[str, int]]:
    return sorted((gi.profile.name, gi.start) for gi in twin.gpus(NODE)[1].gpu_instances.values())


@pytest.mark.parametrize("mode", [None, "agent"])
def test_a_dynamic_mig_node_is_left_alone_with_a_finding_naming_both_writers(
    twin: ClusterTwin, tmp_path: Path, mode: str | None
) -> None:
    twin.dra_driver(NODE, dynamic_mig=True).start_plugin()
    assert _gpu1(twin) == []  # the driver destroyed what it did not create
    labels_before = dict(twin.store.get("nodes", NODE)["metadata"].get("labels") or {})
    annotations_before = dict(twin.store.get("nodes", NODE)["metadata"].get("annotations") or {})
    desired = _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], mode=mode))
    result = _cycle(twin, desired)
    assert not result.errors
    assert not [c for c in result.applied if c.subject == f"node/{NODE}"]  # nothing written to the node
    meta = twin.store.get("nodes", NODE)["metadata"]
    assert (meta.get("labels") or {}) == labels_before and (meta.get("annotations") or {}) == annotations_before
    assert result.plan is not None
    (held,) = [c for c in result.plan.changes if c.subject == f"node/{NODE}"]
    assert held.action is Action.SKIP and held.code == "MP570" and "DynamicMIG" in held.reason
    report = _node_report(result)
    (conflict,) = [f for f in report.findings if f.code == "MP570"]
    assert "NVIDIA's DRA driver (DynamicMIG)" in conflict.message and "nodes/n.yaml" in conflict.message
    assert report.status is NodeStatus.ERROR
    assert not [f for f in report.findings if f.code in ("MP501", "MP502", "MP503")]  # no count drift on DRA
    assert _gpu1(twin) == []  # and nothing cut behind the driver's back


def test_without_the_driver_the_same_plan_is_written(twin: ClusterTwin, tmp_path: Path) -> None:
    desired = _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT]))
    result = _cycle(twin, desired)
    assert [c.kind for c in result.applied if c.subject == f"node/{NODE}"] == [Kind.NODE_MIG_CONFIG]


def test_static_dra_drift_is_name_for_name(twin: ClusterTwin, tmp_path: Path) -> None:
    driver = twin.dra_driver(NODE)
    driver.start_plugin()
    in_sync = _node_report(_cycle(twin, _desired(write_inventory(tmp_path / "same", [GPU0, GPU1_CUT]))))
    assert not [f for f in in_sync.findings if f.code.startswith("MP57")], in_sync.findings
    # The plan re-cuts GPU 1 (report-only view of drift: what the driver publishes is the old cut).
    recut = _desired(write_inventory(tmp_path / "recut", [GPU0, GPU1_RECUT], mode="report-only"))
    report = _node_report(_cycle(twin, recut))
    missing = sorted(f.message for f in report.findings if f.code == "MP572")
    extra = sorted(f.message for f in report.findings if f.code == "MP573")
    assert len(missing) == 5 and all("1g.18gb@" in m for m in missing), missing  # 7 x 1g planned, 2 published
    assert [m.split("publishes ")[1].split(",")[0] for m in extra] == sorted(
        f"gpu-1-mig-{p.replace('.', '')}-{gi.profile.id}-{gi.start}"
        for gi in twin.gpus(NODE)[1].gpu_instances.values()
        if (p := gi.profile.name) != "1g.18gb"
    )


@pytest.mark.parametrize("mode", [None, "agent"])
def test_a_gpucluster_with_dynamic_mig_leaves_every_gpu_node_alone_before_any_slice(
    twin: ClusterTwin, tmp_path: Path, mode: str | None
) -> None:
    twin.install_gpu_cluster(dynamic_mig=True)  # the driver's plugin has published nothing yet
    result = _cycle(twin, _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], mode=mode)))
    assert not result.errors and not [c for c in result.applied if c.subject == f"node/{NODE}"]
    (conflict,) = [f for f in _node_report(result).findings if f.code == "MP570"]
    assert "GPUCluster gpu-cluster" in conflict.message


def test_a_gpucluster_without_dynamic_mig_is_no_other_writer(twin: ClusterTwin, tmp_path: Path) -> None:
    """No other writer: migplan lays the node out, through its node agent (issue 30: under a GPUCluster there is no
    mig-manager to relabel for), and writes no ClusterPolicy."""
    twin.install_gpu_cluster(dynamic_mig=False)
    result = _cycle(twin, _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT])))
    assert [c.kind for c in result.applied if c.subject == f"node/{NODE}"] == [Kind.AGENT_LAYOUT]
    assert not [c for c in result.applied if c.kind in (Kind.CLUSTER_POLICY, Kind.MIG_CONFIG_MAP)]


def test_a_gpucluster_migplan_cannot_read_is_named_and_nothing_is_written(twin: ClusterTwin, tmp_path: Path) -> None:
    twin.install_gpu_cluster(dynamic_mig=False)
    twin.store.patch(
        "gpuclusters.nvidia.com", "gpu-cluster", {"spec": {"draDriver": {"featureGates": {"DynamicMIG": "yes"}}}}
    )
    result = _cycle(twin, _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT])))
    assert not result.errors and not [c for c in result.applied if c.subject == f"node/{NODE}"]
    assert result.report is not None
    (unread,) = [f for f in result.report.findings if f.code == "MP571"]
    assert "DynamicMIG is not true or false" in unread.message
