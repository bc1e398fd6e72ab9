"""Conformance of the API twin with the kube-apiserver's source where the transcripts are silent (issue 16).

Each expectation is derived from the named upstream function, not from the twin: apimachinery's Quantity
(ParseQuantity, CanonicalizeBytes, RoundUp; examples from quantity_test.go), core/v1 and apps/v1 defaulters, the
default admission plugins, the registry strategies' update rules, rest.BeforeDelete's preconditions and the field
label conversion funcs. Writes go over HTTP with every patch type, because the real server canonicalises and
defaults on each of them alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from reconciler.twin.apiserver import ApiError, ApiServerTwin, Store
from reconciler.twin.apiserver.defaults import image_tag
from reconciler.twin.apiserver.quantity import NUMERIC_ERROR, QUANTITY_ERROR, SUFFIX_ERROR, canonical

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServerTwin]:
    with ApiServerTwin(namespaces=("default", "gpu-operator")) as twin:
        yield twin


def _req(api: ApiServerTwin, method: str, path: str, body: Any = None, ctype: str = "application/json") -> Any:
    headers = {"Authorization": f"Bearer {api.token}", "Accept": "application/json"}
    data = None
    if body is not None:
        headers["Content-Type"] = ctype
        data = json.dumps(body).encode()
    resp = requests.request(method, api.url + path, headers=headers, data=data, verify=str(api.ca_file), timeout=30)
    return resp.status_code, resp.json()


# ------------------------------------------------------------------ 1. quantities


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        # quantity.go doc comment and quantity_test.go TestQuantityParse / TestQuantityString
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),
        ("4000m", "4"),
        ("0.5", "500m"),
        ("1000", "1k"),
        ("1000k", "1M"),
        ("1024Mi", "1Gi"),
        ("0.5Ki", "512"),  # BinarySI below 1024 is written as DecimalSI
        ("1.0001Ki", "1024102400u"),  # not an integer: DecimalSI so no precision is lost
        ("1e3", "1e3"),  # DecimalExponent keeps its format
        ("10e2", "1e3"),
        ("1E3", "1E3"),  # already canonical: ParseQuantity keeps the text it was given
        ("100m", "100m"),
        ("+100", "+100"),  # the int64 fast path keeps canonical text verbatim, sign included
        ("1.0", "1"),
        ("0.1", "100m"),
        ("00", "0"),
        ("-0", "0"),
        ("1.5n", "2n"),  # rounded up to the nano scale
        ("1e-999999999", "1e-9"),
        ("9Ei", "9223372036854775807"),  # BinarySI is capped at 2^63-1
        ("123456789012345678901", "123456789012345678901"),
    ],
)
def test_canonical_form_follows_apimachinery(given: str, stored: str) -> None:
    assert canonical(given) == stored


@pytest.mark.parametrize(
    ("given", "stored"), [("100u", "1m"), ("1.0001", "1001m"), ("100m", "100m"), ("2Ki", "2Ki"), ("1.5n", "1m")]
)
def test_resource_lists_round_up_to_milli(given: str, stored: str) -> None:
    """core/v1 SetDefaults_ResourceList: RoundUp(-3) on every ResourceList value."""
    assert canonical(given, resource_list=True) == stored


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("", QUANTITY_ERROR),
        ("abc", QUANTITY_ERROR),
        ("1.2.3", QUANTITY_ERROR),
        ("5Kb", QUANTITY_ERROR),
        ("1ki", SUFFIX_ERROR),  # upstream has no case correction
        ("1e", SUFFIX_ERROR),
        ("1Mi5", SUFFIX_ERROR),
        ("1e99999999999999999999", SUFFIX_ERROR),  # strconv.ParseInt range error
    ],
)
def test_malformed_quantities_give_the_decoder_error(given: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        canonical(given)
    assert str(exc.value) == message
    assert message != NUMERIC_ERROR


@pytest.mark.parametrize(
    ("method", "path", "ctype", "body"),
    [
        ("PATCH", "/api/v1/nodes/q1/status", MERGE, {"status": {"capacity": {"cpu": "4000m", "memory": "0.5Gi"}}}),
        ("PATCH", "/api/v1/nodes/q1/status", STRATEGIC, {"status": {"capacity": {"cpu": "4000m", "memory": "0.5Gi"}}}),
        (
            "PATCH",
            "/api/v1/nodes/q1/status",
            JSON_PATCH,
            [{"op": "add", "path": "/status/capacity", "value": {"cpu": "4000m", "memory": "0.5Gi"}}],
        ),
    ],
)
def test_node_status_writes_store_canonical_capacity_and_default_allocatable(
    api: ApiServerTwin, method: str, path: str, ctype: str, body: Any
) -> None:
    """Every patch type of /status: canonical quantities, allocatable from capacity (SetDefaults_NodeStatus)."""
    api.store.create("nodes", {"metadata": {"name": "q1"}})
    try:
        code, node = _req(api, method, path, body, ctype)
        assert code == 200, node
        assert node["status"]["capacity"] == {"cpu": "4", "memory": "512Mi"}
        assert node["status"]["allocatable"] == {"cpu": "4", "memory": "512Mi"}
        code, node = _req(api, "PATCH", path, {"status": {"allocatable": {"cpu": "3500m"}}}, MERGE)
        assert code == 200 and node["status"]["allocatable"] == {"cpu": "3500m", "memory": "512Mi"}
    finally:
        api.store.delete("nodes", "q1")


def test_create_and_put_canonicalise_and_bad_quantities_are_400(api: ApiServerTwin) -> None:
    code, node = _req(
        api, "POST", "/api/v1/nodes", {"metadata": {"name": "q2"}, "status": {"capacity": {"memory": "1024Mi"}}}
    )
    assert code == 201 and node["status"]["capacity"] == {"memory": "1Gi"} == node["status"]["allocatable"]
    code, node = _req(api, "GET", "/api/v1/nodes/q2")  # the node lifecycle controller has lifted the taint since
    assert code == 200 and "taints" not in node["spec"]
    node["status"]["capacity"]["memory"] = "2048Mi"
    node["status"].pop("allocatable")
    code, put = _req(api, "PUT", "/api/v1/nodes/q2/status", node)
    assert code == 200 and put["status"]["capacity"] == {"memory": "2Gi"} == put["status"]["allocatable"]
    code, status = _req(api, "PATCH", "/api/v1/nodes/q2/status", {"status": {"capacity": {"cpu": "1x"}}}, MERGE)
    assert code == 400
    assert status["message"] == f'Node in version "v1" cannot be handled as a Node: {QUANTITY_ERROR}'
    api.store.delete("nodes", "q2")


def test_pod_and_template_quantities_are_canonical(api: ApiServerTwin) -> None:
    container = {"name": "c", "image": "busybox:1", "resources": {"limits": {"cpu": "0.5", "memory": "1024Mi"}}}
    code, pod = _req(
        api,
        "POST",
        "/api/v1/namespaces/default/pods",
        {
            "metadata": {"name": "qp"},
            "spec": {
                "containers": [container],
                "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1000Mi"}}],
            },
        },
    )
    assert code == 201, pod
    res = pod["spec"]["containers"][0]["resources"]
    assert res == {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert pod["spec"]["volumes"][0]["emptyDir"] == {"sizeLimit": "1000Mi"}
    code, ds = _req(
        api,
        "POST",
        "/apis/apps/v1/namespaces/gpu-operator/daemonsets",
        {
            "metadata": {"name": "qds"},
            "spec": {
                "selector": {"matchLabels": {"app": "q"}},
                "template": {"metadata": {"labels": {"app": "q"}}, "spec": {"containers": [container]}},
            },
        },
    )
    assert code == 201, ds
    # a template gets the PodSpec defaults but not SetDefaults_Pod: no requests from limits
    assert ds["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m", "memory": "1Gi"}}
    api.store.delete("pods", "qp", "default", grace_period_seconds=0)
    api.store.delete("daemonsets.apps", "qds", "gpu-operator")


# ------------------------------------------------------------------ 2. defaults


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("busybox", "latest"),
        ("busybox:latest", "latest"),
        ("nvcr.io:443/nvidia/cuda", "latest"),
        ("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "12.4.1-base-ubuntu22.04"),
        ("busybox@sha256:" + "a" * 64, ""),
        ("busybox:latest@sha256:" + "a" * 64, "latest"),
        ("Busybox", ""),  # does not parse: no tag, IfNotPresent
        ("", ""),
    ],
)
def test_image_tag_as_parse_image_name(image: str, tag: str) -> None:
    assert image_tag(image) == tag


def test_pod_defaults_every_defaulter_of_the_scheme(api: ApiServerTwin) -> None:
    code, pod = _req(
        api,
        "POST",
        "/api/v1/namespaces/default/pods",
        {
            "metadata": {"name": "dp"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "ports": [{"containerPort": 8080}],
                        "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "livenessProbe": {"httpGet": {"port": 8080}},
                    }
                ],
                "volumes": [
                    {"name": "none"},
                    {"name": "cm", "configMap": {"name": "x"}},
                    {"name": "hp", "hostPath": {"path": "/tmp"}},
                ],
            },
        },
    )
    assert code == 201, pod
    spec = pod["spec"]
    c = spec["containers"][0]
    assert c["imagePullPolicy"] == "Always"  # no tag: latest
    assert c["terminationMessagePath"] == "/dev/termination-log" and c["terminationMessagePolicy"] == "File"
    assert c["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert c["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "metadata.name", "apiVersion": "v1"}
    assert c["livenessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["none"] == {"name": "none", "emptyDir": {}}
    assert volumes["cm"]["configMap"] == {"name": "x", "defaultMode": 420}
    assert volumes["hp"]["hostPath"] == {"path": "/tmp", "type": ""}
    for key, value in {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "terminationGracePeriodSeconds": 30,
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "enableServiceLinks": True,
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
    }.items():
        assert spec[key] == value, key
    api.store.delete("pods", "dp", "default", grace_period_seconds=0)


def test_daemonset_defaults(api: ApiServerTwin) -> None:
    code, ds = _req(
        api,
        "POST",
        "/apis/apps/v1/namespaces/gpu-operator/daemonsets",
        {
            "metadata": {"name": "dds"},
            "spec": {
                "selector": {"matchLabels": {"app": "d"}},
                "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": "c", "image": "img:1"}]},
                },
            },
        },
    )
    assert code == 201
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert ds["spec"]["revisionHistoryLimit"] == 10
    assert "enableServiceLinks" not in ds["spec"]["template"]["spec"]  # SetDefaults_Pod is for pods only
    api.store.delete("daemonsets.apps", "dds", "gpu-operator")


# ------------------------------------------------------------------ 3. admission


def test_taint_nodes_by_condition_and_the_node_lifecycle_pass() -> None:
    bare = Store(bare=True)
    node = bare.create(
        "nodes", {"metadata": {"name": "b"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert node["spec"]["taints"] == [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    assert bare.get("nodes", "b")["spec"]["taints"] == node["spec"]["taints"]  # no controller in bare mode
    # a taint with the same key and effect is not added twice (addNotReadyTaint / MatchTaint)
    again = bare.create(
        "nodes",
        {
            "metadata": {"name": "b2"},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        },
    )
    assert len(again["spec"]["taints"]) == 1

    store = Store()
    created = store.create(
        "nodes",
        {
            "metadata": {"name": "n"},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        },
    )
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    assert not_ready in created["spec"]["taints"]
    assert not_ready in store.get("nodes", "n")["spec"]["taints"]  # Ready=False: the controller keeps it
    store.patch("nodes", "n", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, subresource="status")
    assert store.get("nodes", "n")["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    store.patch("nodes", "n", {"spec": {"unschedulable": True}})
    taints = store.get("nodes", "n")["spec"]["taints"]
    assert [t["key"] for t in taints] == ["nvidia.com/gpu", "node.kubernetes.io/unschedulable"]
    assert taints[1]["effect"] == "NoSchedule" and taints[1]["timeAdded"]
    store.patch("nodes", "n", {"spec": {"unschedulable": False}})
    assert store.get("nodes", "n")["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    store.patch(
        "nodes", "n", {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}, subresource="status"
    )
    assert store.get("nodes", "n")["spec"]["taints"][-1]["key"] == "node.kubernetes.io/unreachable"


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i:1"}], **spec}}


def test_priority_admission() -> None:
    store = Store()
    store.ensure_namespaces(["default"])
    critical = store.create("pods", _pod("crit", priorityClassName="system-node-critical"), "default")
    assert critical["spec"]["priority"] == 2000001000
    assert critical["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    with pytest.raises(ApiError) as exc:
        store.create("pods", _pod("unknown", priorityClassName="gold"), "default")
    assert exc.value.code == 403
    assert exc.value.message == 'pods "unknown" is forbidden: no PriorityClass with name gold was found'
    with pytest.raises(ApiError) as exc:
        store.create("pods", _pod("set", priority=5), "default")
    assert exc.value.message == (
        'pods "set" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority '
        "admission controller computed 0 from the given PriorityClass name"
    )
    with pytest.raises(ApiError) as exc:
        store.create("pods", _pod("x", preemptionPolicy="Never"), "default")
    assert exc.value.message.startswith('pods "x" is forbidden: the string value of PreemptionPolicy (Never)')
    assert store.create("pods", _pod("ok", priority=0), "default")["spec"]["priority"] == 0


def test_default_toleration_seconds_respects_wildcard_tolerations() -> None:
    store = Store()
    store.ensure_namespaces(["default"])
    everything = store.create("pods", _pod("all", tolerations=[{"operator": "Exists"}]), "default")
    assert everything["spec"]["tolerations"] == [{"operator": "Exists"}]
    one = store.create(
        "pods",
        _pod(
            "one", tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]
        ),
        "default",
    )
    assert [t["key"] for t in one["spec"]["tolerations"]] == [
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/not-ready",
    ]
    # on update the plugin runs again, so a PUT that leaves the defaults out keeps them
    pod = store.get("pods", "one", "default")
    pod["spec"]["tolerations"] = pod["spec"]["tolerations"][:1]
    pod["spec"].pop("priority")
    updated = store.update("pods", pod, "default")
    assert len(updated["spec"]["tolerations"]) == 2 and updated["spec"]["priority"] == 0


# ------------------------------------------------------------------ 4. preconditions and immutability


def test_delete_preconditions_are_409_with_the_real_message(api: ApiServerTwin) -> None:
    cm = api.store.create("configmaps", {"metadata": {"name": "pre"}, "data": {"a": "1"}}, "default")
    path = "/api/v1/namespaces/default/configmaps/pre"
    code, status = _req(api, "DELETE", path, {"preconditions": {"uid": "not-the-uid"}})
    assert code == 409
    assert status["reason"] == "Conflict" and status["details"] == {"name": "pre", "kind": "ConfigMap"}
    assert status["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "pre": the UID in the precondition (not-the-uid) does not '
        f"match the UID in record ({cm['metadata']['uid']}). The object might have been deleted and then recreated"
    )
    code, status = _req(api, "DELETE", path, {"preconditions": {"resourceVersion": "1"}})
    assert code == 409 and status["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "pre": the ResourceVersion in the precondition (1) does not '
        f"match the ResourceVersion in record ({cm['metadata']['resourceVersion']}). The object might have been "
        "modified"
    )
    meta = cm["metadata"]
    code, status = _req(
        api, "DELETE", path, {"preconditions": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}}
    )
    assert code == 200 and status["status"] == "Success"


def _selector_message(kind: str, name: str) -> str:
    return (
        f'{kind}.apps "{name}" is invalid: spec.selector: Invalid value: v1.LabelSelector{{MatchLabels:'
        'map[string]string{"app":"other"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable'
    )


@pytest.mark.parametrize("plural", ["daemonsets", "deployments"])
def test_workload_selector_is_immutable_on_every_write_path(api: ApiServerTwin, plural: str) -> None:
    kind = {"daemonsets": "DaemonSet", "deployments": "Deployment"}[plural]
    base = f"/apis/apps/v1/namespaces/gpu-operator/{plural}"
    obj = {
        "metadata": {"name": f"sel-{plural}"},
        "spec": {
            "selector": {"matchLabels": {"app": "one"}},
            "template": {
                "metadata": {"labels": {"app": "one"}},
                "spec": {"containers": [{"name": "c", "image": "i:1"}]},
            },
        },
    }
    code, created = _req(api, "POST", base, obj)
    assert code == 201
    path = f"{base}/sel-{plural}"
    new_spec = {"selector": {"matchLabels": {"app": "other"}}, "template": {"metadata": {"labels": {"app": "other"}}}}
    put = json.loads(json.dumps(created))
    put["spec"]["selector"] = new_spec["selector"]
    put["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    attempts = [
        ("PATCH", {"spec": new_spec}, MERGE),
        ("PATCH", {"spec": new_spec}, STRATEGIC),
        (
            "PATCH",
            [
                {"op": "replace", "path": "/spec/selector/matchLabels/app", "value": "other"},
                {"op": "replace", "path": "/spec/template/metadata/labels/app", "value": "other"},
            ],
            JSON_PATCH,
        ),
        ("PUT", put, "application/json"),
    ]
    for method, body, ctype in attempts:
        code, status = _req(api, method, path, body, ctype)
        assert code == 422, (method, ctype, status)
        assert status["message"] == _selector_message(kind, f"sel-{plural}")
        assert status["details"]["causes"] == [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"other"}, '
                "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
                "field": "spec.selector",
            }
        ]
    # an equal selector (empty matchExpressions is nil to Semantic.DeepEqual) is not a change
    code, _ = _req(api, "PATCH", path, {"spec": {"selector": {"matchExpressions": []}}}, MERGE)
    assert code == 200
    _req(api, "DELETE", path)


def test_immutable_configmap(api: ApiServerTwin) -> None:
    api.store.create("configmaps", {"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": True}, "default")
    path = "/api/v1/namespaces/default/configmaps/frozen"
    for body, ctype in (
        ({"data": {"a": "2"}, "immutable": False}, MERGE),
        ({"data": {"a": "2"}, "immutable": False}, STRATEGIC),
        ([{"op": "replace", "path": "/data/a", "value": "2"}, {"op": "remove", "path": "/immutable"}], JSON_PATCH),
    ):
        code, status = _req(api, "PATCH", path, body, ctype)
        assert code == 422
        assert status["message"] == (
            'ConfigMap "frozen" is invalid: [immutable: Forbidden: field is immutable when `immutable` is set, '
            "data: Forbidden: field is immutable when `immutable` is set]"
        )
        assert [c["field"] for c in status["details"]["causes"]] == ["immutable", "data"]
    code, cm = _req(api, "PATCH", path, {"metadata": {"labels": {"ok": "yes"}}}, MERGE)
    assert code == 200 and cm["metadata"]["labels"] == {"ok": "yes"}  # metadata stays mutable
    code, _ = _req(api, "PATCH", path, {"binaryData": {"b": "AA=="}}, MERGE)
    assert code == 422


def test_pod_spec_is_immutable_on_json_patch(api: ApiServerTwin) -> None:
    api.store.create("pods", _pod("imm"), "default")
    code, status = _req(
        api,
        "PATCH",
        "/api/v1/namespaces/default/pods/imm",
        [{"op": "replace", "path": "/spec/restartPolicy", "value": "Never"}],
        JSON_PATCH,
    )
    assert code == 422 and status["details"]["causes"][0]["field"] == "spec"
    assert status["message"].startswith('Pod "imm" is invalid: spec: Forbidden: pod updates may not change fields')
    code, pod = _req(
        api,
        "PATCH",
        "/api/v1/namespaces/default/pods/imm",
        [{"op": "replace", "path": "/spec/containers/0/image", "value": "i:2"}],
        JSON_PATCH,
    )
    assert code == 200 and pod["spec"]["containers"][0]["image"] == "i:2"
    api.store.delete("pods", "imm", "default", grace_period_seconds=0)


# ------------------------------------------------------------------ 5. field selectors


def test_field_selectors_as_the_registries_define_them() -> None:
    store = Store()
    store.ensure_namespaces(["default"])
    for name, source in (("by-kubelet", {"component": "kubelet"}), ("by-controller", {})):
        store.create(
            "events",
            {
                "metadata": {"name": name},
                "involvedObject": {"kind": "Node", "name": "n1"},
                "reason": "R",
                "source": source,
                "reportingComponent": "migplan" if not source else "",
            },
            "default",
        )
    names = lambda res, sel: [o["metadata"]["name"] for o in store.list(res, field_selector=sel)]  # noqa: E731
    assert names("events", "source=kubelet") == ["by-kubelet"]
    assert names("events", "source=migplan") == ["by-controller"]  # the reporting controller stands in
    store.create("pods", {**_pod("p1"), "spec": {**_pod("p1")["spec"], "nodeName": "n1"}}, "default")
    store.create("pods", _pod("p2"), "default")
    store.patch("pods", "p1", {"status": {"podIPs": [{"ip": "10.0.0.7"}]}}, "default", subresource="status")
    assert names("pods", "spec.host=n1") == ["p1"]  # the old label is converted to spec.nodeName
    assert names("pods", "status.podIP=10.0.0.7") == ["p1"]
    assert names("pods", "status.podIPs=") == ["p1", "p2"]  # accepted, but not a selectable field
    # DefaultMetaV1FieldSelectorConversion: metadata.namespace is accepted for a cluster-scoped kind, and is ""
    assert names("clusterroles.rbac.authorization.k8s.io", "metadata.namespace=x") == []
    assert names("services", "spec.type=ClusterIP") == []  # AddFieldLabelConversionsForService
    for resource, field in (("nodes", "metadata.namespace"), ("pods", "spec.containers"), ("events", "message")):
        with pytest.raises(ApiError) as exc:
            store.list(resource, field_selector=f"{field}=x")
        assert exc.value.code == 400 and exc.value.message == f"field label not supported: {field}"


@pytest.mark.parametrize(
    "text",
    ["1e3", "1E3", "2Ki", "1000m", "1.5", ".5", "5.", "007", "1.5Gi", "1.5n", "0.9999999999", "1e-12", "+4", "-1"],
)
def test_migplan_parser_reads_what_the_server_decodes(text: str) -> None:
    """reconciler/model/quantities.py (production) and the twin's decoder agree on the value of a quantity."""
    from fractions import Fraction

    from reconciler.model.quantities import parse_quantity as migplan_value
    from reconciler.twin.apiserver.quantity import parse_quantity as server_value

    assert migplan_value(text) == Fraction(server_value(text))
    assert migplan_value(canonical(text)) == migplan_value(text)  # the stored form means the same number


# ------------------------------------------------------------------ 3b. LimitRanger and ResourceQuota


def _mig_pod(name: str, count: str = "1", **resources: str) -> dict[str, Any]:
    limits = {"nvidia.com/mig-1g.18gb": count, **resources}
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "i:1", "resources": {"limits": limits}}]},
    }


def test_limit_ranger_defaults_and_limits_pods() -> None:
    store = Store()
    store.ensure_namespaces(["team"])
    store.create(
        "limitranges",
        {
            "metadata": {"name": "lr"},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"cpu": "0.5"},
                        "max": {"cpu": "2", "nvidia.com/mig-1g.18gb": "1"},
                    },
                    {"type": "Pod", "max": {"memory": "1Gi"}},
                ]
            },
        },
        "team",
    )
    # SetDefaults_LimitRangeItem: default from max, defaultRequest from default; quantities canonical
    item = store.get("limitranges", "lr", "team")["spec"]["limits"][0]
    assert item["default"] == {"cpu": "500m", "nvidia.com/mig-1g.18gb": "1"}
    assert item["defaultRequest"] == item["default"]
    with pytest.raises(ApiError) as exc:
        store.create("pods", _mig_pod("two", "2", memory="512Mi"), "team")
    assert exc.value.code == 403
    assert exc.value.message == (
        'pods "two" is forbidden: maximum nvidia.com/mig-1g.18gb usage per Container is 1, but limit is 2'
    )
    with pytest.raises(ApiError) as exc:
        store.create("pods", _mig_pod("fat", memory="2Gi"), "team")
    assert exc.value.message == 'pods "fat" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 2Gi'
    pod = store.create("pods", _mig_pod("one", memory="512Mi"), "team")
    res = pod["spec"]["containers"][0]["resources"]
    assert res["limits"]["cpu"] == "500m" and res["requests"]["cpu"] == "500m"
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu request for container c; cpu limit for container c"
    )
    assert pod["status"]["qosClass"] == "Guaranteed"  # computed after the plugin set the cpu request


def test_resource_quota_on_mig_slices() -> None:
    store = Store()
    store.ensure_namespaces(["team"])
    created = store.create(
        "resourcequotas",
        {
            "metadata": {"name": "mig"},
            "spec": {"hard": {"requests.nvidia.com/mig-1g.18gb": "2", "count/configmaps": "1"}},
        },
        "team",
    )
    assert created["status"] == {}  # PrepareForCreate; the quota controller fills it right after
    status = store.get("resourcequotas", "mig", "team")["status"]
    assert status == {
        "hard": {"requests.nvidia.com/mig-1g.18gb": "2", "count/configmaps": "1"},
        "used": {"requests.nvidia.com/mig-1g.18gb": "0", "count/configmaps": "0"},
    }
    store.create("pods", _mig_pod("a"), "team")
    store.create("pods", _mig_pod("b"), "team")
    assert store.get("resourcequotas", "mig", "team")["status"]["used"]["requests.nvidia.com/mig-1g.18gb"] == "2"
    with pytest.raises(ApiError) as exc:
        store.create("pods", _mig_pod("c"), "team")
    assert exc.value.code == 403 and exc.value.message == (
        'pods "c" is forbidden: exceeded quota: mig, requested: requests.nvidia.com/mig-1g.18gb=1, '
        "used: requests.nvidia.com/mig-1g.18gb=2, limited: requests.nvidia.com/mig-1g.18gb=2"
    )
    store.delete("pods", "a", "team")  # unbound: removed at once; the controller gives the slice back
    assert store.get("resourcequotas", "mig", "team")["status"]["used"]["requests.nvidia.com/mig-1g.18gb"] == "1"
    assert store.create("pods", _mig_pod("c"), "team")["metadata"]["name"] == "c"
    store.create("configmaps", {"metadata": {"name": "one"}}, "team")
    with pytest.raises(ApiError) as exc:
        store.create("configmaps", {"metadata": {"name": "two"}}, "team")
    assert exc.value.message.startswith(
        'configmaps "two" is forbidden: exceeded quota: mig, requested: count/configmaps=1'
    )


def test_resource_quota_cpu_requires_every_container_to_state_it() -> None:
    store = Store()
    store.ensure_namespaces(["team"])
    store.create("resourcequotas", {"metadata": {"name": "cpu"}, "spec": {"hard": {"requests.cpu": "1"}}}, "team")
    with pytest.raises(ApiError) as exc:
        store.create("pods", _mig_pod("nocpu"), "team")
    assert exc.value.message == 'pods "nocpu" is forbidden: failed quota: cpu: must specify requests.cpu for: c'


def test_quota_without_controller_status_limits_nothing() -> None:
    """checkRequest reads status.hard: in bare mode (no quota controller) a new quota has none yet."""
    bare = Store(bare=True)
    bare.ensure_namespaces(["team"])
    bare.create("serviceaccounts", {"metadata": {"name": "default"}}, "team")
    bare.create("resourcequotas", {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "0"}}}, "team")
    assert bare.create("pods", _mig_pod("x"), "team")["metadata"]["name"] == "x"
    bare.patch(
        "resourcequotas", "q", {"status": {"hard": {"pods": "0"}}}, "team", subresource="status"
    )  # status.hard without used: the plugin cannot tell
    with pytest.raises(ApiError) as exc:
        bare.create("pods", _mig_pod("y"), "team")
    assert exc.value.message == 'pods "y" is forbidden: status unknown for quota: q, resources: pods'


def test_fields_kept_twice_in_v1_round_trip_as_the_conversion_does() -> None:
    """Convert_v1_NodeSpec_To_core_NodeSpec / Convert_v1_PodStatus_To_core_PodStatus and back: the singular field
    fills an empty list, wins when both are set and differ, and is rewritten from the list's first item."""
    store = Store(bare=True)
    store.ensure_namespaces(["default"])
    node = store.create("nodes", {"metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.0.0/24"}})
    assert node["spec"]["podCIDRs"] == ["10.0.0.0/24"]
    node = store.create("nodes", {"metadata": {"name": "m"}, "spec": {"podCIDRs": ["10.0.1.0/24", "fd00::/64"]}})
    assert node["spec"]["podCIDR"] == "10.0.1.0/24"
    store.create("serviceaccounts", {"metadata": {"name": "default"}}, "default")
    store.create("pods", _pod("p"), "default")
    pod = store.patch("pods", "p", {"status": {"podIPs": [{"ip": "10.1.1.2"}]}}, "default", subresource="status")
    assert pod["status"]["podIP"] == "10.1.1.2"
    pod = store.patch("pods", "p", {"status": {"podIP": "10.1.1.3"}}, "default", subresource="status")
    assert pod["status"]["podIPs"] == [{"ip": "10.1.1.3"}]


HOSTILE_QUANTITIES = [
    "9" * 5000,
    "1e2147483647",
    "1e-2147483648",
    "1e4294967296",  # int32(4294967296) is 0: Go keeps the text, its value is 1
    "-" + "9" * 40 + "Ei",
    "0." + "0" * 3000 + "1",
    "1e999999999999999999999",
    "\u0661",  # an Arabic-Indic digit one
    "1\u00a0",
    "1e+-3",
]


@pytest.mark.parametrize("text", HOSTILE_QUANTITIES)
def test_hostile_quantities_are_stored_or_refused_never_a_crash(text: str) -> None:
    store = Store()
    store.ensure_namespaces(["default"])
    body = {"metadata": {"name": "h"}, "status": {"capacity": {"nvidia.com/gpu": text}}}
    try:
        node = store.create("nodes", body)
    except ApiError as exc:
        if exc.code == 422:  # decoded, then refused by ValidateNodeResources: negative, or not a whole count
            assert all(
                c["message"].endswith(("must be greater than or equal to 0", "must be an integer"))
                for c in (exc.details or {})["causes"]
            )
            return
        assert exc.code == 400
        assert exc.message.split(": ", 1)[1] in (QUANTITY_ERROR, SUFFIX_ERROR, NUMERIC_ERROR)
        return
    stored = node["status"]["capacity"]["nvidia.com/gpu"]
    assert canonical(stored) == stored  # what is stored is already canonical
    store.create(
        "resourcequotas", {"metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": text}}}, "default"
    )
    pod = _mig_pod("p")
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    try:  # the quota arithmetic meets the hostile value and answers
        store.create("pods", pod, "default")
    except ApiError as exc:
        assert exc.code in (403, 422)


def test_node_resources_and_taints_are_validated_as_validate_node_does() -> None:
    store = Store(bare=True)
    store.create("nodes", {"metadata": {"name": "n"}})
    with pytest.raises(ApiError) as exc:  # /status: ValidateNodeUpdate only, each problem once
        store.patch(
            "nodes", "n", {"status": {"capacity": {"nvidia.com/gpu": "-1", "cpu": "1.5"}}}, subresource="status"
        )
    assert exc.value.code == 422 and exc.value.message == (
        'Node "n" is invalid: [status.capacity.nvidia.com/gpu: Invalid value: "-1": must be greater than or equal to '
        '0, status.allocatable.nvidia.com/gpu: Invalid value: "-1": must be greater than or equal to 0]'
    )
    with pytest.raises(ApiError) as exc:  # create: ValidateNode
        store.create("nodes", {"metadata": {"name": "m"}, "status": {"allocatable": {"nvidia.com/mig-1g.18gb": "0.5"}}})
    assert [c["message"] for c in exc.value.details["causes"]] == ['Invalid value: "500m": must be an integer']
    # 1e30 overflows MilliValue's int64, which then reads 0: stored, as upstream does
    huge = store.patch("nodes", "n", {"status": {"capacity": {"nvidia.com/gpu": "1e30"}}}, subresource="status")
    assert huge["status"]["capacity"]["nvidia.com/gpu"] == "1e30"
    with pytest.raises(ApiError) as exc:
        store.patch(
            "nodes", "n", {"spec": {"taints": [{"key": "a", "effect": "Never"}, {"key": "a", "effect": "Never"}]}}
        )
    assert [c["field"] for c in exc.value.details["causes"]] == [
        "metadata.taints[0].effect",  # ValidateNode passes the metadata path to validateNodeTaints
        "metadata.taints[1].effect",
        "metadata.taints[1]",
    ]
    assert exc.value.details["causes"][0]["message"] == (
        'Unsupported value: "Never": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'
    )
    assert exc.value.details["causes"][2]["message"] == (
        'Duplicate value: core.Taint{Key:"a", Value:"", Effect:"Never", TimeAdded:(*v1.Time)(nil)}: taints must be '
        "unique by key and effect pair"
    )


def test_quota_counts_a_batch_and_dry_runs_charge_nothing() -> None:
    store = Store()
    store.ensure_namespaces(["team"])
    store.create("resourcequotas", {"metadata": {"name": "q"}, "spec": {"hard": {"count/pods": "2"}}}, "team")
    store.create("pods", _mig_pod("dry"), "team", dry_run=True)
    assert store.get("resourcequotas", "q", "team")["status"]["used"] == {"count/pods": "0"}
    with pytest.raises(ApiError) as exc:  # all or nothing: the third pod of the batch exceeds the quota
        store.create_many("pods", [_mig_pod(f"p{i}") for i in range(3)], "team")
    assert exc.value.code == 403 and 'pods "p2" is forbidden: exceeded quota: q' in exc.value.message
    assert store.list("pods", "team") == []
    assert store.get("resourcequotas", "q", "team")["status"]["used"] == {"count/pods": "0"}
    assert store.create_many("pods", [_mig_pod(f"p{i}") for i in range(2)], "team") == 2
    assert store.get("resourcequotas", "q", "team")["status"]["used"] == {"count/pods": "2"}


def test_immortal_namespaces_may_not_be_deleted() -> None:
    store = Store()
    store.ensure_namespaces(["default", "kube-system", "kube-public", "team"])
    for name in ("default", "kube-system", "kube-public"):
        with pytest.raises(ApiError) as exc:
            store.delete("namespaces", name)
        assert exc.value.code == 403
        assert exc.value.message == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    store.delete("namespaces", "team")
