"""The twin's ClusterPolicy CRD (reconciler/twin/data/clusterpolicy-crd.yaml, our own) keeps every field migplan and
the twin's operator read or write, and nothing else slips through: a misspelt field is pruned with a warning, as the
real server prunes a field its CRD does not declare. The CRD's other facts are checked against a real server's
answers by tests/twin/test_conformance_transcripts.py (clusterpolicy.json)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.twin.apiserver import Store, clusterpolicy_crd, clusterpolicy_required_spec

# (path in the ClusterPolicy, JSON type): what migplan's planner and observer and the twin's operator use
USED = [
    ("spec.mig.strategy", "string"),
    ("spec.migManager.enabled", "boolean"),
    ("spec.migManager.config.name", "string"),
    ("spec.migManager.config.default", "string"),
    ("spec.migManager.env[].name", "string"),
    ("spec.migManager.env[].value", "string"),
    ("spec.devicePlugin.config.name", "string"),
    ("spec.devicePlugin.config.default", "string"),
    ("spec.devicePlugin.env[].name", "string"),
    ("status.state", "string"),
    ("status.namespace", "string"),
]


def _schema() -> dict[str, Any]:
    (version,) = clusterpolicy_crd()["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _node(path: str) -> dict[str, Any]:
    node = _schema()
    for part in path.split("."):
        node = node["properties"][part[:-2]]["items"] if part.endswith("[]") else node["properties"][part]
    return node


@pytest.mark.parametrize(("path", "kind"), USED, ids=[p for p, _ in USED])
def test_every_field_in_use_is_declared(path: str, kind: str) -> None:
    assert _node(path)["type"] == kind


def test_the_facts_a_real_cluster_enforces() -> None:
    assert clusterpolicy_required_spec() == (
        "daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter", "operator",
        "toolkit",
    )  # fmt: skip
    assert _node("spec.mig.strategy")["enum"] == ["none", "single", "mixed"]
    assert _node("spec.migManager.config.default")["enum"] == ["all-disabled", ""]
    assert _node("status.state")["enum"] == ["ignored", "ready", "notReady"]
    assert _schema()["properties"]["status"]["required"] == ["state"]


def test_no_description_text_is_carried() -> None:
    """Descriptions are where a CRD's authors write prose; ours has none to copy or to drift."""

    def walk(node: object) -> list[str]:
        if isinstance(node, dict):
            return (["description"] if "description" in node else []) + [x for v in node.values() for x in walk(v)]
        if isinstance(node, list):
            return [x for v in node for x in walk(v)]
        return []

    assert walk(clusterpolicy_crd()) == []


def test_a_misspelt_field_is_pruned_with_a_warning() -> None:
    store = Store()
    store.install_crd(clusterpolicy_crd())
    spec: dict[str, Any] = {k: {} for k in clusterpolicy_required_spec()}
    spec["migManager"] = {"confg": {"name": "migplan-mig-parted-config"}, "config": {"name": "migplan"}}
    warnings: list[str] = []
    cp = store.create("clusterpolicies.nvidia.com", {"metadata": {"name": "p"}, "spec": spec}, warnings=warnings)
    assert warnings == ['unknown field "spec.migManager.confg"']
    assert cp["spec"]["migManager"] == {"config": {"name": "migplan", "default": "all-disabled"}}
