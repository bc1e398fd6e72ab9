"""MP522 end to end on the cluster twin: a node mig-manager left `pending` with its GPU clients paused (drift case
`mig-manager-wedged`, reconfigure.go waitForPodsToBeDeleted) is reported with the way out, migplan writes nothing
on it, and the way out it names (restart the node's mig-manager pod) gets the node out."""

from __future__ import annotations

from pathlib import Path

from helpers.twinclock import TwinClock, desired_from, reconcile_cycle

from reconciler.adapters.kube.observe import mig_manager_error
from reconciler.engine import CycleResult
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
NODE = "gpu-h200-02"
NS = "gpu-operator"
CLOCK = TwinClock()  # each cycle one configPropagationSeconds after the last; the twins model the kubelet's delay
WAIT_LINE = (
    "Error: failed to wait for pods to be deleted: device-plugin pod did not shutdown: context deadline exceeded"
)


def _desired() -> DesiredState:
    return desired_from(INVENTORY)


def _run(twin: ClusterTwin, desired: DesiredState) -> CycleResult:
    return reconcile_cycle(twin, desired, CLOCK)


def test_a_wedged_node_is_reported_with_the_way_out_and_left_alone() -> None:
    desired = _desired()
    with ClusterTwin.from_inventory(INVENTORY, drift=[f"mig-manager-wedged:{NODE}"], **CLOCK.twin_kwargs()) as twin:
        twin.settle()
        result = _run(twin, desired)
        assert result.report is not None and not result.errors
        wedged = [f for f in result.report.findings if f.code == "MP522"]
        assert [f.node for f in wedged] == [NODE]
        msg = wedged[0].message
        assert "failed to wait for pods to be deleted: device-plugin pod did not shutdown" in msg  # the real chain
        assert "nvidia.com/gpu.deploy.device-plugin" in msg and "paused-for-mig-change" in msg
        assert (
            f"kubectl -n {NS} get pods -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName={NODE}"
            in msg
        )
        way_out = f"kubectl -n {NS} delete pod -l app=nvidia-mig-manager --field-selector spec.nodeName={NODE}"
        assert way_out in msg
        assert not [f for f in result.report.findings if f.node == NODE and f.code in ("MP508", "MP509")]
        # The drift left the node on a config that is not its plan's: migplan's usual relabel is a new label value,
        # which wakes mig-manager (main.go SyncableMigConfig). Its GPUs already have the plan's layout, so the run's
        # assert passes and setState("success") turns the paused labels back to true (reconfigure.go Run).
        # (migplan's config names go into the ConfigMap first; the relabel waits one propagation delay.)
        assert not [c for c in result.applied if c.subject == f"node/{NODE}"]
        twin.settle()
        relabel = _run(twin, desired)
        assert relabel.report is not None and [f.node for f in relabel.report.findings if f.code == "MP522"] == [NODE]
        assert [c.kind for c in relabel.applied if c.subject == f"node/{NODE}"] == [Kind.NODE_MIG_CONFIG]
        twin.settle()
        labels = twin.store.get("nodes", NODE)["metadata"]["labels"]
        assert labels["nvidia.com/mig.config.state"] == "success"
        assert "paused-for-mig-change" not in labels.values()
        second = _run(twin, desired)
        assert second.report is not None
        assert not [f for f in second.report.findings if f.code == "MP522"]
        assert not [c for c in second.applied if c.subject == f"node/{NODE}"]


def test_only_the_last_runs_error_counts() -> None:
    log = "\n".join(
        [
            "Updating to MIG config: a",
            "Error clearing MigConfig: error destroying Compute instance for profile '(0, 0)': In use by another"
            " client",
            "Error: failed to apply MIG configuration: exit status 1",
            "Updating to MIG config: b",
            "Changing the 'nvidia.com/mig.config.state' node label to 'pending'",
            WAIT_LINE,
        ]
    )
    assert mig_manager_error(log) == WAIT_LINE
    assert mig_manager_error("Updating to MIG config: b\nall good\n") is None
