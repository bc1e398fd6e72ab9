"""`reconcile --once`'s text on real cycles: the same bytes with the plan and findings tables drawn by tabulate."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.inventories import recut_gpu1_to_sevens
from helpers.twinclock import TwinClock
from tabulate import tabulate

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands import reconcile, texttable
from reconciler.commands.reconcile import load_desired, render_text
from reconciler.engine import CycleResult, reconcile_once
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
CLOCK = TwinClock()


def _cycle(inventory: Path, **twin: Any) -> CycleResult:
    desired, diagnostics = load_desired(inventory)
    assert desired is not None, [str(d) for d in diagnostics]
    with ClusterTwin.from_inventory(INVENTORY, **twin, **CLOCK.twin_kwargs()) as running:
        running.settle()
        cluster = KubeCluster.from_kubeconfig(str(running.kubeconfig), page_size=2)
        try:
            return reconcile_once(desired=desired, cluster=cluster, dry_run=True, now=CLOCK.cycle_now())
        finally:
            cluster.close()


def _with_tabulate(rows: Any, headers: Any) -> str:
    return tabulate(rows, headers=list(headers), tablefmt="simple")


@pytest.mark.parametrize("case", ["held-back", "mig-manager-failed"])
def test_text_is_the_same_as_tabulates(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "inventory"
    shutil.copytree(INVENTORY, root)
    if case == "held-back":
        recut_gpu1_to_sevens(root, "gpu-h200-01")
        result = _cycle(root)
    else:
        result = _cycle(root, drift=["mig-config-failed:gpu-h200-02"])
    direct: list[bool] = []
    real_direct = texttable._direct

    def spy(rows: Any, headers: Any) -> bool:
        direct.append(real_direct(rows, headers))
        return direct[-1]

    monkeypatch.setattr(texttable, "_direct", spy)
    ours = render_text(result)
    assert any(direct)  # at least one table of this cycle went the direct way: the comparison below is not vacuous
    monkeypatch.setattr(reconcile, "simple_table", _with_tabulate)
    assert ours == render_text(result)
