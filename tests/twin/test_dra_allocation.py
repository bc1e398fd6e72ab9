"""The twin scheduler allocates ResourceClaims against a node's ResourceSlices with CEL selectors (cel-python), and
NVIDIA's DRA driver twin prepares them: static MIG devices exist already; under DynamicMIG the device is created
at allocation and survives a plugin restart (the driver knows it), while overlapping placements are never given
twice (shared counters)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.draintwin import GPU0, GPU1_CUT, NODE, write_inventory

from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.draallocator import AllocationError


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(write_inventory(tmp_path / "inv", [GPU0, GPU1_CUT]), tls=False) as tw:
        tw.settle()
        yield tw


def _claim(twin: ClusterTwin, name: str, *selectors: str, count: int = 1) -> None:
    exactly: dict[str, Any] = {"deviceClassName": "mig.nvidia.com", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    twin.store.create(
        "resourceclaims.resource.k8s.io",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        },
        "default",
    )


def _pod(twin: ClusterTwin, name: str, claim: str) -> None:
    twin.store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeName": NODE,
                "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            },
        },
        "default",
    )


PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"


def test_static_claims_get_the_existing_device_their_selector_names_and_no_device_twice(twin: ClusterTwin) -> None:
    twin.dra_driver(NODE).start_plugin()
    _claim(twin, "emb", PROFILE.format("2g.35gb"))
    _pod(twin, "emb-0", "emb")
    (device,) = twin.run_claim_pod(NODE, "default", "emb-0", "emb")
    gpu1 = twin.gpus(NODE)[1]
    (gi,) = [g for g in gpu1.gpu_instances.values() if g.profile.name == "2g.35gb"]
    assert device == f"gpu-{gpu1.minor}-mig-2g35gb-{gi.profile.id}-{gi.start}"
    status = twin.store.get("resourceclaims.resource.k8s.io", "emb", "default")["status"]
    assert status["reservedFor"][0]["name"] == "emb-0"
    assert all(ci.holder == "default/emb-0" for ci in gi.compute_instances.values())
    _claim(twin, "emb2", PROFILE.format("2g.35gb"))
    _pod(twin, "emb-1", "emb2")
    with pytest.raises(AllocationError, match="found 0 of 1"):  # the only 2g.35gb is taken
        twin.run_claim_pod(NODE, "default", "emb-1", "emb2")
    assert "status" not in twin.store.get("resourceclaims.resource.k8s.io", "emb2", "default") or not twin.store.get(
        "resourceclaims.resource.k8s.io", "emb2", "default"
    )["status"].get("allocation")


@pytest.mark.parametrize(
    ("selector", "error"),
    [
        ("device.attributes['gpu.nvidia.com'].nosuch == 'x'", "CEL runtime error"),  # unknown field: abort
        ("device.attributes['gpu.nvidia.com'].profile", "not a boolean"),
        ("device.driver ==", "does not compile"),
    ],
)
def test_a_selector_that_errs_aborts_the_allocation(twin: ClusterTwin, selector: str, error: str) -> None:
    twin.dra_driver(NODE).start_plugin()
    _claim(twin, "bad", selector)
    _pod(twin, "bad-0", "bad")
    with pytest.raises(AllocationError, match=error):
        twin.run_claim_pod(NODE, "default", "bad-0", "bad")


def test_an_unknown_domain_is_an_empty_map(twin: ClusterTwin) -> None:
    twin.dra_driver(NODE).start_plugin()
    _claim(twin, "any", "device.attributes['other.example.com'].size() == 0", PROFILE.format("1g.18gb"))
    _pod(twin, "any-0", "any")
    (device,) = twin.run_claim_pod(NODE, "default", "any-0", "any")
    assert "-mig-1g18gb-" in device


def test_dynamic_mig_creates_the_device_keeps_it_across_a_restart_and_never_overlaps(twin: ClusterTwin) -> None:
    driver = twin.dra_driver(NODE, dynamic_mig=True)
    driver.start_plugin()
    assert all(not g.gpu_instances for g in twin.gpus(NODE))
    on_gpu1 = f"device.attributes['gpu.nvidia.com'].parentUUID == '{twin.gpus(NODE)[1].uuid}'"
    _claim(twin, "big", PROFILE.format("3g.71gb"), on_gpu1)
    _pod(twin, "big-0", "big")
    (first,) = twin.run_claim_pod(NODE, "default", "big-0", "big")
    _claim(twin, "big2", PROFILE.format("3g.71gb"), on_gpu1)
    _pod(twin, "big-1", "big2")
    (second,) = twin.run_claim_pod(NODE, "default", "big-1", "big2")
    starts = sorted(int(d.rsplit("-", 1)[1]) for d in (first, second))
    assert starts == [0, 4]  # the second 3g.71gb never overlaps the first's memory slices
    gpu1 = twin.gpus(NODE)[1]
    assert sorted(gi.start for gi in gpu1.gpu_instances.values()) == [0, 4]
    driver.start_plugin()  # a restart destroys only what the driver did not create
    assert sorted(gi.start for gi in gpu1.gpu_instances.values()) == [0, 4]
    _claim(twin, "big3", PROFILE.format("3g.71gb"), on_gpu1)
    _pod(twin, "big-2", "big3")
    with pytest.raises(AllocationError):
        twin.run_claim_pod(NODE, "default", "big-2", "big3")
