"""The kube adapter's parse memo across cycles (kubeobserve.ParseMemo): a controller that keeps its KubeCluster
reuses what it parsed of every node and pod whose (uid, resourceVersion) did not change, and that must never
change a verdict. Differential: over a sequence of changes on the cluster twin, a warm adapter (kept across
cycles) and a cold one (new for each cycle) observing the same cluster at the same time give the same result,
and a time-dependent finding (MP508, pending too long) still appears when only the clock moved."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.twinclock import TwinClock

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.inventory import ApplyMode, DesiredState
from reconciler.model.observed import REQUESTED_AT_ANNOTATION
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
CLOCK = TwinClock()


def _report_only() -> DesiredState:
    """The example inventory in report-only mode: no cycle writes, so the warm and the cold adapter see one state."""
    desired, diagnostics = load_desired(INVENTORY)
    assert desired is not None, [str(d) for d in diagnostics]
    apply = dataclasses.replace(desired.cluster.apply, mode=ApplyMode.REPORT_ONLY)
    return dataclasses.replace(desired, cluster=dataclasses.replace(desired.cluster, apply=apply))


@pytest.fixture()
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY, **CLOCK.twin_kwargs()) as tw:
        tw.settle()
        yield tw


def _gpu_pod(name: str, node: str, resource: str) -> dict[str, Any]:
    limits = {resource: "1"}
    container = {"name": "main", "image": "x", "resources": {"limits": limits, "requests": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [container]},
    }


def _cold(twin: ClusterTwin, desired: DesiredState, now: Any) -> CycleResult:
    # As `reconcile --once` builds it: nothing remembered (the warm adapter keeps its memo).
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig), page_size=3, remember_parses=False)
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=now)
    finally:
        cluster.close()


def test_warm_memo_gives_what_a_cold_adapter_gives_over_a_sequence_of_changes(twin: ClusterTwin) -> None:
    desired = _report_only()
    store = twin.store
    nodes = len(store.list("nodes"))
    warm = KubeCluster.from_kubeconfig(str(twin.kubeconfig), page_size=3)

    def pending_since_now() -> None:
        twin.inject("mig-config-pending:gpu-h200-01")
        stamp = CLOCK.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        store.patch("nodes", "gpu-h200-01", {"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: stamp}}})

    resource = "nvidia.com/mig-1g.18gb"
    steps: list[tuple[str, Callable[[], None], int | None]] = [
        ("nothing changed", lambda: None, nodes),
        (
            "a label on one node",
            lambda: store.patch("nodes", "gpu-h200-02", {"metadata": {"labels": {"x": "1"}}}),
            nodes - 1,
        ),
        ("GPU 1 recut by hand", lambda: twin.inject("gpu-recut:gpu-h200-02:1"), None),
        ("a GPU pod starts", lambda: store.create("pods", _gpu_pod("p1", "gpu-h200-01", resource), "default"), nodes),
        ("the pod goes", lambda: store.delete("pods", "p1", "default", grace_period_seconds=0), nodes),
        ("pending since now", pending_since_now, None),
        ("nothing changed", lambda: None, nodes),
    ]
    try:
        reconcile_once(desired=desired, cluster=warm, now=CLOCK.cycle_now())  # fills the memo
        for what, change, node_hits in steps:
            change()
            twin.settle()
            now = CLOCK.cycle_now()
            got = reconcile_once(desired=desired, cluster=warm, now=now)
            want = _cold(twin, desired, now)
            assert got.to_json() == want.to_json(), what
            assert not got.errors, what
            if node_hits is not None:
                assert warm.node_memo.hits == node_hits, what
        # the pod that started and went was parsed, the others came from the memo
        assert warm.pod_memo.hits > 0
        # Only the clock moves: every node comes from the memo, and the pending node is now stuck (MP508).
        before = {f.code for f in got.report.findings if f.node == "gpu-h200-01"}  # type: ignore[union-attr]
        assert "MP509" in before and "MP508" not in before
        later = CLOCK.advance(20 * 60)
        got = reconcile_once(desired=desired, cluster=warm, now=later)
        assert warm.node_memo.hits == nodes
        assert got.to_json() == _cold(twin, desired, later).to_json()
        after = {f.code for f in got.report.findings if f.node == "gpu-h200-01"}  # type: ignore[union-attr]
        assert "MP508" in after and "MP509" not in after
    finally:
        warm.close()
