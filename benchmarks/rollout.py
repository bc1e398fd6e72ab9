"""Benchmark: how long a MIG strategy change takes to reach every node at the GPU Operator's rollout pace.

    .venv/bin/python benchmarks/rollout.py [--nodes 5000] [--twin-nodes 300] [--ready-seconds 15]
                                           [--max-unavailable N|N%]

A strategy change (`spec.mig.strategy` mixed -> single, the write migplan makes) makes the operator re-render the
device-plugin DaemonSet (its MIG_STRATEGY env); the DaemonSet controller replaces the plugin pods `maxUnavailable`
nodes at a time (the operator's default: 1), each new pod Ready `--ready-seconds` after it is created
(ASSUMPTIONS-operator.md: an assumption, 15 s by default). GPU Feature Discovery's DaemonSet rolls the same change
in parallel at the same pace.

Two runs on simulated clocks, printed side by side:
- `--nodes` (5,000): the twin's rolling-update decision (reconciler/twin/operator/rollingupdate.py, the function the
  twin's DaemonSet controller calls) stepped pod start by pod start over that many nodes;
- `--twin-nodes` (300): the whole cluster twin (API server, operator, device plugins on 8 H200 per node, every GPU
  cut 7 x 1g.18gb so both strategies accept it) taking the same ClusterPolicy write, to show that the first run's
  pace is the twin's. The whole twin at 5,000 nodes is O(nodes^2) in Python (~12 minutes on one core): pass
  `--twin-nodes 5000` to run it anyway.

Prints when the first node, half the nodes and every node run the new plugin, the closed form
ceil(nodes / maxUnavailable) x ready, and the wall-clock time of each simulation. Nothing is asserted:
tests/twin/test_operand_rollout.py holds the behaviour at a small size.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from reconciler.catalog import load_catalog
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.fleet import ClusterSettings, Fleet, GpuSeed, PartitionSeed
from reconciler.twin.operator import rollingupdate

NS = "gpu-operator"
DS = "nvidia-device-plugin-daemonset"


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds


def uniform_fleet(nodes: int) -> Fleet:
    """Every GPU cut 7 x 1g.18gb: a layout the device plugin accepts under `mixed` and `single` alike."""
    gm = load_catalog().get("H200-141GB")
    assert gm is not None
    fleet = Fleet(ClusterSettings(name="rollout", mig_strategy="mixed"))
    parts = tuple(PartitionSeed("1g.18gb", None, None) for _ in range(7))
    for n in range(nodes):
        fleet.add_node(
            f"gpu-node-{n:05d}", [GpuSeed(i, gm, True, parts) for i in range(8)], {"rack": f"r{n // 40:03d}"}
        )
    return fleet


def new_and_serving(twin: ClusterTwin, generation: str) -> int:
    """Nodes whose device-plugin pod is of the new template and serves (the twin's DaemonSet controller's view)."""
    cache = twin.operator.cache
    with cache.lock:
        return sum(
            1
            for node, pod in cache.dp_pods.items()
            if pod.generation == generation and (adv := cache.dp_state.get(node)) is not None and adv.ok
        )


def hms(seconds: float) -> str:
    h, rest = divmod(round(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s"


def model_run(nodes: int, ready: float, max_unavailable: str) -> tuple[float, float, float, int, float]:
    """The rolling update alone: (first, half, every node, maxUnavailable, wall seconds)."""
    strategy: dict[str, Any] = {}
    if max_unavailable:
        strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}}
    budget = rollingupdate.max_unavailable({"spec": {"updateStrategy": strategy}}, nodes)
    w0 = time.perf_counter()
    names = [f"gpu-node-{n:05d}" for n in range(nodes)]
    old = set(names)
    starting: dict[str, float] = {}  # node -> when its new pod is Ready
    t = 0.0
    first = half = 0.0
    done = 0
    while done < nodes:
        for n in [n for n, at in starting.items() if at <= t]:
            del starting[n]
            done += 1
            if done == 1:
                first = t
            if done == math.ceil(nodes / 2):
                half = t
        # current available pods change nothing: only the old ones and the starting ones are passed
        pods = [rollingupdate.NodePods(n, True, False, True) for n in old]
        pods += [rollingupdate.NodePods(n, True, True, False) for n in starting]
        for n in rollingupdate.to_replace(pods, budget):
            old.discard(n)
            starting[n] = t + ready
        if done < nodes:
            t = min(starting.values())
    return first, half, t, budget, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--twin-nodes", type=int, default=300)
    ap.add_argument("--ready-seconds", type=float, default=15.0)
    ap.add_argument("--max-unavailable", default="", help="spec.daemonsets.rollingUpdate.maxUnavailable (default: 1)")
    args = ap.parse_args()
    if args.nodes < 1 or args.twin_nodes < 0 or not args.ready_seconds > 0:
        ap.error("--nodes must be >= 1, --twin-nodes >= 0 and --ready-seconds > 0")
    print(
        f"change: spec.mig.strategy mixed -> single; a new plugin pod Ready {args.ready_seconds:g}s after it is "
        f"created; maxUnavailable {args.max_unavailable or '1 (the operator default)'}"
    )
    runs = [("rolling update", args.nodes, model_run)] + (
        [("whole twin", args.twin_nodes, twin_run)] * bool(args.twin_nodes)
    )
    for what, nodes, run in runs:
        first, half, every, budget, wall = run(nodes, args.ready_seconds, args.max_unavailable)
        formula = math.ceil(nodes / budget) * args.ready_seconds
        print(
            f"{what}, {nodes} nodes: first node {hms(first)}, half {hms(half)}, every node {hms(every)} "
            f"({every:.0f}s; closed form {formula:.0f}s; maxUnavailable {budget}); simulated in {wall:.1f}s"
        )


def twin_run(nodes: int, ready: float, max_unavailable: str) -> tuple[float, float, float, int, float]:
    """The whole twin: (first, half, every node, maxUnavailable, wall seconds)."""
    clock = Clock()
    twin = ClusterTwin(uniform_fleet(nodes), tls=False, operand_ready_seconds=ready, clock=clock.monotonic).start()
    try:
        twin.settle(timeout=600)
        spec: dict[str, Any] = {"mig": {"strategy": "single"}}
        if max_unavailable:
            spec["daemonsets"] = {"rollingUpdate": {"maxUnavailable": max_unavailable}}
        ds0 = twin.store.get("daemonsets.apps", DS, NS)
        w0 = time.perf_counter()
        twin.store.patch("clusterpolicies.nvidia.com", "cluster-policy", {"spec": spec})
        twin.settle(timeout=600)
        ds = twin.store.get("daemonsets.apps", DS, NS)
        assert ds["metadata"]["generation"] != ds0["metadata"]["generation"], "the strategy change rendered nothing"
        budget = rollingupdate.max_unavailable(ds, nodes)
        generation = str(ds["metadata"]["generation"])
        first = half = None
        steps = 0
        while True:
            done = new_and_serving(twin, generation)
            if first is None and done >= 1:
                first = clock.seconds
            if half is None and done >= math.ceil(nodes / 2):
                half = clock.seconds
            if done == nodes:
                break
            if steps > 4 * nodes + 10:
                raise SystemExit(f"the rollout did not finish: {done} of {nodes}")
            clock.seconds += ready
            twin.tick(timeout=600)
            steps += 1
        wall = time.perf_counter() - w0
    finally:
        twin.stop()
    return first or 0.0, half or 0.0, clock.seconds, budget, wall


if __name__ == "__main__":
    main()
