"""The kube adapter's parse memo when nothing is to be kept (ParseMemo(keep=False)): a process that observes once
(`reconcile --once`) parses every object and holds no key, with the same values a remembering memo gives."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands import reconcile


def _node(name: str, uid: str = "u-1", rv: str = "7") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": rv, "labels": {}}, "status": {}}


def _counting(calls: list[str]) -> Any:
    def parse(obj: Mapping[str, Any]) -> tuple[str, int]:
        calls.append(obj["metadata"]["name"])
        return (obj["metadata"]["name"], len(calls))

    return parse


def test_a_memo_that_keeps_nothing_parses_every_object_every_observation() -> None:
    calls: list[str] = []
    memo = kubeobserve.ParseMemo(_counting(calls), keep=False)
    for _ in range(2):
        memo.begin()
        first, second = memo(_node("a")), memo(_node("a"))
        assert first != second  # parsed twice: nothing was taken from a memo
    assert calls == ["a", "a", "a", "a"]
    assert memo.hits == 0
    assert memo._current == {} and memo._last == {}


def test_a_remembering_memo_still_reuses_an_unchanged_object() -> None:
    calls: list[str] = []
    memo = kubeobserve.ParseMemo(_counting(calls))
    memo.begin()
    first = memo(_node("a"))
    memo.begin()
    assert memo(_node("a")) is first
    assert calls == ["a"] and memo.hits == 1


def test_keeping_nothing_gives_the_values_a_remembering_memo_gives() -> None:
    objs = [_node("a"), _node("b", uid="u-2"), {"metadata": {"name": "no-uid"}, "status": {}}]
    kept = kubeobserve.ParseMemo(kubeobserve.node_from_json)
    unkept = kubeobserve.ParseMemo(kubeobserve.node_from_json, keep=False)
    for _ in range(2):
        kept.begin()
        unkept.begin()
        assert [kept(o) for o in objs] == [unkept(o) for o in objs]


def test_the_adapter_remembers_by_default_and_not_when_told() -> None:
    assert KubeCluster(object()).pod_memo.keep  # type: ignore[arg-type]
    cluster = KubeCluster(object(), remember_parses=False)  # type: ignore[arg-type]
    assert not cluster.pod_memo.keep and not cluster.node_memo.keep


def test_reconcile_once_connects_without_a_parse_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def from_kubeconfig(path: str | None = None, **kwargs: Any) -> str:
        seen.update(kwargs, path=path)
        return "cluster"

    monkeypatch.setattr(KubeCluster, "from_kubeconfig", staticmethod(from_kubeconfig))
    assert reconcile._connect(Path("kc"), "ctx") == "cluster"
    assert seen == {"path": "kc", "context": "ctx", "remember_parses": False}


def test_a_watching_adapter_keeps_no_parse_memo() -> None:
    # `migplan run`: the watch-fed caches hold every node's and pod's record; a memo would hold them a second time.
    cluster = KubeCluster(object(), watch=True)  # type: ignore[arg-type]
    assert cluster.node_cache is not None and cluster.pod_cache is not None
    assert not cluster.pod_memo.keep and not cluster.node_memo.keep
    memo = cluster.pod_memo
    memo.begin()
    memo({"metadata": {"name": "p", "namespace": "n", "uid": "u", "resourceVersion": "1"}, "spec": {}})
    assert memo._current == {} and memo._last == {}
