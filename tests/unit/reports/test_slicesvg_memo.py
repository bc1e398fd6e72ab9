"""Issue 29: the SVG fragments memoized across GPUs change no byte of any map. A small fleet whose GPUs share
cuts, holders, owners and states (and differ by node, index, model, slice count, caption, sources) is drawn
twice: once with the memo bypassed (every fragment drawn anew, the path before the memo) and once warm, in
fleet order and reversed; every file must be byte-identical."""

from __future__ import annotations

import itertools

import pytest

from reconciler.logic.reports import slicesvg
from reconciler.model.drift import GpuSliceMap, SlicePartition

CUTS: tuple[tuple[tuple[str, int | None, int], ...], ...] = (
    (("3g.71gb", 4, 4), ("2g.35gb", 0, 2), ("1g.18gb", 2, 1), ("1g.18gb", 3, 1)),
    tuple(("1g.18gb", i, 1) for i in range(7)),
    (("4g.71gb", 0, 4), ("3g.71gb", 4, 4)),
    (("7g.141gb", 0, 8),),
    (("3g.40gb", None, 4), ("1g.10gb", None, 1)),  # placements left to the driver (a second row, dashed)
)
HOLDERS = (None, "ml/vllm-0", "ml/a-very-long-pod-name-that-does-not-fit-in-a-one-slice-box-0", 'x/<b>&"')
STATES = ("planned", "moved", "unplanned", "missing")


def _gpu(node: int, index: int) -> GpuSliceMap:
    cut = CUTS[(node + index) % len(CUTS)]
    parts = []
    for k, (profile, start, size) in enumerate(cut):
        state = STATES[(node * 3 + index + k) % len(STATES)] if node % 2 else "planned"
        parts.append(
            SlicePartition(
                profile,
                None if state == "missing" else start,
                size,
                owner=f"team-{(node + k) % 3}" if k % 2 == 0 else None,
                holder=HOLDERS[(node + index + k) % len(HOLDERS)],
                state=state,
                planned_start=(start or 0) if state in ("moved", "missing") else None,
            )
        )
    return GpuSliceMap(
        index=index,
        model=("H200-141GB", "A100-40GB")[node % 2],
        mig_enabled=(node + index) % 7 != 0,
        memory_slices=(8, 8, 7, 4)[node % 4],
        partitions=tuple(parts),
        layout_source=("planned", "observed")[(node // 2) % 2],
        holders_source=("inferred", "observed")[(node // 3) % 2],
    )


def _drawings() -> list[tuple[str, GpuSliceMap, str, bool]]:
    out = []
    for node, index in itertools.product(range(12), range(4)):
        caption = ("planned cut", "observed cut", "before: main@abc")[node % 3]
        out.append((f"gpu-{node:02d}", _gpu(node, index), caption, node % 5 != 4))
    return out


def _draw_all(drawings: list[tuple[str, GpuSliceMap, str, bool]]) -> list[bytes]:
    return [slicesvg.gpu_svg(g, node=n, caption=c, occupancy=occ) for n, g, c, occ in drawings]


def test_memoized_maps_are_byte_identical_to_maps_drawn_without_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    drawings = _drawings()
    with monkeypatch.context() as m:  # the memo bypassed: every fragment drawn anew, as before issue 29
        for name in ("_partition", "_legend", "_ruler"):
            m.setattr(slicesvg, name, getattr(slicesvg, name).__wrapped__)
        before = _draw_all(drawings)
    slicesvg.clear_fragments()
    warm = _draw_all(drawings)
    assert slicesvg._partition.cache_info().hits > 0  # the fleet does share fragments: the memo is exercised
    again = _draw_all(drawings[::-1])[::-1]  # a warm memo filled in another order
    assert len(set(before)) == len(drawings)  # every map differs: a fragment of the wrong GPU would show
    for (node, gpu, caption, occupancy), old, new, newer in zip(drawings, before, warm, again, strict=True):
        where = f"{node} gpu{gpu.index} {caption!r} occupancy={occupancy}"
        assert new == old, where
        assert newer == old, where


def test_plan_maps_and_node_maps_are_unchanged_by_a_warm_memo() -> None:
    gpus = {f"gpu-{n:02d}": tuple(_gpu(n, i) for i in range(4)) for n in range(6)}
    slicesvg.clear_fragments()
    cold = {node: slicesvg.node_maps(node, gs) for node, gs in gpus.items()}
    plan_cold = slicesvg.plan_maps(gpus, gpus, [(n, 0) for n in gpus], before_caption="b", after_caption="a")
    # warm: the fragments of every map above are in the memo now
    assert {node: slicesvg.node_maps(node, gs) for node, gs in gpus.items()} == cold
    assert slicesvg.plan_maps(gpus, gpus, [(n, 0) for n in gpus], before_caption="b", after_caption="a") == plan_cold
