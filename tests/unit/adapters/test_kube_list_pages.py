"""LIST pages as the kube adapter reads them: the checked page decoder, the continue token read from a page's head
(to ask for the next page early), the fold over pages that uses it, and the pod parts shared within one
observation. Hostile pages get ListUnreadable (MP554) naming the list, never a crash."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from reconciler.adapters.kube import cluster as kc
from reconciler.adapters.kube import observe as kubeobserve
from reconciler.model.errors import MigplanError


def _page(items: list[Any], cont: str | None = None, *, meta_first: bool = True) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": "7"}
    if cont is not None:
        meta["continue"] = cont
    doc = {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}
    if not meta_first:
        doc = {"kind": "PodList", "apiVersion": "v1", "items": items, "metadata": meta}
    return orjson.dumps(doc)


# --- read_list_page --------------------------------------------------------------------------------------------


def test_a_page_gives_its_items_and_token() -> None:
    items, cont = kc.read_list_page(_page([{"metadata": {"name": "a"}}], "tok"), "list pods")
    assert items == [{"metadata": {"name": "a"}}]
    assert cont == "tok"
    assert kc.read_list_page(_page([], ""), "list pods") == ([], None)
    assert kc.read_list_page(b'{"items": null}', "list pods") == ([], None)
    assert kc.read_list_page(b"{}", "list pods") == ([], None)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "not JSON"),
        (b"<html>502 Bad Gateway</html>", "not JSON"),
        (b'{"items": [', "not JSON"),  # cut short
        (b"[]", "not a list object but list"),
        (b'"items"', "not a list object but str"),
        (b"null", "not a list object but NoneType"),
        (b'{"items": {"a": 1}}', "items is dict"),
        (b'{"items": "x"}', "items is str"),
        (b'{"items": [{"metadata": {}}, 5]}', "item 1 is int"),
        (b'{"items": [null]}', "item 0 is NoneType"),
        (b'{"items": [[1]]}', "item 0 is list"),
        (b'{"items": [], "metadata": {"continue": 12}}', "metadata.continue is int"),
        (b'{"items": [], "metadata": {"continue": ["a"]}}', "metadata.continue is list"),
        (b'{"items": [], "metadata": {"continue": "' + b"A" * (kc.MAX_CONTINUE_TOKEN + 1) + b'"}}', "characters"),
    ],
)
def test_a_hostile_page_is_a_clear_error(data: bytes, says: str) -> None:
    with pytest.raises(kc.ListUnreadable) as caught:
        kc.read_list_page(data, "list pods")
    assert caught.value.code == "MP554"
    assert "list pods" in str(caught.value) and says in str(caught.value)
    assert len(str(caught.value)) < 600  # a huge answer is not quoted back


def test_a_huge_item_string_is_read_not_refused() -> None:
    """Inside an item nothing is judged here: kube/observe.py reads every field with bounds."""
    items, _ = kc.read_list_page(_page([{"metadata": {"name": "x" * 5_000_000}}]), "list pods")
    assert len(items[0]["metadata"]["name"]) == 5_000_000


# --- continue_hint ---------------------------------------------------------------------------------------------


def test_the_token_is_read_from_the_head_of_a_page() -> None:
    assert kc.continue_hint(_page([{"metadata": {"name": "a"}}] * 3, "eyJ2Ijoi")) == "eyJ2Ijoi"
    assert kc.continue_hint(_page([{"metadata": {"name": "a"}}])) is None  # last page
    assert kc.continue_hint(_page([], "")) is None


@pytest.mark.parametrize(
    "data",
    [
        _page([{"a": 1}], "tok", meta_first=False),  # another order: no hint, the page is still read
        b'{"metadata": {"items": 1, "continue": "tok"}, "items": []}',  # an "items" key nested first
        b'{"metadata": {"continue": 5}, "items": []}',
        b'{"metadata": "x", "items": []}',
        b'["items": 1]',
        b"",
        b'{"metadata": {"continue": "' + b"A" * (kc.MAX_CONTINUE_TOKEN + 1) + b'"}, "items": []}',
    ],
)
def test_no_hint_from_a_head_it_cannot_read(data: bytes) -> None:
    assert kc.continue_hint(data) is None


# --- the fold over pages ---------------------------------------------------------------------------------------


class _Pages:
    """A list endpoint answering pages by continue token; records every token it was asked for."""

    def __init__(self, pages: Mapping[str | None, bytes]) -> None:
        self.pages = dict(pages)
        self.asked: list[str | None] = []

    def __call__(self, **kwargs: Any) -> Any:
        token = kwargs.get("_continue")
        self.asked.append(token)
        return _Raw(self.pages[token])


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def release_conn(self) -> None:
        pass


def _fold(endpoint: _Pages) -> list[Any]:
    cluster = kc.KubeCluster.__new__(kc.KubeCluster)
    cluster.page_size = 2
    cluster.request_timeout = (1.0, 1.0)
    return list(cluster._pages("list pods", endpoint))


def test_every_page_is_read_once_in_order() -> None:
    endpoint = _Pages(
        {
            None: _page([{"n": 1}, {"n": 2}], "t1"),
            "t1": _page([{"n": 3}, {"n": 4}], "t2"),
            "t2": _page([{"n": 5}]),
        }
    )
    assert _fold(endpoint) == [{"n": i} for i in range(1, 6)]
    assert sorted(endpoint.asked, key=str) == sorted([None, "t1", "t2"], key=str)


def test_a_head_that_lies_costs_a_request_not_a_wrong_page() -> None:
    """The head says "t-wrong", the page's real metadata says "t1": the page fetched ahead is dropped."""
    lying = b'{"metadata": {"continue": "t-wrong"}, "items": [{"n": 1}], "metadata": {"continue": "t1"}}'
    assert kc.continue_hint(lying) == "t-wrong"
    assert kc.read_list_page(lying, "list")[1] == "t1"  # JSON: the last duplicate key wins
    endpoint = _Pages({None: lying, "t-wrong": _page([{"n": "WRONG"}]), "t1": _page([{"n": 2}])})
    assert _fold(endpoint) == [{"n": 1}, {"n": 2}]
    assert "t1" in endpoint.asked


def test_a_hostile_page_in_the_middle_fails_the_list_cleanly() -> None:
    endpoint = _Pages({None: _page([{"n": 1}], "t1"), "t1": b'{"items": [5]}'})
    with pytest.raises(MigplanError) as caught:
        _fold(endpoint)
    assert caught.value.code == "MP554" and "item 0 is int" in str(caught.value)


# --- pod parts shared within one observation -------------------------------------------------------------------


def _pod(i: int, **over: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": f"p{i}",
            "namespace": "default",
            "labels": {"app": "embeddings"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "emb-5d8f", "controller": True}],
        },
        "spec": {
            "nodeName": "gpu-00001",
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/mig-2g.35gb": "1", "cpu": "2"}}}],
        },
        "status": {"phase": "Running"},
    }
    pod.update(over)
    return pod


def test_shared_parts_are_the_same_values_kept_once() -> None:
    shared = kubeobserve.Shared()
    raw = [_pod(i) for i in range(3)]
    plain = [kubeobserve.gpu_pod_from_json(copy.deepcopy(p)) for p in raw]
    kept = [kubeobserve.gpu_pod_from_json(p, shared) for p in raw]
    assert kept == plain  # equal values, field by field
    a, b = kept[0], kept[2]
    assert a is not None and b is not None
    assert a.labels is b.labels and a.containers is b.containers and a.owner is b.owner
    assert a.namespace is b.namespace and a.node is b.node and a.phase is b.phase
    assert a.name != b.name


def test_unequal_parts_are_not_merged() -> None:
    shared = kubeobserve.Shared()
    one = kubeobserve.gpu_pod_from_json(_pod(1), shared)
    other = _pod(2)
    other["metadata"]["labels"] = {"app": "whisper"}
    other["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/mig-2g.35gb"] = "2"
    two = kubeobserve.gpu_pod_from_json(other, shared)
    assert one is not None and two is not None
    assert two.labels == {"app": "whisper"} and one.labels == {"app": "embeddings"}
    assert two.containers[0].limits == {"nvidia.com/mig-2g.35gb": 2}
    assert one.containers[0].limits == {"nvidia.com/mig-2g.35gb": 1}


def test_hostile_parts_are_kept_unshared_not_a_crash() -> None:
    shared = kubeobserve.Shared()
    hostile = _pod(1)
    hostile["metadata"]["labels"] = {"app": ["not", "a", "string"], "x": {"y": 1}}
    hostile["spec"]["nodeSelector"] = {"k": ["v"]}
    hostile["metadata"]["namespace"] = 5
    hostile["status"]["phase"] = "P" * 100_000
    pod = kubeobserve.gpu_pod_from_json(hostile, shared)
    assert pod is not None
    assert pod.labels == {"app": ["not", "a", "string"], "x": {"y": 1}}
    assert pod.node_selector == {"k": ["v"]}
    assert pod == kubeobserve.gpu_pod_from_json(copy.deepcopy(hostile))


def test_a_new_observation_starts_an_empty_table() -> None:
    shared = kubeobserve.Shared()
    first = kubeobserve.gpu_pod_from_json(_pod(1), shared)
    shared.begin()
    second = kubeobserve.gpu_pod_from_json(_pod(2), shared)
    assert first is not None and second is not None
    assert first.labels == second.labels and first.labels is not second.labels
