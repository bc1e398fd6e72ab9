"""A pod read once into a PodRecord (what a watch-fed cache keeps) is sorted exactly as the listed pod is.

The same pods — GPU pods, the device plugin's pods Ready and not (past the log-read cap too), another DaemonSet's,
mig-manager pods on a failed node and in another namespace, bare, finished, mirror and terminating pods, and hostile
ones — go through `PodSorter.add` (raw JSON, the LIST path) and `PodSorter.add_record(pod_record(...))` (the cache's
path): every output of the sorter, the logs it asked for and the reboot tally's details must be equal.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.model.inventory import GpuOperatorSettings

OPS = GpuOperatorSettings()
NS = OPS.namespace


def _pod(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = "gpu-1",
    gpu: str | None = None,
    owner: tuple[str, str] | None = ("ReplicaSet", "rs"),
    labels: Any = None,
    ready: bool | None = None,
    phase: str = "Running",
    **meta: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main"}
    if gpu:
        container["resources"] = {"requests": {gpu: "1"}, "limits": {gpu: "1"}}
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "uid": f"u-{name}", "resourceVersion": "5", **meta},
        "spec": {"containers": [container]},
        "status": {"phase": phase},
    }
    if labels is not None:
        pod["metadata"]["labels"] = labels
    if owner is not None:
        pod["metadata"]["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    if node is not None:
        pod["spec"]["nodeName"] = node
    if ready is not None:
        cond = {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": "2026-01-02T03:04:05Z"}
        pod["status"]["conditions"] = [cond]
    return pod


def _mig_manager(name: str, node: str, namespace: str = NS) -> dict[str, Any]:
    pod = _pod(name, namespace=namespace, node=node, owner=("DaemonSet", "nvidia-mig-manager"))
    key, value = kubeobserve.MIG_MANAGER_APP_LABEL
    pod["metadata"]["labels"] = {key: value}
    pod["spec"]["volumes"] = [{"name": "mig-parted-config", "configMap": {"name": "custom-mig-config"}}]
    pod["spec"]["containers"][0]["env"] = [{"name": "CONFIG_FILE", "value": "/mig-parted-config/config.yaml"}]
    return pod


PODS = [
    _pod("llm-0", gpu="nvidia.com/mig-3g.71gb", labels={"app": "llm"}),
    _pod("llm-1", gpu="nvidia.com/mig-3g.71gb", labels={"app": "llm"}, node="gpu-2"),
    _pod("whole", gpu="nvidia.com/gpu", owner=None),
    _pod("pending", gpu="nvidia.com/gpu", node=None, phase="Pending"),
    _pod("done", gpu="nvidia.com/gpu", phase="Succeeded"),
    _pod("web", labels={"app": "web"}),
    _pod("bare", owner=None),
    _pod("going", deletionTimestamp="2026-01-02T03:04:05Z"),
    _pod("static", annotations={"kubernetes.io/config.mirror": "abc"}, owner=("Node", "gpu-1")),
    _pod("dp-ready", namespace=NS, owner=("DaemonSet", OPS.device_plugin_daemonset), ready=True),
    _pod("dp-down-1", namespace=NS, owner=("DaemonSet", OPS.device_plugin_daemonset), ready=False, node="gpu-2"),
    _pod("dp-down-2", namespace=NS, owner=("DaemonSet", OPS.device_plugin_daemonset), ready=False, node="gpu-3"),
    _pod("dp-elsewhere", namespace="kube-system", owner=("DaemonSet", OPS.device_plugin_daemonset), ready=False),
    _pod("gfd", namespace=NS, owner=("DaemonSet", "gpu-feature-discovery"), ready=True),
    _mig_manager("mm-1", "gpu-1"),
    _mig_manager("mm-2", "gpu-2"),
    _mig_manager("mm-other-ns", "gpu-3", namespace="somewhere-else"),  # not the operator's: an ordinary pod
    _pod("odd-labels", labels=["not", "a", "map"]),
    _pod("odd-owners", gpu="nvidia.com/gpu", owner=None, ownerReferences={"kind": "DaemonSet"}),
    _pod("odd-ref", ownerReferences=["DaemonSet"], owner=None),
    _pod("claims", owner=None, node="gpu-3")
    | {"spec": {"nodeName": "gpu-3", "containers": [], "resourceClaims": [{"name": "c", "resourceClaimName": "rc"}]}},
]


def _sorted(feed: str, *, failed: frozenset[str], max_log_reads: int) -> tuple[Any, list[str]]:
    logs: list[str] = []

    def log(kind: str) -> Any:
        def read(obj: Any) -> str:
            meta = obj.get("metadata") or {}
            containers = [c.get("name") for c in (obj.get("spec") or {}).get("containers") or ()]
            logs.append(f"{kind} {meta.get('namespace')}/{meta.get('name')} {containers}")
            return f"{kind} error of {meta.get('name')}"

        return read

    sorter = kubeobserve.PodSorter(
        OPS,
        failed=failed,
        daemonset=True,
        device_plugin_log=log("device-plugin"),
        mig_manager_log=log("mig-manager"),
        max_log_reads=max_log_reads,
    )
    shared = kubeobserve.Shared()
    for obj in PODS:
        if feed == "raw":
            sorter.add(obj)
        else:
            sorter.add_record(kubeobserve.pod_record(obj, shared=shared))
    tally = sorter.reboot.by_node()
    details = {node: pods.details() if pods.details else None for node, pods in tally.items()}
    out = (
        sorter.gpu_pods,
        sorter.dp_pods,
        sorter.mig_manager_errors,
        sorter.mig_manager_sources,
        sorter.log_reads,
        tally,
        details,
    )
    return out, logs


@pytest.mark.parametrize("max_log_reads", [0, 1, 100])
@pytest.mark.parametrize("failed", [frozenset(), frozenset({"gpu-2"})])
def test_a_record_is_sorted_as_the_listed_pod(failed: frozenset[str], max_log_reads: int) -> None:
    raw, raw_logs = _sorted("raw", failed=failed, max_log_reads=max_log_reads)
    kept, kept_logs = _sorted("record", failed=failed, max_log_reads=max_log_reads)
    assert kept == raw
    assert kept_logs == raw_logs
    gpu_pods, dp_pods, errors, sources = raw[:4]
    # The cases are live: each output has something in it to compare.
    assert {p.name for p in gpu_pods} >= {"llm-0", "llm-1", "whole", "odd-owners", "claims"}
    assert [p.name for p in dp_pods] == ["dp-ready", "dp-down-1", "dp-down-2"]
    assert sources == {"gpu-1": "custom-mig-config", "gpu-2": "custom-mig-config"}
    assert errors == ({"gpu-2": "mig-manager error of mm-2"} if failed else {})
    assert len(raw_logs) == min(max_log_reads, 2) + (1 if failed else 0)


def test_a_pod_worth_nothing_holds_nothing() -> None:
    assert kubeobserve.pod_record(_pod("floating", node=None)).holds_nothing()
    assert not kubeobserve.pod_record(_pod("bound")).holds_nothing()
    assert not kubeobserve.pod_record(_pod("gpu", node=None, gpu="nvidia.com/gpu")).holds_nothing()


def test_records_keep_the_parts_pods_repeat_once() -> None:
    # Each pod decoded on its own (as a LIST page or a watch event is): equal strings are distinct objects.
    def decoded(pod: dict[str, Any]) -> Any:
        return orjson.loads(orjson.dumps(pod))

    pods = [decoded(_pod(name)) for name in ("web-a", "web-b")]
    plugins = [decoded(_pod(name, namespace=NS, owner=("DaemonSet", "gpu-feature-discovery"))) for name in "ab"]
    assert pods[0]["spec"]["nodeName"] is not pods[1]["spec"]["nodeName"]
    shared = kubeobserve.Shared()
    first, second = (kubeobserve.pod_record(p, shared=shared) for p in pods)
    assert first.tally is not None and second.tally is not None
    assert first.tally[0] == "gpu-1" and first.tally[0] is second.tally[0]  # the node name
    assert first.tally[1][4] == "Running" and first.tally[1][4] is second.tally[1][4]  # the phase
    assert first.node is first.tally[0]  # one node name per record, not two
    ds_a, ds_b = (kubeobserve.pod_record(p, shared=shared) for p in plugins)
    assert ds_a.daemonsets == ("gpu-feature-discovery",) and ds_a.daemonsets[0] is ds_b.daemonsets[0]
    # Without a table nothing is shared, and the values are the same.
    alone = [kubeobserve.pod_record(p) for p in pods]
    assert alone[0].tally is not None and alone[1].tally is not None
    assert alone[0].tally[0] is not alone[1].tally[0]
    assert [a.tally for a in alone] == [first.tally, second.tally]
