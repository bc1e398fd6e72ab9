"""A 1,000-node fleet (benchmarks/validate.py's block inventory on a cluster twin: some 28,000 pods) observed through
the real kube adapter the fast way (typed pruned pages, container shapes parsed once per observation) equals the
same fleet observed the plain way (every page decoded in full by orjson, every pod's containers parsed on their
own): the same pods in the same order, the same values, the same reboot tallies and the light pods a drain reads."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import load_script

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube import shapes
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.model.observed import ObservedState
from reconciler.twin.cluster import ClusterTwin

REPO = Path(__file__).parents[2]
NODES = 1000

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterTwin, Path]]:
    root = tmp_path_factory.mktemp("fleet")
    inventory = root / "inventory"
    load_script("bench_validate_fold", REPO / "benchmarks" / "validate.py").generate(inventory, NODES, "block")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=inventory, check=True)  # load_desired reads a plain dir
    with ClusterTwin.from_inventory(inventory, kubeconfig=root / "kubeconfig") as twin:
        twin.settle(timeout=600)
        yield twin, inventory


def _observe(twin: ClusterTwin, inventory: Path, monkeypatch: pytest.MonkeyPatch, *, fast: bool) -> ObservedState:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(shapes, "decode_page", lambda data, shape: None)  # every page decoded in full
            m.setattr(kubeobserve, "_containers_key", lambda spec: None)  # every pod's containers parsed alone
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig), remember_parses=False)
        try:
            desired, diagnostics = load_desired(inventory)
            assert desired is not None, diagnostics
            return cluster.observe(desired.cluster.gpu_operator)
        finally:
            cluster.close()


def test_the_fast_fold_observes_the_fleet_as_the_plain_one(
    fleet: tuple[ClusterTwin, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    twin, inventory = fleet
    typed: list[bool] = []
    parsed: list[int] = []
    real_decode, real_parse = shapes.decode_page, kubeobserve._containers

    def counting(data: bytes, shape: shapes.PageShape) -> dict[str, Any] | None:
        doc = real_decode(data, shape)
        typed.append(doc is not None)
        return doc

    def parse(spec: Any, bad: list[Any]) -> Any:
        parsed.append(1)
        return real_parse(spec, bad)

    monkeypatch.setattr(shapes, "decode_page", counting)
    monkeypatch.setattr(kubeobserve, "_containers", parse)
    fast = _observe(twin, inventory, monkeypatch, fast=True)
    cluster_parts, fast_parses = len(typed), len(parsed)
    plain = _observe(twin, inventory, monkeypatch, fast=False)
    assert cluster_parts > 50 and all(typed[:cluster_parts])  # the fast way read every node and pod page typed
    assert len(fast.pods) > 20 * NODES
    assert fast == plain
    assert tuple(p.key for p in fast.pods) == tuple(p.key for p in plain.pods)
    assert {n: p.details() for n, p in fast.node_pods.items() if p.details} == {
        n: p.details() for n, p in plain.node_pods.items() if p.details
    }
    # The equality above is not of a fleet that gives nothing to compare.
    assert sum(t.count for t in fast.node_pods.values()) > 20 * NODES
    assert fast.device_plugin is not None and len(fast.device_plugin.pods) == NODES
    assert len(fast.mig_manager_sources) == NODES
    # Pods of one shape share their parse: a few dozen shapes for the whole fleet.
    distinct = {id(p.containers) for p in fast.pods}
    assert len(distinct) < 100 and 0 < fast_parses < 100
    assert len(parsed) - fast_parses >= len(plain.pods)  # the plain way parsed every pod's containers
