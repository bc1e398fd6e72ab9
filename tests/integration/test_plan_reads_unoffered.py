"""The plan takes each node's unoffered-profile verdict from the drift analysis of the same states (issue 29, adoptcpu).

Both used to compute profilecheck.unoffered for every node: the analysis for MP564, the plan again for every node it
relabels. The verdicts are the same function of the same values, so the plan reads the analysis' and the plan is
the one it was: here a node whose GPUs (H100s) lack its plan's profile (H200's 1g.18gb) is held either way, with
the same reason.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from helpers.inventories import H100_NODE, plan_h100_node_as_h200

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import ObservedState
from reconciler.model.plans import Action, Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
NODE = H100_NODE


def _states(tmp_path: Path) -> tuple[DesiredState, ObservedState]:
    root = tmp_path / "inventory"
    shutil.copytree(INVENTORY, root)
    plan_h100_node_as_h200(root)
    desired, diags = load_desired(root)
    assert desired is not None, [str(d) for d in diags]
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
        try:
            return desired, cluster.observe(desired.cluster.gpu_operator)
        finally:
            cluster.close()


def test_the_plan_with_the_analysis_verdicts_is_the_plan_without_them(tmp_path: Path) -> None:
    desired, observed = _states(tmp_path)
    now = datetime.now(UTC)
    analysis = drift.analyze(desired, observed, now=now)
    present = {n for n in desired.nodes if n in observed.nodes}
    assert set(analysis.unoffered) == present and len(present) > 1
    why = analysis.unoffered[NODE]
    assert why is not None and "H100-80GB" in why
    assert [n for n, w in analysis.unoffered.items() if w is not None] == [NODE]

    with_verdicts = planner.plan(desired, observed, now=now, rendered=analysis.rendered, unoffered=analysis.unoffered)
    alone = planner.plan(desired, observed, now=now, rendered=analysis.rendered)
    assert with_verdicts == alone
    (held,) = [c for c in alone.changes if c.subject == f"node/{NODE}" and c.kind is Kind.NODE_MIG_CONFIG]
    assert held.action is Action.SKIP and held.code == "MP564" and held.reason == f"held: {why}"


def test_the_plan_reads_the_verdict_it_is_given(tmp_path: Path) -> None:
    """A verdict handed in is the one the plan uses (what makes the second computation go)."""
    desired, observed = _states(tmp_path)
    now = datetime.now(UTC)
    analysis = drift.analyze(desired, observed, now=now)
    told = {**analysis.unoffered, NODE: "said so by the analysis"}
    plan = planner.plan(desired, observed, now=now, rendered=analysis.rendered, unoffered=told)
    (held,) = [c for c in plan.changes if c.subject == f"node/{NODE}" and c.kind is Kind.NODE_MIG_CONFIG]
    assert held.action is Action.SKIP and held.code == "MP564" and held.reason == "held: said so by the analysis"
