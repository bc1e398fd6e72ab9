"""Device-plugin restarts without loops, end to end on the cluster twin (issue 11 item 4).

The twin's operator writes its DaemonSet as gpu-operator's object_controls.go does (rendered whole, replaced whole
when its hash changes, migplan's annotations dropped). A strategy change must roll each device-plugin pod exactly
once — the operator's roll — and nothing more over the next cycles, also when the operator rewrites the DaemonSet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.twinclock import TwinClock, desired_from, reconcile_cycle

from reconciler.engine import CycleResult
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.operator.dsupdate import HASH_ANNOTATION

INVENTORY = Path(__file__).parents[2] / "inventory"
NS = "gpu-operator"
CLOCK = TwinClock()  # each cycle one configPropagationSeconds after the last; the twins model the kubelet's delay
DS = "nvidia-device-plugin-daemonset"


def _desired() -> DesiredState:
    return desired_from(INVENTORY)


def _run(twin: ClusterTwin, desired: DesiredState) -> CycleResult:
    return reconcile_cycle(twin, desired, CLOCK)


def _record_rolls(twin: ClusterTwin) -> tuple[list[str], list[int]]:
    """Device-plugin pods created (their nodes) and DaemonSet generations, as they happen."""
    created: list[str] = []
    generations: list[int] = []

    def cb(kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if kind == "ADDED" and obj.get("kind") == "Pod" and (meta.get("labels") or {}).get("app") == DS:
            created.append(obj["spec"]["nodeName"])
        if obj.get("kind") == "DaemonSet" and meta.get("name") == DS:
            gen = int(meta.get("generation", 0))
            if not generations or generations[-1] != gen:
                generations.append(gen)

    twin.store.subscribe(cb)
    return created, generations


def test_a_strategy_change_rolls_each_device_plugin_pod_exactly_once() -> None:
    desired = _desired()
    # The ClusterPolicy on `single`, the inventory `mixed`; GPUs already cut as the inventory says.
    with ClusterTwin.from_inventory(INVENTORY, strategy="single", **CLOCK.twin_kwargs()) as twin:
        twin.settle()
        nodes = sorted(
            p["spec"]["nodeName"]
            for p in twin.store.list("pods", NS)
            if (p["metadata"].get("labels") or {}).get("app") == DS
        )
        created, generations = _record_rolls(twin)
        results = []
        for _ in range(3):
            results.append(_run(twin, desired))
            twin.settle()
        # The operator rewrites its DaemonSet whole once more (its last-applied hash gone): same template, no roll.
        twin.store.patch("daemonsets.apps", DS, {"metadata": {"annotations": {HASH_ANNOTATION: None}}}, NS)
        twin.settle()
        assert twin.store.get("daemonsets.apps", DS, NS)["metadata"]["annotations"][HASH_ANNOTATION]
        for _ in range(3):
            results.append(_run(twin, desired))
            twin.settle()
        assert not any(r.errors for r in results), [r.errors for r in results]
        restarts = [c for r in results for c in r.applied if c.kind is Kind.RESTART_DEVICE_PLUGIN]
        assert restarts == []  # the operator rolls its own DaemonSet; migplan never adds a second roll
        strategy_writes = [
            c for r in results for c in r.applied if c.kind is Kind.CLUSTER_POLICY and "spec.mig.strategy" in c.after
        ]
        assert len(strategy_writes) == 1
        assert sorted(created) == nodes  # exactly one new device-plugin pod per node
        assert len(generations) == 1  # one template change: the operator's, for the strategy
        assert results[-1].converged, [str(f) for f in results[-1].report.findings]  # type: ignore[union-attr]
        assert all(not r.applied for r in results[-2:])  # stable: nothing more to write
