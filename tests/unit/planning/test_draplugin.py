"""DRA-static nodes (issue 30 items 1 and 2): which nodes go through migplan's agent, and the once-per-layout restart
of NVIDIA's DRA kubelet plugin (reconciler/logic/drift/drastatic.py, reconciler/logic/planning/draplugin.py), for
the inputs the twin scenario does not spell out: each stage of the restart record, hostile records, a node without
a plugin pod, another writer, and the planner's routing (no ClusterPolicy, no mig-parted ConfigMap under a
GPUCluster; a DRA-static node laid out by the agent in gpu-operator mode)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.catalog import load_catalog
from reconciler.logic.drift import drastatic
from reconciler.logic.planning import agentdrain, desiredcodec, draplugin, planner
from reconciler.logic.planning.agentplan import desired_from_node_spec
from reconciler.model.dra import DraDevice, DraDriverConfig, DraPluginPod, GpuClusterState, NodeDra
from reconciler.model.inventory import (
    ClusterSpec,
    DesiredState,
    GpuSpec,
    MigStrategy,
    NodeSpec,
    Partition,
    Placement,
)
from reconciler.model.observed import ClusterPolicyState, ObservedNode, ObservedState
from reconciler.model.plans import Action, Kind

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
NODE = "n"
NS = "nvidia-dra-driver-gpu"
# GPU 0 of an H200 cut 3g@4 + 2g@0 + 1g@2 + 1g@3 (GI profile ids: 3g 9, 2g 14, 1g 19)
PLAN = (("3g.71gb", 4, 4), ("2g.35gb", 0, 2), ("1g.18gb", 2, 1), ("1g.18gb", 3, 1))  # profile, start, size
PLANNED = ("gpu-0-mig-3g71gb-9-4", "gpu-0-mig-2g35gb-14-0", "gpu-0-mig-1g18gb-19-2", "gpu-0-mig-1g18gb-19-3")
OLD = ("gpu-0-mig-7g141gb-0-0",)  # what the plugin published before the re-cut


def _desired(writer: str | None = None) -> DesiredState:
    parts = tuple(Partition(p, placement=start) for p, start, _ in PLAN)
    gpu = GpuSpec(0, "H200-141GB", True, parts, placements=tuple(Placement(start, size) for _, start, size in PLAN))
    node = NodeSpec(NODE, (gpu,), layout_writer=writer)
    return DesiredState(ClusterSpec("t", MigStrategy.MIXED), {NODE: node})


def _layout_text(desired: DesiredState) -> str:
    layout, problems = desired_from_node_spec(desired.nodes[NODE], revision="rev-2", catalog=load_catalog())
    assert not problems
    return desiredcodec.encode(layout)


def _node(desired: DesiredState, *, success: bool = True, **annotations: str) -> ObservedNode:
    """The node with the plan's layout published at rev-2 and (by default) its agent's success for it."""
    labels = {agentdrain.STATE_LABEL: "success" if success else "pending"}
    notes = {
        desiredcodec.ANNOTATION: _layout_text(desired),
        agentdrain.STATE_REVISION_ANNOTATION: "rev-2",
        **annotations,
    }
    return ObservedNode(NODE, labels=labels, annotations=notes)


def _pod(uid: str = "uid-1", *, deleting: bool = False) -> DraPluginPod:
    return DraPluginPod(NODE, NS, f"plugin-{uid}", uid, deleting=deleting)


def _observed(
    node: ObservedNode,
    published: tuple[str, ...] = OLD,
    pods: tuple[DraPluginPod, ...] = (_pod(),),
    gpu_cluster: GpuClusterState | None = None,
) -> ObservedState:
    devices = tuple(DraDevice(name, kind="mig") for name in published)
    driver = DraDriverConfig(NS, "dra-driver-nvidia-gpu-kubelet-plugin", False, frozenset({NODE}), pods=pods)
    return ObservedState(
        nodes={NODE: node},
        dra={NODE: NodeDra(NODE, devices)},
        dra_drivers=(driver,),
        gpu_clusters=() if gpu_cluster is None else (gpu_cluster,),
    )


def _changes(observed: ObservedState, desired: DesiredState | None = None, now: datetime = NOW) -> list[object]:
    desired = desired or _desired()
    static = drastatic.static_nodes(desired, observed)
    return list(draplugin.plugin_changes(desired, observed, now, static, frozenset()))


def _record(layout_key: str, uid: str = "uid-1", at: datetime = NOW) -> str:
    return drastatic.PluginRestart(layout_key, "rev-2", f"{NS}/plugin-{uid}", uid, at).encode()


def _key(desired: DesiredState) -> str:
    layout = agentdrain.published_layout(_node(desired))
    assert layout is not None
    return agentdrain.layout_key(layout)


# --- which nodes -----------------------------------------------------------------------------------


def test_a_node_whose_slices_publish_static_mig_devices_is_dra_static() -> None:
    desired = _desired()
    assert drastatic.static_nodes(desired, _observed(_node(desired))) == {NODE}


def test_a_gpucluster_without_dynamic_mig_makes_every_gpu_node_dra_static_before_any_slice() -> None:
    desired = _desired()
    bare = replace(_observed(_node(desired)), dra={})
    assert drastatic.static_nodes(desired, bare) == frozenset()  # device plugin: mig-manager's path
    on = replace(bare, gpu_clusters=(GpuClusterState("gc", dynamic_mig=False),))
    assert drastatic.static_nodes(desired, on) == {NODE}
    ignored = replace(bare, gpu_clusters=(GpuClusterState("gc", dynamic_mig=False, ignored=True),))
    assert drastatic.static_nodes(desired, ignored) == frozenset()


@pytest.mark.parametrize("gate", [True, None])
def test_dynamic_mig_or_an_unreadable_gate_leaves_no_node_to_migplan(gate: bool | None) -> None:
    desired = _desired()
    observed = _observed(_node(desired), gpu_cluster=GpuClusterState("gc", dynamic_mig=gate))
    assert drastatic.static_nodes(desired, observed) == frozenset()
    assert _changes(observed) == []


def test_a_node_the_inventory_gives_another_writer_is_never_restarted() -> None:
    desired = _desired(writer="external")
    observed = _observed(_node(desired))
    assert drastatic.static_nodes(desired, observed) == frozenset() and _changes(observed, desired) == []


# --- the restart -----------------------------------------------------------------------------------


def test_built_and_stale_the_restart_is_recorded_then_the_pod_deleted_by_uid() -> None:
    desired = _desired()
    record, delete = _changes(_observed(_node(desired)))
    assert record.kind is Kind.DRA_PLUGIN_RECORD and record.subject == f"node/{NODE}"  # type: ignore[attr-defined]
    text = record.patch["metadata"]["annotations"][drastatic.RESTART_ANNOTATION]  # type: ignore[attr-defined]
    written = json.loads(text)
    assert written["uid"] == "uid-1" and written["revision"] == "rev-2" and written["layout"] == _key(desired)
    assert delete.kind is Kind.RESTART_DRA_PLUGIN and delete.action is Action.DELETE  # type: ignore[attr-defined]
    assert delete.patch == {"metadata": {"namespace": NS, "name": "plugin-uid-1", "uid": "uid-1"}}  # type: ignore[attr-defined]


def test_nothing_before_the_agent_has_built_the_layout() -> None:
    desired = _desired()
    assert _changes(_observed(_node(desired, success=False))) == []


def test_nothing_while_a_newer_layout_is_owed() -> None:
    desired = _desired()
    newer = replace(
        desired,
        nodes={
            NODE: replace(
                desired.nodes[NODE],
                gpus=(GpuSpec(0, "H200-141GB", True, (Partition("7g.141gb"),), placements=(Placement(0, 8),)),),
            )
        },
    )
    assert _changes(_observed(_node(desired)), newer) == []  # the node holds rev-2's layout; the plan is another


def test_slices_that_publish_the_plan_need_no_restart() -> None:
    desired = _desired()
    assert _changes(_observed(_node(desired), published=PLANNED)) == []
    # one device short (or one too many) is not the plan
    assert len(_changes(_observed(_node(desired), published=PLANNED[:-1]))) == 2
    assert len(_changes(_observed(_node(desired), published=(*PLANNED, "gpu-0-mig-1g18gb-19-5")))) == 2


def test_a_record_whose_pod_is_still_there_means_the_delete_was_never_made() -> None:
    desired = _desired()
    node = _node(desired, **{drastatic.RESTART_ANNOTATION: _record(_key(desired))})
    (delete,) = _changes(_observed(node))
    assert delete.kind is Kind.RESTART_DRA_PLUGIN and delete.patch["metadata"]["uid"] == "uid-1"  # type: ignore[attr-defined]


def test_a_record_whose_pod_was_replaced_restarts_nothing_until_stale_then_names_the_way_out() -> None:
    desired = _desired()
    node = _node(desired, **{drastatic.RESTART_ANNOTATION: _record(_key(desired))})
    replaced = _observed(node, pods=(_pod("uid-2"),))
    assert _changes(replaced, now=NOW + drastatic.STALE_AFTER) == []  # not past the bounded wait yet
    (stale,) = _changes(replaced, now=NOW + drastatic.STALE_AFTER + timedelta(seconds=1))
    assert stale.action is Action.SKIP and stale.code == draplugin.STALE  # type: ignore[attr-defined]
    assert f"kubectl -n {NS} delete pod" in stale.reason and "plugin-uid-1" in stale.reason  # type: ignore[attr-defined]
    # the old pod still terminating: not the same as "still there"
    terminating = _observed(node, pods=(_pod("uid-1", deleting=True), _pod("uid-2")))
    assert _changes(terminating) == []


def test_a_record_for_an_older_layout_restarts_again_for_the_new_one() -> None:
    desired = _desired()
    node = _node(desired, **{drastatic.RESTART_ANNOTATION: _record("layout-older", uid="uid-0")})
    record, delete = _changes(_observed(node))
    assert record.kind is Kind.DRA_PLUGIN_RECORD and delete.kind is Kind.RESTART_DRA_PLUGIN  # type: ignore[attr-defined]


def test_no_plugin_pod_on_the_node_is_a_finding_and_no_write() -> None:
    desired = _desired()
    (held,) = _changes(_observed(_node(desired), pods=()))
    assert held.action is Action.SKIP and held.code == draplugin.NO_POD and not held.writes  # type: ignore[attr-defined]
    # a pod already terminating (someone else restarts it): wait for its successor
    assert _changes(_observed(_node(desired), pods=(_pod(deleting=True),))) == []


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        "{}",
        json.dumps({"layout": "x", "revision": "r", "pod": "p", "uid": 7, "at": "2026-12-03T12:00:00Z"}),
        json.dumps({"layout": "x", "revision": "r", "pod": "p", "uid": "u", "at": "yesterday"}),
        json.dumps({"layout": "x" * 300, "revision": "r", "pod": "p", "uid": "u", "at": "2026-12-03T12:00:00Z"}),
        "[" * 5000,
        "x" * 5000,
    ],
)
def test_a_record_migplan_cannot_read_restarts_nothing_and_says_so(text: str) -> None:
    desired = _desired()
    (held,) = _changes(_observed(_node(desired, **{drastatic.RESTART_ANNOTATION: text})))
    assert held.action is Action.SKIP and held.code == draplugin.BAD_RECORD and not held.writes  # type: ignore[attr-defined]
    assert f"kubectl annotate node {NODE} {drastatic.RESTART_ANNOTATION}-" in held.reason  # type: ignore[attr-defined]


def test_the_record_round_trips() -> None:
    record = drastatic.PluginRestart("layout-1", "abc", f"{NS}/p", "u", NOW)
    assert drastatic.decode(record.encode()) == (record, None)
    assert drastatic.decode(None) == (None, None)


def test_an_unreadable_node_is_never_restarted() -> None:
    desired = _desired()
    observed = _observed(_node(desired))
    assert draplugin.plugin_changes(desired, observed, NOW, frozenset({NODE}), frozenset({NODE})) == []


# --- the planner's routing -------------------------------------------------------------------------


def test_a_gpucluster_cluster_gets_no_clusterpolicy_and_no_mig_parted_configmap_write() -> None:
    desired = _desired()
    cp = ClusterPolicyState("cluster-policy", "single", None, None, resource_version="1")
    node = ObservedNode(NODE)  # nothing published yet for the agent
    observed = replace(
        _observed(node, published=()), cluster_policy=cp, gpu_clusters=(GpuClusterState("gc", dynamic_mig=False),)
    )
    plan = planner.plan(desired, observed, now=NOW)
    assert not [c for c in plan.writes if c.kind in (Kind.CLUSTER_POLICY, Kind.MIG_CONFIG_MAP)]
    (cp_change,) = [c for c in plan.changes if c.kind is Kind.CLUSTER_POLICY]
    assert cp_change.action is Action.UNCHANGED and "GPUCluster gc" in cp_change.reason
    assert [c.kind for c in plan.writes] == [Kind.AGENT_LAYOUT]  # the node's layout, for its agent
    assert not [c for c in plan.changes if c.kind is Kind.NODE_MIG_CONFIG]


def test_a_dra_static_node_in_gpu_operator_mode_is_laid_out_by_the_agent_beside_a_device_plugin_node() -> None:
    desired = _desired()
    other = replace(desired.nodes[NODE], name="dp")
    both = replace(desired, nodes={NODE: desired.nodes[NODE], "dp": other})
    observed = _observed(ObservedNode(NODE))
    observed = replace(observed, nodes={NODE: ObservedNode(NODE), "dp": ObservedNode("dp")})
    plan = planner.plan(both, observed, now=NOW)
    kinds = {(c.subject, c.kind) for c in plan.changes if c.subject.startswith("node/")}
    assert (f"node/{NODE}", Kind.AGENT_LAYOUT) in kinds and (f"node/{NODE}", Kind.NODE_MIG_CONFIG) not in kinds
    assert ("node/dp", Kind.NODE_MIG_CONFIG) in kinds and ("node/dp", Kind.AGENT_LAYOUT) not in kinds


def test_a_plugin_restart_reads_as_a_pod_deleted_never_as_the_node() -> None:
    """Grouped under its node (subject node/X), the restart deletes the plugin's pod: what a person reads (the
    cycle's output, the demo, errors) names that pod, never "delete node/X"."""
    from reconciler.model.plans import Action, Change, Kind

    restart = Change(
        "node/gpu-a",
        Action.DELETE,
        Kind.RESTART_DRA_PLUGIN,
        reason="restart NVIDIA's DRA kubelet plugin",
        patch={"metadata": {"namespace": "nvidia-dra-driver-gpu", "name": "plugin-x", "uid": "u"}},
    )
    assert restart.headline == "delete pod/nvidia-dra-driver-gpu/plugin-x (DRA kubelet plugin of node/gpu-a)"
    assert str(restart).startswith("delete pod/nvidia-dra-driver-gpu/plugin-x")
    assert "delete node/" not in str(restart)
    label = Change("node/gpu-a", Action.CONFIGURE, Kind.NODE_MIG_CONFIG)
    assert label.headline == "configure node/gpu-a"
