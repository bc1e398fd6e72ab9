"""spec.deviceClasses (issue 30 item 2): the DeviceClasses rendered from the plan, and validate's rules on them
(MP415 two classes for one extended name, MP416 nvidia.com/gpu mapped to MIG devices, MP417 a name Kubernetes
refuses, MP418 an owner without partitions, MP419 two classes with one name), each with its file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.commands.reconcile import load_desired
from reconciler.logic.inventory import deviceclasses
from reconciler.model.diagnostics import Diagnostic

PARTS = [
    {"profile": "3g.71gb", "owner": "llm"},
    {"profile": "1g.18gb", "owner": "embeddings"},
    {"profile": "1g.18gb"},
]
GPU_PIN = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


def _root(tmp_path: Path, device_classes: dict[str, Any] | None) -> Path:
    (tmp_path / "nodes").mkdir(parents=True)
    spec: dict[str, Any] = {"migStrategy": "mixed"}
    if device_classes is not None:
        spec["deviceClasses"] = device_classes
    doc = {"apiVersion": "migplan/v1", "kind": "Cluster", "metadata": {"name": "t"}, "spec": spec}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    node = {
        "apiVersion": "migplan/v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "spec": {"gpus": [{"index": 0, "model": "H200-141GB", "mig": {"enabled": True, "partitions": PARTS}}]},
    }
    (tmp_path / "nodes" / "n1.yaml").write_text(yaml.safe_dump(node, sort_keys=False))
    return tmp_path


def _codes(diagnostics: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == code]


def _line_of(tmp_path: Path, needle: str) -> int:
    for i, line in enumerate((tmp_path / "cluster.yaml").read_text().splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_defaults_render_one_class_per_profile_and_validate_clean(tmp_path: Path) -> None:
    desired, diagnostics = load_desired(_root(tmp_path, None))
    assert desired is not None
    assert not [d for d in diagnostics if d.code.startswith("MP41")]
    classes = deviceclasses.wanted(desired, dra_nodes={"n1"}, owner_uuids={})
    assert [(c.name, c.extended_resource_name) for c in classes] == [
        ("migplan-mig-1g.18gb", "nvidia.com/mig-1g.18gb"),
        ("migplan-mig-3g.71gb", "nvidia.com/mig-3g.71gb"),
    ]
    assert classes[0].selectors == (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' "
        "&& device.attributes['gpu.nvidia.com'].profile == '1g.18gb'",
    )
    # Not a DRA node: nothing rendered for it.
    assert deviceclasses.wanted(desired, dra_nodes=set(), owner_uuids={}) == ()


def test_disabled_renders_no_profile_class(tmp_path: Path) -> None:
    desired, _ = load_desired(_root(tmp_path, {"enabled": False}))
    assert desired is not None
    assert deviceclasses.wanted(desired, dra_nodes={"n1"}, owner_uuids={}) == ()


def test_a_declared_class_for_a_rendered_extended_name_is_refused_at_its_line(tmp_path: Path) -> None:
    root = _root(tmp_path, {"declared": [{"name": "mine", "extendedResourceName": "nvidia.com/mig-1g.18gb"}]})
    desired, diagnostics = load_desired(root)
    (two,) = _codes(diagnostics, "MP415")
    assert two.file == "cluster.yaml" and two.line == _line_of(tmp_path, "- name: mine")
    assert "migplan-mig-1g.18gb" in two.message and "mine" in two.message
    assert desired is None or any(d.severity.value == "error" for d in diagnostics)


def test_two_declared_classes_for_one_name_are_refused_even_when_rendering_is_off(tmp_path: Path) -> None:
    declared = [
        {"name": "a", "extendedResourceName": "example.com/x"},
        {"name": "b", "extendedResourceName": "example.com/x"},
    ]
    _, diagnostics = load_desired(_root(tmp_path, {"enabled": False, "declared": declared}))
    (two,) = _codes(diagnostics, "MP415")
    assert two.line == _line_of(tmp_path, "- name: b")


def test_owner_class_with_a_profile_extended_name_collides_with_the_rendered_class(tmp_path: Path) -> None:
    owners = [{"owner": "llm", "extendedResourceName": "nvidia.com/mig-3g.71gb"}]
    _, diagnostics = load_desired(_root(tmp_path, {"owners": owners}))
    (two,) = _codes(diagnostics, "MP415")
    assert "migplan-owner-llm" in two.message and two.line == _line_of(tmp_path, "- owner: llm")
    # With rendering off, the owner may take the name.
    _, diagnostics = load_desired(_root(tmp_path / "off", {"enabled": False, "owners": owners}))
    assert not _codes(diagnostics, "MP415")


@pytest.mark.parametrize(
    "selectors",
    [
        [],  # no selector: every device of every driver
        ["device.driver == 'gpu.nvidia.com'"],
        [f"{GPU_PIN} || device.attributes['gpu.nvidia.com'].type == 'mig'"],
        [f"!({GPU_PIN})"],
        ["device.attributes['gpu.nvidia.com'].type == 'gpu' ? true : true"],
        ["device.attributes['gpu.nvidia.com'].type != 'mig'"],  # not a proof migplan can read: refused
    ],
)
def test_nvidia_gpu_is_never_mapped_to_what_could_be_a_mig_device(tmp_path: Path, selectors: list[str]) -> None:
    declared = [{"name": "whole", "extendedResourceName": "nvidia.com/gpu", "selectors": selectors}]
    _, diagnostics = load_desired(_root(tmp_path, {"declared": declared}))
    (bad,) = _codes(diagnostics, "MP416")
    assert bad.file == "cluster.yaml" and bad.line == _line_of(tmp_path, "- name: whole")


@pytest.mark.parametrize("selector", [GPU_PIN, f"({GPU_PIN})", GPU_PIN.replace("'", '"')])
def test_nvidia_gpu_pinned_to_whole_gpus_is_accepted(tmp_path: Path, selector: str) -> None:
    declared = [{"name": "whole", "extendedResourceName": "nvidia.com/gpu", "selectors": [selector]}]
    desired, diagnostics = load_desired(_root(tmp_path, {"declared": declared}))
    assert desired is not None and not _codes(diagnostics, "MP416")
    (whole,) = [c for c in deviceclasses.wanted(desired, dra_nodes=(), owner_uuids={}) if c.name == "whole"]
    assert whole.selectors == (selector,) and whole.purpose == "declared"


def test_an_owner_class_never_serves_nvidia_gpu(tmp_path: Path) -> None:
    owners = [{"owner": "llm", "extendedResourceName": "nvidia.com/gpu"}]
    _, diagnostics = load_desired(_root(tmp_path, {"owners": owners}))
    (bad,) = _codes(diagnostics, "MP416")
    assert bad.line == _line_of(tmp_path, "- owner: llm")


@pytest.mark.parametrize("name", ["kubernetes.io/mig", "requests.example.com/x", "example.com/" + "x" * 64])
def test_extended_names_kubernetes_refuses_are_refused(tmp_path: Path, name: str) -> None:
    _, diagnostics = load_desired(_root(tmp_path, {"declared": [{"name": "c", "extendedResourceName": name}]}))
    (bad,) = _codes(diagnostics, "MP417")
    assert bad.line == _line_of(tmp_path, "- name: c")


def test_a_declared_selector_that_is_not_cel_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    declared = [{"name": "c", "selectors": ["device.driver == 'gpu.nvidia.com'", "device.driver =="]}]
    desired, diagnostics = load_desired(_root(tmp_path, {"declared": declared}))
    (bad,) = _codes(diagnostics, "MP417")
    assert bad.line == _line_of(tmp_path, "- name: c") and "selector 2" in bad.message
    assert desired is None or any(d.severity.value == "error" for d in diagnostics)


def test_malformed_names_are_schema_errors_with_a_line(tmp_path: Path) -> None:
    root = _root(tmp_path, {"declared": [{"name": "Not A Name", "extendedResourceName": "no-slash"}]})
    desired, diagnostics = load_desired(root)
    assert desired is None
    assert all(d.file == "cluster.yaml" and d.line is not None for d in diagnostics if d.severity.value == "error")


def test_owner_without_partitions_warns_and_two_classes_with_one_name_are_refused(tmp_path: Path) -> None:
    owners = [{"owner": "nobody"}, {"owner": "llm", "name": "migplan-mig-3g.71gb"}]
    _, diagnostics = load_desired(_root(tmp_path, {"owners": owners}))
    (none,) = _codes(diagnostics, "MP418")
    assert none.severity.value == "warning" and none.line == _line_of(tmp_path, "- owner: nobody")
    (dup,) = _codes(diagnostics, "MP419")
    assert dup.line == _line_of(tmp_path, "- owner: llm") and "profile 3g.71gb" in dup.message


def test_owner_class_selects_exactly_the_published_uuids_it_is_given(tmp_path: Path) -> None:
    desired, _ = load_desired(_root(tmp_path, {"enabled": False, "owners": [{"owner": "Team A/llm"}]}))
    assert desired is not None
    uuids = {"Team A/llm": ["MIG-bbb", "MIG-aaa", "x' || true || '"]}
    (cls,) = deviceclasses.wanted(desired, dra_nodes={"n1"}, owner_uuids=uuids)
    assert cls.name.startswith("migplan-owner-team-a-llm-") and len(cls.name) <= 253
    assert cls.selectors[0].endswith(".uuid in ['MIG-aaa', 'MIG-bbb']")  # the hostile uuid is never quoted in


def _seven(owner: str) -> list[dict[str, str]]:
    return [{"profile": "1g.18gb", "owner": owner} for _ in range(7)]


def test_an_owner_class_too_long_for_the_api_is_refused(tmp_path: Path) -> None:
    """Each of the owner's partitions is one uuid in the class's selector: past the API's 10 KiB it is refused."""
    most = deviceclasses.max_owner_partitions()
    full = deviceclasses.uuid_selector([f"MIG-{i:036d}" for i in range(most)])
    assert (
        len(full)
        <= deviceclasses.CEL_MAX_LENGTH
        < len(deviceclasses.uuid_selector([f"MIG-{i:036d}" for i in range(most + 1)]))
    )
    (tmp_path / "nodes").mkdir(parents=True)
    doc = {"apiVersion": "migplan/v1", "kind": "Cluster", "metadata": {"name": "t"}}
    doc["spec"] = {"migStrategy": "mixed", "deviceClasses": {"owners": [{"owner": "llm"}]}}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    for n in range(most // 56 + 1):  # 8 GPUs x 7 partitions a node
        gpus = [
            {"index": i, "model": "H200-141GB", "mig": {"enabled": True, "partitions": _seven("llm")}} for i in range(8)
        ]
        node = {"apiVersion": "migplan/v1", "kind": "Node", "metadata": {"name": f"n{n}"}, "spec": {"gpus": gpus}}
        (tmp_path / "nodes" / f"n{n}.yaml").write_text(yaml.safe_dump(node, sort_keys=False))
    _, diagnostics = load_desired(tmp_path)
    found = _codes(diagnostics, "MP417")
    assert len(found) == 1, [str(d) for d in diagnostics]
    long = found[0]
    assert long.file == "cluster.yaml" and long.line == _line_of(tmp_path, "- owner: llm")
    assert f"at most {most} partitions" in long.message


@pytest.mark.parametrize(
    ("profile", "name", "resource"),
    [("1g.18gb+me", "migplan-mig-1g.18gb-me", "nvidia.com/mig-1g.18gb.me"), ("7g.141gb", "migplan-mig-7g.141gb", None)],
)
def test_profile_names_follow_the_device_plugin(profile: str, name: str, resource: str | None) -> None:
    assert deviceclasses.profile_class_name(profile) == name
    assert deviceclasses.extended_resource(profile) == (resource or f"nvidia.com/mig-{profile}")
    assert deviceclasses.is_extended_resource_name(deviceclasses.extended_resource(profile))
