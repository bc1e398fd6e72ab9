"""Benchmark: the merge-request comment for a 5,000-node diff, as CI runs it (`migplan plan -o comment`).

Self-contained: generates a repository whose `main` has N nodes of 8 H200 GPUs cut 3g+2g+1g+1g and
whose `feature` re-cuts every GPU into seven 1g.18gb, then times the whole user command (a `migplan`
process: read both revisions from Git, validate both, diff, render) for each --max-chars and prints the
comment's size, how many nodes got a <details> block and the peak memory of the process.

The comment must fit GitHub's 65,536-character body (the default --max-chars 60,000 leaves room for the
marker line `migplan post-comment` adds) and GitLab's 1,000,000-character note.
Usage: python benchmarks/plan_comment.py [--nodes 5000] [--max-chars 60000 65536 1000000]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BALANCED = "[{profile: 3g.71gb, owner: team-%d}, {profile: 2g.35gb}, {profile: 1g.18gb}, {profile: 1g.18gb}]"
SMALL = "[" + ", ".join(["{profile: 1g.18gb, owner: team-%d}"] + ["{profile: 1g.18gb}"] * 6) + "]"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@x", "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True)


def _write(work: Path, nodes: int, cut: str) -> None:
    (work / "nodes").mkdir(exist_ok=True)
    for k in range(nodes):
        parts = cut % (k % 40)
        gpus = "\n".join(
            f"    - {{index: {i}, model: H200-141GB, mig: {{enabled: true, partitions: {parts}}}}}" for i in range(8)
        )
        name = f"n{k:05d}"
        text = f"apiVersion: migplan/v1\nkind: Node\nmetadata: {{name: {name}}}\nspec:\n  gpus:\n{gpus}\n"
        (work / "nodes" / f"{name}.yaml").write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--max-chars", type=int, nargs="+", default=[60_000, 65_536, 1_000_000])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "inv"
        work.mkdir()
        _git("init", "-q", "-b", "main", cwd=work)
        (work / "cluster.yaml").write_text(
            "apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: big}\nspec:\n  migStrategy: mixed\n"
        )
        _write(work, args.nodes, BALANCED)
        _git("add", "-A", cwd=work)
        _git("commit", "-q", "-m", "base", cwd=work)
        _git("checkout", "-q", "-b", "feature", cwd=work)
        _write(work, args.nodes, SMALL)
        _git("commit", "-q", "-am", "re-cut every GPU", cwd=work)
        migplan = Path(sys.executable).parent / "migplan"
        print(f"{args.nodes} nodes x 8 H200, every GPU re-cut: `migplan plan -o comment`")
        print(f"{'--max-chars':>12} {'chars':>10} {'details':>8} {'wall s':>8} {'peak RSS MiB':>13}")
        for limit in args.max_chars:
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            t0 = time.perf_counter()
            proc = subprocess.run(
                [str(migplan), "plan", "--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment",
                 "--max-chars", str(limit)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            wall = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            if proc.returncode != 0:
                sys.exit(f"migplan plan failed ({proc.returncode}): {proc.stderr[-2000:]}")
            out = proc.stdout
            assert len(out) <= limit, (len(out), limit)
            rss = f"{peak / 1024:.0f}" if peak > before else "(as above)"
            print(f"{limit:>12,} {len(out):>10,} {out.count('<details>'):>8} {wall:>8.1f} {rss:>13}")


if __name__ == "__main__":
    main()
