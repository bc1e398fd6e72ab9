"""Benchmark `migplan twin --inventory DIR` as users start it: seconds until ready, peak RSS, threads.

    .venv/bin/python benchmarks/twin_ready.py [--sizes 1000,5000] [--dra static] [--timeout 900] [--source DIR]

`--source DIR` runs `python -m reconciler.cli` from another checkout (DIR on PYTHONPATH): the "before" figures.

For each size, the block-style inventory of benchmarks/validate.py (8 GPUs per node, every placement left to the
solver) is written to a temporary folder and `migplan twin --inventory DIR --kubeconfig-out FILE` started as a
process. Ready means what a user waits for: FILE exists (the command writes it atomically once the server
answers) and a LIST of nodes through the official kubernetes client with that kubeconfig returns every node.
Printed: seconds from process start to ready, the process's peak RSS (VmHWM) and its threads, the highest thread
count sampled every 50 ms until ready and the count once ready (`/proc/PID/status` Threads, as `ps -o nlwp`).
Then the process is sent SIGTERM and must exit 0. Floor, measured in the same run on the same inventory: `migplan
validate DIR` as a process (reading and checking the fleet the twin is built from); the ratio is ready / floor.
Targets (issue 29 item 4): ready within 60 s at 5,000 nodes on
a 2-core machine, threads bounded (not growing with the number of nodes).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))


def _status(pid: int) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            out[key] = value.strip()
    except OSError:
        pass
    return out


def _list_nodes(kubeconfig: Path) -> int:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        return len(client.CoreV1Api(api_client).list_node(_preload_content=True).items)
    finally:
        api_client.close()


def measure(nodes: int, dra: str | None, timeout: float, source: Path | None = None) -> dict[str, float]:
    from commands import timed_process  # the whole-process timer of benchmarks/commands.py (wait4: wall, peak RSS)
    from validate import generate

    with tempfile.TemporaryDirectory(prefix="migplan-twin-ready-") as tmp:
        inventory = Path(tmp) / "inventory"
        generate(inventory, nodes, "block")
        kubeconfig = Path(tmp) / "kubeconfig"
        exe = Path(sys.executable).parent / "migplan"
        env = dict(os.environ)
        if source is not None or not exe.exists():
            argv = [sys.executable, "-m", "reconciler"]
            if source is not None:
                env["PYTHONPATH"] = str(source)
        else:
            argv = [str(exe)]
        argv += ["twin", "--inventory", str(inventory), "--kubeconfig-out", str(kubeconfig)]
        if dra:
            argv += ["--dra", dra]
        log = (Path(tmp) / "twin.log").open("wb")
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=source)
        peak_threads = 0
        try:
            while not kubeconfig.exists():
                if proc.poll() is not None:
                    raise SystemExit(f"migplan twin exited {proc.returncode}: {(Path(tmp) / 'twin.log').read_text()}")
                if time.perf_counter() - t0 > timeout:
                    raise SystemExit(f"not ready within {timeout} s")
                peak_threads = max(peak_threads, int(_status(proc.pid).get("Threads", "0") or 0))
                time.sleep(0.05)
            listed = _list_nodes(kubeconfig)
            ready = time.perf_counter() - t0
            status = _status(proc.pid)
            threads = int(status.get("Threads", "0"))
            peak_rss = int(status.get("VmHWM", "0 kB").split()[0]) / 1024
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            log.close()
        if rc != 0:
            raise SystemExit(f"migplan twin exited {rc} on SIGTERM")
        floor_s, floor_mb, _, _ = timed_process([*argv[: argv.index("twin")], "validate", str(inventory), "-o", "json"])
        return {
            "floor_s": floor_s,
            "floor_mb": floor_mb,
            "nodes": listed,
            "ready_s": ready,
            "peak_rss_mb": peak_rss,
            "threads": threads,
            "peak_threads": max(peak_threads, threads),
        }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,5000")
    ap.add_argument("--dra", choices=["static", "dynamic-mig"], default=None)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--source", type=Path, default=None, help="a checkout to run instead of the installed package")
    args = ap.parse_args()
    print(f"migplan twin readiness ({os.cpu_count()} CPUs){' --dra ' + args.dra if args.dra else ''}")
    for size in (int(s) for s in args.sizes.split(",")):
        r = measure(size, args.dra, args.timeout, args.source)
        print(
            f"{size:>6} nodes: ready {r['ready_s']:.1f} s ({int(r['nodes'])} nodes listed), peak RSS "
            f"{r['peak_rss_mb']:.0f} MB, threads {int(r['threads'])} once ready (peak {int(r['peak_threads'])}); "
            f"floor (validate, same inventory) {r['floor_s']:.1f} s, {r['floor_mb']:.0f} MB -> "
            f"{r['ready_s'] / r['floor_s']:.1f}x",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
