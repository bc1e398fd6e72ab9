"""Benchmark `migplan validate` on generated inventories of 100, 1,000 and 5,000 nodes.

    .venv/bin/python benchmarks/validate.py [--sizes 100,1000,5000] [--no-check-jsonschema]

Each node has 8 GPUs with a mix of layouts (the article's H200 cut with some placements written and
some left to the solver, shared layouts, H100 halves, MIG disabled). For each size, measured in the
same run and printed side by side:

* validate: read the files + parse + schema + every rule (validate_inventory, fresh cache), in a
  child process so that its peak RSS (ru_maxrss, interpreter included) is its own;
* floor: pyyaml's C loader (yaml.CSafeLoader) only parsing the same files, already in memory;
* check-jsonschema: the CLI validating the same files against the same schemas (schema only);
* the ratios validate/floor (target <= 0.5 at 5,000 nodes) and check-jsonschema/validate
  (target >= 20), and validate's peak memory (target < 500 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CLUSTER = """\
# yaml-language-server: $schema=../schemas/cluster.schema.json
apiVersion: migplan/v1
kind: Cluster
metadata: {name: bench}
spec:
  migStrategy: mixed
"""
LAYOUTS = {
    "h200-balanced": ("H200-141GB", ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]),
    "h200-sevens": ("H200-141GB", ["1g.18gb"] * 7),
    "a100-balanced": ("A100-40GB", ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]),
}


def layout_file(name: str, model: str, profiles: list[str]) -> str:
    parts = "".join(f"      - {{profile: {p}, purpose: shared pool}}\n" for p in profiles)
    return (
        "# yaml-language-server: $schema=../../schemas/layout.schema.json\n"
        f"apiVersion: migplan/v1\nkind: Layout\nmetadata: {{name: {name}}}\nspec:\n  model: {model}\n"
        f"  mig:\n    enabled: true\n    partitions:\n{parts}"
    )


def gpu_block(i: int, n: int) -> str:
    kind = (i + n) % 6
    head = f"    - index: {i}\n"
    if kind == 0:  # the article's cut, placements written except one
        return head + (
            "      model: H200-141GB\n      mig:\n        enabled: true\n        partitions:\n"
            f"          - {{profile: 3g.71gb, placement: 4, owner: vllm-{n % 50}, purpose: chat inference}}\n"
            "          - {profile: 2g.35gb, placement: 0, owner: embeddings}\n"
            "          - {profile: 1g.18gb, placement: 2, owner: reranker}\n"
            "          - {profile: 1g.18gb}\n"
        )
    if kind == 1:  # the same cut, all placements left to the solver
        return head + (
            "      model: H200-141GB\n      mig:\n        enabled: true\n        partitions:\n"
            "          - {profile: 3g.71gb, owner: vllm-large}\n          - {profile: 2g.35gb, owner: whisper}\n"
            "          - {profile: 1g.18gb, owner: guardrails}\n          - {profile: 1g.18gb}\n"
        )
    if kind == 2:
        return head + "      model: H200-141GB\n      layout: h200-balanced\n"
    if kind == 3:
        return head + "      model: H200-141GB\n      layout: h200-sevens\n"
    if kind == 4:
        return head + (
            "      model: H100-80GB\n      mig:\n        enabled: true\n        partitions:\n"
            "          - {profile: 4g.40gb, placement: 0, owner: finetune, purpose: LoRA fine-tuning}\n"
            "          - {profile: 3g.40gb, placement: 4, owner: eval}\n"
        )
    return head + "      model: H100-80GB\n      mig: {enabled: false}\n"


def node_file(n: int) -> str:
    name = f"gpu-{n:05d}"
    gpus = "".join(gpu_block(i, n) for i in range(8))
    return (
        "# yaml-language-server: $schema=../../schemas/node.schema.json\n"
        f"apiVersion: migplan/v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{rack: r{n % 40:02d}}}\n"
        f"spec:\n  gpus:\n{gpus}"
    )


def generate(root: Path, nodes: int) -> None:
    (root / "nodes").mkdir(parents=True)
    (root / "layouts").mkdir()
    (root / "cluster.yaml").write_text(CLUSTER)
    for name, (model, profiles) in LAYOUTS.items():
        (root / "layouts" / f"{name}.yaml").write_text(layout_file(name, model, profiles))
    for n in range(nodes):
        (root / "nodes" / f"gpu-{n:05d}.yaml").write_text(node_file(n))


def child_validate(root: Path) -> None:
    """Run in a fresh process: time validate's whole work and report peak RSS."""
    from reconciler.adapters.fsinventory import read_inventory_dir
    from reconciler.catalog import load_catalog
    from reconciler.commands import gcpause
    from reconciler.logic import schemas, validation

    # Per-process setup, timed apart (printed as "setup s"): the catalog, and the schemas loaded and
    # compiled (by fastjsonschema). A controller pays it once; `migplan validate` once per run.
    s0 = time.perf_counter()
    catalog = load_catalog()
    for kind in schemas.KINDS:
        schemas.schema(kind)
        schemas.fast_valid(kind, {})
    setup = time.perf_counter() - s0
    t0, c0 = time.perf_counter(), time.process_time()
    files = read_inventory_dir(root)
    with gcpause.paused():  # as `migplan validate` runs it
        result = validation.validate_inventory(files, catalog=catalog)
    t1, c1 = time.perf_counter(), time.process_time()
    assert result.valid, [str(d) for d in result.diagnostics[:5]]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"setup": setup, "wall": t1 - t0, "cpu": c1 - c0, "peak_kib": peak}))


def floor(root: Path) -> tuple[float, float]:
    """(wall, cpu) seconds for pyyaml's C loader to parse every file, already in memory."""
    import yaml

    blobs = [p.read_bytes() for p in sorted(root.rglob("*.yaml"))]
    t0, c0 = time.perf_counter(), time.process_time()
    for b in blobs:
        yaml.load(b, Loader=yaml.CSafeLoader)
    return time.perf_counter() - t0, time.process_time() - c0


def check_jsonschema(root: Path) -> float | None:
    exe = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which("check-jsonschema")
    if exe is None:
        return None
    schemas = REPO / "schemas"
    groups = [
        ("cluster.schema.json", [root / "cluster.yaml"]),
        ("layout.schema.json", sorted((root / "layouts").glob("*.yaml"))),
        ("node.schema.json", sorted((root / "nodes").glob("*.yaml"))),
    ]
    t0 = time.perf_counter()
    for schema, files in groups:
        proc = subprocess.run(
            [exe, "--schemafile", str(schemas / schema), *map(str, files)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise SystemExit(f"check-jsonschema failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--no-check-jsonschema", action="store_true")
    ap.add_argument("--repeats", type=int, default=3, help="best of N for validate and the floor")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_validate(args.child)
        return
    print("validate = read + parse + schema + every rule; floor = CSafeLoader parse only; best of", args.repeats)
    print("wall-clock and CPU seconds both shown: on a shared machine CPU time is the steadier measure")
    print(
        f"{'nodes':>6} {'MB':>5} {'valid. s':>8} {'floor s':>8} {'ratio':>6} {'val.cpu':>8} {'flr.cpu':>8} "
        f"{'ratio':>6} {'chk-jsch s':>10} {'speedup':>8} {'peak MB':>8} {'setup s':>8}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="migplan-bench-") as tmp:
            root = Path(tmp) / "inv"
            generate(root, size)
            mb = sum(p.stat().st_size for p in root.rglob("*.yaml")) / 1e6
            # Best of REPEATS for both sides, interleaved: on a shared 2-core machine a single
            # measurement says more about the neighbours than about the code.
            runs, floors = [], []
            for _ in range(args.repeats):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(root)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "PYTHONPATH": str(REPO)},
                )
                runs.append(json.loads(out.stdout))
                floors.append(floor(root))
            wall = min(r["wall"] for r in runs)
            cpu = min(r["cpu"] for r in runs)
            peak = max(r["peak_kib"] for r in runs) / 1024
            setup = min(r["setup"] for r in runs)
            fwall = min(f[0] for f in floors)
            fcpu = min(f[1] for f in floors)
            cj = None if args.no_check_jsonschema else check_jsonschema(root)
            cjs = f"{cj:10.2f}" if cj else f"{'n/a':>10}"
            speed = f"{cj / wall:8.1f}" if cj else f"{'n/a':>8}"
            print(
                f"{size:>6} {mb:5.1f} {wall:8.3f} {fwall:8.3f} {wall / fwall:6.2f} {cpu:8.3f} {fcpu:8.3f} "
                f"{cpu / fcpu:6.2f} {cjs} {speed} {peak:8.0f} {setup:8.3f}",
                flush=True,
            )
    print("targets at 5,000 nodes: ratio <= 0.5, speedup >= 20, peak < 500 MB")


if __name__ == "__main__":
    main()
