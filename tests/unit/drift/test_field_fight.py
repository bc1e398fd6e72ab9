"""When another field manager's value on a ClusterPolicy field migplan set is a fight (MP590), worst inputs included."""

from __future__ import annotations

import json

import pytest

from reconciler.logic.drift import fieldfight
from reconciler.model.observed import ClusterPolicyState


def _cp(
    record: dict[str, tuple[str | None, list[str]]] | None, owners: dict[str, tuple[str, ...]]
) -> ClusterPolicyState:
    """A ClusterPolicy whose record says {field: (value migplan set, over whose value)}."""
    doc = {k: {"value": v, "over": over} for k, (v, over) in (record or {}).items()}
    annotations = {fieldfight.FIELDS_SET_ANNOTATION: json.dumps(doc)} if record is not None else {}
    return ClusterPolicyState(
        name="cluster-policy",
        mig_strategy="single",
        mig_manager_config_name=None,
        device_plugin_config_name=None,
        annotations=annotations,
        field_owners=owners,
    )


def test_first_difference_is_patched_not_a_fight() -> None:
    # Helm owns the field since the install, but migplan never set it: it patches once.
    assert fieldfight.fight(_cp(None, {"spec.mig.strategy": ("helm",)}), "spec.mig.strategy", "mixed", "single") is None


def test_a_manager_whose_value_migplan_overwrote_putting_it_back_is_a_fight() -> None:
    cp = _cp({"spec.mig.strategy": ("mixed", ["argocd-controller"])}, {"spec.mig.strategy": ("argocd-controller",)})
    found = fieldfight.fight(cp, "spec.mig.strategy", "mixed", "single")
    assert found is not None and found.managers == ("argocd-controller",)
    text = found.message("cluster-policy")
    assert "argocd-controller" in text and "spec.mig.strategy" in text


def test_a_manager_not_overwritten_yet_gets_its_one_repair() -> None:
    cp = _cp({"spec.mig.strategy": ("mixed", ["helm"])}, {"spec.mig.strategy": ("kubectl-edit",)})
    assert fieldfight.fight(cp, "spec.mig.strategy", "mixed", "single") is None
    # The repair records kubectl-edit beside helm: the next revert by either is the fight.
    again = _cp({"spec.mig.strategy": ("mixed", ["helm"])}, {"spec.mig.strategy": ("kubectl-edit",)})
    doc = json.loads(fieldfight.record_text(again, {"spec.mig.strategy": "mixed"}))
    assert doc == {"spec.mig.strategy": {"value": "mixed", "over": ["helm", "kubectl-edit"]}}


def test_no_other_owner_or_a_new_desired_value_ends_the_fight() -> None:
    mine = _cp({"spec.mig.strategy": ("mixed", ["helm"])}, {"spec.mig.strategy": ("migplan",)})
    assert fieldfight.fight(mine, "spec.mig.strategy", "mixed", "single") is None
    nobody = _cp({"spec.mig.strategy": ("mixed", ["helm"])}, {})
    assert fieldfight.fight(nobody, "spec.mig.strategy", "mixed", "single") is None
    # The inventory now asks for single: migplan has not set that value yet, so it patches once more, and the
    # managers it overwrote for another value start over.
    helm = _cp({"spec.mig.strategy": ("mixed", ["helm", "twin"])}, {"spec.mig.strategy": ("helm",)})
    assert fieldfight.fight(helm, "spec.mig.strategy", "single", "mixed") is None
    doc = json.loads(fieldfight.record_text(helm, {"spec.mig.strategy": "single"}))
    assert doc["spec.mig.strategy"] == {"value": "single", "over": ["helm"]}


def test_a_removed_field_put_back_is_a_fight() -> None:
    cp = _cp({"spec.devicePlugin.config": (None, ["helm"])}, {"spec.devicePlugin.config": ("helm",)})
    found = fieldfight.fight(cp, "spec.devicePlugin.config", None, "old-plugin-config")
    assert found is not None and "(unset)" in found.message("cp")


def test_the_older_strategy_annotation_counts_as_set_over_nobody() -> None:
    cp = ClusterPolicyState(
        name="cp",
        mig_strategy="single",
        mig_manager_config_name=None,
        device_plugin_config_name=None,
        annotations={"migplan.io/mig-strategy-set": "mixed"},
        field_owners={"spec.mig.strategy": ("helm",)},
    )
    assert fieldfight.recorded(cp.annotations) == {"spec.mig.strategy": fieldfight.Record("mixed")}
    assert fieldfight.fight(cp, "spec.mig.strategy", "mixed", "single") is None


def test_the_managers_kept_are_bounded() -> None:
    owners = tuple(f"m{i}" for i in range(20))
    cp = _cp({"spec.mig.strategy": ("mixed", [f"x{i}" for i in range(20)])}, {"spec.mig.strategy": owners})
    doc = json.loads(fieldfight.record_text(cp, {"spec.mig.strategy": "mixed"}))
    assert len(doc["spec.mig.strategy"]["over"]) == 8


@pytest.mark.parametrize(
    "raw",
    [
        "{",
        "[]",
        '"mixed"',
        json.dumps({"spec.mig.strategy": 3}),
        json.dumps({"spec.mig.strategy": {"value": 3, "over": ["helm"]}}),
        json.dumps({"spec.mig.strategy": {"value": "mixed", "over": "helm"}}),
        json.dumps({"spec.mig.strategy": {"value": "mixed", "over": [1]}}),
        json.dumps({"spec.other": {"value": "mixed", "over": ["helm"]}}),
        json.dumps({"spec.mig.strategy": {"value": "mixed", "over": ["helm"]}, "pad": "x" * 9000}),
    ],
)
def test_a_malformed_record_counts_as_nothing_set(raw: str) -> None:
    cp = ClusterPolicyState(
        name="cp",
        mig_strategy="single",
        mig_manager_config_name=None,
        device_plugin_config_name=None,
        annotations={fieldfight.FIELDS_SET_ANNOTATION: raw},
        field_owners={"spec.mig.strategy": ("helm",)},
    )
    assert fieldfight.recorded(cp.annotations) == {}
    assert fieldfight.fight(cp, "spec.mig.strategy", "mixed", "single") is None


def test_the_record_keeps_earlier_fields() -> None:
    cp = _cp({"spec.devicePlugin.config": (None, ["helm"])}, {"spec.mig.strategy": ("twin",)})
    merged = json.loads(fieldfight.record_text(cp, {"spec.mig.strategy": "mixed"}))
    assert merged == {
        "spec.devicePlugin.config": {"value": None, "over": ["helm"]},
        "spec.mig.strategy": {"value": "mixed", "over": ["twin"]},
    }
