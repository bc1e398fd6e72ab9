"""Drain in `apply.mode: agent`, end to end on the cluster twin (issue 11 item 5 for the node agent).

The node observer (NVML twin + the twin kubelet's PodResources server, through the production adapters) publishes
who holds each MIG instance; the controller's cycle reads it. A re-cut of GPU 1 that destroys the 2g.35gb a
ReplicaSet pod holds, with allowDisruption: with a PodDisruptionBudget allowing one disruption the node is
cordoned, the pod evicted through the Eviction API, the layout published only once the observer saw the device
freed, the agent applies it through NVML, reports success for that revision and the node is uncordoned. With a
budget allowing none: the eviction is refused each cycle, the publication held and the pod and PDB named,
nothing forced, the layout never published.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.draintwin import (
    GPU0,
    GPU1_CUT,
    GPU1_RECUT,
    NODE,
    pod_disruption_budget,
    replicaset_pod,
    write_inventory,
)
from kubernetes import client

from reconciler.adapters.kube.agentmode import DESIRED, KubeNodeState, decode_desired
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.events import KubeSignals
from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.agent import actuate_once
from reconciler.commands.reconcile import load_desired
from reconciler.controller import signals
from reconciler.controller.loop import kube_configuration
from reconciler.engine import CycleResult, reconcile_once
from reconciler.logic.planning.agentplan import MigState
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Kind
from reconciler.observer import publish_pass
from reconciler.twin.cluster import ClusterTwin

T0 = datetime(2026, 12, 2, 10, tzinfo=UTC)


def _inventory(root: Path, gpus: list[dict[str, Any]]) -> DesiredState:
    desired, diagnostics = load_desired(write_inventory(root, gpus, mode="agent"))
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


def _core(twin: ClusterTwin) -> Any:
    return client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))


def _observe(twin: ClusterTwin) -> None:
    """One pass of the node observer (`migplan agent --observe-only`) through the production adapters."""
    publish_pass(
        open_gpus=lambda: NvmlGpu(nvml=twin.nvml(NODE)),
        holders=KubeletPodResources(str(twin.pod_resources_socket(NODE)), timeout_seconds=5),
        node_state=KubeNodeState(_core(twin)),
        node=NODE,
    )


def _agent(twin: ClusterTwin) -> MigState | None:
    """One pass of the node agent (`migplan agent`): applies the published layout through NVML."""
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:
        result = actuate_once(
            gpus=gpus,
            node_state=KubeNodeState(_core(twin)),
            node=NODE,
            holders=KubeletPodResources(str(twin.pod_resources_socket(NODE)), timeout_seconds=5),
        )
    twin.settle()
    return result.state


def _cycle(twin: ClusterTwin, desired: DesiredState, minutes: float) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        result = reconcile_once(desired=desired, cluster=cluster, now=T0 + timedelta(minutes=minutes))
    finally:
        cluster.close()
    assert not result.errors, [str(e) for e in result.errors]
    return result


def _events(twin: ClusterTwin, result: CycleResult) -> list[dict[str, Any]]:
    """The Events the controller loop writes after the cycle about the node (controller/loop.py)."""
    assert result.report is not None
    intents, _ = signals.build(
        report=result.report, plan=result.plan, applied=result.applied, errors=[], cluster_policy="cluster-policy"
    )
    KubeSignals(_core(twin), instance="test").emit(intents)
    return [e for e in twin.store.list("events", "default") if e["involvedObject"]["name"] == NODE]


def _node(twin: ClusterTwin) -> dict[str, Any]:
    node: dict[str, Any] = twin.store.get("nodes", NODE)
    return node


def _published(twin: ClusterTwin) -> Any:
    return decode_desired(NODE, _node(twin)["metadata"]["annotations"][DESIRED])


_pod = replicaset_pod
_budget = pod_disruption_budget


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[tuple[ClusterTwin, DesiredState]]:
    """The node on its first layout, published and applied by its agent; then a ReplicaSet's two pods, one
    holding GPU 1's only 2g.35gb (the re-cut destroys it), the other no GPU; the observer has seen them."""
    before = _inventory(tmp_path / "before", [GPU0, GPU1_CUT])
    with ClusterTwin.from_inventory(tmp_path / "before", tls=False) as tw:
        tw.settle()
        _observe(tw)
        first = _cycle(tw, before, -10)
        assert [c.kind for c in first.applied if c.subject == f"node/{NODE}"] == [Kind.AGENT_LAYOUT]
        assert _agent(tw) is MigState.SUCCESS
        _pod(tw, "emb-0", {"nvidia.com/mig-2g.35gb": "1"})
        _pod(tw, "emb-1", {})
        tw.settle()
        assert tw.store.get("pods", "emb-0", "default")["status"]["phase"] == "Running"
        _observe(tw)
        yield tw, before


def test_agent_mode_drain_evicts_publishes_applies_and_uncordons(
    twin: tuple[ClusterTwin, DesiredState], tmp_path: Path
) -> None:
    tw, _ = twin
    _budget(tw, min_available=1)  # two healthy pods: one disruption allowed
    desired = _inventory(tmp_path / "after", [GPU0, GPU1_RECUT])
    old_layout = _published(tw)

    first = _cycle(tw, desired, 0)
    assert first.refused_evictions == ()
    assert [(c.kind, c.subject) for c in first.applied if c.kind in (Kind.CORDON, Kind.EVICT, Kind.AGENT_LAYOUT)] == [
        (Kind.CORDON, f"node/{NODE}"),
        (Kind.EVICT, "pod/default/emb-0"),
    ]
    (held,) = [c for c in first.plan.changes if c.kind is Kind.AGENT_LAYOUT]  # type: ignore[union-attr]
    assert held.action is Action.SKIP and held.blocked_by == ("default/emb-0",)
    (eviction,) = [c for c in first.applied if c.kind is Kind.EVICT]
    assert "gpu 1: destroys" in eviction.reason and "holders observed by the node observer" in eviction.reason
    assert any(e["reason"] == "Draining" and "default/emb-0" in e["message"] for e in _events(tw, first))
    assert _node(tw)["spec"]["unschedulable"] is True
    assert _published(tw) == old_layout  # not published while the pod holds the instance

    tw.settle()  # the twin's kubelet finishes the termination and frees the device
    assert "emb-0" not in {p["metadata"]["name"] for p in tw.store.list("pods", "default")}
    # The API no longer lists the pod, but the observer has not looked again: still held.
    waiting = _cycle(tw, desired, 1)
    assert not [c for c in waiting.applied if c.kind in (Kind.AGENT_LAYOUT, Kind.EVICT)]
    _observe(tw)
    second = _cycle(tw, desired, 2)
    assert [c.kind for c in second.applied if c.subject == f"node/{NODE}"] == [Kind.AGENT_LAYOUT]
    layout = _published(tw)
    assert layout.revision == str(desired.revision) and layout != old_layout
    annotations = _node(tw)["metadata"]["annotations"]
    assert "migplan.io/drain-started-at" not in annotations  # the publication ends the drain
    assert annotations.get("migplan.io/cordoned") == "true"  # cordoned until the agent succeeds

    pending = _cycle(tw, desired, 3)  # the agent has not run yet: no uncordon
    assert not [c for c in pending.applied if c.kind is Kind.UNCORDON]
    assert _agent(tw) is MigState.SUCCESS
    (gpu1,) = [g for g in tw.gpus(NODE) if g.index == 1]
    assert sorted(gi.profile.name for gi in gpu1.gpu_instances.values()) == ["1g.18gb"] * 7
    third = _cycle(tw, desired, 4)
    assert [c.kind for c in third.applied if c.subject == f"node/{NODE}"] == [Kind.UNCORDON]
    node = _node(tw)
    assert not node["spec"].get("unschedulable")
    assert not any(k == "migplan.io/cordoned" or "drain" in k for k in node["metadata"].get("annotations", {}))
    assert tw.store.get("pods", "emb-1", "default")["status"]["phase"] == "Running"  # never evicted


def test_agent_mode_pdb_allowing_none_holds_the_layout_and_forces_nothing(
    twin: tuple[ClusterTwin, DesiredState], tmp_path: Path
) -> None:
    tw, _ = twin
    _budget(tw, min_available=2)  # two healthy pods, two needed: no disruption allowed
    desired = _inventory(tmp_path / "after", [GPU0, GPU1_RECUT])
    old_layout = _published(tw)
    tw.reset_counts()

    for minute in (0, 3, 6):
        result = _cycle(tw, desired, minute)
        ((node, pod, message),) = result.refused_evictions
        assert (node, pod) == (NODE, "default/emb-0")
        assert "disruption budget" in message
        (held,) = [c for c in result.plan.changes if c.kind is Kind.AGENT_LAYOUT]  # type: ignore[union-attr]
        assert held.action is Action.SKIP and held.code == "MP537" and held.pdbs == ("default/emb",)
        assert held.blocked_by == ("default/emb-0",)
        named = next(f for f in result.report.findings if f.code == "MP537" and f.pods)  # type: ignore[union-attr]
        assert named.pods == ("default/emb-0",)
        blocked = [e for e in _events(tw, result) if e["reason"] == "DrainBlocked"]
        assert blocked and "default/emb-0" in blocked[-1]["message"] and blocked[-1]["type"] == "Warning"
        tw.settle()
        _observe(tw)
    late = _cycle(tw, desired, 11)  # drainTimeoutSeconds 600 are over
    assert late.refused_evictions == () and not [c for c in late.applied if c.kind is Kind.EVICT]
    (held,) = [c for c in late.plan.changes if c.kind is Kind.AGENT_LAYOUT]  # type: ignore[union-attr]
    assert held.action is Action.SKIP and held.code == "MP538" and "nothing is deleted by force" in held.reason
    tw.settle()
    pods = {p["metadata"]["name"]: p for p in tw.store.list("pods", "default")}
    assert not pods["emb-0"]["metadata"].get("deletionTimestamp") and pods["emb-0"]["status"]["phase"] == "Running"
    assert _published(tw) == old_layout  # never published
    assert _agent(tw) is MigState.SUCCESS  # the agent still holds the old layout, in sync
    counts = tw.request_counts()
    assert not [k for k in counts if k[0] == "DELETE" and k[1].startswith("pods")]  # never a delete
    assert counts.get(("POST", "pods/eviction", "create"), 0) == 2 * 3  # dry run + real, three cycles
