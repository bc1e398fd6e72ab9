"""The DeviceClass writes of a cycle (issue 30 item 2): created for profiles planned on DRA-static nodes, patched
when they differ, never touching a class migplan did not create (MP596/MP597 say so), deleted only when migplan
created it and the plan no longer has the profile; owner classes list the published uuids of the owner's partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.commands.reconcile import load_desired
from reconciler.logic.drift import draclasses
from reconciler.logic.planning import deviceclasses
from reconciler.model.dra import DraDevice, NodeDra, ObservedDeviceClass
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import ObservedState
from reconciler.model.plans import Action, Kind

PARTS = [{"profile": "3g.71gb", "placement": 4, "owner": "llm"}, {"profile": "1g.18gb", "placement": 0}]
PROFILE_1G = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' "
    "&& device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"
)


def _desired(tmp_path: Path, device_classes: dict[str, Any] | None = None, parts: Any = None) -> DesiredState:
    (tmp_path / "nodes").mkdir(parents=True)
    spec: dict[str, Any] = {"migStrategy": "mixed"}
    if device_classes is not None:
        spec["deviceClasses"] = device_classes
    doc = {"apiVersion": "migplan/v1", "kind": "Cluster", "metadata": {"name": "t"}, "spec": spec}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(doc))
    mig = {"enabled": True, "partitions": parts if parts is not None else PARTS}
    node = {
        "apiVersion": "migplan/v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "spec": {"gpus": [{"index": 0, "model": "H200-141GB", "mig": mig}]},
    }
    (tmp_path / "nodes" / "n1.yaml").write_text(yaml.safe_dump(node))
    desired, diagnostics = load_desired(tmp_path)
    assert desired is not None, diagnostics
    return desired


PUBLISHED = NodeDra(
    "n1",
    devices=(
        DraDevice("gpu-0-mig-3g71gb-9-4", kind="mig", profile="3g.71gb", uuid="MIG-llm-1"),
        DraDevice("gpu-0-mig-1g18gb-19-0", kind="mig", profile="1g.18gb", uuid="MIG-free-1"),
    ),
)


def _observed(classes: tuple[ObservedDeviceClass, ...] | None, *, dra: bool = True) -> ObservedState:
    return ObservedState(nodes={}, dra={"n1": PUBLISHED} if dra else {}, device_classes=classes)


def _by_subject(desired: DesiredState, observed: ObservedState) -> dict[str, Any]:
    return {c.subject: c for c in deviceclasses.changes(desired, observed)}


def test_profiles_on_a_dra_node_get_a_class_created_with_label_and_extended_name(tmp_path: Path) -> None:
    changes = _by_subject(_desired(tmp_path), _observed(()))
    assert sorted(changes) == ["deviceclass/migplan-mig-1g.18gb", "deviceclass/migplan-mig-3g.71gb"]
    one = changes["deviceclass/migplan-mig-1g.18gb"]
    assert one.action is Action.CREATE and one.kind is Kind.DEVICE_CLASS
    assert one.patch["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "migplan"}
    assert one.patch["spec"] == {
        "selectors": [{"cel": {"expression": PROFILE_1G}}],
        "extendedResourceName": "nvidia.com/mig-1g.18gb",
    }


def test_nothing_without_a_dra_node_or_without_a_class_list(tmp_path: Path) -> None:
    desired = _desired(tmp_path)
    assert deviceclasses.changes(desired, _observed((), dra=False)) == []
    assert deviceclasses.changes(desired, _observed(None)) == []


def _ours(name: str, ext: str | None, selectors: tuple[str, ...], purpose: str, rv: str = "7") -> ObservedDeviceClass:
    return ObservedDeviceClass(name, ext, selectors, managed=True, purpose=purpose, resource_version=rv)


def test_in_step_classes_are_left_alone_and_a_changed_one_is_patched_with_its_resource_version(tmp_path: Path) -> None:
    desired = _desired(tmp_path)
    wanted = {c.subject: c.patch for c in deviceclasses.changes(desired, _observed(()))}
    three = wanted["deviceclass/migplan-mig-3g.71gb"]["spec"]["selectors"][0]["cel"]["expression"]
    classes = (
        _ours("migplan-mig-1g.18gb", "nvidia.com/mig-1g.18gb", (PROFILE_1G,), "profile 1g.18gb"),
        _ours("migplan-mig-3g.71gb", "nvidia.com/mig-3g.71gb", (three + " && true",), "profile 3g.71gb", rv="42"),
    )
    (change,) = deviceclasses.changes(desired, _observed(classes))
    assert change.subject == "deviceclass/migplan-mig-3g.71gb" and change.action is Action.CONFIGURE
    assert change.patch["metadata"]["resourceVersion"] == "42"
    assert change.patch["spec"]["selectors"] == [{"cel": {"expression": three}}]


def test_a_class_migplan_did_not_create_is_never_written_and_is_reported(tmp_path: Path) -> None:
    desired = _desired(tmp_path)
    theirs = ObservedDeviceClass("migplan-mig-1g.18gb", "nvidia.com/mig-1g.18gb", ("true",), managed=False)
    other = ObservedDeviceClass("team-mig", "nvidia.com/mig-3g.71gb", ("true",), managed=False)
    changes = _by_subject(desired, _observed((theirs, other)))
    assert "deviceclass/migplan-mig-1g.18gb" not in changes  # neither patched nor deleted
    assert "deviceclass/team-mig" not in changes
    found = {f.code: f for f in draclasses.findings(desired, _observed((theirs, other)))}
    assert set(found) == {"MP596", "MP597"}
    assert "migplan-mig-1g.18gb" in found["MP596"].message and found["MP596"].node is None
    assert "team-mig" in found["MP597"].message and "migplan-mig-3g.71gb" in found["MP597"].message


def test_only_migplans_classes_the_plan_dropped_are_retired_never_deleted(tmp_path: Path) -> None:
    desired = _desired(tmp_path, parts=[{"profile": "3g.71gb", "placement": 4}])
    stale = _ours("migplan-mig-1g.18gb", "nvidia.com/mig-1g.18gb", (PROFILE_1G,), "profile 1g.18gb", rv="9")
    foreign = ObservedDeviceClass("mig.nvidia.com", None, ("true",), managed=False)
    changes = _by_subject(desired, _observed((stale, foreign)))
    gone = changes["deviceclass/migplan-mig-1g.18gb"]
    assert gone.action is Action.CONFIGURE and gone.patch["metadata"]["resourceVersion"] == "9"
    assert gone.patch["spec"] == {"selectors": [{"cel": {"expression": "false"}}], "extendedResourceName": None}
    assert "deviceclass/mig.nvidia.com" not in changes
    assert all(c.action is not Action.DELETE for c in changes.values())
    retired = _ours("migplan-mig-1g.18gb", None, ("false",), "retired")
    assert "deviceclass/migplan-mig-1g.18gb" not in _by_subject(desired, _observed((retired,)))


def test_a_profile_class_is_kept_while_the_nodes_slices_are_republished(tmp_path: Path) -> None:
    """The driver's plugin restart after a re-cut empties the node's slices for a moment: no delete then."""
    desired = _desired(tmp_path)
    ours = _ours("migplan-mig-1g.18gb", "nvidia.com/mig-1g.18gb", (PROFILE_1G,), "profile 1g.18gb")
    assert deviceclasses.changes(desired, _observed((ours,), dra=False)) == []


def test_owner_class_lists_the_uuids_of_the_owners_published_partitions(tmp_path: Path) -> None:
    desired = _desired(tmp_path, {"enabled": False, "owners": [{"owner": "llm", "extendedResourceName": "x.io/llm"}]})
    (create,) = deviceclasses.changes(desired, _observed(()))
    assert create.subject == "deviceclass/migplan-owner-llm"
    expression = create.patch["spec"]["selectors"][0]["cel"]["expression"]
    assert expression.endswith(".uuid in ['MIG-llm-1']") and "MIG-free-1" not in expression
    assert create.patch["spec"]["extendedResourceName"] == "x.io/llm"
