"""The twin's components write pod status as the kubelet does: an unchanged condition keeps its transition time."""

from __future__ import annotations

from typing import Any

from reconciler.twin.apiserver.store import Store
from reconciler.twin.operator.kubeobjects import pod_status
from reconciler.twin.operator.storeapi import StoreApi

NS = "gpu-operator"


def _ready(store: Store) -> dict[str, Any]:
    pod = store.get("pods", "dp-1", NS)
    return next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")


def _with_time(status: dict[str, Any], at: str) -> dict[str, Any]:
    return {**status, "conditions": [{**c, "lastTransitionTime": at} for c in status["conditions"]]}


def test_an_unchanged_condition_keeps_its_time_and_a_change_takes_the_new_one() -> None:
    store = Store()
    store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dp-1"},
        "spec": {"nodeName": "n1", "containers": [{"name": "nvidia-device-plugin", "image": "x"}]},
    }
    store.create("pods", pod, NS)
    api = StoreApi(store, NS)
    ready = pod_status("n1", ["nvidia-device-plugin"], ready=True)
    api.patch_pod_status("dp-1", NS, _with_time(ready, "2026-12-03T10:00:00Z"))
    assert _ready(store)["lastTransitionTime"] == "2026-12-03T10:00:00Z"
    # Re-read in place (SIGHUP): still Ready, so still Ready since 10:00.
    api.patch_pod_status("dp-1", NS, _with_time(ready, "2026-12-03T10:05:00Z"))
    assert _ready(store)["lastTransitionTime"] == "2026-12-03T10:00:00Z"
    # Not Ready any more: the transition is now.
    failing = pod_status("n1", ["nvidia-device-plugin"], ready=False, failing="nvidia-device-plugin")
    api.patch_pod_status("dp-1", NS, _with_time(failing, "2026-12-03T10:06:00Z"))
    assert _ready(store)["status"] == "False"
    assert _ready(store)["lastTransitionTime"] == "2026-12-03T10:06:00Z"
    # Ready again: a new transition time.
    api.patch_pod_status("dp-1", NS, _with_time(ready, "2026-12-03T10:07:00Z"))
    assert _ready(store)["lastTransitionTime"] == "2026-12-03T10:07:00Z"
