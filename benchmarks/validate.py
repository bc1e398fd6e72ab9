"""Benchmark `migplan validate DIR -o json` as users run it, on generated inventories of 100, 1,000 and 5,000 nodes.

    .venv/bin/python benchmarks/validate.py [--sizes 100,1000,5000] [--styles compact,block] [--no-check-jsonschema]

Two inventory styles, each node with 8 GPUs:

* compact: flow-style partitions, a mix of layouts (the article's H200 cut with some placements written
  and some left to the solver, shared layouts, H100 halves, MIG disabled);
* block: how people write YAML by hand, block style, comments, every placement left to the solver,
  a handful of distinct cuts repeated across the fleet (solver-heavy).

For each size and style, measured in the same run and printed side by side:

* validate: the whole `migplan validate DIR -o json` process (interpreter start, imports, reading the
  files, parse, schema, every rule, the solver's placement choices, the JSON written to a pipe), wall
  and CPU (user+sys of the child), and its peak RSS;
* floor: pyyaml's C loader (yaml.CSafeLoader) only parsing the same files, already in memory;
* check-jsonschema: the CLI validating the same files against the same schemas (schema only);
* the ratios validate/floor (target <= 0.35 at 5,000 nodes, goal 0.25) and check-jsonschema/validate
  (target >= 50), and validate's peak memory (target < 500 MB).
"""

from __future__ import annotations

import argparse
import json
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


# block style: (model, [(profile, owner, purpose)]) or (model, None) for MIG disabled; every placement left out.
# One GPU model per node, as in a real server (a node whose GPUs mixed H200 and H100 cuts is held by MP564: GFD
# labels one product per node, and mig-parted would leave the other model's GPUs empty): one node in six is an
# H100 node, the others H200.
BLOCK_CUTS: list[tuple[str, list[tuple[str, str | None, str | None]] | None]] = [
    (
        "H200-141GB",
        [
            ("3g.71gb", "vllm-large", "chat inference"),
            ("2g.35gb", "whisper", None),
            ("1g.18gb", "guardrails", None),
            ("1g.18gb", None, None),
        ],
    ),
    ("H200-141GB", [("1g.18gb", "notebooks", "data science")] * 7),
    ("H200-141GB", [("3g.71gb", "vllm-large", None), ("3g.71gb", "vllm-large", None)]),
    ("H200-141GB", [("2g.35gb", "embeddings", None)] * 3),
    ("H100-80GB", [("4g.40gb", "finetune", "LoRA fine-tuning"), ("3g.40gb", "eval", None)]),
    ("H100-80GB", None),
]
H200_CUTS = BLOCK_CUTS[:4]
H100_CUTS = BLOCK_CUTS[4:]


def block_gpu(i: int, n: int) -> str:
    cuts = H100_CUTS if n % 6 == 5 else H200_CUTS
    model, parts = cuts[(i + n) % len(cuts)] if (n + i) % 7 else cuts[(n // 7) % len(cuts)]
    out = f"    - index: {i}\n      model: {model}\n      mig:\n"
    if parts is None:
        return out + "        enabled: false\n"
    out += "        enabled: true\n        partitions:\n"
    for profile, owner, purpose in parts:
        out += f"          - profile: {profile}\n"
        if owner:
            out += f"            owner: {owner}\n"
        if purpose:
            out += f"            purpose: {purpose}\n"
    return out


def block_node_file(n: int) -> str:
    name = f"gpu-{n:05d}"
    gpus = "".join(block_gpu(i, n) for i in range(8))
    return (
        "# yaml-language-server: $schema=../../schemas/node.schema.json\n"
        f"# {name}: rack r{n % 40:02d}, placements left to the solver\n"
        "apiVersion: migplan/v1\nkind: Node\nmetadata:\n"
        f"  name: {name}\n  labels:\n    rack: r{n % 40:02d}\n"
        f"spec:\n  gpus:\n{gpus}"
    )


def generate(root: Path, nodes: int, style: str = "compact") -> None:
    (root / "nodes").mkdir(parents=True)
    (root / "layouts").mkdir()
    (root / "cluster.yaml").write_text(CLUSTER)
    for name, (model, profiles) in LAYOUTS.items():
        (root / "layouts" / f"{name}.yaml").write_text(layout_file(name, model, profiles))
    make = block_node_file if style == "block" else node_file
    for n in range(nodes):
        (root / "nodes" / f"gpu-{n:05d}.yaml").write_text(make(n))


def migplan_command() -> list[str]:
    """The installed `migplan` console script next to this interpreter (what a user's shell runs)."""
    exe = Path(sys.executable).parent / "migplan"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "reconciler.cli"]


def run_validate(root: Path) -> dict[str, float]:
    """Time one whole `migplan validate ROOT -o json` process: wall, CPU (user+sys), peak RSS (KiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([*migplan_command(), "validate", str(root), "-o", "json"], capture_output=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"migplan validate failed ({proc.returncode}): {proc.stdout[-2000:]!r}{proc.stderr[-2000:]!r}")
    doc = json.loads(proc.stdout)
    assert doc["valid"] and not doc["errors"], doc["errors"][:3]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "peak_kib": after.ru_maxrss, "placements": len(doc.get("placements") or ())}


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
    ap.add_argument("--styles", default="compact,block")
    ap.add_argument("--no-check-jsonschema", action="store_true")
    ap.add_argument("--repeats", type=int, default=3, help="best of N for validate and the floor")
    args = ap.parse_args()
    print("validate = the whole `migplan validate DIR -o json` process; floor = CSafeLoader parse only (files in")
    print(
        f"memory); best of {args.repeats}, interleaved. Wall and CPU both shown: on a shared machine CPU is steadier."
    )
    print(
        f"{'style':>7} {'nodes':>6} {'MB':>5} {'valid. s':>8} {'floor s':>8} {'ratio':>6} {'val.cpu':>8} "
        f"{'flr.cpu':>8} {'ratio':>6} {'chk-jsch s':>10} {'speedup':>8} {'peak MB':>8} {'solver':>7}"
    )
    for style in args.styles.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            with tempfile.TemporaryDirectory(prefix="migplan-bench-") as tmp:
                root = Path(tmp) / "inv"
                generate(root, size, style)
                mb = sum(p.stat().st_size for p in root.rglob("*.yaml")) / 1e6
                # Best of REPEATS for both sides, interleaved: on a shared 2-core machine a single
                # measurement says more about the neighbours than about the code.
                runs, floors = [], []
                for _ in range(args.repeats):
                    runs.append(run_validate(root))
                    floors.append(floor(root))
                wall = min(r["wall"] for r in runs)
                cpu = min(r["cpu"] for r in runs)
                peak = max(r["peak_kib"] for r in runs) / 1024
                fwall = min(f[0] for f in floors)
                fcpu = min(f[1] for f in floors)
                cj = None if args.no_check_jsonschema else check_jsonschema(root)
                cjs = f"{cj:10.2f}" if cj else f"{'n/a':>10}"
                speed = f"{cj / wall:8.1f}" if cj else f"{'n/a':>8}"
                print(
                    f"{style:>7} {size:>6} {mb:5.1f} {wall:8.3f} {fwall:8.3f} {wall / fwall:6.2f} {cpu:8.3f} "
                    f"{fcpu:8.3f} {cpu / fcpu:6.2f} {cjs} {speed} {peak:8.0f} {int(runs[0]['placements']):>7}",
                    flush=True,
                )
    print("targets at 5,000 nodes: ratio <= 0.35 (goal 0.25), speedup >= 50, peak < 500 MB")
    print("(solver = partitions whose placement the solver chose, as listed in the JSON output)")


if __name__ == "__main__":
    main()
