"""Issue 29 (`first5k`): the SVG maps carry the attributes their labels share once (on <svg> and on a <g> around the
labels) and draw exactly what the plain renderer (tests/helpers/reportrender_v0) drew with every attribute on every
<text>; tests/helpers/svgdrawn says what "draw the same" means and is shown here to tell a changed drawing apart."""

from __future__ import annotations

import itertools
import re

import pytest
from helpers import REPO, load_script, svgdrawn
from helpers import reportrender_v0 as plain

from reconciler.catalog import load_catalog
from reconciler.logic.reports import nodepages, reports, slicesvg
from reconciler.model.drift import GpuSliceMap, SlicePartition

bench = load_script("bench_reports_drawn", REPO / "benchmarks" / "reports.py")

# Holders as a report meets them: none (free), the owner's pod, a foreign pod (another team's), several pods, a name
# too long for any box, markup and characters XML forbids.
HOLDERS = (None, "team-a/vllm-0", "other/batch-7", "a/p-1,b/p-2", "ns/" + "x" * 90, 'ns/<b>&"q"\x01</b>')
OWNERS = (None, "team-a", 'team <&> "quoted"', "o" * 70)


def _catalog_gpus() -> list[GpuSliceMap]:
    """Every profile of every catalog model at every placement it may take (or left to the driver where the catalog
    publishes none), alone on its GPU, in every state, held or free, by a foreign, shared or hostile holder."""
    gpus = []
    count = itertools.count()
    for model in load_catalog():
        for profile in model.profiles.values():
            starts: tuple[int | None, ...] = profile.placements.starts if profile.placements else (None,)
            for start in starts:
                i = next(count)
                part = SlicePartition(
                    profile.name,
                    start,
                    profile.memory_slices,
                    owner=OWNERS[i % len(OWNERS)],
                    holder=HOLDERS[i % len(HOLDERS)],
                    state=("planned", "moved", "unplanned", "missing")[(i // 3) % 4],
                    planned_start=(None, 0, 4)[i % 3],
                )
                gpus.append(
                    GpuSliceMap(
                        i % 8,
                        model.key,
                        True,
                        model.memory_slices,
                        (part,),
                        layout_source=("planned", "observed")[i % 2],
                        holders_source=("inferred", "observed")[(i // 2) % 2],
                    )
                )
    return gpus


CATALOG_GPUS = _catalog_gpus()


def test_every_catalog_profile_at_every_placement_draws_what_the_plain_renderer_drew() -> None:
    profiles = {(m.key, p.name) for m in load_catalog() for p in m.profiles.values()}
    assert {(g.model, g.partitions[0].profile) for g in CATALOG_GPUS} == profiles and len(profiles) > 50
    slicesvg.clear_fragments()
    for gpu, (caption, occupancy) in itertools.product(
        CATALOG_GPUS, (("planned cut", True), ("before: main@<a>", False))
    ):
        node = f"node-{gpu.model}-{gpu.index}"
        got = slicesvg.gpu_svg(gpu, node=node, caption=caption, occupancy=occupancy)
        expected = plain.gpu_svg(gpu, node=node, caption=caption, occupancy=occupancy)
        assert got != expected  # the bytes changed on purpose ...
        assert svgdrawn.drawn(got) == svgdrawn.drawn(expected), (gpu, caption)  # ... the drawing did not


def test_a_whole_cut_of_one_gpu_with_every_holder_kind_draws_the_same() -> None:
    parts = tuple(
        SlicePartition("1g.18gb", i, 1, owner=OWNERS[i % len(OWNERS)], holder=HOLDERS[i % len(HOLDERS)])
        for i in range(7)
    )
    for gpu in (
        GpuSliceMap(3, "H200-141GB", True, 8, parts, holders_source="observed"),
        GpuSliceMap(3, "H200-141GB", True, 8, (*parts[:2], SlicePartition("3g.71gb", None, 4, "t", None, "missing"))),
        GpuSliceMap(3, "H200-141GB", False, 8),
    ):
        got, expected = slicesvg.gpu_svg(gpu, node="n<&>"), plain.gpu_svg(gpu, node="n<&>")
        assert svgdrawn.drawn(got) == svgdrawn.drawn(expected)


def _without_first(svg: bytes, pattern: str) -> bytes:
    text = svg.decode()
    changed = re.sub(pattern, "", text, count=1)
    assert changed != text, pattern
    return changed.encode()


@pytest.mark.parametrize(
    "edit",
    [
        ' font-family="[^"]*"',  # the map's font, on <svg>
        ' fill="#1b3a12"',  # a free partition's ink, on its <g>
        ' font-size="13" font-weight="bold"',  # a profile label's own size and weight
        ' text-anchor="middle"',  # the ruler's anchor
        ' fill="#333333"',  # the legend's ink
        ' stroke-width="2"',  # a box's outline (not a text property)
    ],
)
def test_the_comparison_sees_a_lost_attribute(edit: str) -> None:
    """svgdrawn is no tautology: dropping any one carried attribute changes what a map draws."""
    gpu = GpuSliceMap(0, "H200-141GB", True, 8, (SlicePartition("2g.35gb", 0, 2), SlicePartition("3g.71gb", 4, 4)))
    svg = slicesvg.gpu_svg(gpu, node="n")
    assert svgdrawn.drawn(_without_first(svg, edit)) != svgdrawn.drawn(plain.gpu_svg(gpu, node="n"))


def test_the_comparison_sees_a_property_put_where_it_would_reach_more_elements() -> None:
    """A stroke on the ruler's group would outline its numbers: another drawing, though every rect keeps its own."""
    gpu = GpuSliceMap(0, "H200-141GB", True, 8, (SlicePartition("7g.141gb", 0, 8),))
    svg = slicesvg.gpu_svg(gpu, node="n").replace(
        b'<g text-anchor="middle" font-size="11" fill="#666666">',
        b'<g text-anchor="middle" font-size="11" fill="#666666" stroke="#cccccc">',
    )
    assert b'stroke="#cccccc">' in svg
    assert svgdrawn.drawn(svg) != svgdrawn.drawn(plain.gpu_svg(gpu, node="n"))


def test_a_fleet_map_is_about_two_thirds_of_its_plain_bytes() -> None:
    """The point of the change (bytes the packs delta-search, deflate and hash): measured on the benchmark fleet."""
    report = bench.fleet(40, 100.0)
    new = old = 0
    for node in sorted(reports.mapped_nodes(report)):
        for g in report.slice_maps[node]:
            new += len(slicesvg.gpu_svg(g, node=node, caption=nodepages.cut_caption(g)))
            old += len(plain.gpu_svg(g, node=node, caption=nodepages.cut_caption(g)))
    assert new < 0.7 * old, (new, old)
