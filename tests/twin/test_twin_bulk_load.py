"""The twin's bulk load (issue 29 item 4): a fleet loaded with Store.load is what creating it object by object makes.

The objects a small ClusterTwin loads at start (nodes, Leases, daemon pods, the pods holding partitions, and with
DRA the ResourceSlices its plugins publish) are recorded, then written into two fresh stores: one by one (create,
then the status patch) and with Store.load. Through the HTTP API both answer the same lists, gets, field-selected
lists and watches (from resourceVersion 0, and from the list's), but for what the server generates per object
(uid, resourceVersion, times). Bad input fails the whole load with the API's own error and stores nothing. A
2,000-node twin starts, DRA plugins included, without a thread per node.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.twin.apiserver import ApiError, Store
from reconciler.twin.apiserver.twin import ApiServerTwin
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.fleet import Fleet

Calls = list[tuple[str, list[tuple[dict[str, Any], dict[str, Any] | None]], str | None]]
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "gpu-operator")


def _record(monkeypatch: pytest.MonkeyPatch, nodes: int, *, dra: bool) -> tuple[Calls, list[str]]:
    """Every Store.load call of a small twin's start (and its DRA plugins' start), its arguments copied."""
    calls: Calls = []
    real = Store.load

    def recording(self: Store, resource: str, items: Any, namespace: str | None = None) -> list[str]:
        items = list(items)
        calls.append((resource, copy.deepcopy(items), namespace))
        return real(self, resource, items, namespace)

    monkeypatch.setattr(Store, "load", recording)
    with ClusterTwin.synthetic(nodes, gpus_per_node=2, owned_fraction=0.5, tls=False) as twin:
        twin.settle()
        if dra:
            twin.start_dra_plugins(sorted(twin.fleet.nodes))
        spaces = [n["metadata"]["name"] for n in twin.store.list("namespaces")]
    monkeypatch.setattr(Store, "load", real)
    return calls, spaces


def _one_by_one(calls: Calls, spaces: list[str]) -> Store:
    store = Store(seed=7)
    store.ensure_namespaces(spaces)
    for resource, items, namespace in calls:
        for obj, status in items:
            created = store.create(resource, copy.deepcopy(obj), namespace)
            if status is not None:
                meta = created["metadata"]
                store.patch(resource, meta["name"], {"status": status}, meta.get("namespace"), subresource="status")
    return store


def _bulk(calls: Calls, spaces: list[str]) -> Store:
    store = Store(seed=7)
    store.ensure_namespaces(spaces)
    for resource, items, namespace in calls:
        store.load(resource, copy.deepcopy(items), namespace)
    return store


def _normal(value: Any) -> Any:
    """What the server generates per object left out: uids, resourceVersions, times."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if k not in ("resourceVersion", "uid")}
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, str) and (_UUID.match(value) or _TIME.match(value)):
        return "<generated>"
    return value


def _open(api: ApiServerTwin, path: str) -> bytes:
    request = urllib.request.Request(api.url + path, headers={"Authorization": f"Bearer {api.token}"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        body: bytes = resp.read()
    return body


def _get(api: ApiServerTwin, path: str) -> Any:
    return json.loads(_open(api, path))


def _watch(api: ApiServerTwin, path: str) -> list[tuple[str, Any]]:
    return [(ev["type"], ev["object"]) for ev in map(json.loads, _open(api, path).splitlines()) if ev]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServerTwin, ApiServerTwin, Calls]]:
    with pytest.MonkeyPatch.context() as mp:
        calls, spaces = _record(mp, 6, dra=True)
    with (
        ApiServerTwin(store=_one_by_one(calls, spaces), tls=False, namespaces=NAMESPACES) as one,
        ApiServerTwin(store=_bulk(calls, spaces), tls=False, namespaces=NAMESPACES) as bulk,
    ):
        yield one, bulk, calls


def _object_path(meta: dict[str, Any], group: str, resource: str) -> str:
    ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"{group}{ns}/{resource}/{meta['name']}"


# list path -> (group prefix, resource) of its objects' own paths
PATHS = {
    "/api/v1/nodes": ("/api/v1", "nodes"),
    "/api/v1/pods": ("/api/v1", "pods"),
    "/api/v1/namespaces/gpu-operator/pods": ("/api/v1", "pods"),
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases": ("/apis/coordination.k8s.io/v1", "leases"),
    "/apis/resource.k8s.io/v1/resourceslices": ("/apis/resource.k8s.io/v1", "resourceslices"),
}


def test_the_recorded_start_loads_every_kind_it_writes_in_bulk(
    both: tuple[ApiServerTwin, ApiServerTwin, Calls],
) -> None:
    loaded = {resource for resource, _, _ in both[2]}
    assert loaded == {"nodes", "leases.coordination.k8s.io", "pods", "resourceslices.resource.k8s.io"}
    statuses = [status for resource, items, _ in both[2] if resource == "pods" for _, status in items]
    assert statuses and all(s is not None and s["phase"] == "Running" for s in statuses)


@pytest.mark.parametrize("path", PATHS)
def test_lists_and_gets_are_the_same_as_one_by_one(both: tuple[ApiServerTwin, ApiServerTwin, Calls], path: str) -> None:
    one, bulk, _ = both
    expected = _get(one, path)["items"]
    got = _get(bulk, path)["items"]
    assert expected, path
    assert _normal(got) == _normal(expected)
    # managedFields (who wrote what: the creator, then the status write) survive the bulk path too
    assert [m["manager"] for m in got[0]["metadata"]["managedFields"]] == [
        m["manager"] for m in expected[0]["metadata"]["managedFields"]
    ]
    for item in got[:3]:
        own = _object_path(item["metadata"], *PATHS[path])
        assert _normal(_get(bulk, own)) == _normal(_get(one, own))
        assert _get(bulk, own)["metadata"]["resourceVersion"] == item["metadata"]["resourceVersion"]


def test_field_selected_lists_are_the_same(both: tuple[ApiServerTwin, ApiServerTwin, Calls]) -> None:
    one, bulk, _ = both
    node = _get(one, "/api/v1/nodes")["items"][2]["metadata"]["name"]
    for query in (f"fieldSelector=spec.nodeName%3D{node}", "fieldSelector=status.phase%3DRunning"):
        expected = _get(one, f"/api/v1/pods?{query}")["items"]
        got = _get(bulk, f"/api/v1/pods?{query}")["items"]
        assert expected and _normal(got) == _normal(expected), query
    sliced = _get(bulk, f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{node}")
    assert [s["spec"]["nodeName"] for s in sliced["items"]] == [node]


def test_watches_are_the_same(both: tuple[ApiServerTwin, ApiServerTwin, Calls]) -> None:
    one, bulk, _ = both
    for path in ("/api/v1/nodes", "/api/v1/pods", "/apis/resource.k8s.io/v1/resourceslices"):
        expected = _watch(one, f"{path}?watch=1&resourceVersion=0&timeoutSeconds=1")
        got = _watch(bulk, f"{path}?watch=1&resourceVersion=0&timeoutSeconds=1")
        assert got and {t for t, _ in got} == {"ADDED"}, path
        assert _normal(got) == _normal(expected), path
    # From the list's resourceVersion: nothing until the next write, then that write alone.
    listed = _get(bulk, "/api/v1/namespaces/default/pods")
    rv = listed["metadata"]["resourceVersion"]
    assert _watch(bulk, f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1") == []
    bulk.store.create(
        "pods", {"metadata": {"name": "late"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "default"
    )
    after = _watch(bulk, f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert [(t, o["metadata"]["name"]) for t, o in after] == [("ADDED", "late")]


# ---------------------------------------------------------------------------------------------- the store alone


def _pod(name: Any, node: str = "n1", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "x", **labels}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "img"}]},
    }


@pytest.fixture
def store() -> Store:
    s = Store(seed=3)
    s.ensure_namespaces(["default"])
    return s


def test_one_rv_per_object_in_order_and_one_added_event_each(store: Store) -> None:
    seen: list[tuple[str, str]] = []
    store.subscribe(lambda t, o: seen.append((t, o["metadata"]["name"])), kinds=("Pod",))
    before = store.resource_version
    names = store.load("pods", [(_pod(f"p{i}", f"n{i}"), {"phase": "Running"}) for i in range(300)], "default")
    assert names == [f"p{i}" for i in range(300)]
    assert store.resource_version == before + 300
    rvs = [int(store.get("pods", f"p{i}", "default")["metadata"]["resourceVersion"]) for i in range(300)]
    assert rvs == list(range(before + 1, before + 301))
    assert seen == [("ADDED", f"p{i}") for i in range(300)]
    # the watch cache keeps the newest events only, as 300 creates would leave it
    events, _ = store.events_since("pods", store.resource_version - 100)
    assert len(events) == 100
    with pytest.raises(ApiError) as gone:
        store.events_since("pods", before)
    assert gone.value.code == 410
    pods = store.list("pods", "default")
    assert len({p["metadata"]["uid"] for p in pods}) == 300  # every object its own uid
    volumes = {p["spec"]["volumes"][0]["name"] for p in pods}
    assert len(volumes) > 250 and all(v.startswith("kube-api-access-") for v in volumes)  # drawn per object


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (_pod("Not_A_Name"), 422),  # same shape as the others: its name is still checked
        (_pod("p1"), 409),  # twice in one load
        (_pod(12345), 400),  # not a string: takes the whole path, whose decoder refuses it
        ({"metadata": {"name": "p9"}, "spec": "not a spec"}, 422),
        ("not an object", 400),
    ],
)
def test_a_bad_object_fails_the_whole_load_and_stores_nothing(store: Store, bad: Any, code: int) -> None:
    before = store.resource_version
    with pytest.raises(ApiError) as err:
        store.load("pods", [(_pod("p0"), None), (_pod("p1"), None), (bad, None), (_pod("p2"), None)], "default")
    assert err.value.code == code
    assert store.resource_version == before
    assert store.list("pods") == []


def test_a_name_already_stored_and_a_missing_namespace_are_refused(store: Store) -> None:
    store.create("pods", _pod("taken"), "default")
    with pytest.raises(ApiError) as err:
        store.load("pods", [(_pod("a"), None), (_pod("taken"), None)], "default")
    assert err.value.code == 409
    with pytest.raises(ApiError) as missing:
        store.load("pods", [(_pod("a"), None)], "nowhere")
    assert missing.value.code == 404
    assert [p["metadata"]["name"] for p in store.list("pods")] == ["taken"]


def test_a_quota_still_admits_and_charges_each_object(store: Store) -> None:
    store.create("resourcequotas", {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "3"}}}, "default")
    with pytest.raises(ApiError) as err:
        store.load("pods", [(_pod(f"p{i}"), None) for i in range(4)], "default")
    assert err.value.code == 403
    assert store.list("pods") == []
    store.load("pods", [(_pod(f"p{i}"), None) for i in range(3)], "default")
    assert store.get("resourcequotas", "q", "default")["status"]["used"]["pods"] == "3"


def test_a_value_copied_elsewhere_is_not_templated_wrongly(store: Store) -> None:
    # The label repeats each pod's own name: a template would carry the first pod's name in every label.
    store.load("pods", [(_pod(f"p{i}", f"n{i}", own=f"p{i}"), None) for i in range(5)], "default")
    for i in range(5):
        pod = store.get("pods", f"p{i}", "default")
        assert pod["metadata"]["labels"]["own"] == f"p{i}" and pod["spec"]["nodeName"] == f"n{i}"


# ---------------------------------------------------------------------------------------------- at fleet size


def _threads() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return threading.active_count()


def test_a_large_fleet_starts_without_a_thread_per_node() -> None:
    nodes = 2000
    fleet = Fleet.synthetic(nodes, gpus_per_node=4, owned_fraction=0.05)
    before = _threads()
    with ClusterTwin(fleet, tls=False) as twin:
        twin.settle(timeout=300)
        twin.start_dra_plugins(sorted(fleet.nodes))
        twin.settle(timeout=300)
        during = _threads()
        store = twin.store
        assert len(store.list("nodes")) == nodes
        assert len(store.list("leases.coordination.k8s.io", "kube-node-lease")) == nodes
        slices = store.list("resourceslices.resource.k8s.io")
        assert sorted(s["spec"]["nodeName"] for s in slices) == sorted(fleet.nodes)
        pods = store.list("pods")
        holders = [p for p in pods if p["metadata"]["namespace"] == "default"]
        assert len(holders) == len(fleet.pods) > 0
        assert all(p["status"]["phase"] == "Running" for p in pods)
    # the API server's serving thread and the operator's worker: nothing that grows with the fleet
    assert during - before <= 4, (before, during)
