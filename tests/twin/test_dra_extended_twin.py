"""The twin scheduler's DRA extended-resource path (reconciler/twin/draextended.py), on its own: which class maps a
name (explicit, implicit, the newer of two), the special claim's requests and mappings as kube-scheduler names
them, and the API server's validation of `spec.extendedResourceName`."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.twin.apiserver.errors import ApiError
from reconciler.twin.apiserver.store import Store
from reconciler.twin.draextended import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    NotFit,
    class_mapping,
    dra_mapped,
    special_claim,
)


def _class(name: str, ext: str | None, created: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": "true"}}]}
    if ext is not None:
        spec["extendedResourceName"] = ext
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def test_mapping_explicit_implicit_and_the_newer_of_two() -> None:
    mapping = class_mapping(
        [
            _class("new", "nvidia.com/mig-1g.18gb", "2026-12-02T00:00:00Z"),
            _class("old", "nvidia.com/mig-1g.18gb", "2026-12-01T00:00:00Z"),
            _class("plain", None, "2026-12-01T00:00:00Z"),
        ]
    )
    assert mapping["nvidia.com/mig-1g.18gb"] == "new"
    assert mapping["deviceclass.resource.kubernetes.io/plain"] == "plain"
    assert mapping["deviceclass.resource.kubernetes.io/old"] == "old"


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}, "spec": spec}


def _c(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": requests, "limits": requests}}


MAPPING = {"nvidia.com/mig-1g.18gb": "migplan-mig-1g.18gb", "nvidia.com/mig-3g.71gb": "migplan-mig-3g.71gb"}


def test_special_claim_requests_are_named_by_container_and_sorted_resource_index() -> None:
    pod = _pod(
        [
            _c("a", {"cpu": "1", "nvidia.com/mig-3g.71gb": "1"}),
            _c("b", {"nvidia.com/mig-1g.18gb": "2", "nvidia.com/mig-3g.71gb": "1"}),
        ],
        init=[_c("setup", {"cpu": "1"})],
    )
    made = special_claim(pod, {"cpu": "8"}, MAPPING)
    assert made is not None
    claim, mappings = made
    assert claim["metadata"]["generateName"] == "p-extended-resources-"
    assert claim["metadata"]["annotations"] == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1", "controller": True}
    ]
    # container index over initContainers + containers; request index among the container's sorted names
    assert [
        (r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"])
        for r in claim["spec"]["devices"]["requests"]
    ] == [
        ("container-1-request-1", "migplan-mig-3g.71gb", 1),
        ("container-2-request-0", "migplan-mig-1g.18gb", 2),
        ("container-2-request-1", "migplan-mig-3g.71gb", 1),
    ]
    assert {(m["containerName"], m["resourceName"]) for m in mappings} == {
        ("a", "nvidia.com/mig-3g.71gb"),
        ("b", "nvidia.com/mig-1g.18gb"),
        ("b", "nvidia.com/mig-3g.71gb"),
    }
    status = {"status": {"extendedResourceClaimStatus": {"requestMappings": mappings}}}
    assert dra_mapped(status) == {
        ("a", "nvidia.com/mig-3g.71gb"),
        ("b", "nvidia.com/mig-1g.18gb"),
        ("b", "nvidia.com/mig-3g.71gb"),
    }


def test_the_device_plugin_serves_what_a_node_advertises_and_an_unknown_resource_does_not_fit() -> None:
    pod = _pod([_c("a", {"nvidia.com/mig-1g.18gb": "1"})])
    assert special_claim(pod, {"nvidia.com/mig-1g.18gb": "2"}, MAPPING) is None
    with pytest.raises(NotFit):
        special_claim(_pod([_c("a", {"example.com/fpga": "1"})]), {}, MAPPING)


@pytest.mark.parametrize("bad", ["kubernetes.io/x", "no-slash", "requests.example.com/x", 7])
def test_the_api_server_refuses_an_invalid_extended_resource_name(bad: object) -> None:
    store = Store()
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "c"},
        "spec": {"extendedResourceName": bad},
    }
    with pytest.raises(ApiError) as err:
        store.create("deviceclasses.resource.k8s.io", body)
    assert err.value.code == 422 and "spec.extendedResourceName" in str(err.value)
    body["spec"] = {"extendedResourceName": "nvidia.com/mig-1g.18gb"}
    assert (
        store.create("deviceclasses.resource.k8s.io", body)["spec"]["extendedResourceName"] == "nvidia.com/mig-1g.18gb"
    )
