"""Whatever shape a DRA manifest takes, check-workloads answers with registered findings and never raises: values
of every JSON type, and CEL text of every kind, wherever a claim, a class or a pod's claims are read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.workloads import dracel, workloads
from reconciler.logic.workloads.manifests import read_manifests
from reconciler.model.codes import severity
from reconciler.model.inventory import DesiredState

_DESIRED: list[DesiredState] = []
# cel-python's Environment raises the process's recursion limit (to 2500) when it is built: build it before Hypothesis
# watches the limit.
dracel.compile_selector("true")


def desired() -> DesiredState:
    if not _DESIRED:
        result = validate_inventory(read_inventory_dir(resources.inventory_dir()), catalog=load_catalog())
        assert result.desired is not None
        _DESIRED.append(result.desired)
    return _DESIRED[0]


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=20),
    st.sampled_from(["mig.nvidia.com", "gpu.nvidia.com", "All", "ExactCount", "gpu.nvidia.com/parentUUID", "g"]),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
CEL = st.one_of(
    st.text(max_size=60),
    st.sampled_from([
        "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'", "device.capacity['gpu.nvidia.com'].memory",
        "has(device.attributes['gpu.nvidia.com'].uuid)", "device.attributes['gpu.nvidia.com'].uuid > 1",
        "quantity('x') == quantity('1')", "semver('1.2.3').major() == 1", "1 / 0 == 1", "'a'.matches('(')",
        "[1].all(x, x / 0 == 1)", "size(device.attributes) > 0", "{'a': 1}['b'] == 1", "9223372036854775807 + 1 > 0",
    ]),
)  # fmt: skip


def request(name: Any, cls: Any, expression: Any, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {"deviceClassName": cls, "selectors": [{"cel": {"expression": expression}}], **extra},
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.one_of(st.just("g"), VALUES), cls=st.one_of(st.just("mig.nvidia.com"), VALUES), expression=CEL,
    extra=st.dictionaries(st.sampled_from(["count", "allocationMode", "selectors", "firstAvailable"]), VALUES,
                          max_size=2),
    constraints=VALUES, pod_claims=st.one_of(VALUES, st.just([{"name": "g", "resourceClaimTemplateName": "t"}])),
    replicas=st.one_of(st.integers(min_value=0, max_value=10**6), VALUES),
)  # fmt: skip
def test_any_shape_is_findings_never_an_exception(
    name: Any, cls: Any, expression: Any, extra: dict[str, Any], constraints: Any, pod_claims: Any, replicas: Any
) -> None:
    devices = {"requests": [request(name, cls, expression, extra)], "constraints": constraints}
    pod_spec = {"containers": [{"name": "c"}], "resourceClaims": pod_claims}
    docs = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "c"},
         "spec": {"selectors": [{"cel": {"expression": expression}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
         "spec": {"spec": {"devices": devices}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
         "spec": {"replicas": replicas, "template": {"spec": pod_spec}}},
    ]  # fmt: skip
    manifests, read = read_manifests(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}).encode(), file="f")
    found, _ = workloads.check_workloads(
        manifests, desired=desired(), nodes=workloads.plan_nodes(desired(), load_catalog())
    )
    for d in read + found:
        assert d.severity.value == severity(d.code).value
        assert "\n" not in d.message


@pytest.mark.parametrize("expression", ["device.attributes['gpu.nvidia.com'].profile == '" + "x" * 9000 + "'"])
def test_a_long_string_in_a_selector_is_judged(expression: str) -> None:
    doc = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
           "spec": {"spec": {"devices": {"requests": [request("g", "mig.nvidia.com", expression, {})]}}}}  # fmt: skip
    claims = [{"name": "g", "resourceClaimTemplateName": "t"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c"}], "resourceClaims": claims}}  # fmt: skip
    manifests, _ = read_manifests(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [doc, pod]}).encode(), file="f"
    )
    found, _ = workloads.check_workloads(
        manifests, desired=desired(), nodes=workloads.plan_nodes(desired(), load_catalog())
    )
    assert [d.code for d in found] == ["MP632"] and len(found[0].message) < 700
