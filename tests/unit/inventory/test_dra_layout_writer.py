"""spec.layoutWriter (issue 27 item 2): who writes a node's MIG layout, declared per cluster and per node;
`validate` refuses a plan that gives a GPU two writers (MP320), and the planner writes nothing where the
inventory gives the layout to another component."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.commands.reconcile import load_desired
from reconciler.logic.drift import drift

PARTS = {"enabled": True, "partitions": [{"profile": "3g.71gb"}, {"profile": "1g.18gb"}]}
DYNAMIC = {"enabled": False}  # migplan plans nothing there: the other writer sets MIG mode


def _root(tmp_path: Path, *, cluster_writer: str | None, node_writer: str | None, mig: dict[str, Any]) -> Path:
    (tmp_path / "nodes").mkdir()
    spec: dict[str, Any] = {"migStrategy": "mixed"}
    if cluster_writer is not None:
        spec["layoutWriter"] = cluster_writer
    (tmp_path / "cluster.yaml").write_text(
        yaml.safe_dump({"apiVersion": "migplan/v1", "kind": "Cluster", "metadata": {"name": "t"}, "spec": spec})
    )
    node_spec: dict[str, Any] = {"gpus": [{"index": 0, "model": "H200-141GB", "mig": mig}]}
    if node_writer is not None:
        node_spec["layoutWriter"] = node_writer
    doc = {"apiVersion": "migplan/v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": node_spec}
    (tmp_path / "nodes" / "n1.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


@pytest.mark.parametrize(
    ("cluster_writer", "node_writer"),
    [(None, "dra-dynamic-mig"), ("external", None), ("dra-dynamic-mig", "external")],
)
def test_partitions_where_another_component_writes_are_refused_with_file_and_line(
    tmp_path: Path, cluster_writer: str | None, node_writer: str | None
) -> None:
    desired, diagnostics = load_desired(
        _root(tmp_path, cluster_writer=cluster_writer, node_writer=node_writer, mig=PARTS)
    )
    (two,) = [d for d in diagnostics if d.code == "MP320"]
    assert two.file == "nodes/n1.yaml" and two.line is not None and "two writers" in two.message
    assert desired is None or any(d.severity.value == "error" for d in diagnostics)


@pytest.mark.parametrize(
    ("cluster_writer", "node_writer", "mig", "expected"),
    [
        (None, None, PARTS, "migplan"),
        (None, "dra-dynamic-mig", DYNAMIC, "dra-dynamic-mig"),
        ("external", None, DYNAMIC, "external"),
        ("external", "migplan", PARTS, "migplan"),  # a node may take its layout back from the cluster's default
    ],
)
def test_consistent_declarations_validate_and_resolve_per_node(
    tmp_path: Path, cluster_writer: str | None, node_writer: str | None, mig: dict[str, Any], expected: str
) -> None:
    desired, diagnostics = load_desired(
        _root(tmp_path, cluster_writer=cluster_writer, node_writer=node_writer, mig=mig)
    )
    assert desired is not None and not [d for d in diagnostics if d.code == "MP320"], diagnostics
    assert desired.layout_writer("n1") == expected
    assert (drift.declared_writers(desired) == {}) is (expected == "migplan")


def test_an_unknown_writer_is_a_schema_error(tmp_path: Path) -> None:
    _, diagnostics = load_desired(_root(tmp_path, cluster_writer=None, node_writer="hami", mig=DYNAMIC))
    assert [d.code for d in diagnostics if d.file == "nodes/n1.yaml"] and any(
        d.code.startswith("MP2") for d in diagnostics
    )
