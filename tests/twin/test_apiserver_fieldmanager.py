"""managedFields and server-side apply in the API twin's store (fieldmanager.py, fieldpaths.py, apply.py).

Each expectation is the apiserver's field manager / structured-merge-diff behaviour named in the test; the HTTP and
kubectl side is tests/twin/test_apiserver_serverside_apply.py, the recorded server's entries are compared in
test_conformance_transcripts.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.twin.apiserver import fieldmanager, fieldpaths
from reconciler.twin.apiserver.errors import ApiError
from reconciler.twin.apiserver.fieldmanager import Managed
from reconciler.twin.apiserver.fieldschema import BuiltinShape
from reconciler.twin.apiserver.store import Store


def _owners(obj: dict[str, Any]) -> dict[tuple[str, str, str], set[fieldpaths.Path]]:
    return {
        (e["manager"], e["operation"], e.get("subresource", "")): fieldpaths.decode(e["fieldsV1"])
        for e in obj["metadata"].get("managedFields") or []
    }


def _node(store: Store, name: str = "n1") -> dict[str, Any]:
    return store.create("nodes", {"metadata": {"name": name, "labels": {"rack": "r1"}}}, field_manager="creator")


UNSCHEDULABLE = ("f:spec", "f:unschedulable")


def test_fieldsv1_encoding_round_trips_with_dot_for_members_with_children() -> None:
    paths = {
        ("f:metadata", "f:labels"),
        ("f:metadata", "f:labels", "f:a"),
        ("f:spec", "f:containers", 'k:{"name":"c"}'),
        ("f:spec", "f:containers", 'k:{"name":"c"}', "f:image"),
        ("f:spec", "f:tolerations"),
    }
    encoded = fieldpaths.encode(paths)
    assert encoded == {
        "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
        "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}}}, "f:tolerations": {}},
    }
    assert list(encoded["f:metadata"]["f:labels"]) == [".", "f:a"]  # "." first, as serialize.go writes it
    assert fieldpaths.decode(encoded) == paths
    with pytest.raises(ValueError):
        fieldpaths.decode({"x:bad": {}})
    with pytest.raises(ValueError):
        fieldpaths.decode([])


def test_compare_skips_unchanged_subtrees_but_not_ones_only_python_calls_equal() -> None:
    """An unchanged map is skipped whole (same result as walking it); True == 1 == 1.0 in Python, so a map
    that differs only by such a type is still walked, and only the JSON type change (true -> 1) is Modified."""
    shape = BuiltinShape()
    status = {"capacity": {"cpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}
    old = {"metadata": {"labels": {"a": "1"}}, "spec": {"unschedulable": True, "x": {"n": 1}}, "status": status}
    new = {"metadata": {"labels": {"a": "2"}}, "spec": {"unschedulable": 1, "x": {"n": 1.0}}, "status": dict(status)}
    added, modified, removed = fieldpaths.compare(old, new, shape)
    assert modified == {("f:metadata", "f:labels", "f:a"), ("f:spec", "f:unschedulable")}
    assert added == removed == set()
    assert fieldpaths.compare(old, old, shape) == (set(), set(), set())


def test_compare_walks_keyed_lists_and_keeps_atomic_ones_whole() -> None:
    shape = BuiltinShape()
    old = {"spec": {"containers": [{"name": "a", "image": "1"}], "tolerations": [{"key": "x"}]}}
    new = {"spec": {"containers": [{"name": "a", "image": "2"}, {"name": "b"}], "tolerations": [{"key": "y"}]}}
    added, modified, removed = fieldpaths.compare(old, new, shape)
    assert added == {
        ("f:spec", "f:containers", 'k:{"name":"b"}'),
        ("f:spec", "f:containers", 'k:{"name":"b"}', "f:name"),
    }
    assert modified == {
        ("f:spec", "f:containers", 'k:{"name":"a"}', "f:image"),
        ("f:spec", "f:tolerations"),  # +listType=atomic
    }
    assert removed == set()
    assert (
        fieldpaths.dotted(("f:spec", "f:containers", 'k:{"name":"a"}', "f:image")) == '.spec.containers[name="a"].image'
    )


def test_update_moves_changed_fields_and_removed_fields_leave_every_set() -> None:
    store = Store()
    _node(store)
    store.patch("nodes", "n1", {"spec": {"unschedulable": True}}, field_manager="migplan")
    assert UNSCHEDULABLE in _owners(store.get("nodes", "n1"))[("migplan", "Update", "")]
    # kubectl uncordon: a strategic merge patch removing the field -> nobody owns it (migplan's entry empties)
    gone = store.patch(
        "nodes", "n1", {"spec": {"unschedulable": None}}, patch_type="strategic", field_manager="kubectl"
    )
    assert ("migplan", "Update", "") not in _owners(gone)
    assert all(UNSCHEDULABLE not in s for s in _owners(gone).values())
    # kubectl cordon: the re-added field is kubectl's
    again = store.patch(
        "nodes", "n1", {"spec": {"unschedulable": True}}, patch_type="strategic", field_manager="kubectl"
    )
    assert _owners(again)[("kubectl", "Update", "")] == {UNSCHEDULABLE}
    # a write that sets the same value takes nothing: ownership and time stay
    before = store.get("nodes", "n1")["metadata"]["managedFields"]
    same = store.patch("nodes", "n1", {"spec": {"unschedulable": True}}, field_manager="migplan")
    assert same["metadata"]["managedFields"] == before
    assert ("f:metadata", "f:labels", "f:rack") in _owners(same)[("creator", "Update", "")]


def test_status_writes_get_their_own_entry_and_zero_values_are_nobodys() -> None:
    store = Store()
    _node(store)
    out = store.patch(
        "nodes", "n1", {"status": {"capacity": {"nvidia.com/gpu": "1"}}}, subresource="status", field_manager="agent"
    )
    owners = _owners(out)
    # the request is defaulted before the field manager sees it (SetDefaults_NodeStatus copies capacity into an
    # absent allocatable), so the writer owns the defaulted allocatable too, as on a real server
    assert owners[("agent", "Update", "status")] == {
        ("f:status", "f:capacity"),
        ("f:status", "f:capacity", "f:nvidia.com/gpu"),
        ("f:status", "f:allocatable"),
        ("f:status", "f:allocatable", "f:nvidia.com/gpu"),
    }
    # the creator owns its labels only: not the zero-valued nodeInfo/daemonEndpoints, not the admission taint
    assert owners[("creator", "Update", "")] == {("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:rack")}


def test_managed_fields_sent_with_a_write_replace_or_reset_the_live_ones() -> None:
    store = Store()
    _node(store)
    node = store.get("nodes", "n1")  # fresh: the node lifecycle controller has written after the create
    # [{}] clears them (isResetManagedFields): this write then owns nothing new, so none are left
    node["metadata"]["managedFields"] = [{}]
    cleared = store.update("nodes", node, field_manager="editor")
    assert "managedFields" not in cleared["metadata"]
    # garbage is ignored: the live entries stay (decodeLiveOrNew falls back, never fails the write)
    store.patch("nodes", "n1", {"metadata": {"labels": {"x": "1"}}}, field_manager="labeller")
    current = store.get("nodes", "n1")
    current["metadata"]["managedFields"] = [{"manager": "x", "operation": "Bogus", "fieldsType": "FieldsV1"}]
    kept = store.update("nodes", current, field_manager="editor")
    assert ("labeller", "Update", "") in _owners(kept)
    assert all(m != "x" for m, _, _ in _owners(kept))


def test_entries_sort_by_operation_time_manager_and_cap_at_ten_updaters() -> None:
    entries = [
        Managed("b", "Update", "v1", "", "2026-01-01T00:00:02Z", {("f:a",)}),
        Managed("a", "Update", "v1", "", "2026-01-01T00:00:02Z", {("f:b",)}),
        Managed("z", "Apply", "v1", "", "2026-01-01T00:00:09Z", {("f:c",)}),
        Managed("c", "Update", "v1", "status", "2026-01-01T00:00:01Z", {("f:d",)}),
    ]
    assert [e["manager"] for e in fieldmanager.encode_entries(entries)] == ["z", "c", "a", "b"]
    many = [Managed(f"m{i:02}", "Update", "v1", "", f"2026-01-01T00:00:{i:02}Z", {(f"f:k{i}",)}) for i in range(12)]
    capped = fieldmanager.cap_update_managers(many)
    assert len(capped) == 10
    bucket = next(m for m in capped if m.manager == fieldmanager.ANCIENT_CHANGES)
    assert bucket.fields == {("f:k0",), ("f:k1",), ("f:k2",)}


def test_apply_owns_exactly_its_configuration_conflicts_and_force() -> None:
    store = Store()
    store.create("namespaces", {"metadata": {"name": "ns"}})
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}
    created, was_created = store.apply("configmaps", "c", config, "ns", field_manager="tool")
    assert was_created and created["data"] == {"a": "1", "b": "2"}
    assert _owners(created)[("tool", "Apply", "")] == {("f:data",), ("f:data", "f:a"), ("f:data", "f:b")}
    store.patch("configmaps", "c", {"data": {"a": "9"}}, "ns", field_manager="person")
    with pytest.raises(ApiError) as err:
        store.apply("configmaps", "c", {**config, "data": {"a": "3", "b": "2"}}, "ns", field_manager="tool")
    assert err.value.code == 409
    assert err.value.message == 'Apply failed with 1 conflict: conflict with "person" using v1: .data.a'
    assert err.value.details == {
        "causes": [{"reason": "FieldManagerConflict", "message": 'conflict with "person" using v1', "field": ".data.a"}]
    }
    assert store.get("configmaps", "c", "ns")["data"]["a"] == "9"  # nothing written
    # same value as the other manager: shared, not a conflict
    shared, _ = store.apply("configmaps", "c", {**config, "data": {"a": "9", "b": "2"}}, "ns", field_manager="tool")
    assert ("f:data", "f:a") in _owners(shared)[("person", "Update", "")]
    forced, created_now = store.apply(
        "configmaps", "c", {**config, "data": {"a": "3", "b": "2"}}, "ns", field_manager="tool", force=True
    )
    assert not created_now and forced["data"]["a"] == "3"
    assert ("person", "Update", "") not in _owners(forced)
    # a field the applier stops applying and nobody else owns is removed (prune)
    pruned, _ = store.apply("configmaps", "c", {**config, "data": {"a": "3"}}, "ns", field_manager="tool")
    assert pruned["data"] == {"a": "3"}


def test_apply_merges_lists_by_their_keys_and_keeps_other_managers_items() -> None:
    store = Store()
    store.create("namespaces", {"metadata": {"name": "ns"}})
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "main", "image": "img:1"}]},
            },
        },
    }
    store.create("daemonsets.apps", ds, "ns", field_manager="installer")
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "side:1"}]}}},
    }
    out, _ = store.apply("daemonsets.apps", "d", sidecar, "ns", field_manager="injector")
    names = [c["name"] for c in out["spec"]["template"]["spec"]["containers"]]
    assert names == ["main", "side"]
    owners = _owners(out)
    side = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"side"}')
    assert side in owners[("injector", "Apply", "")]
    assert (*side[:-1], 'k:{"name":"main"}', "f:image") in owners[("installer", "Update", "")]


def test_apply_refuses_what_the_real_server_refuses() -> None:
    store = Store()
    _node(store)
    good = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    for config, message in (
        ({**good, "apiVersion": "v2"}, "Incorrect version specified in apply patch"),
        ({**good, "metadata": {"name": "n1", "managedFields": []}}, "metadata.managedFields must be nil"),
        ({**good, "metadata": {"name": "other"}}, "does not match the name on the URL"),
        (["not", "an", "object"], "error decoding YAML"),
    ):
        with pytest.raises(ApiError) as err:
            store.apply("nodes", "n1", config, field_manager="x")
        assert err.value.code == 400 and message in err.value.message
    # status is never written through the main resource by apply (nodeStrategy.GetResetFields)
    out, _ = store.apply("nodes", "n1", {**good, "status": {"capacity": {"x": "1"}}}, field_manager="x")
    assert "capacity" not in out.get("status", {})


def test_request_options_are_validated_like_the_apiserver() -> None:
    with pytest.raises(ApiError) as err:
        fieldmanager.request_manager({}, "kubectl/v1.36", "patch", applying=True)
    assert err.value.code == 422
    assert err.value.message == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    with pytest.raises(ApiError) as err:
        fieldmanager.request_manager({"force": "true"}, "x", "patch", applying=False)
    assert "force: Forbidden: may not be specified for non-apply patch" in err.value.message
    with pytest.raises(ApiError) as err:
        fieldmanager.request_manager({"fieldManager": "m" * 129}, "x", "create", applying=False)
    assert err.value.message.startswith('CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long')
    with pytest.raises(ApiError):
        fieldmanager.request_manager({"fieldManager": "bad\x07"}, "x", "update", applying=False)
    assert fieldmanager.request_manager({}, "kubectl/v1.36.0 (linux/amd64)", "patch", applying=False) == "kubectl"
    assert fieldmanager.manager_from_user_agent("a\x00b" + "c" * 300) == "ab" + "c" * 126
    with pytest.raises(ApiError):
        fieldmanager.force_option({"force": "maybe"})


def test_the_create_fast_path_agrees_with_the_path_set_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """created_fields_v1 (one walk, used by every create) == encode(created_fields) (compare-based), on the
    transcripts' create bodies and on objects with admission additions, nulls and keyed lists."""
    import json
    from pathlib import Path

    fast = fieldmanager.created_fields_v1
    checked: list[str] = []

    def both(key: str, shape: Any, sent: Any, stored: Any) -> dict[str, Any]:
        got = fast(key, shape, sent, stored)
        assert got == fieldpaths.encode(fieldmanager.created_fields(key, shape, sent, stored)), key
        checked.append(key)
        return got

    monkeypatch.setattr(fieldmanager, "created_fields_v1", both)
    store = Store(bare=True)
    store.ensure_namespaces(["default", "gpu-operator"])
    store.create("serviceaccounts", {"metadata": {"name": "default"}}, "default")
    transcripts = Path(__file__).resolve().parents[1] / "reference" / "kube-apiserver"
    plural = {"Node": "nodes", "Pod": "pods", "ConfigMap": "configmaps", "DaemonSet": "daemonsets.apps"}
    plural |= {"Lease": "leases.coordination.k8s.io", "Namespace": "namespaces", "ServiceAccount": "serviceaccounts"}
    for name in ("nodes.json", "pods.json", "configmaps.json", "daemonset.json", "leases.json", "events.json"):
        for step in json.loads((transcripts / name).read_text()):
            body = step["request_body"]
            if step["method"] != "POST" or not isinstance(body, dict) or step["status"] != 201:
                continue
            resource = plural.get(body.get("kind", ""), "events")
            if body.get("apiVersion") == "events.k8s.io/v1":
                resource = "events.events.k8s.io"
            parts = step["path"].split("?")[0].split("/")
            ns = parts[parts.index("namespaces") + 1] if "namespaces" in parts[:-1] else None
            try:
                store.create(resource, body, ns)
            except ApiError as exc:
                assert exc.code in (404, 409), exc  # names already taken / missing node: not what is checked here
    store.create(
        "pods",
        {
            "metadata": {"name": "mounts"},
            "spec": {
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "containers": [
                    {"name": "a", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/m"}], "args": None},
                    {"name": "b", "image": "i:latest", "env": [{"name": "E", "value": "1"}]},
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
            },
        },
        "default",
    )
    assert {"nodes", "pods", "configmaps", "daemonsets.apps", "events.events.k8s.io"} <= set(checked)


def test_hostile_applied_configurations_are_400s_not_crashes() -> None:
    from reconciler.twin.apiserver import apply

    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    deep = "{a: " * 400 + "1" + "}" * 400
    for body, message in (
        (laughs.encode(), "excessive aliasing"),
        (deep.encode(), "nested deeper than"),
        (b"\xff\xfe", "error decoding YAML"),
        (b"a: [", "error decoding YAML"),
    ):
        with pytest.raises(ApiError) as err:
            apply.decode_config(body)
        assert err.value.code == 400 and message in err.value.message
