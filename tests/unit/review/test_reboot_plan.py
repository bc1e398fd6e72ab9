"""`migplan plan` and the MR comment say what a change mig-manager may reboot a node for takes (issue 26 item 2):
"may reboot: N pods end" with the names the drift report committed, and the NotReady window of a host driver's
kubelet stop. The report is the only source in CI: the facts travel through it, read as untrusted data."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.git.reportbranch import parse_report
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.reports.reports import render_drift_yaml
from reconciler.logic.review.mrcomment import PlanSection, node_rows, render_comment
from reconciler.logic.review.reportoccupancy import observed_from_report
from reconciler.logic.review.revdiff import diff_states, disruptions
from reconciler.model.drift import DriftReport, MigManagerHost, NodeReport, NodeStatus
from reconciler.model.inventory import ClusterSpec, DesiredState, GpuSpec, MigStrategy, NodeSpec, Partition, Placement
from reconciler.model.observed import REBOOT_NAMES_CAP
from reconciler.model.revisions import Revision

CLUSTER = b"apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: c}\nspec:\n  migStrategy: mixed\n"
NAMES = ("batch/etl-0", "web/api-0", "web/api-1")


def _report(host: MigManagerHost | None, ends: int | None = 3) -> dict[str, Any]:
    node = NodeReport("gpu-a", NodeStatus.IN_SYNC, reboot_ends=ends, reboot_names=NAMES if ends else ())
    data = render_drift_yaml(DriftReport("c", Revision("main", "a" * 40), "mixed", (node,), mig_manager=host))
    doc = parse_report(data)
    assert not isinstance(doc, str)
    return doc


def _state(mig_on_gpu1: bool, sha: str) -> DesiredState:
    seven = GpuSpec(0, "H200-141GB", True, (Partition("7g.141gb", 0, None),), placements=(Placement(0, 8),))
    gpu1 = (
        GpuSpec(1, "H200-141GB", True, (Partition("1g.18gb", 0, None),), placements=(Placement(0, 1),))
        if mig_on_gpu1
        else GpuSpec(1, "H200-141GB", False, ())
    )
    node = NodeSpec("gpu-a", (seven, gpu1))
    return DesiredState(ClusterSpec("c", MigStrategy.MIXED), {"gpu-a": node}, revision=Revision("main", sha * 40))


def _section(report: dict[str, Any], *, flip: bool = True) -> PlanSection:
    before, after = _state(True, "a"), _state(not flip, "b")
    if not flip:  # a re-cut of GPU 1 only: no MIG mode changes
        one = GpuSpec(1, "H200-141GB", True, (Partition("2g.35gb", 0, None),), placements=(Placement(0, 2),))
        after = DesiredState(
            after.cluster, {"gpu-a": NodeSpec("gpu-a", (after.nodes["gpu-a"].gpus[0], one))}, revision=after.revision
        )
    diff = diff_states(before, after)
    observed = observed_from_report(report)
    return PlanSection(
        cluster="c", root="", base=str(before.revision), target=str(after.revision),
        validation=validate_inventory({"cluster.yaml": CLUSTER}, revision=after.revision), diff=diff,
        disrupts=disruptions(diff, before, after, observed), pods_from="the drift report",
    )  # fmt: skip


def test_the_report_carries_the_host_facts_and_the_count_round_trip() -> None:
    observed = observed_from_report(_report(MigManagerHost(with_reboot=True, host_driver=True), ends=45))
    assert observed.cluster_policy is not None and not observed.cluster_policy.driver_enabled
    assert observed.cluster_policy.mig_manager_env == {"WITH_REBOOT": "true"}
    assert observed.node_pods["gpu-a"].count == 45 and observed.node_pods["gpu-a"].names == NAMES


def test_a_mode_flip_under_with_reboot_says_may_reboot_with_the_count_and_names() -> None:
    section = _section(_report(MigManagerHost(with_reboot=True)))
    ((_, what, _),) = node_rows(section)
    said = "may reboot (WITH\\_REBOOT, if the MIG mode change fails): 3 pods end"
    assert f"{said} (batch/etl-0, web/api-0, web/api-1)" in what
    comment = render_comment([section])
    assert "**reboots the node**, and **3** pod(s) end there" in comment and "NotReady" not in comment


def test_a_host_driver_says_the_not_ready_window() -> None:
    section = _section(_report(MigManagerHost(host_driver=True), ends=None))
    ((_, what, _),) = node_rows(section)
    assert "NotReady window" in what and "may reboot" not in what
    comment = render_comment([section])
    assert "node.kubernetes.io/unreachable" in comment and "node-monitor-grace-period" in comment


def test_nothing_is_said_without_the_facts_or_without_a_mode_flip() -> None:
    plain = _section(_report(None, ends=None))
    assert "may reboot" not in render_comment([plain]) and not plain.disrupts.host  # type: ignore[union-attr]
    recut = _section(_report(MigManagerHost(with_reboot=True, host_driver=True)), flip=False)
    assert "may reboot" not in render_comment([recut]) and "NotReady" not in render_comment([recut])


def test_hostile_report_values_are_skipped() -> None:
    def doc(mm: Any, ends: Any) -> dict[str, Any]:
        return {"kind": "DriftReport", "migManager": mm, "nodes": [{"name": "gpu-a", "rebootEnds": ends}]}

    assert (
        observed_from_report(doc({"withReboot": "yes", "shutdownHostGpuClients": False}, None)).cluster_policy is None
    )
    assert observed_from_report(doc(None, {"pods": 3, "names": []})).node_pods == {}
    for bad in ({"pods": True}, {"pods": -1}, {"pods": 10**9}, {"pods": "3"}, [3], None):
        assert observed_from_report(doc({"withReboot": True, "shutdownHostGpuClients": False}, bad)).node_pods == {}
    names = ["../x", "ns/UPPER", 7, ["a/b"], *(f"ns/p{i}" for i in range(REBOOT_NAMES_CAP * 3))]
    got = observed_from_report(doc({"withReboot": True, "shutdownHostGpuClients": False}, {"pods": 5, "names": names}))
    pods = got.node_pods["gpu-a"]
    assert pods.count == 5 and len(pods.names) == 5 and all(n.startswith("ns/p") for n in pods.names)
