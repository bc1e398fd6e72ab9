"""The API server twin's store and its pure parts: patches, selectors, notifications, concurrency, bad input."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from reconciler.twin.apiserver import ApiError, Store, clusterpolicy_required_spec
from reconciler.twin.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from reconciler.twin.apiserver.registry import STRATEGIES, strategy_for
from reconciler.twin.apiserver.resources import BUILTINS
from reconciler.twin.apiserver.selectors import parse_label_selector


@pytest.fixture
def store() -> Store:
    s = Store()
    s.ensure_namespaces(["default", "gpu-operator"])
    return s


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(labels)}}


# ------------------------------------------------------------------ patches


def test_merge_patch_rfc7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}
    assert merge_patch(target, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch(target, {"c": ["x"]}) == {"a": "b", "c": ["x"]}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}}  # input untouched


def test_json_patch_ops_and_failures() -> None:
    doc = {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.18gb"}}, "list": [1, 2]}
    out = json_patch(
        doc,
        [
            {"op": "test", "path": "/metadata/labels/nvidia.com~1mig.config", "value": "all-1g.18gb"},
            {"op": "replace", "path": "/metadata/labels/nvidia.com~1mig.config", "value": "all-disabled"},
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "move", "from": "/list/0", "path": "/first"},
        ],
    )
    assert out == {"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled"}}, "list": [2, 3], "first": 1}
    for bad in (
        [{"op": "test", "path": "/list/0", "value": 9}],
        [{"op": "remove", "path": "/nope"}],
        [{"op": "replace", "path": "/list/7", "value": 0}],
    ):
        with pytest.raises(ApiError) as exc:
            json_patch(doc, bad)
        assert exc.value.code == 422
        assert exc.value.message == "the server rejected our request due to an error in our request"
    with pytest.raises(ApiError) as exc:
        json_patch(doc, {"op": "add"})
    assert exc.value.code == 400


def test_strategic_merge_patch_merge_keys_and_directives() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "b", "image": "b:1"},
            ],
            "tolerations": [{"key": "t1", "operator": "Exists"}],
            "finalizers": ["x"],
        },
        "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]},
    }
    out = strategic_merge_patch(
        pod,
        {
            "spec": {
                "containers": [
                    {"name": "a", "env": [{"name": "Y", "value": "3"}, {"name": "Z", "value": "4"}]},
                    {"name": "b", "$patch": "delete"},
                ],
                "tolerations": [{"key": "t2", "operator": "Exists"}],  # atomic list: replaced
                "finalizers": ["y"],  # primitive merge list: union
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    assert out["spec"]["containers"] == [
        {
            "name": "a",
            "image": "a:1",
            "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "3"}, {"name": "Z", "value": "4"}],
        }
    ]
    assert out["spec"]["tolerations"] == [{"key": "t2", "operator": "Exists"}]
    assert out["spec"]["finalizers"] == ["x", "y"]
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]
    replaced = strategic_merge_patch(pod, {"spec": {"$patch": "replace", "containers": []}})
    assert replaced["spec"] == {"containers": []}


# ------------------------------------------------------------------ selectors


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("rack=r12", {"n1"}),
        ("rack==r12,nvidia.com/mig.config", {"n1"}),
        ("rack!=r12", {"n2", "n3"}),
        ("!nvidia.com/mig.config", {"n2", "n3"}),
        ("rack in (r12, r13)", {"n1", "n2"}),
        ("rack notin (r12)", {"n2", "n3"}),
        ("nvidia.com/mig.config", {"n1"}),
        ("", {"n1", "n2", "n3"}),
    ],
)
def test_label_selectors(selector: str, matches: set[str]) -> None:
    nodes = {"n1": {"rack": "r12", "nvidia.com/mig.config": "all-balanced"}, "n2": {"rack": "r13"}, "n3": {}}
    sel = parse_label_selector(selector)
    assert {n for n, labels in nodes.items() if sel.matches(labels)} == matches


@pytest.mark.parametrize("bad", ["rack===r12", "rack in r12", "rack in (r12", "=x", "a b"])
def test_bad_label_selector_is_400(bad: str) -> None:
    with pytest.raises(ApiError) as exc:
        parse_label_selector(bad)
    assert exc.value.code == 400 and exc.value.message.startswith("unable to parse requirement")


def test_field_selectors_and_unsupported_fields(store: Store) -> None:
    for name, node in (("p1", "n1"), ("p2", "n2"), ("p3", None)):
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x:1"}]}
        if node:
            spec["nodeName"] = node
        store.create("pods", {"metadata": {"name": name}, "spec": spec}, "default")
    names = lambda sel: [p["metadata"]["name"] for p in store.list("pods", "default", field_selector=sel)]  # noqa: E731
    assert names("spec.nodeName=n1") == ["p1"]
    assert names("spec.nodeName=") == ["p3"]
    assert names("spec.nodeName!=n1,status.phase=Pending") == ["p2", "p3"]
    store.create("nodes", _node("schedulable"))
    store.create("nodes", {"metadata": {"name": "cordoned"}, "spec": {"unschedulable": True}})
    assert [n["metadata"]["name"] for n in store.list("nodes", field_selector="spec.unschedulable=false")] == [
        "schedulable"
    ]
    with pytest.raises(ApiError) as exc:
        store.list("pods", field_selector="metadata.labels=x")
    assert exc.value.code == 400 and exc.value.message == "field label not supported: metadata.labels"


def test_pagination_with_selector_misses_nothing(store: Store) -> None:
    for i in range(25):
        store.create("nodes", _node(f"n{i:02d}", parity="even" if i % 2 == 0 else "odd"))
    seen: list[str] = []
    token = None
    while True:
        page = store.list_page("nodes", label_selector="parity=even", limit=4, continue_token=token)
        seen += [n.decode().split('"name":"')[1].split('"')[0] for n in page.items]
        token = page.continue_token
        if token is None:
            break
    assert seen == [f"n{i:02d}" for i in range(0, 25, 2)]


def test_count_is_the_number_listed_in_every_namespace(store: Store) -> None:
    assert store.count("nodes") == 0 and store.count("pods") == 0
    for i in range(3):
        store.create("nodes", _node(f"n{i}"))
    for ns in ("default", "gpu-operator"):
        store.create("pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, ns)
    store.delete("nodes", "n1")
    assert store.count("nodes") == len(store.list("nodes")) == 2
    assert store.count("pods") == len(store.list("pods")) == 2
    with pytest.raises(ApiError):
        store.count("no-such-resource")


# ------------------------------------------------------------------ write semantics


def test_resource_version_generation_and_conflict(store: Store) -> None:
    store.create("nodes", _node("n1", a="1"))
    node = store.get("nodes", "n1")  # after the node lifecycle controller lifted the admission's not-ready taint
    rv = int(node["metadata"]["resourceVersion"])
    store.patch("nodes", "n1", {"metadata": {"labels": {"b": "2"}}})
    again = store.patch("nodes", "n1", {"metadata": {"labels": {"b": "2"}}})  # no-op: no new RV
    assert int(again["metadata"]["resourceVersion"]) == rv + 1
    node["metadata"]["labels"]["c"] = "3"
    with pytest.raises(ApiError) as exc:
        store.update("nodes", node)
    assert exc.value.code == 409 and exc.value.reason == "Conflict"
    ds = store.create(
        "daemonsets.apps",
        {
            "metadata": {"name": "dp"},
            "spec": {
                "selector": {"matchLabels": {"n": "dp"}},
                "template": {
                    "metadata": {"labels": {"n": "dp"}},
                    "spec": {"containers": [{"name": "c", "image": "i:1"}]},
                },
            },
        },
        "gpu-operator",
    )
    assert ds["metadata"]["generation"] == 1
    ds = store.patch("daemonsets.apps", "dp", {"metadata": {"labels": {"x": "y"}}}, "gpu-operator")
    assert ds["metadata"]["generation"] == 1
    ds = store.patch(
        "daemonsets.apps",
        "dp",
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "c", "env": [{"name": "MIG_STRATEGY", "value": "mixed"}]}]}
                }
            }
        },
        "gpu-operator",
        patch_type="strategic",
    )
    assert ds["metadata"]["generation"] == 2
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "i:1"


def test_bad_input_changes_nothing(store: Store) -> None:
    store.create("nodes", _node("n1", a="1"))
    before = store.get("nodes", "n1")
    rv = store.resource_version
    for call in (
        lambda: store.patch("nodes", "n1", {"metadata": {"labels": {"a": "bad value!"}}}),
        lambda: store.patch(
            "nodes", "n1", [{"op": "test", "path": "/metadata/labels/a", "value": "2"}], patch_type="json"
        ),
        lambda: store.patch("nodes", "n1", {"metadata": {"resourceVersion": "1", "labels": {"b": "1"}}}),
        lambda: store.create(
            "pods",
            {
                "metadata": {"name": "p"},
                "spec": {
                    "containers": [{"name": "c", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]
                },
            },
            "default",
        ),
        lambda: store.create("configmaps", {"metadata": {"name": "c"}}, "missing-ns"),
    ):
        with pytest.raises(ApiError):
            call()
    assert store.get("nodes", "n1") == before
    assert store.resource_version == rv
    assert store.list("pods") == []


def test_dry_run_and_status_isolation(store: Store) -> None:
    store.create("configmaps", {"metadata": {"name": "dry"}, "data": {"a": "b"}}, "default", dry_run=True)
    with pytest.raises(ApiError) as exc:
        store.get("configmaps", "dry", "default")
    assert exc.value.code == 404
    store.create("nodes", _node("n1"))
    store.patch("nodes", "n1", {"status": {"capacity": {"nvidia.com/gpu": "8"}}})
    assert "capacity" not in store.get("nodes", "n1")["status"]
    store.patch(
        "nodes",
        "n1",
        {"status": {"capacity": {"nvidia.com/gpu": "8"}}, "spec": {"unschedulable": True}},
        subresource="status",
    )
    node = store.get("nodes", "n1")
    assert node["status"]["capacity"] == {"nvidia.com/gpu": "8"} and "unschedulable" not in node["spec"]


def test_pod_deletion_is_graceful_only_when_bound(store: Store) -> None:
    spec = {"containers": [{"name": "c", "image": "x:1"}]}
    store.create("pods", {"metadata": {"name": "bound"}, "spec": {**spec, "nodeName": "n1"}}, "default")
    store.create("pods", {"metadata": {"name": "free"}, "spec": spec}, "default")
    marked = store.delete("pods", "bound", "default")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert store.get("pods", "bound", "default")["metadata"]["deletionTimestamp"]
    store.delete("pods", "bound", "default", grace_period_seconds=0)
    store.delete("pods", "free", "default")
    assert store.list("pods", "default") == []


def test_custom_resource_validation_defaults_and_warnings(store: Store) -> None:
    from reconciler.twin.apiserver import clusterpolicy_crd

    store.install_crd(clusterpolicy_crd())
    spec: dict[str, Any] = {k: {} for k in clusterpolicy_required_spec()}
    with pytest.raises(ApiError) as exc:
        store.create("clusterpolicies.nvidia.com", {"metadata": {"name": "p"}, "spec": {"mig": {"strategy": "x"}}})
    assert exc.value.code == 422 and "spec.daemonsets: Required value" in exc.value.message
    warnings: list[str] = []
    cp = store.create(
        "clusterpolicies.nvidia.com", {"metadata": {"name": "p"}, "spec": {**spec, "bogus": 1}}, warnings=warnings
    )
    assert warnings == ['unknown field "spec.bogus"'] and "bogus" not in cp["spec"]
    assert cp["spec"]["toolkit"] == {"installDir": "/usr/local/nvidia"}
    with pytest.raises(ApiError) as exc:
        store.patch("clusterpolicies.nvidia.com", "p", {"spec": {"mig": {"strategy": "s"}}}, patch_type="strategic")
    assert exc.value.code == 415


# ------------------------------------------------------------------ notifications and concurrency


def test_subscribers_see_commit_order_even_with_nested_writes(store: Store) -> None:
    seen_a: list[tuple[str, str]] = []
    seen_b: list[tuple[str, str]] = []

    def controller(event: str, obj: dict[str, Any]) -> None:
        seen_a.append((event, obj["metadata"]["name"]))
        if obj["kind"] == "Node" and event == "ADDED":  # react by writing: delivered after this round
            store.create("configmaps", {"metadata": {"name": f"cm-{obj['metadata']['name']}"}}, "default")

    store.subscribe(controller)
    unsubscribe = store.subscribe(lambda e, o: seen_b.append((e, o["metadata"]["name"])))
    store.create("nodes", _node("n1"))
    # the twin's node lifecycle controller (nodelifecycle.py) subscribed first: its taint removal is the first
    # nested write, the configmap the second
    assert seen_a == seen_b == [("ADDED", "n1"), ("MODIFIED", "n1"), ("ADDED", "cm-n1")]
    unsubscribe()
    store.delete("nodes", "n1")
    assert seen_b[-1] == ("ADDED", "cm-n1") and seen_a[-1] == ("DELETED", "n1")


def test_concurrent_writers_lose_nothing(store: Store) -> None:
    store.create("nodes", _node("n1"))
    errors: list[Exception] = []

    def writer(i: int) -> None:
        try:
            for j in range(25):
                store.patch("nodes", "n1", {"metadata": {"labels": {f"w{i}-{j}": "x"}}})
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(store.get("nodes", "n1")["metadata"]["labels"]) == 200


def test_watch_window_expires_old_resource_versions() -> None:
    store = Store(watch_cache_size=5)
    store.create("nodes", _node("n1"))
    start = store.resource_version
    for i in range(10):
        store.patch("nodes", "n1", {"metadata": {"labels": {"i": str(i)}}})
    with pytest.raises(ApiError) as exc:
        store.events_since("nodes", start)
    assert exc.value.code == 410 and exc.value.message.startswith(f"too old resource version: {start} (")
    events, _ = store.events_since("nodes", store.resource_version - 2)
    assert [e.type for e in events] == ["MODIFIED", "MODIFIED"]


def test_create_many_is_all_or_nothing(store: Store) -> None:
    seen: list[str] = []
    store.subscribe(lambda e, o: seen.append(o["metadata"]["name"]) if e == "ADDED" else None)
    assert store.create_many("nodes", [_node(f"n{i}") for i in range(3)]) == 3
    assert seen == ["n0", "n1", "n2"]
    rv = store.resource_version
    with pytest.raises(ApiError) as exc:
        store.create_many("nodes", [_node("m0"), _node("m1", a="bad value!")])
    assert exc.value.code == 422
    with pytest.raises(ApiError) as exc:
        store.create_many("nodes", [_node("m0"), _node("m0")])
    assert exc.value.code == 409
    assert store.resource_version == rv and [n["metadata"]["name"] for n in store.list("nodes")] == ["n0", "n1", "n2"]


def test_bind_sets_node_and_condition_once(store: Store) -> None:
    store.create(
        "pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}, "default"
    )
    uid = store.get("pods", "p", "default")["metadata"]["uid"]
    pod = store.bind("default", "p", "gpu-1")
    assert pod["spec"]["nodeName"] == "gpu-1" and pod["metadata"]["uid"] == uid
    assert [(c["type"], c["status"]) for c in pod["status"]["conditions"]] == [("PodScheduled", "True")]
    with pytest.raises(ApiError) as exc:
        store.bind("default", "p", "gpu-2")
    assert exc.value.code == 409 and 'already assigned to node "gpu-1"' in exc.value.message


def test_namespace_deletion_terminates_then_finalizes(store: Store) -> None:
    store.create("namespaces", {"metadata": {"name": "team"}})
    store.create("configmaps", {"metadata": {"name": "c"}}, "team")
    terminating = store.delete("namespaces", "team")
    assert terminating["status"]["phase"] == "Terminating"
    with pytest.raises(ApiError) as exc:
        store.get("namespaces", "team")
    assert exc.value.code == 404
    assert store.list("configmaps", "team") == []

    bare = Store(bare=True)
    bare.ensure_namespaces(["team"])
    bare.delete("namespaces", "team")
    assert bare.get("namespaces", "team")["status"]["phase"] == "Terminating"  # no namespace controller
    with pytest.raises(ApiError) as exc:
        bare.create("configmaps", {"metadata": {"name": "c"}}, "team")
    assert exc.value.code == 403 and "because it is being terminated" in exc.value.message


def test_pod_logs_by_container_and_tail(store: Store) -> None:
    store.create(
        "pods",
        {
            "metadata": {"name": "two"},
            "spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "x:1"}]},
        },
        "default",
    )
    store.set_pod_log("default", "two", "a1\na2\na3\n", container="a")
    assert store.pod_log("default", "two", "a", tail_lines=2) == "a2\na3\n"
    assert store.pod_log("default", "two", "b") == ""
    assert store.pod_log("default", "two") == "a1\na2\na3\n"  # Python callers: the first container
    with pytest.raises(ApiError) as exc:
        store.pod_log("default", "two", strict=True)  # what HTTP answers, as the real server
    assert exc.value.code == 400 and "choose one of: [a b]" in exc.value.message
    with pytest.raises(ApiError) as exc:
        store.pod_log("default", "two", "c")
    assert exc.value.message == "container c is not valid for pod two"


def test_a_pods_logs_go_with_the_pod_only(store: Store) -> None:
    """The pod strategy's on_removed drops the pod's logs; another kind's object of the same name does not."""
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x:1"}]}}
    store.create("pods", pod, "default")
    store.create("configmaps", {"metadata": {"name": "p"}}, "default")
    store.set_pod_log("default", "p", "hello\n")
    store.delete("configmaps", "p", "default")
    assert store.pod_log("default", "p") == "hello\n"
    store.delete("pods", "p", "default", grace_period_seconds=0)
    store.create("pods", pod, "default")
    assert store.pod_log("default", "p") == ""


def test_every_kind_strategy_names_a_served_built_in() -> None:
    """A strategy keyed by a misspelt resource would never run: the kind would silently get the generic one."""
    served = {rt.key for rt in BUILTINS}
    assert set(STRATEGIES) <= served
    assert all(strategy_for(rt) is STRATEGIES[rt.key] for rt in BUILTINS if rt.key in STRATEGIES)


def test_unknown_fields_of_built_ins_warn_or_fail_strict(store: Store) -> None:
    warnings: list[str] = []
    cm = store.create(
        "configmaps", {"metadata": {"name": "c", "lables": {"a": "b"}}, "dat": {"x": "1"}}, "default", warnings=warnings
    )
    assert warnings == ['unknown field "dat"', 'unknown field "metadata.lables"']
    assert "dat" not in cm and "lables" not in cm["metadata"]
    with pytest.raises(ApiError) as exc:
        store.create("nodes", {"metadata": {"name": "n"}, "spec": {"unschedulabel": True}}, strict=True)
    assert exc.value.code == 400
    assert exc.value.message == (
        'Node in version "v1" cannot be handled as a Node: strict decoding error: unknown field "spec.unschedulabel"'
    )
