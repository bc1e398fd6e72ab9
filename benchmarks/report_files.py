"""Benchmark: the cost per per-node report file of the first report at fleet size (issue 29, `first5k`).

    .venv/bin/python benchmarks/report_files.py [--nodes 1000] [--repeat 3] [--tree DIR]

In process, on benchmarks/reports.py's fleet with every node out of sync (1 page + 8 maps a node): the bytes of
the maps and node pages, then the CPU seconds (user + system, best of --repeat) of drawing every map from cold
fragments (`slicesvg.gpu_svg`), rendering every node page, digesting every page's inputs
(`pageindex.input_digest`), and `store_report` writing the whole report into a fresh bare repository (rendering,
digests and packs, as the first `reconcile --once` does; twice). `--tree DIR` measures another migplan source
tree (e.g. a checkout of main) with the same fleet, for a before/after.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", type=Path, help="the migplan source tree to measure (default: this one)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "benchmarks"))
    sys.path.insert(0, str((args.tree or REPO).resolve()))

    import pygit2

    from reconciler.adapters.git.reportstore import StoredReport, renderer_fingerprint, store_report
    from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
    from reconciler.logic.reports import pageindex, reports, slicesvg

    # After the package: benchmarks/reports.py puts this tree first on sys.path, but `reconciler` is imported by now
    # (from --tree), and its submodules resolve through the package, not sys.path.
    fleet = importlib.import_module("reports").fleet

    print(f"reconciler from {Path(slicesvg.__file__).parents[3]}")
    report = fleet(args.nodes, 100.0)
    sources = list(reports.page_sources(report))
    fp = renderer_fingerprint()
    maps = [s for s in sources if s.path.endswith(".svg")]
    pages = [s for s in sources if s.path.endswith(".md")]
    best: dict[str, float] = {}
    svg: list[bytes] = []
    md: list[bytes] = []
    for _ in range(args.repeat):
        slicesvg.clear_fragments()
        t = cpu()
        svg = [s.render() for s in maps]
        best["maps (gpu_svg)"] = min(best.get("maps (gpu_svg)", float("inf")), cpu() - t)
        t = cpu()
        md = [s.render() for s in pages]
        best["node pages"] = min(best.get("node pages", float("inf")), cpu() - t)
        t = cpu()
        for s in sources:
            pageindex.input_digest(s.inputs, fp)
        best["input_digest"] = min(best.get("input_digest", float("inf")), cpu() - t)
    svg_bytes, md_bytes = sum(map(len, svg)), sum(map(len, md))
    print(f"tree {(args.tree or REPO).resolve().name}, {args.nodes} nodes, every node out of sync:")
    print(f"  {len(maps)} maps {svg_bytes / 1e6:.2f} MB ({svg_bytes / max(len(maps), 1):.0f} B each)")
    print(f"  {len(pages)} node pages {md_bytes / 1e6:.2f} MB")
    for label, seconds in best.items():
        print(f"  {label}: {seconds:.3f} s CPU")
    for _ in range(2):
        with tempfile.TemporaryDirectory(prefix="migplan-bench-files-") as tmp:
            pygit2.init_repository(tmp, bare=True)
            repo = InventoryRepo.open(GitRemote(tmp, Path(tmp) / "cache", GitAuth()))
            assert isinstance(repo, InventoryRepo), repo
            slicesvg.clear_fragments()
            t, wall = cpu(), time.perf_counter()
            out = store_report(repo, branch="r", path="reports", top={}, pages=reports.page_sources(report))
            took, wall = cpu() - t, time.perf_counter() - wall
            assert isinstance(out, StoredReport), out
            size = sum(f.stat().st_size for f in Path(tmp, "objects").rglob("*") if f.is_file())
            print(f"  store_report: {took:.2f} s CPU, {wall:.2f} s wall, objects/ {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
