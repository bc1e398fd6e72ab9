"""One bad value on one node never stops the cycle for the others (issue 10, family 3), on the cluster twin.

Each case poisons one value migplan reads on one node (a quantity in status, mig-manager's state label,
a GFD label, migplan's own annotations). The cycle must end without an error, report MP530 on that
node with the field it could not read, send no write to that node, and reconcile every other node as
usual (they are relabelled to migplan's config names and converge).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.twinclock import TwinClock

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.inventory import DesiredState
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
POISONED = "gpu-h200-01"

# (case id, merge patch, subresource, the field MP530 must name)
CASES: list[tuple[str, dict[str, Any], str | None, str]] = [
    # A real server refuses negative or fractional extended resources in a node's status (422, ValidateNodeResources,
    # like the twin); what it stores and migplan still cannot count is a value too large for any device count.
    (
        "huge-capacity",
        {"status": {"capacity": {"nvidia.com/mig-1g.18gb": "1e30"}}},
        "status",
        "status.capacity[nvidia.com/mig-1g.18gb]",
    ),
    (
        "huge-allocatable",
        {"status": {"allocatable": {"nvidia.com/mig-2g.35gb": "1e19"}}},
        "status",
        "status.allocatable[nvidia.com/mig-2g.35gb]",
    ),
    (
        # a real server refuses text that is no quantity at all (400, like the twin); this one it stores as sent
        # (DecimalExponent, already canonical) and no device count can be that large
        "huge-exponent-capacity",
        {"status": {"capacity": {"nvidia.com/mig-3g.71gb": "1e999999999"}}},
        "status",
        "status.capacity[nvidia.com/mig-3g.71gb]",
    ),
    (
        "unknown-mig-config-state",
        {"metadata": {"labels": {"nvidia.com/mig.config.state": "NaN"}}},
        None,
        "label nvidia.com/mig.config.state",
    ),
    ("gfd-gpu-count", {"metadata": {"labels": {"nvidia.com/gpu.count": "1e3"}}}, None, "label nvidia.com/gpu.count"),
    (
        "naive-requested-at",
        {"metadata": {"annotations": {"migplan.io/mig-config-requested-at": "2026-01-01T00:00:00"}}},
        None,
        "annotation migplan.io/mig-config-requested-at",
    ),
    (
        "cordoned-not-true",
        {"metadata": {"annotations": {"migplan.io/cordoned": "Infinity"}}},
        None,
        "annotation migplan.io/cordoned",
    ),
]


CLOCK = TwinClock()  # each cycle one configPropagationSeconds after the last


def _desired() -> DesiredState:
    desired, diagnostics = load_desired(INVENTORY)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


def _run(twin: ClusterTwin, desired: DesiredState) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig), page_size=2)
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=CLOCK.cycle_now())
    finally:
        cluster.close()


def _node_writes(twin: ClusterTwin, node: str) -> list[str]:
    return [
        f"{r.method} {r.path}"
        for r in twin.api.request_log()
        if r.resource == "nodes" and r.name == node and r.method not in ("GET", "HEAD")
    ]


@pytest.mark.parametrize(("patch", "subresource", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_one_poisoned_node_is_reported_and_left_alone_while_the_others_converge(
    patch: dict[str, Any], subresource: str | None, field: str
) -> None:
    desired = _desired()
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        # The twin's device plugin and GFD would heal a poisoned status or label at once: stop them
        # so the cycle sees the value as an admin, a broken controller or an attacker left it.
        twin.operator.stop()
        twin.store.patch("nodes", POISONED, patch, subresource=subresource)
        before = twin.store.get("nodes", POISONED)
        others = sorted(n for n in desired.nodes if n != POISONED)
        twin.api.reset_counts()
        first = _run(twin, desired)  # migplan's config names into the ConfigMap ...
        assert not first.errors, [str(e) for e in first.errors]
        result = _run(twin, desired)  # ... and one propagation delay later, the relabels
        assert not result.errors, [str(e) for e in result.errors]
        assert result.report is not None and result.plan is not None
        poisoned = next(n for n in result.report.nodes if n.name == POISONED)
        mp530 = [f for f in poisoned.findings if f.code == "MP530"]
        assert mp530 and field in mp530[0].message, [str(f) for f in poisoned.findings]
        assert poisoned.status.value == "Error"
        held = [c for c in result.plan.changes if c.subject == f"node/{POISONED}"]
        assert [c.action.value for c in held] == ["skip"] and "MP530" in held[0].reason
        assert _node_writes(twin, POISONED) == []  # never written on a guess
        after = twin.store.get("nodes", POISONED)
        assert after["metadata"]["labels"].get("nvidia.com/mig.config") == before["metadata"]["labels"].get(
            "nvidia.com/mig.config"
        )
        assert bool(after["spec"].get("unschedulable")) == bool(before["spec"].get("unschedulable"))

        # every other node was reconciled as usual (on a fresh twin: relabelled to migplan's config
        # names, which mig-manager takes as already applied), no MP530 on it
        for n in others:
            assert (
                twin.store.get("nodes", n)["metadata"]["labels"]["nvidia.com/mig.config"]
                == (result.plan.node_configs[n])
            )
            assert not [f for f in result.report.findings if f.node == n and f.code == "MP530"]
        assert any(_node_writes(twin, n) for n in others)
