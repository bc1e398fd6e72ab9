"""The owners of the ClusterPolicy fields migplan patches, read from metadata.managedFields (worst inputs included)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.kube.observe import cluster_policy_from_json, field_owners
from reconciler.model.observed import CLUSTER_POLICY_FIELDS

STRATEGY_FIELDS = {"f:spec": {"f:mig": {".": {}, "f:strategy": {}}}}
CONFIG_FIELDS = {"f:spec": {"f:devicePlugin": {"f:config": {".": {}, "f:name": {}}}}}


def _entry(manager: str, fields: object, **extra: Any) -> dict[str, Any]:
    return {"manager": manager, "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": fields, **extra}


def test_owners_are_read_per_field_and_a_field_under_counts() -> None:
    meta = {
        "managedFields": [
            _entry("helm", STRATEGY_FIELDS),
            _entry("argocd-controller", CONFIG_FIELDS),
            _entry("migplan", {"f:spec": {"f:mig": {"f:strategy": {}}}}),
            _entry("gpu-operator", {"f:status": {"f:state": {}}}, subresource="status"),
        ]
    }
    owners = field_owners(meta, CLUSTER_POLICY_FIELDS)
    assert owners == {"spec.mig.strategy": ("helm", "migplan"), "spec.devicePlugin.config": ("argocd-controller",)}


@pytest.mark.parametrize(
    "managed",
    [
        None,
        "not a list",
        [None, 3, "x", {}],
        [_entry("", STRATEGY_FIELDS)],
        [_entry("helm", "f:spec")],
        [_entry("helm", {"f:spec": "f:mig"})],
        [_entry("helm", {"f:spec": {"f:mig": {"f:strategy": None}}})],
        [{"manager": 7, "fieldsV1": STRATEGY_FIELDS}],
    ],
)
def test_entries_no_server_writes_name_no_owner(managed: object) -> None:
    assert field_owners({"managedFields": managed}, CLUSTER_POLICY_FIELDS) == {}


def test_a_hostile_manager_name_is_cut() -> None:
    owners = field_owners({"managedFields": [_entry("h" * 10_000, STRATEGY_FIELDS)]}, CLUSTER_POLICY_FIELDS)
    assert owners["spec.mig.strategy"] == ("h" * 128,)


def test_the_cluster_policy_carries_its_owners() -> None:
    obj = {"metadata": {"name": "cp", "managedFields": [_entry("helm", STRATEGY_FIELDS)]}, "spec": {}}
    assert cluster_policy_from_json(obj).field_owners == {"spec.mig.strategy": ("helm",)}
