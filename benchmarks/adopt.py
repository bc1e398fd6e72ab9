"""Benchmark `migplan import` of a synthetic cluster twin (8 H200 per node, mixed layouts).

    .venv/bin/python benchmarks/adopt.py [--nodes 1000 5000] [--page-size 500]

Per size: the twin (API server + GPU Operator behaviour, `ClusterTwin.synthetic`) runs in a child process;
this process times the whole user command, `migplan import --kubeconfig F --out DIR -o json`, as a user runs
it (a new `migplan` process: interpreter start, imports, every LIST, the conversion, the files written and
the in-memory validation of the written root), against the floor measured in the same run: the official
client listing the same nodes and pods with the same page size (raw JSON, parsed with orjson).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _serve_twin(conn: Connection, nodes: int) -> None:
    from reconciler.twin.cluster import ClusterTwin

    twin = ClusterTwin.synthetic(nodes, owned_fraction=0.05)
    twin.start()
    twin.settle(timeout=600)
    conn.send(str(twin.kubeconfig))
    conn.recv()
    twin.stop()
    conn.send(None)


def floor_lists(kubeconfig: str, page_size: int) -> float:
    """The official client listing every node and pod with the same page size, raw JSON (the floor)."""
    import orjson
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    t0 = time.perf_counter()
    for fn in (api.list_node, api.list_pod_for_all_namespaces):
        cont = None
        while True:
            doc = orjson.loads(fn(limit=page_size, _continue=cont, _preload_content=False).data)
            cont = (doc.get("metadata") or {}).get("continue")
            if not cont:
                break
    elapsed = time.perf_counter() - t0
    api.api_client.close()
    return elapsed


def measure(nodes: int, page_size: int) -> None:
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=_serve_twin, args=(child, nodes), daemon=True)
    t0 = time.perf_counter()
    proc.start()
    kubeconfig = parent.recv()
    build = time.perf_counter() - t0
    try:
        floor = floor_lists(kubeconfig, page_size)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "inventory"
            t1 = time.perf_counter()
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "reconciler",
                    "import",
                    "--kubeconfig",
                    kubeconfig,
                    "--out",
                    str(out),
                    "-o",
                    "json",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            elapsed = time.perf_counter() - t1
            if run.returncode not in (0, 1):
                print(run.stderr, file=sys.stderr)
                raise SystemExit(f"migplan import exited {run.returncode}")
            doc = json.loads(run.stdout)
            files = list(out.rglob("*.yaml"))
            size = sum(f.stat().st_size for f in files)
    finally:
        parent.send("stop")
        parent.recv()
        proc.join(timeout=60)
    print(
        f"{nodes:>6} nodes: migplan import {elapsed:6.2f} s | floor (list nodes+pods) {floor:5.2f} s "
        f"| ratio {elapsed / floor:4.1f} | {len(doc['nodes'])} node files, {len(files)} files, {size / 1e6:.1f} MB "
        f"| valid {doc['valid']} | GPUs by source {doc['gpus_by_source']} | twin built in {build:.0f} s"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--page-size", type=int, default=500)
    args = ap.parse_args()
    for n in args.nodes:
        measure(n, args.page_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
