"""expected_resources remembers its answer per GPU tuple: never a stale or shared answer."""

from __future__ import annotations

import dataclasses

from reconciler.logic.observe import occupancy
from reconciler.logic.observe.occupancy import expected_resources
from reconciler.model.inventory import GpuSpec, MigStrategy, NodeSpec, Partition


def _node(*profiles: str) -> NodeSpec:
    parts = tuple(Partition(p, None, None) for p in profiles)
    return NodeSpec(name="n", gpus=(GpuSpec(index=0, model="H200-141GB", mig_enabled=True, partitions=parts),))


def test_answers_follow_the_gpus_and_strategy_and_are_never_shared() -> None:
    a = _node("3g.71gb", "1g.18gb")
    first = expected_resources(a, MigStrategy.MIXED)
    assert first == {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.71gb": 1, "nvidia.com/mig-1g.18gb": 1}
    first["nvidia.com/gpu"] = 99  # a caller that changes its copy changes nothing for the next one
    assert expected_resources(a, MigStrategy.MIXED)["nvidia.com/gpu"] == 0
    assert expected_resources(a, MigStrategy.SINGLE) == {"nvidia.com/gpu": 2}
    # an equal node with other GPUs (another revision) gets its own answer
    b = dataclasses.replace(a, gpus=_node("7g.141gb").gpus)
    assert expected_resources(b, MigStrategy.MIXED) == {"nvidia.com/gpu": 0, "nvidia.com/mig-7g.141gb": 1}
    assert expected_resources(a, MigStrategy.MIXED)["nvidia.com/mig-3g.71gb"] == 1


def test_the_memo_is_bounded() -> None:
    for i in range(occupancy._EXPECTED_LIMIT + 10):
        expected_resources(_node(*(["1g.18gb"] * (i % 7 + 1))), MigStrategy.MIXED)
    assert len(occupancy._EXPECTED) <= occupancy._EXPECTED_LIMIT
