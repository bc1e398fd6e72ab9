"""The kube adapter's raw requests are the very requests the official client's generated methods send.

Each pair calls a rawapi method and the generated method of the same name with the same arguments on ApiClients
whose `call_api` records what it is handed (method, URL with its query, headers, body) and answers a canned raw
response; the two records must be equal. A path, a query parameter, a header or a body that drifted from the
generated client's fails here. Then: an answer outside 2xx raises the client's own ApiException (what
cluster.api_error translates), and hostile names are percent-encoded into the path, never a path of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube import rawapi


class _Answer:
    """What ApiClient.call_api returns (rest.RESTResponse): status, read(), and the urllib3 response."""

    def __init__(self, status: int, data: bytes) -> None:
        self.status = status
        self.reason = "canned"
        self.data = data
        self.response = self
        self.headers: dict[str, str] = {}

    def read(self) -> bytes:
        return self.data

    def getheaders(self) -> dict[str, str]:
        return {}

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return default


class _Recorder(client.ApiClient):
    def __init__(self, status: int = 200) -> None:
        super().__init__(client.Configuration(host="https://api.example:6443"))
        self.sent: list[tuple[Any, ...]] = []
        self.status = status

    def call_api(
        self, method: str, url: str, header_params: Any = None, body: Any = None, *rest: Any, **kw: Any
    ) -> Any:
        self.sent.append((method, url, dict(header_params or {}), body))
        return _Answer(self.status, b'{"kind":"Status","message":"no"}')


def _pair(generated: type, raw: type) -> tuple[Any, Any, _Recorder, _Recorder]:
    g, r = _Recorder(), _Recorder()
    return generated(g), raw(r), g, r


BODY = {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.18gb"}}}
LIST = {"limit": 500, "_continue": "tok/en=", "field_selector": "metadata.name=x", "label_selector": "a in (b,c)"}
# A watch as kube/informer.py opens it: from a list's resourceVersion, with bookmarks, for a few seconds.
WATCH = {"watch": True, "allow_watch_bookmarks": True, "resource_version": "123456", "timeout_seconds": 3}
MERGE = "application/merge-patch+json"
WRITE = {"field_manager": "migplan", "dry_run": "All"}
PATCH = {**WRITE, "_content_type": MERGE}

CASES: list[tuple[type, type, str, tuple[Any, ...], dict[str, Any]]] = [
    (client.CoreV1Api, rawapi.CoreV1, "list_node", (), LIST),
    (client.CoreV1Api, rawapi.CoreV1, "list_node", (), {}),
    (client.CoreV1Api, rawapi.CoreV1, "list_pod_for_all_namespaces", (), LIST),
    (client.CoreV1Api, rawapi.CoreV1, "list_node", (), WATCH),
    (client.CoreV1Api, rawapi.CoreV1, "list_pod_for_all_namespaces", (), WATCH),
    (client.CoreV1Api, rawapi.CoreV1, "list_node", (), {"limit": 1}),
    (client.CoreV1Api, rawapi.CoreV1, "list_namespaced_pod", ("gpu-operator",), LIST),
    (client.CoreV1Api, rawapi.CoreV1, "list_namespaced_config_map", ("gpu-operator",), LIST),
    (
        client.CoreV1Api,
        rawapi.CoreV1,
        "read_namespaced_pod_log",
        ("nvidia-device-plugin-abc", "gpu-operator"),
        {"container": "nvidia-device-plugin", "previous": True, "tail_lines": 200},
    ),
    (client.CoreV1Api, rawapi.CoreV1, "read_namespaced_pod_log", ("p", "ns"), {"tail_lines": 200}),
    (client.CoreV1Api, rawapi.CoreV1, "create_namespaced_config_map", ("gpu-operator", {"data": {"a": "b"}}), WRITE),
    (
        client.CoreV1Api,
        rawapi.CoreV1,
        "patch_namespaced_config_map",
        ("cm", "ns", BODY),
        {**WRITE, "_content_type": MERGE},
    ),
    (client.CoreV1Api, rawapi.CoreV1, "patch_node", ("gpu-00001", BODY), {**WRITE, "_content_type": MERGE}),
    (client.CoreV1Api, rawapi.CoreV1, "patch_node", ("gpu-00001", BODY), {"_content_type": MERGE}),
    (
        client.CoreV1Api,
        rawapi.CoreV1,
        "create_namespaced_pod_eviction",
        ("pod", "ns", {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "pod", "namespace": "ns"}}),
        {"dry_run": "All"},
    ),
    (
        client.CoreV1Api,
        rawapi.CoreV1,
        "delete_namespaced_pod",
        ("nvidia-dra-driver-gpu-kubelet-plugin-x", "nvidia-dra-driver-gpu"),
        {"body": {"preconditions": {"uid": "0e1f"}}, "dry_run": "All"},
    ),
    (client.CoreV1Api, rawapi.CoreV1, "delete_namespaced_pod", ("p", "ns"), {"body": {"preconditions": {"uid": "u"}}}),
    (client.AppsV1Api, rawapi.AppsV1, "list_namespaced_daemon_set", ("gpu-operator",), LIST),
    (client.AppsV1Api, rawapi.AppsV1, "list_daemon_set_for_all_namespaces", (), LIST),
    (
        client.AppsV1Api,
        rawapi.AppsV1,
        "patch_namespaced_daemon_set",
        ("nvidia-device-plugin-daemonset", "gpu-operator", BODY),
        {**WRITE, "_content_type": "application/strategic-merge-patch+json"},
    ),
    (
        client.CustomObjectsApi,
        rawapi.CustomObjects,
        "list_cluster_custom_object",
        ("nvidia.com", "v1", "clusterpolicies"),
        LIST,
    ),
    (
        client.CustomObjectsApi,
        rawapi.CustomObjects,
        "patch_cluster_custom_object",
        ("nvidia.com", "v1", "clusterpolicies", "cluster-policy", BODY),
        {**WRITE, "_content_type": MERGE},
    ),
    (client.PolicyV1Api, rawapi.PolicyV1, "list_pod_disruption_budget_for_all_namespaces", (), LIST),
    (client.ResourceV1Api, rawapi.ResourceV1, "list_resource_claim_for_all_namespaces", (), LIST),
    (client.ResourceV1Api, rawapi.ResourceV1, "list_resource_slice", (), LIST),
    (client.ResourceV1Api, rawapi.ResourceV1, "list_device_class", (), LIST),
    (
        client.ResourceV1Api,
        rawapi.ResourceV1,
        "create_device_class",
        (
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "migplan-mig-1g.18gb"},
                "spec": {"extendedResourceName": "nvidia.com/mig-1g.18gb"},
            },
        ),
        WRITE,
    ),
    (client.ResourceV1Api, rawapi.ResourceV1, "patch_device_class", ("migplan-mig-1g.18gb", BODY), PATCH),
]


@pytest.mark.parametrize(("generated", "raw", "method", "args", "kwargs"), CASES)
def test_each_raw_request_is_the_generated_clients_request(
    generated: type, raw: type, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    g_api, r_api, g, r = _pair(generated, raw)
    timeout = (5.0, 30.0)
    preload = {} if method == "read_namespaced_pod_log" else {"_preload_content": False}
    getattr(g_api, method)(*args, **kwargs, **preload, _request_timeout=timeout)
    getattr(r_api, method)(*args, **kwargs, _request_timeout=timeout)
    assert r.sent == g.sent
    assert len(r.sent) == 1


def test_every_method_the_adapter_calls_is_compared_above() -> None:
    """A method added to rawapi without its comparison with the generated client fails here."""
    compared = {(raw, method) for _, raw, method, _, _ in CASES}
    for cls in (rawapi.CoreV1, rawapi.AppsV1, rawapi.CustomObjects, rawapi.PolicyV1, rawapi.ResourceV1):
        public = {name for name in vars(cls) if not name.startswith("_")}
        assert public, cls
        assert {(cls, m) for m in public} <= compared, cls


@pytest.mark.parametrize("status", [400, 403, 404, 409, 410, 422, 429, 500, 503])
def test_an_answer_outside_2xx_is_the_clients_api_exception(status: int) -> None:
    api = rawapi.CoreV1(_Recorder(status))
    with pytest.raises(ApiException) as caught:
        api.list_node(limit=1)
    assert caught.value.status == status
    assert "no" in str(caught.value.body)


def test_a_2xx_answer_comes_back_raw_unread() -> None:
    rec = _Recorder(200)
    answer = rawapi.CoreV1(rec).patch_node("n", BODY, _content_type=MERGE)
    assert isinstance(answer, _Answer)
    assert answer.data == b'{"kind":"Status","message":"no"}'


@pytest.mark.parametrize("name", ["../../api/v1/secrets", "a/b", "x?y=z", "n#frag", "%2F", "é" * 300, "a b"])
def test_hostile_names_stay_inside_their_path_segment(name: str) -> None:
    rec = _Recorder()
    calls: list[tuple[Callable[[], Any], int]] = [  # (request, slashes of its path template)
        (lambda: rawapi.CoreV1(rec).patch_node(name, BODY, _content_type=MERGE), 4),
        (lambda: rawapi.CoreV1(rec).read_namespaced_pod_log(name, name), 7),
        (lambda: rawapi.CoreV1(rec).create_namespaced_pod_eviction(name, "ns", {}), 7),
    ]
    for call, slashes in calls:
        call()
        url = rec.sent[-1][1]
        path = url.removeprefix("https://api.example:6443").split("?", 1)[0]
        assert path.count("/") == slashes, url
        assert "#" not in path and " " not in path and url.count("?") <= 1
