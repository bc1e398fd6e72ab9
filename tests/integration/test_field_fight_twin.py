"""A field-manager fight on the ClusterPolicy, on the cluster twin (issue 28 item 7, MP590).

The GPU Operator's chart keeps `mig.strategy: single`: Helm installed it, and after each migplan cycle a second
client, field manager `helm` (a `helm upgrade`), puts spec.mig.strategy back. migplan overwrites helm's value once,
then reports the fight naming `helm` and the field, and never patches it again while helm owns it. A manager migplan
has not overwritten yet (a one-off `kubectl edit`) still gets its one repair.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.twinclock import TwinClock

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
CP = ("clusterpolicies.nvidia.com", "cluster-policy")
CLOCK = TwinClock()


def _desired() -> DesiredState:
    desired, diagnostics = load_desired(INVENTORY)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


def _run(twin: ClusterTwin, desired: DesiredState) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=CLOCK.cycle_now())
    finally:
        cluster.close()


def _strategy_patches(result: CycleResult) -> int:
    return sum(
        1
        for c in result.applied
        if c.kind is Kind.CLUSTER_POLICY and c.action is Action.CONFIGURE and "spec.mig.strategy" in (c.after or {})
    )


def _helm_sets(twin: ClusterTwin, strategy: str, manager: str = "helm") -> None:
    twin.store.patch(*CP, {"spec": {"mig": {"strategy": strategy}}}, field_manager=manager)


def _helm_installs(twin: ClusterTwin) -> None:
    """Make helm the field's owner, as `helm install` (the creator) is on a real cluster: the twin creates the
    ClusterPolicy as field manager `twin`, and a write that changes nothing moves no ownership, so helm writes
    another value and then the chart's."""
    _helm_sets(twin, "none")
    _helm_sets(twin, "single")
    twin.settle()


@pytest.fixture()
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY, strategy="single", **CLOCK.twin_kwargs()) as t:
        t.settle()
        yield t


def test_helm_reverting_the_strategy_gets_one_patch_then_a_finding_naming_helm(twin: ClusterTwin) -> None:
    desired = _desired()
    assert desired.cluster.mig_strategy.value == "mixed"
    _helm_installs(twin)
    patches = 0
    fights = []
    for _ in range(5):
        result = _run(twin, desired)
        assert not result.errors, result.errors
        patches += _strategy_patches(result)
        assert result.report is not None
        fights.append([f for f in result.report.findings if f.code == "MP590"])
        _helm_sets(twin, "single")  # the chart's value, after every cycle
        twin.settle()
    assert patches == 1  # once, never a patch loop
    assert fights[0] == []  # the first cycle patches: nobody had reverted migplan yet
    for found in fights[1:]:
        (f,) = found
        assert "helm" in f.message and "spec.mig.strategy" in f.message
        assert f.desired == "mixed" and f.observed == "single"
    assert twin.store.get(*CP)["spec"]["mig"]["strategy"] == "single"


def test_the_fight_ends_when_helm_writes_the_inventorys_value_and_a_one_off_edit_is_repaired(
    twin: ClusterTwin,
) -> None:
    desired = _desired()
    _helm_installs(twin)
    assert _strategy_patches(_run(twin, desired)) == 1
    _helm_sets(twin, "single")
    twin.settle()
    assert _strategy_patches(_run(twin, desired)) == 0
    # The chart is fixed (its values now say mixed): helm writes mixed; the field agrees, no finding, no patch.
    _helm_sets(twin, "mixed")
    twin.settle()
    result = _run(twin, desired)
    assert result.report is not None
    assert _strategy_patches(result) == 0
    assert not [f for f in result.report.findings if f.code == "MP590"]
    # Someone sets single by hand once (kubectl edit): drift like any other, repaired once, no fight yet.
    _helm_sets(twin, "single", manager="kubectl-edit")
    twin.settle()
    result = _run(twin, desired)
    assert result.report is not None
    assert _strategy_patches(result) == 1
    assert not [f for f in result.report.findings if f.code == "MP590"]
    assert twin.store.get(*CP)["spec"]["mig"]["strategy"] == "mixed"
    # ... and again: now that is a fight, with kubectl-edit named (and helm, which owns nothing of it now, not).
    _helm_sets(twin, "single", manager="kubectl-edit")
    twin.settle()
    result = _run(twin, desired)
    assert result.report is not None
    (f,) = [f for f in result.report.findings if f.code == "MP590"]
    assert "kubectl-edit" in f.message and "helm" not in f.message
    assert _strategy_patches(result) == 0


def test_argo_cd_server_side_apply_of_the_device_plugin_config_is_a_fight_too() -> None:
    """Argo CD with server-side apply (field manager argocd-controller, force: its sync wins conflicts) puts back a
    device-plugin config whose per-node strategy contradicts the inventory; migplan removed it once."""
    with ClusterTwin.from_inventory(
        INVENTORY, strategy="single", device_plugin_config="old-plugin-config", **CLOCK.twin_kwargs()
    ) as twin:
        config = {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": CP[1]},
            "spec": {"devicePlugin": {"config": {"name": "old-plugin-config"}}},
        }
        twin.store.apply(*CP, config, field_manager="argocd-controller", force=True)  # the first sync
        twin.settle()
        desired = _desired()
        config_patches = 0
        found = []
        for _ in range(4):
            result = _run(twin, desired)
            assert not result.errors, result.errors
            config_patches += sum(
                1
                for c in result.applied
                if c.kind is Kind.CLUSTER_POLICY and "spec.devicePlugin.config.name" in (c.after or {})
            )
            assert result.report is not None
            found += [f for f in result.report.findings if f.code == "MP590"]
            twin.store.apply(*CP, config, field_manager="argocd-controller", force=True)
            twin.settle()
        assert config_patches == 1
        assert found and all(
            "argocd-controller" in f.message and "spec.devicePlugin.config" in f.message for f in found
        )
        assert twin.store.get(*CP)["spec"]["devicePlugin"]["config"]["name"] == "old-plugin-config"
