"""A watch-fed node cache keeps the label values its nodes repeat once (issue 29, memory): each node decoded on its
own holds its own copy of every value, and GPU Feature Discovery writes the same few on every GPU node.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from reconciler.adapters.kube import cluster as kubecluster
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.observe import node_from_json

GFD = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "8", "nvidia.com/mig.strategy": "mixed"}


def _node(name: str, **labels: Any) -> Any:
    node = {
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "3", "labels": {**GFD, **labels}},
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}},
    }
    return orjson.loads(orjson.dumps(node))  # decoded on its own, as a page or a watch event is


def _reader() -> Any:
    return KubeCluster(object(), watch=True)._node_labels.entry  # type: ignore[arg-type]


def test_equal_label_values_of_two_nodes_are_one_object_and_the_nodes_are_the_same() -> None:
    read = _reader()
    raw = [_node("gpu-1", hostname="gpu-1"), _node("gpu-2", hostname="gpu-2")]
    assert (
        raw[0]["metadata"]["labels"]["nvidia.com/gpu.product"]
        is not raw[1]["metadata"]["labels"]["nvidia.com/gpu.product"]
    )
    (k1, one), (k2, two) = read(raw[0]), read(raw[1])
    assert (k1, k2) == ("gpu-1", "gpu-2")
    assert one == node_from_json(raw[0]) and two == node_from_json(raw[1])  # the same nodes, equal values
    for key in GFD:
        assert one.labels[key] is two.labels[key]
    assert one.labels["hostname"] == "gpu-1" and two.labels["hostname"] == "gpu-2"


def test_only_label_values_an_api_server_accepts_are_kept_and_the_table_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = _reader()
    long = "x" * 64  # past a label value's 63 characters: not kept
    (_, one), (_, two) = read(_node("gpu-1", note=long)), read(_node("gpu-2", note=long))
    assert one.labels["note"] == long and one.labels["note"] is not two.labels["note"]
    monkeypatch.setattr(kubecluster, "NODE_LABEL_VALUES", 4)
    table = KubeCluster(object(), watch=True)._node_labels  # type: ignore[arg-type]
    for i in range(20):
        table.entry(_node(f"gpu-{i}", stamp=f"2026-01-01T00:00:{i:02d}Z"))
        assert len(table.values) <= 4 + len(GFD) + 1
