"""The SVG slice maps: well-formed, accessible (a <title> for the map and per partition), escaped,
deterministic, and written next to README.md with relative links the forges render."""

from __future__ import annotations

import dataclasses
import posixpath
import re
import xml.etree.ElementTree as ET

from reconciler.logic.reports import reports, slicesvg
from reconciler.model.drift import DriftReport, GpuSliceMap, NodeReport, NodeStatus, SlicePartition
from reconciler.model.revisions import Revision

SVG = "{http://www.w3.org/2000/svg}"

H200 = GpuSliceMap(
    index=0,
    model="H200-141GB",
    mig_enabled=True,
    memory_slices=8,
    partitions=(
        SlicePartition("3g.71gb", 4, 4, owner="vllm-llama-70b", holder="ml/vllm-0"),
        SlicePartition("2g.35gb", 0, 2, owner="embeddings"),
        SlicePartition("1g.18gb", None, 1),  # placement left to the driver
    ),
)
WHOLE = GpuSliceMap(index=1, model="H100-80GB", mig_enabled=False, memory_slices=8)


def parse(svg: bytes) -> ET.Element:
    return ET.fromstring(svg)


def partition_titles(root: ET.Element) -> list[str]:
    return [t.text or "" for g in root.iter(f"{SVG}g") for t in g.findall(f"{SVG}title")]


def test_map_is_well_formed_and_accessible() -> None:
    root = parse(slicesvg.gpu_svg(H200, node="gpu-h200-01", caption="planned cut at main@sha1:abc"))
    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    assert root.get("aria-labelledby") == "map-title map-desc"
    title = root.find(f"{SVG}title")
    assert title is not None and title.get("id") == "map-title"
    assert title.text == "MIG slice map of node gpu-h200-01, GPU 0 (H200-141GB): planned cut at main@sha1:abc"
    desc = root.find(f"{SVG}desc")
    assert desc is not None and "1 held, 2 free" in (desc.text or "") and "Cut: planned" in (desc.text or "")
    titles = partition_titles(root)
    assert titles == [
        "2g.35gb: memory slices 0-1 of 8; owner embeddings; free",
        "3g.71gb: memory slices 4-7 of 8; owner vllm-llama-70b; held by ml/vllm-0 (inferred from pod requests)",
        "1g.18gb: 1 memory slice(s), placement chosen by the driver; no owner; free",
    ]
    # the slices no partition takes are drawn (and titled) as unallocated
    unallocated = [t.text for r in root.iter(f"{SVG}rect") for t in r.findall(f"{SVG}title")]
    assert unallocated == [f"memory slice {i}: unallocated" for i in range(8)]
    # held and free are told apart by fill
    fills = {r.get("fill") for g in root.iter(f"{SVG}g") for r in g.findall(f"{SVG}rect")}
    assert {slicesvg.HELD[0], slicesvg.FREE[0]} <= fills


def test_the_3g_partition_spans_its_four_slices() -> None:
    root = parse(slicesvg.gpu_svg(H200, node="n"))
    g = next(g for g in root.iter(f"{SVG}g") if (g.findtext(f"{SVG}title") or "").startswith("3g.71gb"))
    rect = g.find(f"{SVG}rect")
    assert rect is not None
    cells = [r for r in root.iter(f"{SVG}rect") if (r.findtext(f"{SVG}title") or "").startswith("memory slice")]
    x4, x7 = float(cells[4].get("x") or 0), float(cells[7].get("x") or 0) + float(cells[7].get("width") or 0)
    assert x4 <= float(rect.get("x") or 0) and float(rect.get("x") or 0) + float(rect.get("width") or 0) <= x7 + 1


def test_mig_disabled_gpu_is_one_device() -> None:
    root = parse(slicesvg.gpu_svg(WHOLE, node="gpu-h100-01"))
    assert partition_titles(root) == ["GPU 1: MIG disabled, the whole GPU is one device (nvidia.com/gpu)"]


def test_every_string_is_escaped() -> None:
    hostile = GpuSliceMap(
        index=2,
        model='H200 <"&>',
        mig_enabled=True,
        memory_slices=8,
        partitions=(SlicePartition("1g.18gb", 0, 1, owner="<script>alert(1)</script>", holder='ns/a"b&c\x01'),),
    )
    svg = slicesvg.gpu_svg(hostile, node="n&<x>", caption="</title><svg onload=x>")
    root = parse(svg)  # well-formed despite the markup in every field
    assert b"<script>" not in svg and b"onload=x>" not in svg and b"\x01" not in svg
    assert (root.findtext(f"{SVG}title") or "").endswith("</title><svg onload=x>")
    assert 'owner <script>alert(1)</script>; held by ns/a"b&c' in partition_titles(root)[0]


def test_deterministic_whatever_the_partition_order() -> None:
    assert slicesvg.gpu_svg(H200, node="a") == slicesvg.gpu_svg(H200, node="a")
    reordered = dataclasses.replace(H200, partitions=(H200.partitions[1], H200.partitions[0], H200.partitions[2]))
    assert slicesvg.gpu_svg(reordered, node="a") == slicesvg.gpu_svg(H200, node="a")


def test_report_writes_maps_next_to_the_readme_and_links_them() -> None:
    report = DriftReport(
        cluster="c",
        revision=Revision(ref="main", sha="a" * 40),
        strategy="mixed",
        nodes=(NodeReport("gpu-h200-01", NodeStatus.IN_SYNC),),
        slice_maps={"gpu-h200-01": (H200, WHOLE)},
    )
    files = reports.render_reports(report)
    assert set(files) == {
        "drift.yaml",
        "README.md",
        "nodes/gpu-h200-01.md",
        "maps/gpu-h200-01-gpu0.svg",
        "maps/gpu-h200-01-gpu1.svg",
    }
    page = files["nodes/gpu-h200-01.md"].decode()
    links = re.findall(r"!\[([^\]]*)\]\(([^)]+)\)", page)
    assert links == [  # relative to nodes/, where the page is
        ("gpu-h200-01 GPU 0 slice map", "../maps/gpu-h200-01-gpu0.svg"),
        ("gpu-h200-01 GPU 1 slice map", "../maps/gpu-h200-01-gpu1.svg"),
    ]
    assert "<svg" not in page  # the forges strip inline SVG: files and image links only
    assert page.index("GPU 0  H200-141GB  MIG") < page.index("![gpu-h200-01 GPU 0")  # beside the text map
    assert "](nodes/gpu-h200-01.md)" in files["README.md"].decode()  # the README links the page
    for _alt, name in links:
        parse(files[posixpath.normpath(posixpath.join("nodes", name))])


def test_at_fleet_scale_only_nodes_not_in_sync_get_pictures() -> None:
    n = reports.MAP_EVERY_NODE_UP_TO + 1
    names = [f"gpu-{i:03d}" for i in range(n)]
    report = DriftReport(
        cluster="c",
        revision=Revision(ref="main", sha="a" * 40),
        strategy="mixed",
        nodes=tuple(NodeReport(x, NodeStatus.DRIFTED if x == "gpu-007" else NodeStatus.IN_SYNC) for x in names),
        slice_maps={x: (H200,) for x in names},
    )
    files = reports.render_reports(report)
    assert sorted(k for k in files if k.startswith("maps/")) == ["maps/gpu-007-gpu0.svg"]
    pages = "".join(v.decode() for k, v in sorted(files.items()) if k.startswith("nodes/"))
    assert re.findall(r"\]\((\.\./maps/[^)]+)\)", pages) == ["../maps/gpu-007-gpu0.svg"]
    assert "drawn for the nodes not in sync" in files["README.md"].decode()
    small = dataclasses.replace(report, nodes=report.nodes[:3], slice_maps={x: (H200,) for x in names[:3]})
    assert len([k for k in reports.render_reports(small) if k.startswith("maps/")]) == 3


def test_metric_rows_per_node_finding_and_per_owner() -> None:
    from reconciler.controller import signals
    from reconciler.model.drift import Finding, FindingSeverity

    report = DriftReport(
        cluster="c",
        revision=Revision(ref="main", sha="a" * 40),
        strategy="mixed",
        nodes=(
            NodeReport(
                "gpu-h200-01",
                NodeStatus.ERROR,
                findings=(
                    Finding("MP507", "failed", FindingSeverity.ERROR, node="gpu-h200-01"),
                    Finding("MP501", "a", node="gpu-h200-01"),
                    Finding("MP501", "b", node="gpu-h200-01"),
                ),
            ),
        ),
        cluster_findings=(Finding("MP502", "strategy"),),
        slice_maps={"gpu-h200-01": (H200, WHOLE)},
    )
    assert signals.node_finding_rows(report) == (
        ("", "MP502", "warning", 1),
        ("gpu-h200-01", "MP501", "warning", 2),
        ("gpu-h200-01", "MP507", "error", 1),
    )
    assert signals.owner_rows(report) == (
        ("", "1g.18gb", 1, 0),
        ("embeddings", "2g.35gb", 1, 0),
        ("vllm-llama-70b", "3g.71gb", 1, 1),
    )
