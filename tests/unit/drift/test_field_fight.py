"""When another field manager's value on a ClusterPolicy field migplan set is a fight (MP590), worst inputs included."""

from __future__ import annotations

import json

import pytest

from reconciler.logic.drift import fieldfight
from reconciler.model.observed import ClusterPolicyState


def _cp(record: dict[str, str | None] | None, owners: dict[str, tuple[str, ...]]) -> ClusterPolicyState:
    annotations = {fieldfight.FIELDS_SET_ANNOTATION: json.dumps(record)} if record is not None else {}
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


def test_set_once_then_put_back_by_another_manager_is_a_fight() -> None:
    cp = _cp({"spec.mig.strategy": "mixed"}, {"spec.mig.strategy": ("argocd-controller", "migplan")})
    found = fieldfight.fight(cp, "spec.mig.strategy", "mixed", "single")
    assert found is not None and found.managers == ("argocd-controller",)
    text = found.message("cluster-policy")
    assert "argocd-controller" in text and "spec.mig.strategy" in text and "migplan" not in found.managers


def test_no_other_owner_or_a_new_desired_value_ends_the_fight() -> None:
    mine = _cp({"spec.mig.strategy": "mixed"}, {"spec.mig.strategy": ("migplan",)})
    assert fieldfight.fight(mine, "spec.mig.strategy", "mixed", "single") is None
    nobody = _cp({"spec.mig.strategy": "mixed"}, {})
    assert fieldfight.fight(nobody, "spec.mig.strategy", "mixed", "single") is None
    # The inventory now asks for single: migplan has not set that value yet, so it patches once more.
    helm = _cp({"spec.mig.strategy": "mixed"}, {"spec.mig.strategy": ("helm",)})
    assert fieldfight.fight(helm, "spec.mig.strategy", "single", "mixed") is None


def test_a_removed_field_put_back_is_a_fight() -> None:
    cp = _cp({"spec.devicePlugin.config": None}, {"spec.devicePlugin.config": ("helm",)})
    found = fieldfight.fight(cp, "spec.devicePlugin.config", None, "old-plugin-config")
    assert found is not None and "(unset)" in found.message("cp")


@pytest.mark.parametrize(
    "raw",
    ["{", "[]", '"mixed"', json.dumps({"spec.mig.strategy": 3}), json.dumps({"spec.other": "x"}), "x" * 5000],
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
    cp = _cp({"spec.devicePlugin.config": None}, {})
    merged = json.loads(fieldfight.record_text(cp, {"spec.mig.strategy": "mixed"}))
    assert merged == {"spec.devicePlugin.config": None, "spec.mig.strategy": "mixed"}
