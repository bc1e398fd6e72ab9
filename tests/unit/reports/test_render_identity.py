"""Issue 29: the faster node pages are byte for byte the plain renderers' (tests/helpers/reportrender_v0), and the
faster SVG maps draw what the plain renderer's draw (tests/helpers/svgdrawn: the same elements in the same order, with
the same text and the same effective presentation after inheritance; `first5k` moved the attributes the labels share
onto the <svg> and <g> around them, so the bytes differ on purpose).

Every page and map of three kinds of report is rendered by both and compared: the synthetic fleet of the benchmarks
(8 H200 each, half the partitions held by a pod), whole and with 1% drift, the fixtures' drift reports (observed
cuts, moved, unplanned and missing partitions, findings) and a hostile fleet (markup, characters XML forbids,
backticks, long and non-ASCII names, every partition state, placements left to the driver, MIG disabled), each drawn
with and without occupancy and under several captions. The memo is cold, then warm, then warm in another order, so a
fragment drawn for one GPU and reused for another would show."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from helpers import REPO, load_script, reportfleet, svgdrawn
from helpers import planning as fixtures
from helpers import reportrender_v0 as plain
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.logic.reports import nodepages, reports, slicesvg
from reconciler.model.drift import DriftReport, GpuSliceMap, Holder, NodeReport, NodeStatus, Occupancy, SlicePartition
from reconciler.model.revisions import Revision

bench = load_script("bench_reports_identity", REPO / "benchmarks" / "reports.py")


def _fixture(case: str) -> DriftReport:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read(case, "observed.yaml") or {}, desired)
    report: DriftReport = drift.build_report(
        desired, observed, drift.analyze(desired, observed, now=now), planner.plan(desired, observed, now=now)
    )
    return report


HOSTILE = (
    None,
    "",
    "ml/vllm-0",
    "ml/a-very-long-pod-name-that-does-not-fit-in-a-one-slice-box-0",
    "no-namespace-and-a-name-far-too-long-for-any-box-of-this-map",
    'x/<b>&"it\'s"</b>',
    "ns/ctl\x00\x07\x1f\x7f\ufffe\uffff-end",
    "ns/tab\there\nnewline\r",
    "ns/`tick``ticks```",
    "ns/ünïcødé-名前-🙂",
    "a,b/c,d/e",  # several holders, comma-separated
)
OWNERS = (None, "", "team-a", "team <b>&amp;</b>", "`owner`", "o" * 80)
PROFILES = ("3g.71gb", "1g.18gb+me", "<p>&", "`x`", "名前")
STATES = ("planned", "moved", "unplanned", "missing")
CUTS: tuple[tuple[tuple[int | None, int], ...], ...] = (
    ((4, 4), (0, 2), (2, 1), (3, 1)),
    tuple((i, 1) for i in range(7)),
    ((0, 8),),
    ((None, 4), (None, 1)),  # placements left to the driver: a second row, dashed
    ((6, 4), (9, 1), (-1, 2)),  # out of range, as a hostile observation could say
    (),
)


def _hostile_gpu(node: int, index: int) -> GpuSliceMap:
    parts = []
    for k, (start, size) in enumerate(CUTS[(node + index) % len(CUTS)]):
        state = STATES[(node + 2 * index + k) % len(STATES)]
        parts.append(
            SlicePartition(
                PROFILES[(node + k) % len(PROFILES)],
                None if state == "missing" and k % 2 else start,
                size,
                owner=OWNERS[(node * 5 + index + k) % len(OWNERS)],
                holder=HOSTILE[(node * 7 + index * 3 + k) % len(HOSTILE)],
                state=state,
                planned_start=(None, 0, 3, 4)[(node + k) % 4],
            )
        )
    return GpuSliceMap(
        index=index,
        model=("H200-141GB", "A<100>&", "A30-24GB")[node % 3],
        mig_enabled=(node + index) % 9 != 0,
        memory_slices=(8, 8, 7, 4, 1, 0)[(node + index) % 6],
        partitions=tuple(parts),
        layout_source=("planned", "observed")[(node // 2) % 2],
        holders_source=("inferred", "observed")[(node // 3) % 2],
    )


def _hostile_report() -> DriftReport:
    nodes, maps = [], {}
    for node in range(24):
        name = f"gpu-{node:02d}" if node % 5 else f"odd `name` <{node}>"
        gpus = tuple(_hostile_gpu(node, i) for i in range(4))
        holders = tuple(Holder(h, 1, "team-a") for h in HOSTILE if h)[: node % 4]
        occ = (Occupancy(name, PROFILES[node % len(PROFILES)], 7, len(holders), holders),)
        status = (NodeStatus.IN_SYNC, NodeStatus.DRIFTED, NodeStatus.ERROR)[node % 3]
        nodes.append(NodeReport(name, status, (), occ, mig_config="cfg`1`" if node % 2 else None, observer="absent"))
        maps[name] = gpus
    return DriftReport("c", Revision("main", "a" * 40), "mixed", tuple(nodes), slice_maps=maps)


REPORTS: dict[str, Callable[[], DriftReport]] = {
    "benchmark fleet, all drifted": lambda: bench.fleet(120, 100.0),
    "benchmark fleet, 1% drift": lambda: bench.fleet(300, 1.0),
    "report store fleet": lambda: reportfleet.fleet(130, {0, 3, 77}, held=3),
    "hostile fleet": _hostile_report,
    **{f"fixture {case}": functools.partial(_fixture, case) for case in fixtures.cases()},
}


def _plain_render(report: DriftReport) -> dict[str, bytes]:
    pictured = reports.mapped_nodes(report)
    out = {}
    for n in report.nodes:
        gpus = tuple(report.slice_maps.get(n.name, ()))
        out[nodepages.node_page_name(n.name)] = plain.render_node_page(n, gpus, pictured=n.name in pictured)
    for node in sorted(pictured):
        for g in report.slice_maps[node]:
            out[slicesvg.gpu_map_name(node, g.index)] = plain.gpu_svg(g, node=node, caption=nodepages.cut_caption(g))
    return out


def _same(path: str, got: bytes, expected: bytes) -> bool:
    """A page is the plain renderer's bytes; a map draws what the plain renderer's map draws."""
    if path.endswith(".svg"):
        return svgdrawn.drawn(got) == svgdrawn.drawn(expected)
    return got == expected


@pytest.mark.parametrize("name", list(REPORTS))
def test_every_page_and_map_is_the_plain_renderers(name: str) -> None:
    report = REPORTS[name]()
    expected = _plain_render(report)
    assert expected  # every report here has pages
    slicesvg.clear_fragments()
    cold: dict[str, bytes] = {}
    for order in (1, 1, -1):  # cold memo, warm, warm in another order
        sources = list(reports.page_sources(report))[::order]
        assert {s.path for s in sources} == expected.keys()
        for source in sources:
            got = source.render()
            assert _same(source.path, got, expected[source.path]), f"{name}: {source.path}"
            assert cold.setdefault(source.path, got) == got, f"{name}: {source.path} differs warm"


def test_every_hostile_map_is_the_plain_renderers_with_and_without_occupancy() -> None:
    drawings = [
        (f"n{node}", _hostile_gpu(node, index), caption, occupancy)
        for node, index in itertools.product(range(30), range(3))
        for caption, occupancy in (("planned cut", True), ("before: main@a<b>", False), ("after: `x` & y", False))
    ]
    slicesvg.clear_fragments()
    cold: dict[tuple[str, int, str, bool], bytes] = {}
    for each in (drawings, drawings[::-1]):
        for node, gpu, caption, occupancy in each:
            got = slicesvg.gpu_svg(gpu, node=node, caption=caption, occupancy=occupancy)
            expected = plain.gpu_svg(gpu, node=node, caption=caption, occupancy=occupancy)
            assert svgdrawn.drawn(got) == svgdrawn.drawn(expected), (node, gpu.index)
            assert cold.setdefault((node, gpu.index, caption, occupancy), got) == got  # warm memo: the same bytes
    for _, gpu, _, _ in drawings[::3]:
        assert nodepages.slice_map_text(gpu) == plain.slice_map_text(gpu)


def test_held_partitions_of_one_cut_share_one_drawing_whatever_their_holders() -> None:
    """The speed itself: 200 GPUs of one cut held by 200 x 4 different pods draw each partition's frame once."""
    cut = ((4, 4), (0, 2), (2, 1), (3, 1))
    gpus = [
        GpuSliceMap(
            0, "H200-141GB", True, 8, tuple(SlicePartition("1g.18gb", s, z, "t", f"ns/p-{i}-{s}") for s, z in cut)
        )
        for i in range(200)
    ]
    slicesvg.clear_fragments()
    maps = [slicesvg.gpu_svg(g, node="n") for g in gpus]
    assert len(set(maps)) == len(gpus)  # every holder is drawn: no two maps alike
    info = slicesvg._partition.cache_info()
    assert info.misses == len(cut) and info.hits == len(cut) * (len(gpus) - 1)


_XML_SPECIAL = "&<>\"'\x00\x01\x08\t\n\x0b\x0c\r\x0e\x1f\x7f\x80\ufffd\ufffe\uffff🙂"


@settings(max_examples=600, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(_XML_SPECIAL + "ab9é"), max_size=40) | st.text(max_size=40))
def test_xml_is_the_plain_escape_and_escapes_a_concatenation_part_by_part(value: str) -> None:
    assert slicesvg.xml(value) == plain.xml(value)
    cut = len(value) // 2
    assert slicesvg.xml(value[:cut]) + slicesvg.xml(value[cut:]) == plain.xml(value)  # what _draw relies on
