"""Benchmark: a 5,000-node cluster twin (8 H200 per node) — build, then list all nodes and all pods over HTTP.

    .venv/bin/python benchmarks/twin.py [--nodes 5000] [--page-size 500] [--owned-fraction 0.05]

Prints, measured in the same run:
- build: `Fleet.synthetic` (GPUs cut) + `ClusterTwin.start()` (store populated, device plugin/GFD evaluated, controllers
  started); baseline: the same number of bare `Store.create("nodes", ...)` calls with the same node objects' labels
  (the floor of writing the nodes at all);
- one page of `limit` nodes and every node (paginated) through the official kubernetes client; baseline: `orjson.loads`
  of the same response bytes (the client's own decode floor);
- every pod (one list call) likewise;
- peak RSS of the process (ru_maxrss) after each step. Target (issue 3): a paginated node list in well under a second.
"""

from __future__ import annotations

import argparse
import gc
import resource
import time

import orjson
from kubernetes import client, config

from reconciler.twin.apiserver import Store
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.fleet import Fleet


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--page-size", type=int, default=500)
    ap.add_argument("--owned-fraction", type=float, default=0.05)
    args = ap.parse_args()

    t0 = time.perf_counter()
    fleet = Fleet.synthetic(args.nodes, owned_fraction=args.owned_fraction)
    t1 = time.perf_counter()
    twin = ClusterTwin(fleet, tls=False).start()
    t2 = time.perf_counter()
    twin.settle()
    nodes_in_store = twin.store.list("nodes")
    pods_total = len(twin.store.list("pods"))
    print(f"fleet: {args.nodes} nodes, {args.nodes * 8} GPUs, {pods_total} pods")
    print(f"build: fleet {t1 - t0:.2f}s + twin start {t2 - t1:.2f}s = {t2 - t0:.2f}s   peak RSS {rss_mb():.0f} MB")

    bare = Store()
    objs = [{"metadata": {"name": n["metadata"]["name"], "labels": n["metadata"]["labels"]}} for n in nodes_in_store]
    b0 = time.perf_counter()
    for o in objs:
        bare.create("nodes", o)
    base_build = time.perf_counter() - b0
    del bare, objs
    print(f"  baseline (bare Store.create of the nodes): {base_build:.2f}s   ratio {(t2 - t0) / base_build:.1f}x")

    api = client.CoreV1Api(config.new_client_from_config(str(twin.kubeconfig)))
    # The lists and their decode floors are timed with the cyclic GC off, so neither pays for scanning the other's
    # garbage (the server thread allocates in the same process).
    gc.collect()
    gc.disable()
    p0 = time.perf_counter()
    first = api.list_node(limit=args.page_size, _preload_content=False).data
    page_s = time.perf_counter() - p0
    d0 = time.perf_counter()
    orjson.loads(first)
    page_floor = time.perf_counter() - d0
    print(
        f"one page of {args.page_size} nodes: {page_s * 1000:.0f} ms ({len(first) / 1e6:.1f} MB); "
        f"decode floor {page_floor * 1000:.0f} ms, ratio {page_s / page_floor:.1f}x"
    )

    cont: str | None = None
    total = 0
    raw: list[bytes] = []
    l0 = time.perf_counter()
    while True:
        data = api.list_node(limit=args.page_size, _continue=cont, _preload_content=False).data
        raw.append(data)
        doc = orjson.loads(data)
        total += len(doc["items"])
        cont = doc["metadata"].get("continue") or None
        if not cont:
            break
    all_nodes = time.perf_counter() - l0
    f0 = time.perf_counter()
    for data in raw:
        orjson.loads(data)
    floor = time.perf_counter() - f0
    print(
        f"all {total} nodes, {len(raw)} pages: {all_nodes:.2f}s; decode floor {floor:.2f}s, "
        f"ratio {all_nodes / floor:.1f}x   peak RSS {rss_mb():.0f} MB"
    )

    q0 = time.perf_counter()
    pods = api.list_pod_for_all_namespaces(_preload_content=False).data
    pods_s = time.perf_counter() - q0
    f1 = time.perf_counter()
    n_pods = len(orjson.loads(pods)["items"])
    pfloor = time.perf_counter() - f1
    print(
        f"all {n_pods} pods, one call: {pods_s:.2f}s; decode floor {pfloor:.2f}s, ratio {pods_s / pfloor:.1f}x   "
        f"peak RSS {rss_mb():.0f} MB"
    )
    gc.enable()
    twin.stop()


if __name__ == "__main__":
    main()
