"""The MR comment's "claims and pods disrupted" without a node observer: a pod holding a partition through a
ResourceClaim (it requests no nvidia.com/mig-* resource) is named from its claim, per partition (agent's NVML model)
and per GPU (mig-parted's model), exactly like a device-plugin holder."""

from __future__ import annotations

from dataclasses import replace

from reconciler.logic.review.revdiff import ChangeKind, diff_states, disrupted_pods, disruptions
from reconciler.model.dra import ClaimedDevice, ObservedClaim
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
from reconciler.model.observed import ObservedNode, ObservedState
from reconciler.model.revisions import Revision

CLUSTER = ClusterSpec(name="c", mig_strategy=MigStrategy.MIXED)


def _gpu(index: int, *parts: tuple[str, int, int]) -> GpuSpec:
    return GpuSpec(
        index=index,
        model="H200-141GB",
        mig_enabled=True,
        partitions=tuple(Partition(p, placement=s) for p, s, _ in parts),
        placements=tuple(Placement(s, size) for _, s, size in parts),
    )


BASE = (_gpu(0, ("7g.141gb", 0, 8)), _gpu(1, ("3g.71gb", 4, 4), ("2g.35gb", 0, 2), ("1g.18gb", 2, 1)))
RECUT = (_gpu(0, ("7g.141gb", 0, 8)), _gpu(1, ("3g.71gb", 4, 4), ("2g.35gb", 2, 2), ("1g.18gb", 0, 1)))


def _state(gpus: tuple[GpuSpec, ...], sha: str, mode: ApplyMode = ApplyMode.AGENT) -> DesiredState:
    cluster = replace(CLUSTER, apply=ApplySettings(mode=mode))
    return DesiredState(cluster=cluster, nodes={"n": NodeSpec("n", gpus)}, revision=Revision("main", sha * 40))


def _claimed(*devices: str) -> ObservedState:
    claims = tuple(
        ObservedClaim("default", f"c{i}", (ClaimedDevice("gpu.nvidia.com", "n", d),), (f"default/p{i}",))
        for i, d in enumerate(devices)
    )
    return ObservedState(nodes={"n": ObservedNode("n")}, claims=claims)


def test_a_claimed_partition_a_move_destroys_names_its_pod() -> None:
    diff = diff_states(_state(BASE, "a"), _state(RECUT, "b"))
    observed = _claimed("gpu-1-mig-2g35gb-14-0", "gpu-1-mig-3g71gb-9-4")  # the 3g.71gb stays where it is
    got = {diff.changes[i].profile: pods for i, pods in disrupted_pods(diff, _state(BASE, "a"), observed).items()}
    assert got == {"2g.35gb": ("default/p0",)}
    assert disruptions(diff, _state(BASE, "a"), _state(RECUT, "b"), observed).pods == {"default/p0"}


def test_without_claims_nobody_is_named() -> None:
    diff = diff_states(_state(BASE, "a"), _state(RECUT, "b"))
    assert disrupted_pods(diff, _state(BASE, "a"), _claimed()) == {}
    # a claim at a placement the plan does not have, or a name that does not parse, holds no planned partition
    assert disrupted_pods(diff, _state(BASE, "a"), _claimed("gpu-1-mig-2g35gb-14-6", "gpu-1-mig-x")) == {}


def test_mig_parted_names_every_claim_on_a_rebuilt_gpu() -> None:
    more = (BASE[0], _gpu(1, ("3g.71gb", 4, 4), ("2g.35gb", 0, 2), ("1g.18gb", 2, 1), ("1g.18gb", 3, 1)))
    before, after = _state(BASE, "a", ApplyMode.GPU_OPERATOR), _state(more, "b", ApplyMode.GPU_OPERATOR)
    diff = diff_states(before, after)
    assert [c.kind for c in diff.changes] == [ChangeKind.CREATE]  # new counts: mig-parted rebuilds GPU 1
    observed = _claimed("gpu-1-mig-3g71gb-9-4", "gpu-0-mig-7g141gb-0-0", "gpu-1")
    got = disruptions(diff, before, after, observed)
    # mig-parted rebuilds GPU 1 whole: the 3g.71gb's pod and the whole-GPU claim on it; GPU 0 is untouched
    assert [(g.gpu, g.pods) for g in got.gpus] == [(1, ("default/p0", "default/p2"))]
