"""Who owns spec.unschedulable, read from metadata.managedFields (issue 10 item 9).

The entries are what a real server writes (FieldsV1, structured-merge-diff encoding); hostile ones are skipped,
never trusted for "migplan's", and never raise.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.kube.observe import node_from_json


def _node(managed: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "n1", "annotations": {"migplan.io/cordoned": "true"}}
    if managed is not ...:
        meta["managedFields"] = managed
    return {"metadata": meta, "spec": {"unschedulable": True}}


def _entry(manager: str, fields: Any, **extra: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


MIGPLANS = {"f:metadata": {"f:annotations": {".": {}, "f:migplan.io/cordoned": {}}}, "f:spec": {"f:unschedulable": {}}}


@pytest.mark.parametrize(
    ("managed", "owned"),
    [
        (..., None),  # no managedFields at all: unknown, today's behaviour
        ([], None),
        ([_entry("migplan", MIGPLANS)], True),
        # kubectl uncordon then kubectl cordon: the field is kubectl's, migplan keeps only its annotation
        (
            [
                _entry("kubectl", {"f:spec": {"f:unschedulable": {}}}),
                _entry("migplan", {"f:metadata": {"f:annotations": {".": {}, "f:migplan.io/cordoned": {}}}}),
            ],
            False,
        ),
        ([_entry("migplan", MIGPLANS, subresource="status")], False),  # a status write cannot own spec
        # someone else applied the same value: the field is shared, so the cordon is not migplan's alone
        (
            [
                _entry("migplan", MIGPLANS),
                {**_entry("gitops", {"f:spec": {"f:unschedulable": {}}}), "operation": "Apply"},
            ],
            False,
        ),
        ([_entry("someone", MIGPLANS)], False),
        ("not a list", None),
        ([None, 3, "x", _entry("migplan", "not an object"), _entry("migplan", {"f:spec": []})], False),
        ([_entry("migplan", {"f:spec": {"f:unschedulable": "yes"}})], False),
    ],
)
def test_unschedulable_ownership(managed: Any, owned: bool | None) -> None:
    node = node_from_json(_node(managed))
    assert node.unschedulable is True
    assert node.unschedulable_owned_by_migplan is owned
    assert not node.malformed
