"""Scale figures of the API server twin alone: `python benchmarks/twin_apiserver.py [--nodes N --pods P]`.

Builds a store of N GPU nodes (8 GPUs' worth of MIG capacity and GFD-style labels each) and P pods holding MIG
partitions, serves it over HTTPS, and prints: build time, memory held by the store (RSS growth) and peak RSS; a
paginated list of every node (limit=500, keep-alive connection) and one list of every pod, each against the floor of
decoding the same bytes with orjson (the least any client must spend). Side effects: a loopback server for the run.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import resource
import ssl
import time
from typing import Any
from urllib.parse import quote

import orjson

from reconciler.twin.apiserver.store import Store
from reconciler.twin.apiserver.twin import ApiServerTwin

_PROFILES = {"nvidia.com/mig-1g.18gb": 16, "nvidia.com/mig-2g.35gb": 8, "nvidia.com/mig-3g.71gb": 8}


def node_object(i: int) -> dict[str, Any]:
    capacity = {
        "cpu": "128",
        "memory": "2Ti",
        "pods": "110",
        **{k: str(v) for k, v in _PROFILES.items()},
        "nvidia.com/gpu": "0",
    }
    labels = {
        "kubernetes.io/hostname": f"gpu-node-{i:05d}",
        "rack": f"r{i % 50:02d}",
        "nvidia.com/gpu.product": "NVIDIA-H200",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-balanced",
        "nvidia.com/mig.config.state": "success",
        **{f"{k}.count": str(v) for k, v in _PROFILES.items()},
    }
    return {
        "metadata": {"name": f"gpu-node-{i:05d}", "labels": labels},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.36.2", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def pod_object(i: int, nodes: int) -> dict[str, Any]:
    profile = list(_PROFILES)[i % len(_PROFILES)]
    return {
        "metadata": {"name": f"job-{i:06d}", "labels": {"app": f"svc-{i % 200}"}},
        "spec": {
            "nodeName": f"gpu-node-{i % nodes:05d}",
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"limits": {profile: "1"}},
                }
            ],
        },
    }


class _Client:
    """One keep-alive HTTPS connection, like a client's connection pool of one."""

    def __init__(self, api: ApiServerTwin) -> None:
        ctx = ssl.create_default_context(cafile=str(api.ca_file)) if api.tls else None
        self.conn = (
            http.client.HTTPSConnection("127.0.0.1", api.port, context=ctx)
            if ctx
            else http.client.HTTPConnection("127.0.0.1", api.port)
        )
        self.headers = {"Authorization": f"Bearer {api.token}", "Accept": "application/json"}

    def get(self, path: str) -> bytes:
        self.conn.request("GET", path, headers=self.headers)
        resp = self.conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: {resp.status} {body[:200]!r}")
        return body


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=40000)
    ap.add_argument("--page-size", type=int, default=500)
    args = ap.parse_args(argv)

    node_objs = [node_object(i) for i in range(args.nodes)]
    pod_objs = [pod_object(i, args.nodes) for i in range(args.pods)]
    gc.collect()
    rss0 = _rss_mib()
    t0 = time.perf_counter()
    store = Store()
    store.ensure_namespaces(["default"])
    store.create_many("nodes", node_objs)
    t1 = time.perf_counter()
    store.create_many("pods", pod_objs, "default")
    t2 = time.perf_counter()
    del node_objs, pod_objs
    gc.collect()
    print(
        f"build: {args.nodes} nodes {t1 - t0:.2f}s, {args.pods} pods {t2 - t1:.2f}s; store holds "
        f"{_rss_mib() - rss0:.0f} MiB (RSS growth); peak RSS {_peak_mib():.0f} MiB"
    )

    with ApiServerTwin(store=store, install_clusterpolicy_crd=False, namespaces=()) as api:
        client = _Client(api)
        client.get("/version")  # connect and handshake outside the timings
        for attempt in range(2):
            pages: list[bytes] = []
            cont = ""
            l0 = time.perf_counter()
            while True:
                query = f"limit={args.page_size}" + (f"&continue={quote(cont)}" if cont else "")
                body = client.get(f"/api/v1/nodes?{query}")
                pages.append(body)
                cont = orjson.loads(body)["metadata"].get("continue", "")
                if not cont:
                    break
            nodes_s = time.perf_counter() - l0
            count, floor = _decode_floor(pages)
            print(
                f"[{attempt}] all {count} nodes, {len(pages)} pages of {args.page_size}: {nodes_s * 1000:.0f} ms "
                f"({sum(map(len, pages)) / 1e6:.1f} MB); decode floor {floor * 1000:.0f} ms, "
                f"ratio {nodes_s / floor:.1f}x"
            )
            p0 = time.perf_counter()
            body = client.get("/api/v1/pods")
            pods_s = time.perf_counter() - p0
            count, floor = _decode_floor([body])
            print(
                f"[{attempt}] all {count} pods, one list: {pods_s * 1000:.0f} ms ({len(body) / 1e6:.1f} MB); "
                f"decode floor {floor * 1000:.0f} ms, ratio {pods_s / floor:.1f}x"
            )
            s0 = time.perf_counter()
            one = client.get("/api/v1/pods?fieldSelector=" + quote("spec.nodeName=gpu-node-00042"))
            print(
                f"[{attempt}] pods of one node (field selector over {args.pods}): "
                f"{(time.perf_counter() - s0) * 1000:.0f} ms, {len(orjson.loads(one)['items'])} pods"
            )
    print(f"peak RSS {_peak_mib():.0f} MiB")


def _rss_mib() -> float:
    """Current resident set size (Linux /proc), to see what the store itself holds."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _decode_floor(bodies: list[bytes]) -> tuple[int, float]:
    """Items in the bodies and the time orjson needs to decode them (GC paused: the pure decode cost)."""
    gc.disable()
    try:
        d0 = time.perf_counter()
        count = sum(len(orjson.loads(b)["items"]) for b in bodies)
        return count, time.perf_counter() - d0
    finally:
        gc.enable()


if __name__ == "__main__":
    main()
