"""The report page's slice maps as a browser shows them: headless Chromium (Debian `chromium`, in
.ci/apt-packages.txt) loads a page embedding, through <img> as GitHub and GitLab do, every SVG the
README links, and the screenshot must show them — many colours, the held and the free fills among them,
most of the page not white — while each SVG parses with a <title> for the map and one per partition.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

from reconciler.logic.reports import reports, slicesvg
from reconciler.model.drift import DriftReport, GpuSliceMap, NodeReport, NodeStatus, SlicePartition
from reconciler.model.revisions import Revision

SVG = "{http://www.w3.org/2000/svg}"
CHROMIUM = shutil.which("chromium") or "chromium"

GPUS = (
    GpuSliceMap(
        index=0,
        model="H200-141GB",
        mig_enabled=True,
        memory_slices=8,
        partitions=(
            SlicePartition("3g.71gb", 4, 4, owner="vllm-llama-70b", holder="ml/vllm-0"),
            SlicePartition("2g.35gb", 0, 2, owner="embeddings", holder="search/embed-7f9c"),
            SlicePartition("1g.18gb", 2, 1, owner="reranker"),
        ),  # slice 3 left unallocated
    ),
    GpuSliceMap(
        index=1,
        model="H200-141GB",
        mig_enabled=True,
        memory_slices=8,
        partitions=(SlicePartition("7g.141gb", 0, 8, owner="training", holder="ml/train-0"),),
    ),
)


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG, with stdlib zlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and interlace == 0 and colour in (2, 6), (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r[i] for i in range(len(r)) if i % bpp < 3) for r in rows]


def pixels(rows: list[bytes]) -> list[tuple[int, int, int]]:
    return [(r[i], r[i + 1], r[i + 2]) for r in rows for i in range(0, len(r), 3)]


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return (int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16))


def test_report_page_maps_render_in_chromium(tmp_path: Path) -> None:
    report = DriftReport(
        cluster="par1-prod",
        revision=Revision(ref="main", sha="c0ffee" * 6 + "c0ff"),
        strategy="mixed",
        nodes=(NodeReport("gpu-h200-01", NodeStatus.IN_SYNC),),
        slice_maps={"gpu-h200-01": GPUS},
    )
    root = tmp_path / "reports"
    for name, data in reports.render_reports(report).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)

    # The SVGs the node's page links (relative to nodes/): each exists, parses, and titles the map and every
    # partition.
    links = re.findall(r"!\[[^\]]*\]\(([^)]+\.svg)\)", (root / "nodes" / "gpu-h200-01.md").read_text())
    assert links == ["../maps/gpu-h200-01-gpu0.svg", "../maps/gpu-h200-01-gpu1.svg"]
    links = [link.removeprefix("../") for link in links]
    for link, gpu in zip(links, GPUS, strict=True):
        svg = ET.parse(root / link).getroot()
        assert svg.get("role") == "img" and (svg.findtext(f"{SVG}title") or "").startswith("MIG slice map of node")
        titles = [t.text or "" for g in svg.iter(f"{SVG}g") for t in g.findall(f"{SVG}title")]
        assert sorted(t.split(":")[0] for t in titles) == sorted(p.profile for p in gpu.partitions)

    # The page a forge shows: the images by their relative links.
    imgs = "".join(f'<img src="{link}" alt="map"><br>' for link in links)
    (root / "page.html").write_text(f'<!doctype html><html><body style="margin:0;background:#fff">{imgs}</body></html>')
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--hide-scrollbars",
            "--window-size=720,460",
            f"--screenshot={shot}",
            (root / "page.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    width, height, rows = decode_png(shot.read_bytes())
    assert (width, height) == (720, 460)
    px = pixels(rows)
    colours = set(px)
    not_white = sum(1 for p in px if p != (255, 255, 255))
    print(f"\nscreenshot {width}x{height}: {len(colours)} colours, {not_white / len(px):.0%} not white")
    assert len(colours) > 50  # text antialiasing, fills, strokes: a blank or broken image has a handful
    # The held fill, the free fill and the unallocated slice are all on screen: the maps were drawn.
    for colour in (slicesvg.HELD[0], slicesvg.FREE[0], slicesvg.UNALLOCATED):
        assert sum(1 for p in px if p == rgb(colour)) > 500, colour
    assert not_white > len(px) // 5
