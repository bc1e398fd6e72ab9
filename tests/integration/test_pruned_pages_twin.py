"""The node and pod LIST pages decoded typed and pruned (reconciler/adapters/kube/shapes.py) observe a rich cluster
exactly as the full decode does, and every field the consumers read on the full objects is one the shapes keep.

The cluster: the article's (strategy `single` refusing a mixed layout: device-plugin pods not Ready, their logs
read), a node whose mig-manager failed (its log read), NVIDIA's DRA driver chart (kubelet-plugin pods), and pods of
every kind: GPU pods owned by a ReplicaSet, a bare one, one asking in an init container, one being deleted, a mirror
pod, a finished one, a DaemonSet's, pods with ResourceClaims (named and from a template) and a pod with kilobytes of
annotations. Values of the wrong type (which the API server refuses) are tests/unit/adapters/test_kube_shapes.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import pagerecorder

from reconciler.adapters.kube import cluster as kc
from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube import shapes
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.model.observed import MIRROR_POD_ANNOTATION, ObservedState
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
FAILED = "gpu-h200-02"
NODE = "gpu-h200-01"


def _pod(name: str, *, namespace: str = "team-a", node: str | None = NODE, **parts: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"app": name.split("-")[0]}}
    meta.update(parts.pop("meta", {}))
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "vllm:1", "resources": {"limits": {"nvidia.com/mig-1g.18gb": "1"}}}]
    }
    if node is not None:
        spec["nodeName"] = node
    spec.update(parts.pop("spec", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, **parts}


RS = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "vllm-7d9", "uid": "u-rs", "controller": True}]
DS = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter", "uid": "u-ds", "controller": True}]

PODS = [
    _pod("vllm-a", meta={"ownerReferences": RS}, spec={"nodeSelector": {"nvidia.com/gpu.product": "H200"}}),
    _pod("vllm-b", meta={"ownerReferences": RS}),
    _pod("bare-gpu"),
    _pod(
        "init-gpu",
        spec={
            "initContainers": [{"name": "warm", "image": "w:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "containers": [
                {"name": "main", "image": "m:1", "resources": {"limits": {"nvidia.com/mig-2g.35gb": "1", "cpu": "2"}}}
            ],
        },
    ),
    _pod("leaving", node="cpu-01", meta={"ownerReferences": RS}),  # a node without the twin's kubelet
    _pod("static-gpu", meta={"annotations": {MIRROR_POD_ANNOTATION: "abc", "other": "x"}}),
    _pod("done", status={"phase": "Succeeded"}),
    _pod(
        "exporter-x",
        namespace="monitoring",
        meta={"ownerReferences": DS},
        spec={"containers": [{"name": "e", "image": "e:1"}]},
    ),
    _pod(
        "claimer",
        spec={
            "containers": [{"name": "main", "image": "m:1", "resources": {"claims": [{"name": "gpu"}, {"name": "t"}]}}],
            "resourceClaims": [
                {"name": "gpu", "resourceClaimName": "emb-gpu"},
                {"name": "t", "resourceClaimTemplateName": "x"},
            ],
        },
    ),
    _pod("pending-gpu", node=None),
    _pod(
        "chatty", meta={"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 20_000 + "}"}}
    ),
]


@pytest.fixture(scope="module")
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(
        INVENTORY, strategy="single", device_plugin_config="old-plugin-config", drift=[f"mig-config-failed:{FAILED}"]
    ) as twin:
        twin.settle()
        twin.install_dra_driver_chart([NODE], "DynamicMIG=false,")
        store = twin.store
        store.ensure_namespaces(["team-a", "monitoring"])
        for pod in PODS:
            store.create("pods", pod, pod["metadata"]["namespace"])
        store.patch(
            "pods",
            "claimer",
            {"status": {"resourceClaimStatuses": [{"name": "t", "resourceClaimName": "claimer-t-x1"}]}},
            "team-a",
            subresource="status",
        )
        twin.settle()
        store.delete("pods", "leaving", "team-a")  # bound: marked for deletion, still listed (no kubelet ends it)
        yield twin


def _observe(twin: ClusterTwin, *, pruned: bool, monkeypatch: pytest.MonkeyPatch) -> ObservedState:
    with monkeypatch.context() as m:
        if not pruned:
            m.setattr(shapes, "decode_page", lambda data, shape: None)  # every page decoded in full
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig), page_size=3, remember_parses=False)
        try:
            desired, diagnostics = load_desired(INVENTORY)
            assert desired is not None, diagnostics
            return cluster.observe(desired.cluster.gpu_operator)
        finally:
            cluster.close()


def test_the_pruned_pages_observe_what_the_full_ones_do(twin: ClusterTwin, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[bool] = []
    real = shapes.decode_page

    def counting(data: bytes, shape: shapes.PageShape) -> dict[str, Any] | None:
        doc = real(data, shape)
        decoded.append(doc is not None)
        return doc

    monkeypatch.setattr(shapes, "decode_page", counting)
    pruned = _observe(twin, pruned=True, monkeypatch=monkeypatch)
    assert decoded and all(decoded)  # every node and pod page went the typed way (none fell back)
    full = _observe(twin, pruned=False, monkeypatch=monkeypatch)
    assert pruned == full
    # What the comparison above leaves out (compare=False): the light pods a drain reads, built on demand.
    assert {n: p.details() for n, p in pruned.node_pods.items() if p.details} == {
        n: p.details() for n, p in full.node_pods.items() if p.details
    }
    # The cluster is as rich as the docstring says (so the equality above covers each kind).
    names = {p.name for p in pruned.pods}
    assert {"vllm-a", "bare-gpu", "init-gpu", "leaving", "static-gpu", "claimer"} <= names
    assert next(p for p in pruned.pods if p.name == "leaving").terminating
    assert next(p for p in pruned.pods if p.name == "static-gpu").mirror
    assert next(p for p in pruned.pods if p.name == "claimer").claims == ("team-a/claimer-t-x1", "team-a/emb-gpu")
    assert FAILED in kubeobserve.failed_nodes(pruned.nodes) and pruned.mig_manager_sources  # its log was asked for
    assert pruned.device_plugin is not None and any(not p.ready and p.log_line for p in pruned.device_plugin.pods)
    assert any(n.unschedulable_owned_by_migplan is not None for n in pruned.nodes.values())  # managedFields read
    assert pruned.node_pods[NODE].unreplicated_count >= 3  # bare pods: drain refuses them


def test_every_field_the_consumers_read_is_one_the_shapes_keep(twin: ClusterTwin) -> None:
    """The consumers run on the full listed objects, each wrapped to record every key path it reads; a path the
    shape drops would be a silent wrong answer on the pruned path (a future consumer reading a new field)."""
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig), remember_parses=True)
    try:
        desired, _ = load_desired(INVENTORY)
        assert desired is not None
        ops = desired.cluster.gpu_operator
        node_log: set[pagerecorder.Path] = set()
        pod_log: set[pagerecorder.Path] = set()
        raw_nodes = list(cluster.list_objects("list nodes", cluster.core.list_node))
        raw_pods = list(cluster.list_objects("list pods", cluster.core.list_pod_for_all_namespaces))
        nodes = {}
        for obj in raw_nodes:
            node = cluster.node_memo(pagerecorder.record(dict(obj), node_log))
            nodes[node.name] = node
        sorter = kubeobserve.PodSorter(
            ops,
            failed=frozenset(nodes),  # every node: each mig-manager pod's log path runs
            daemonset=True,
            device_plugin_log=cluster._quote_log,
            mig_manager_log=cluster._mig_manager_reason,
            max_log_reads=len(raw_pods),
            gpu_pod=cluster.pod_memo,
        )
        for obj in raw_pods:
            sorter.add(pagerecorder.record(dict(obj), pod_log))
        for tally in sorter.reboot.by_node().values():
            assert tally.details is not None
            tally.details()
    finally:
        cluster.close()
    assert sorter.dp_pods and sorter.mig_manager_sources and sorter.gpu_pods  # every consumer ran
    assert ("metadata", "managedFields", "[]", "fieldsV1", "f:spec") in node_log  # the recorder sees deep reads
    assert ("spec", "containers", "[]", "resources", "limits") in pod_log
    lost = {
        p: where
        for log, kind in ((node_log, shapes.Node), (pod_log, shapes.Pod))
        for p in log
        if (where := pagerecorder.dropped(p, kind)) is not None
    }
    assert not lost


def test_the_twins_pages_decode_to_the_full_objects_cut_to_the_shapes(twin: ClusterTwin) -> None:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        for fn, shape, kind in (
            (cluster.core.list_node, shapes.NODES, shapes.Node),
            (cluster.core.list_pod_for_all_namespaces, shapes.PODS, shapes.Pod),
        ):
            data = kc._drain(fn(limit=500, _preload_content=False))
            full, cont = kc.read_list_page(data, "list")
            pruned, pruned_cont = kc.read_list_page(data, "list", shape)
            assert cont is None and pruned_cont is None
            assert pruned == [pagerecorder.project(item, kind) for item in full]
            assert len(orjson.dumps(pruned)) < len(data) / 2  # most of a page is what migplan never reads
    finally:
        cluster.close()


def test_an_observed_state_is_a_plain_value() -> None:
    """The equality above compares dataclasses field by field: it would pass vacuously if ObservedState compared
    by identity."""
    assert dataclasses.is_dataclass(ObservedState)
    assert ObservedState(nodes={}) == ObservedState(nodes={})
