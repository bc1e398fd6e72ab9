"""`migplan run`'s watch-fed caches of nodes and pods against the cluster twin (issue 29; kube/informer.py).

After each change the twin makes — a pod created, updated, deleted; a node relabelled, deleted; the watch connection
dropped; a 410 because the server no longer has the events after the cache's resourceVersion — the observation a
watching KubeCluster makes equals the one a fresh KubeCluster makes with full LISTs (ObservedState equality), and
the watching one served it from its caches except where it had to list (the 410). Then the loop test: a cycle that
relabels a node is followed by one that sees the label and writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from helpers.twinclock import TwinClock

from reconciler.adapters.kube import informer
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import reconcile_once
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import MIG_CONFIG_LABEL, ObservedState
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
CLOCK = TwinClock()


@pytest.fixture(autouse=True)
def _patient(monkeypatch: pytest.MonkeyPatch) -> None:
    # A cycle waits for the watch's bookmark (about a second); on a loaded machine give it room, so "served from the
    # cache" depends on the cache being right, never on how busy the machine is.
    monkeypatch.setattr(informer, "FRESH_WAIT", 60.0)


@pytest.fixture()
def desired() -> DesiredState:
    loaded, diagnostics = load_desired(INVENTORY)
    assert loaded is not None, [str(d) for d in diagnostics]
    return loaded


@pytest.fixture()
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY, **CLOCK.twin_kwargs()) as t:
        t.settle()
        yield t


def _fresh(twin: ClusterTwin, desired: DesiredState) -> ObservedState:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return cluster.observe(desired.cluster.gpu_operator)
    finally:
        cluster.close()


def _gpu_pod(name: str, node: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": "x"}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {
                        "requests": {"nvidia.com/mig-1g.18gb": "1"},
                        "limits": {"nvidia.com/mig-1g.18gb": "1"},
                    },
                }
            ],
        },
    }


def _wait_until(what: str, done: Callable[[], bool]) -> None:
    ends = time.monotonic() + 30
    while not done():
        assert time.monotonic() < ends, what
        time.sleep(0.05)


class _Dropped:
    """A watch stream the network cuts in the middle of its first chunk (half a line, then a reset)."""

    def __init__(self, resp: Any) -> None:
        self.resp = resp

    def stream(self, amt: int) -> Iterator[bytes]:
        for chunk in self.resp.stream(amt):
            yield chunk[: max(1, len(chunk) // 2)]
            raise urllib3.exceptions.ProtocolError("Connection broken: connection reset by peer")

    def close(self) -> None:
        self.resp.close()

    def release_conn(self) -> None:
        self.resp.release_conn()


class _Prefixed:
    """A watch stream with a line of someone else's in front of the server's answer."""

    def __init__(self, line: bytes, resp: Any) -> None:
        self.line = line
        self.resp = resp

    def stream(self, amt: int) -> Iterator[bytes]:
        yield self.line
        yield from self.resp.stream(amt)

    def close(self) -> None:
        self.resp.close()

    def release_conn(self) -> None:
        self.resp.release_conn()


class _Slow:
    """A watch stream over a slow network: every chunk arrives half a second late."""

    def __init__(self, resp: Any) -> None:
        self.resp = resp

    def stream(self, amt: int) -> Iterator[bytes]:
        for chunk in self.resp.stream(amt):
            time.sleep(0.5)
            yield chunk

    def close(self) -> None:
        self.resp.close()

    def release_conn(self) -> None:
        self.resp.release_conn()


def test_the_cached_observation_equals_a_fresh_list_after_every_change(
    twin: ClusterTwin, desired: DesiredState
) -> None:
    ops = desired.cluster.gpu_operator
    watching = KubeCluster.from_kubeconfig(str(twin.kubeconfig), watch=True)
    assert watching.node_cache is not None and watching.pod_cache is not None
    store = twin.store
    node_names = sorted(n["metadata"]["name"] for n in store.list("nodes"))
    first, last = node_names[0], node_names[-1]

    def same(step: str, *, lists: int = 0) -> None:
        twin.settle()  # the twin's operators have reacted: the two observations look at one state
        relists = watching.relists
        got = watching.observe(ops)
        assert watching.relists - relists == lists, step
        assert got == _fresh(twin, desired), step

    try:
        same("first cycle: lists and seeds both caches", lists=2)
        same("nothing changed")
        store.create("pods", _gpu_pod("holder-a", first), namespace="default")
        store.create("pods", _gpu_pod("holder-b", first), namespace="default")
        same("pods created")
        store.patch("pods", "holder-a", {"metadata": {"labels": {"app": "y", "tier": "gold"}}}, namespace="default")
        same("pod updated")
        store.delete("pods", "holder-b", namespace="default", grace_period_seconds=0)
        same("pod deleted")
        store.patch("nodes", first, {"metadata": {"labels": {MIG_CONFIG_LABEL: "all-disabled", "rack": "r99"}}})
        same("node relabelled")
        store.delete("nodes", last)
        same("node deleted")
        assert last not in watching.observe(ops).nodes

        # The connection drops in the middle of an event: the cache watches again from the last resourceVersion it
        # applied, and the event cut in half comes again.
        opened = watching.pod_cache._open_watch
        cuts: list[int] = []

        def dropping(rv: str) -> Any:
            resp = opened(rv)
            if not cuts:
                cuts.append(1)
                return _Dropped(resp)
            return resp

        watching.pod_cache._open_watch = dropping
        store.patch("pods", "holder-a", {"metadata": {"labels": {"app": "z"}}}, namespace="default")
        same("watch connection dropped")
        assert cuts == [1]
        assert watching.pod_cache.broken is None

        # A hostile stream (a proxy's garbage, an event without an object, a Secret in a watch of pods) before the
        # real events: watched again, no crash, and nothing of it in the observation.
        hostile = [
            b"<html>502 Bad Gateway</html>\n",
            b'{"type":"ADDED"}\n',
            b'{"type":"ADDED","object":{"kind":"Secret","metadata":{"name":"s","uid":"s","resourceVersion":"1"}}}\n',
        ]

        def garbling(rv: str) -> Any:
            resp = opened(rv)
            return _Prefixed(hostile.pop(0), resp) if hostile else resp

        watching.pod_cache._open_watch = garbling
        store.patch("pods", "holder-a", {"metadata": {"labels": {"app": "w"}}}, namespace="default")
        same("hostile lines in the stream")
        assert hostile == [] and watching.pod_cache.broken is None
    finally:
        watching.close()


def test_a_watch_the_server_has_compacted_away_is_a_fresh_list(twin: ClusterTwin, desired: DesiredState) -> None:
    """ERROR 410 Expired: the events after the cache's resourceVersion are gone, so the cache gives up and the next
    cycle lists (and seeds it again), as client-go's reflector relists."""
    ops = desired.cluster.gpu_operator
    watching = KubeCluster.from_kubeconfig(str(twin.kubeconfig), watch=True)
    cache = watching.pod_cache
    assert cache is not None
    store = twin.store
    node = sorted(n["metadata"]["name"] for n in store.list("nodes"))[0]
    try:
        watching.observe(ops)
        behind, behind_rv = dict(cache._items), cache._rv
        cache.stop()
        # More pod events than the server keeps for watches (kube-apiserver's default watch cache: 100 per resource)
        store.create("pods", _gpu_pod("churn", node), namespace="default")
        for i in range(store.watch_cache_size + 1):
            store.patch("pods", "churn", {"metadata": {"labels": {"app": f"v{i}"}}}, namespace="default")
        cache.seed(behind, behind_rv)  # a watch from a resourceVersion the server no longer has the events after
        _wait_until("the cache gives up on 410", lambda: "410" in str(cache.broken))
        twin.settle()
        relists = watching.relists
        got = watching.observe(ops)
        assert watching.relists == relists + 1
        assert got == _fresh(twin, desired)
        assert "churn" in {p.name for p in got.pods}
        twin.settle()
        same_again = watching.observe(ops)  # seeded again: served from the cache
        assert watching.relists == relists + 1
        assert same_again == _fresh(twin, desired)
    finally:
        watching.close()


def test_a_cycle_sees_the_labels_the_last_cycle_wrote_and_writes_nothing(
    twin: ClusterTwin, desired: DesiredState
) -> None:
    """The freshness check at work: a cycle relabels the nodes (the twin's nodes name configs of another
    ConfigMap: migplan writes its own first, then relabels); the next cycles, served by the caches right after those
    writes, must see the labels (a cache behind the writes would relabel again, every cycle: a loop)."""
    watching = KubeCluster.from_kubeconfig(str(twin.kubeconfig), watch=True)
    nodes = {f"node/{n['metadata']['name']}" for n in twin.store.list("nodes")}

    def relabelled() -> set[str]:
        result = reconcile_once(desired=desired, cluster=watching, now=CLOCK.cycle_now())
        assert not result.errors, result.errors
        return {c.subject for c in result.applied if c.kind is Kind.NODE_MIG_CONFIG and c.writes}

    # The nodes' events reach the cache late: only the freshness check keeps a cycle from reading the nodes as they
    # were before the last cycle's writes.
    assert watching.node_cache is not None
    opened = watching.node_cache._open_watch
    watching.node_cache._open_watch = lambda rv: _Slow(opened(rv))
    try:
        first = [relabelled() for _ in range(2)]  # the ConfigMap, then the labels
        assert first == [set(), nodes]
        assert [relabelled() for _ in range(3)] == [set(), set(), set()]
        assert watching.relists == 2  # the first cycle's two lists: every later one was served by the caches
    finally:
        watching.close()
