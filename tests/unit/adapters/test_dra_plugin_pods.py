"""The pods of NVIDIA's DRA kubelet-plugin DaemonSet as the kube adapter reads them (what a plugin restart deletes):
name, namespace, uid and node all present and strings, or the pod is not one migplan would ever delete."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.kube.observe import dra_driver_from_json, dra_plugin_pod
from reconciler.model.dra import DraPluginPod


def _pod(**meta: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "plugin-a", "namespace": "dra", "uid": "u-1"}
    base.update(meta)
    return {"metadata": {k: v for k, v in base.items() if v is not None}, "spec": {"nodeName": "n"}}


def test_a_bound_pod_is_read_with_what_its_delete_needs() -> None:
    assert dra_plugin_pod(_pod()) == DraPluginPod("n", "dra", "plugin-a", "u-1")
    assert dra_plugin_pod(_pod(deletionTimestamp="2026-12-03T10:00:00Z")) == DraPluginPod(
        "n", "dra", "plugin-a", "u-1", deleting=True
    )


@pytest.mark.parametrize(
    "obj",
    [
        _pod(uid=None),
        _pod(uid=7),
        _pod(name=""),
        _pod(namespace=["dra"]),
        _pod(name="x" * 300),
        {"metadata": {"name": "p", "namespace": "dra", "uid": "u"}, "spec": {}},  # not bound: no node
        {"metadata": "nope", "spec": {"nodeName": "n"}},
        [],
        None,
    ],
)
def test_a_pod_missing_any_of_it_is_never_a_candidate(obj: Any) -> None:
    assert dra_plugin_pod(obj) is None


def test_the_driver_carries_its_pods_sorted_whatever_its_gates_say() -> None:
    ds: dict[str, Any] = {
        "metadata": {"name": "dra-driver-nvidia-gpu-kubelet-plugin", "namespace": "dra"},
        "spec": {"template": {"spec": {"containers": [{"name": "gpus", "image": "i"}]}}},
    }
    pods = [DraPluginPod("n2", "dra", "b", "u2"), DraPluginPod("n1", "dra", "a", "u1")]
    assert [p.node for p in dra_driver_from_json(ds, {"n1", "n2"}, pods).pods] == ["n1", "n2"]
    broken = {**ds, "spec": {"template": {"spec": {"containers": "no"}}}}
    assert len(dra_driver_from_json(broken, {"n1"}, pods).pods) == 2
