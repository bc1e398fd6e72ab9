"""What `migplan import` writes carries values from the cluster (a GFD product label, a pod's app label) in
comments and in quoted scalars: whatever they hold, the written file parses, every comment stays one line of
printable text, every scalar reads back as the value, and `migplan validate` names the real problem (an
unknown model), never a syntax error in a file migplan wrote."""

from __future__ import annotations

import pytest
import yaml

from reconciler.catalog import load_catalog
from reconciler.logic.adoption.adopt import ConfigSource, NodeFacts, import_cluster
from reconciler.logic.adoption.adoptfiles import render_inventory
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.model.observed import ContainerResources, ObservedNode, ObservedPod

HOSTILE = "\x1b[2J\u202eevil\x85owner: x\ud800"


def _written(product: str, app: str) -> str:
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": "1"}
    pod = ObservedPod(
        "ml", "p", "n1", "Running", (ContainerResources("c", {"nvidia.com/gpu": 1}),), labels={"app": app}
    )
    facts = NodeFacts(ObservedNode("n1", labels, allocatable={"nvidia.com/gpu": 1}), (pod,))
    imported = import_cluster([facts], ConfigSource("cm", None, "none"), load_catalog())
    return render_inventory(imported, None)["nodes/n1.yaml"]


def test_a_control_character_or_bidi_override_in_a_comment_is_escaped() -> None:
    text = _written("NVIDIA-H200", "vllm" + HOSTILE)
    yaml.safe_load(text)  # the YAML reader refuses \x1b even in a comment
    assert all(line.isprintable() for line in text.splitlines()), text
    owners = next(line for line in text.splitlines() if "(pod ml/p)" in line)
    assert owners == "#   nvidia.com/gpu: vllm\\x1b[2J\\u202eevil owner: x\\ud800 (pod ml/p)", owners


@pytest.mark.parametrize(
    ("product", "reads_back"),
    [
        ("H200\U0001f642", "H200\U0001f642"),  # JSON's surrogate pair escapes are a YAML syntax error
        ("H200\u2028x", "H200\u2028x"),  # raw, YAML would fold it as a line break
        ("H200" + HOSTILE, "H200" + HOSTILE.replace("\ud800", "\ufffd")),  # no YAML form for a lone surrogate
    ],
    ids=["beyond-bmp", "line-separator", "controls"],
)
def test_a_scalar_from_the_cluster_reads_back_and_validates_to_the_real_problem(product: str, reads_back: str) -> None:
    text = _written(product, "vllm")
    text.encode("utf-8")  # written with write_text(encoding="utf-8"): a lone surrogate would raise there
    doc = yaml.safe_load(text)
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    assert doc["spec"]["gpus"][0]["model"] == reads_back
    codes = {d.code for d in validate_inventory({"nodes/n1.yaml": text.encode()}).diagnostics}
    assert "MP301" in codes and "MP107" not in codes, codes  # unknown model, not a syntax error


@pytest.mark.parametrize("name", ["0o17", "1e5", "12e3"])
def test_a_node_name_yaml_12_reads_as_a_number_is_quoted(name: str) -> None:
    """Valid Kubernetes node names that YAML 1.2 reads as numbers: written plain, validate refuses the file
    migplan wrote (MP116) instead of taking the node."""
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "1E5", "nvidia.com/gpu.count": "1"}
    facts = NodeFacts(ObservedNode(name, labels, allocatable={"nvidia.com/gpu": 1}))
    imported = import_cluster([facts], ConfigSource("cm", None, "none"), load_catalog())
    text = render_inventory(imported, None)[f"nodes/{name}.yaml"]
    assert yaml.safe_load(text)["metadata"]["name"] == name
    codes = {d.code for d in validate_inventory({f"nodes/{name}.yaml": text.encode()}).diagnostics}
    assert "MP116" not in codes and "MP301" in codes, codes  # the unknown model 1E5 is the problem, nothing else
