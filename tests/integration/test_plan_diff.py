"""The pure partition diff behind `migplan plan`, on hand-built desired states (no Git)."""

from __future__ import annotations

from dataclasses import replace

from reconciler.logic.planning import disruption
from reconciler.logic.review.revdiff import ChangeKind, diff_states, disrupted_pods, disruptions
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
from reconciler.model.observed import ContainerResources, ObservedNode, ObservedPod, ObservedState
from reconciler.model.revisions import Revision

CLUSTER = ClusterSpec(name="c", mig_strategy=MigStrategy.MIXED)


def _gpu(model: str = "H200-141GB", *parts: tuple[str, int, int, str | None], enabled: bool = True) -> GpuSpec:
    return GpuSpec(
        index=0,
        model=model,
        mig_enabled=enabled,
        partitions=tuple(Partition(p, placement=s, owner=o) for p, s, _size, o in parts),
        placements=tuple(Placement(s, size) for _p, s, size, _o in parts),
    )


def _state(gpu: GpuSpec, sha: str, cluster: ClusterSpec = CLUSTER) -> DesiredState:
    return DesiredState(cluster=cluster, nodes={"n": NodeSpec("n", (gpu,))}, revision=Revision("main", sha * 40))


BASE = _gpu("H200-141GB", ("3g.71gb", 4, 4, "a"), ("2g.35gb", 0, 2, "b"), ("1g.18gb", 2, 1, None))


def test_identical_states_have_no_changes() -> None:
    d = diff_states(_state(BASE, "a"), _state(BASE, "b"))
    assert d.empty and d.changes == () and d.before.sha == "a" * 40 and d.after.sha == "b" * 40


def test_owner_move_create_destroy() -> None:
    after = _gpu("H200-141GB", ("3g.71gb", 4, 4, "z"), ("2g.35gb", 2, 2, "b"), ("1g.18gb", 0, 1, "new"))
    d = diff_states(_state(BASE, "a"), _state(after, "b"))
    got = {(c.kind, c.profile, str(c.before), str(c.after), c.owner_before, c.owner_after) for c in d.changes}
    assert got == {
        (ChangeKind.OWNER, "3g.71gb", "4:4", "4:4", "a", "z"),
        (ChangeKind.MOVE, "2g.35gb", "0:2", "2:2", "b", "b"),
        (ChangeKind.DESTROY, "1g.18gb", "2:1", "None", None, None),
        (ChangeKind.CREATE, "1g.18gb", "None", "0:1", None, "new"),
    }
    # destroys are listed before creates, as they must happen on the GPU
    kinds = [c.kind for c in d.changes]
    assert kinds.index(ChangeKind.DESTROY) < kinds.index(ChangeKind.CREATE)


def test_model_change_rebuilds_and_mig_toggle_is_noted() -> None:
    other = _gpu("H100-80GB", ("7g.80gb", 0, 8, "a"))
    d = diff_states(_state(BASE, "a"), _state(other, "b"))
    assert d.count(ChangeKind.DESTROY) == 3 and d.count(ChangeKind.CREATE) == 1
    assert any("H200-141GB -> H100-80GB" in n.message for n in d.notes)
    off = replace(BASE, mig_enabled=False)
    d = diff_states(_state(BASE, "a"), _state(off, "b"))
    assert d.count(ChangeKind.DESTROY) == 3 and [n.message for n in d.notes] == ["MIG disabled"]


def test_strategy_change_is_a_cluster_note() -> None:
    single = replace(CLUSTER, mig_strategy=MigStrategy.SINGLE)
    d = diff_states(_state(BASE, "a"), _state(BASE, "b", single))
    assert d.changes == () and len(d.cluster_notes) == 1 and "mixed -> single" in d.cluster_notes[0]


def _pods(*specs: tuple[str, str, str, str]) -> ObservedState:
    pods = tuple(
        ObservedPod(
            namespace="default",
            name=name,
            node="n",
            phase=phase,
            containers=(ContainerResources("c", limits={res: 1}),),
            labels={"app": app},
        )
        for name, res, app, phase in specs
    )
    return ObservedState(nodes={"n": ObservedNode("n")}, pods=pods)


def test_disrupted_pods_mixed_names_the_holder_of_each_partition() -> None:
    after = _gpu("H200-141GB", ("3g.71gb", 4, 4, "a"), ("2g.35gb", 2, 2, "b"))  # 2g moved, 1g destroyed
    diff = diff_states(_state(BASE, "a"), _state(after, "b"))
    observed = _pods(
        ("b-pod", "nvidia.com/mig-2g.35gb", "b", "Running"),
        ("a-pod", "nvidia.com/mig-3g.71gb", "a", "Running"),
        ("done", "nvidia.com/mig-1g.18gb", "x", "Succeeded"),  # finished: holds nothing
    )
    got = {diff.changes[i].kind: pods for i, pods in disrupted_pods(diff, _state(BASE, "a"), observed).items()}
    assert got == {ChangeKind.MOVE: ("default/b-pod",)}


def test_disrupted_pods_single_names_every_gpu_pod_on_the_node() -> None:
    single = replace(CLUSTER, mig_strategy=MigStrategy.SINGLE)
    one = _gpu("H200-141GB", ("1g.18gb", 0, 1, None), ("1g.18gb", 1, 1, None))
    fewer = _gpu("H200-141GB", ("1g.18gb", 0, 1, None))
    diff = diff_states(_state(one, "a", single), _state(fewer, "b", single))
    observed = _pods(("p1", "nvidia.com/gpu", "x", "Running"), ("p2", "nvidia.com/gpu", "y", "Pending"))
    got = disrupted_pods(diff, _state(one, "a", single), observed)
    assert list(got.values()) == [("default/p1", "default/p2")]


def _node_state(gpus: tuple[GpuSpec, ...], sha: str, mode: ApplyMode = ApplyMode.GPU_OPERATOR) -> DesiredState:
    cluster = replace(CLUSTER, apply=ApplySettings(mode=mode))
    return DesiredState(cluster=cluster, nodes={"n": NodeSpec("n", gpus)}, revision=Revision("main", sha * 40))


def test_recut_of_one_partition_disrupts_the_pod_on_another_partition_of_that_gpu_under_mig_parted() -> None:
    """Merging the two 1g.18gb into a 2g.35gb: mig-parted's SetMigConfig replaces the whole GPU, so the pod on
    the untouched 3g.71gb is disrupted; the node agent (nvml model) would leave it running."""
    base = _gpu(
        "H200-141GB", ("3g.71gb", 4, 4, "a"), ("2g.35gb", 0, 2, "b"), ("1g.18gb", 2, 1, None), ("1g.18gb", 3, 1, None)
    )
    recut = _gpu("H200-141GB", ("3g.71gb", 4, 4, "a"), ("2g.35gb", 0, 2, "b"), ("2g.35gb", 2, 2, None))
    observed = _pods(("a-pod", "nvidia.com/mig-3g.71gb", "a", "Running"))
    before, after = _node_state((base,), "a"), _node_state((recut,), "b")
    diff = diff_states(before, after)
    got = disruptions(diff, before, after, observed)
    assert got.model is disruption.Model.MIG_PARTED
    assert [(g.node, g.gpu, g.pods) for g in got.gpus] == [("n", 0, ("default/a-pod",))]
    assert "re-cuts GPU 0" in got.gpus[0].reason and got.clients_paused == ("n",)
    assert got.pods == {"default/a-pod"}
    agent = _node_state((recut,), "b", ApplyMode.AGENT)
    finer = disruptions(diff, before, agent, observed)
    assert finer.model is disruption.Model.NVML and finer.pods == frozenset() and finer.gpus == ()


def test_mode_flip_on_gpu_1_disrupts_the_pod_on_gpu_0_under_mig_parted() -> None:
    """ApplyMigMode clears every MIG GPU of the node when one GPU's MIG mode changes."""
    gpu0 = _gpu("H200-141GB", ("7g.141gb", 0, 8, "a"))
    gpu1 = replace(_gpu("H200-141GB", ("3g.71gb", 4, 4, None), ("2g.35gb", 0, 2, None)), index=1)
    off = replace(gpu1, mig_enabled=False, partitions=(), placements=())
    observed = _pods(("a-pod", "nvidia.com/mig-7g.141gb", "a", "Running"))
    before, after = _node_state((gpu0, gpu1), "a"), _node_state((gpu0, off), "b")
    diff = diff_states(before, after)
    got = disruptions(diff, before, after, observed)
    assert {g.gpu for g in got.gpus} == {0, 1} and got.pods == {"default/a-pod"}
    assert "MIG mode changes on GPU 1" in got.gpus[0].reason
    assert disrupted_pods(diff, before, observed) == {}  # the per-partition view misses it


def test_observed_holders_say_which_gpu_a_pod_really_has() -> None:
    """Two GPUs with a 3g.71gb each; the merge re-cuts GPU 1 only. Inference (pods matched to partitions in
    name order) puts p0 on GPU 0; the node's observer says the kubelet gave p0 GPU 1's and p1 GPU 0's: the
    guard names p0, under both models (agent: the partition destroyed; mig-parted: the GPU re-cut)."""
    from datetime import UTC, datetime, timedelta

    from reconciler.logic.codecs import observedcodec
    from reconciler.logic.observe import observation
    from reconciler.model.inventory import Placement
    from reconciler.model.nodeobservation import Holder, NodeObservation, ObservedGpu, ObservedInstance
    from reconciler.model.observed import OBSERVED_ANNOTATION

    gpu0 = _gpu("H200-141GB", ("3g.71gb", 4, 4, None), ("2g.35gb", 0, 2, None))
    gpu1 = replace(gpu0, index=1)
    recut1 = replace(_gpu("H200-141GB", ("7g.141gb", 0, 8, None)), index=1)
    now = datetime(2026, 12, 2, 10, tzinfo=UTC)

    def real(index: int, pod: str) -> ObservedGpu:
        held = ObservedInstance(1, "3g.71gb", Placement(4, 4), f"MIG-{index}", (), (Holder("default", pod, "c", "x"),))
        free = ObservedInstance(2, "2g.35gb", Placement(0, 2), f"MIG-{index}-2")
        return ObservedGpu(index, f"GPU-{index}", "NVIDIA H200", True, True, False, (held, free))

    obs = NodeObservation(
        "v2",
        (real(0, "p1"), real(1, "p0")),
        now - timedelta(minutes=1),
        observation.CONTROLLER_OBSERVER,
        {"nvml": "ok", "podResources": "ok"},
    )
    pods = _pods(("p0", "nvidia.com/mig-3g.71gb", "x", "Running"), ("p1", "nvidia.com/mig-3g.71gb", "y", "Running"))
    text = observedcodec.encode(obs)
    decoded, _ = observation.read_observation({OBSERVED_ANNOTATION: text})
    seen = replace(pods, nodes={"n": ObservedNode("n", annotations={OBSERVED_ANNOTATION: text}, observation=decoded)})
    for mode in (ApplyMode.AGENT, ApplyMode.GPU_OPERATOR):
        before, after = _node_state((gpu0, gpu1), "a", mode), _node_state((gpu0, recut1), "b", mode)
        diff = diff_states(before, after)
        inferred = disruptions(diff, before, after, pods, now)
        observed = disruptions(diff, before, after, seen, now)
        assert observed.pods == {"default/p0"}, mode
        assert inferred.pods == {"default/p1"}, mode  # the guess, wrong here
        stale = disruptions(diff, before, after, seen, now + timedelta(hours=1))
        assert stale.pods == inferred.pods  # a silent observer's facts are not used
