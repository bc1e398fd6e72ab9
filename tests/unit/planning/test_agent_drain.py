"""apply.mode agent: what a node's new layout destroys and who holds it (reconciler/logic/planning/agentdrain.py), and
the
planner's guard, drain and uncordon built on it, for the inputs the table cases (tests/fixtures/planning/
agent-drain-*) do not spell out: poisoned annotations, MIG mode changes, the drain's timeout and kubectl's
filters, a node with a malformed value, the agent's state read strictly."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from reconciler.catalog import load_catalog
from reconciler.logic.codecs import observedcodec
from reconciler.logic.planning import agentdrain, desiredcodec, planner
from reconciler.logic.planning.agentplan import DesiredGpu, DesiredNode, DesiredPartition, desired_from_node_spec
from reconciler.model.inventory import (
    ApplyMode,
    ApplySettings,
    ClusterSpec,
    DesiredState,
    GpuSpec,
    MigStrategy,
    NodeSpec,
    Partition,
    Placement,
)
from reconciler.model.nodeobservation import Holder, NodeObservation, ObservedGpu, ObservedInstance
from reconciler.model.observed import (
    CORDONED_ANNOTATION,
    DRAIN_FOR_ANNOTATION,
    DRAIN_STARTED_ANNOTATION,
    OBSERVED_ANNOTATION,
    ContainerResources,
    Malformed,
    ObservedNode,
    ObservedPod,
    ObservedState,
    OwnerRef,
)
from reconciler.model.plans import Action, Change, Kind

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
OLD = (("2g.35gb", 0, 2), ("1g.18gb", 2, 1), ("1g.18gb", 3, 1), ("3g.71gb", 4, 4))


def _holder(pod: str, profile: str) -> Holder:
    return Holder("ml", pod, "main", "nvidia.com/mig-" + profile)


def _observation(
    *, holders: dict[int, str] | None = None, pids: dict[int, tuple[int, ...]] | None = None, mig: bool = True
) -> NodeObservation:
    """GPU 0 cut as OLD (instance k holds `holders[k]`); MIG disabled: whole-GPU holder `holders[-1]`."""
    holders = holders or {}
    pids = pids or {}
    instances = tuple(
        ObservedInstance(
            k + 1,
            prof,
            Placement(start, size),
            processes=pids.get(k, ()),
            holders=(_holder(holders[k], prof),) if k in holders else (),
        )
        for k, (prof, start, size) in enumerate(OLD)
    )
    whole = (Holder("ml", holders[-1], "main", "nvidia.com/gpu"),) if -1 in holders else ()
    gpu = ObservedGpu(0, "GPU-0", "NVIDIA H200", True, mig, mig, instances if mig else (), holders=whole)
    return NodeObservation(
        "v2", (gpu,), observed_at=NOW, observer="migplan/test", sources={"nvml": "ok", "podResources": "ok"}
    )


def _desired(partitions: tuple[str, ...] | None, *, allow: bool = True) -> DesiredState:
    """One node `n`, GPU 0 cut into `partitions` (None: MIG disabled)."""
    gpu = (
        GpuSpec(index=0, model="H200-141GB", mig_enabled=False)
        if partitions is None
        else GpuSpec(
            index=0,
            model="H200-141GB",
            mig_enabled=True,
            partitions=tuple(Partition(p) for p in partitions),
        )
    )
    settings = ApplySettings(mode=ApplyMode.AGENT, allow_disruption=allow, drain_timeout_seconds=600)
    cluster = ClusterSpec(name="t", mig_strategy=MigStrategy.MIXED, apply=settings)
    return DesiredState(cluster=cluster, nodes={"n": NodeSpec(name="n", gpus=(gpu,))})


def _layout(desired: DesiredState) -> DesiredNode:
    layout, problems = desired_from_node_spec(
        desired.nodes["n"], revision=str(desired.revision), catalog=load_catalog()
    )
    assert not problems
    return layout


def _node(obs: NodeObservation | str | None, **annotations: str) -> ObservedNode:
    ann = dict(annotations)
    if obs is not None:
        ann[OBSERVED_ANNOTATION] = obs if isinstance(obs, str) else observedcodec.encode(obs)
    return ObservedNode(name="n", labels={"nvidia.com/gpu.present": "true"}, annotations=ann)


RS = OwnerRef("ReplicaSet", "rs-1")


def _pod(name: str, resource: str, *, owner: OwnerRef | None = RS) -> ObservedPod:
    return ObservedPod(
        namespace="ml",
        name=name,
        node="n",
        phase="Running",
        containers=(ContainerResources("main", limits={resource: 1}),),
        owner=owner,
    )


def _agent_changes(desired: DesiredState, node: ObservedNode, pods: tuple[ObservedPod, ...] = ()) -> list[Change]:
    plan = planner.plan(desired, ObservedState(nodes={"n": node}, pods=pods), now=NOW)
    return [c for c in plan.changes if c.subject.startswith(("node/", "pod/")) and c.action is not Action.UNCHANGED]


SEVEN = ("1g.18gb",) * 7


def test_only_the_instances_that_change_are_destroyed_and_only_their_holders_named() -> None:
    layout = _layout(_desired(SEVEN))
    found = agentdrain.layout_disruption(_node(_observation(holders={0: "emb-0", 1: "rr-0"})), layout)
    assert found.measured and found.holders == ("ml/emb-0",)  # rr-0's 1g.18gb@2 is kept
    assert "2g.35gb@0:2" in found.effect and "3g.71gb@4:4" in found.effect and "1g.18gb" not in found.effect


def test_a_mig_mode_change_destroys_every_instance_and_takes_a_whole_gpu() -> None:
    off = _layout(_desired(None))
    found = agentdrain.layout_disruption(_node(_observation(holders={1: "rr-0"})), off)
    assert found.holders == ("ml/rr-0",) and "MIG mode change" in found.effect  # a kept profile is destroyed too
    on = _layout(_desired(SEVEN))
    whole = agentdrain.layout_disruption(_node(_observation(holders={-1: "train-0"}, mig=False)), on)
    assert whole.holders == ("ml/train-0",)


def test_processes_no_pod_accounts_for_cannot_be_drained() -> None:
    desired = _desired(SEVEN)
    node = _node(_observation(pids={0: (4242,)}))
    (held,) = _agent_changes(desired, node)
    assert held.action is Action.SKIP and held.code == "MP539" and "pids 4242" in held.blocked_by[0]


@pytest.mark.parametrize(
    "poison",
    [
        "not json",
        '{"version":"v9","gpus":[]}',
        '{"version":"v2","gpus":[{"index":"0"}]}',
        '{"version":"v2","gpus":' + "[" * 200 + "]" * 200 + "}",
        '{"version":"v2","gpus":[],"observedAt":"yesterday"}',
        "x" * (observedcodec.MAX_OBSERVED_BYTES + 1),
    ],
)
def test_a_poisoned_observation_is_never_believed_it_falls_back_to_inference(poison: str) -> None:
    """Anyone who can write the Node can write the annotation: a malformed one is not read as 'nothing held'
    but falls back to the pods' requests, and the reason says so."""
    desired = _desired(SEVEN, allow=False)
    node = _node(poison, **{desiredcodec.ANNOTATION: desiredcodec.encode(_old_layout())})
    pods = (_pod("emb-0", "nvidia.com/mig-2g.35gb"), _pod("rr-0", "nvidia.com/mig-1g.18gb"))
    (held,) = _agent_changes(desired, node, pods)
    assert held.kind is Kind.AGENT_LAYOUT and held.action is Action.SKIP and held.code == "MP519"
    assert held.blocked_by == ("ml/emb-0",)  # previous layout from the published annotation: 2g and 3g destroyed
    assert "observation unreadable" in held.reason and "inferred" in held.reason


def _old_layout() -> DesiredNode:
    parts = tuple(DesiredPartition(p, Placement(s, z)) for p, s, z in OLD)
    return DesiredNode("n", "main@sha1:" + "1" * 40, (DesiredGpu(0, True, parts),))


def test_holders_unknown_without_the_kubelet_and_a_poisoned_published_layout_means_every_gpu_pod() -> None:
    desired = _desired(SEVEN, allow=False)
    no_kubelet = replace(_observation(), sources={"nvml": "ok", "podResources": "socket not found"})
    pods = (_pod("emb-0", "nvidia.com/mig-2g.35gb"), _pod("rr-0", "nvidia.com/mig-1g.18gb"))
    (held,) = _agent_changes(desired, _node(no_kubelet), pods)
    assert held.blocked_by == ("ml/emb-0",) and "without the kubelet's holders" in held.reason
    (held,) = _agent_changes(desired, _node(None, **{desiredcodec.ANNOTATION: '{"version":"v1","gpus":7}'}), pods)
    assert held.blocked_by == ("ml/emb-0", "ml/rr-0") and "unknown previous layout" in held.reason


def test_the_drain_times_out_and_names_the_pods_nothing_forced() -> None:
    desired = _desired(SEVEN)
    key = agentdrain.layout_key(_layout(desired))
    marks = {CORDONED_ANNOTATION: "true", DRAIN_STARTED_ANNOTATION: "2026-12-02T09:40:00Z", DRAIN_FOR_ANNOTATION: key}
    node = replace(_node(_observation(holders={0: "emb-0"}), **marks), unschedulable=True)
    (held,) = _agent_changes(desired, node, (_pod("emb-0", "nvidia.com/mig-2g.35gb"),))
    assert held.kind is Kind.AGENT_LAYOUT and held.code == "MP538" and "nothing is deleted by force" in held.reason


def test_kubectl_drain_filters_hold_a_daemonset_or_bare_pod() -> None:
    desired = _desired(SEVEN)
    node = _node(_observation(holders={0: "probe-0"}))
    (held,) = _agent_changes(
        desired, node, (_pod("probe-0", "nvidia.com/mig-2g.35gb", owner=OwnerRef("DaemonSet", "p")),)
    )
    assert held.code == "MP539" and held.blocked_by == ("ml/probe-0",)
    (held,) = _agent_changes(desired, node, (_pod("probe-0", "nvidia.com/mig-2g.35gb", owner=None),))
    assert held.code == "MP539"


def test_a_node_with_a_malformed_value_is_neither_cordoned_nor_evicted() -> None:
    desired = _desired(SEVEN)
    node = replace(
        _node(_observation(holders={0: "emb-0"})), malformed=(Malformed("label x", "?", "not a value migplan knows"),)
    )
    (held,) = _agent_changes(desired, node, (_pod("emb-0", "nvidia.com/mig-2g.35gb"),))
    assert held.action is Action.SKIP and "MP530" in held.reason


def test_layout_key_names_the_layout_not_the_revision() -> None:
    a = _layout(_desired(SEVEN))
    assert agentdrain.layout_key(a) == agentdrain.layout_key(replace(a, revision="other"))
    assert agentdrain.layout_key(a) != agentdrain.layout_key(_old_layout())


@pytest.mark.parametrize(
    ("label", "revision", "built", "expected"),
    [
        ("success", "R", True, True),
        ("success", "R", False, False),  # the state is the previous layout's: the GPUs are not cut yet
        ("success", "older", True, False),
        ("pending", "R", True, False),
        ("Success", "R", True, False),  # not a word the agent writes
        ("success", None, True, False),
    ],
)
def test_the_agents_success_is_read_strictly(label: str, revision: str | None, built: bool, expected: bool) -> None:
    layout = replace(_layout(_desired(SEVEN)), revision="R")
    if built:
        gpu = ObservedGpu(
            0,
            "GPU-0",
            "NVIDIA H200",
            True,
            True,
            True,
            tuple(ObservedInstance(k + 1, p.profile, p.placement) for k, p in enumerate(layout.gpus[0].partitions)),
        )
        obs = NodeObservation("v2", (gpu,), observed_at=NOW, sources={"nvml": "ok", "podResources": "ok"})
    else:
        obs = _observation()
    ann = {} if revision is None else {agentdrain.STATE_REVISION_ANNOTATION: revision}
    node = replace(_node(obs, **ann), labels={agentdrain.STATE_LABEL: label})
    assert agentdrain.agent_reported_success(node, layout) is expected
    poisoned = replace(node, annotations={**node.annotations, OBSERVED_ANNOTATION: "{"})
    assert not agentdrain.agent_reported_success(poisoned, layout)
