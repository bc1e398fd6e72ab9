"""check-workloads' view of the devices the plan publishes agrees with the cluster twin's: NVIDIA's DRA driver twin
publishes, for the example plan, exactly the devices check-workloads allocates claims on, and the twin scheduler's
allocator (written from Kubernetes' structured allocator on its own) fits as many one-device claims per node as
check-workloads counts pods there."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.workloads import draplandevices, workloads
from reconciler.logic.workloads.manifests import read_manifests
from reconciler.model.inventory import DesiredState
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.draallocator import AllocationError

NODES = ("gpu-h200-01", "gpu-h100-01")
A = "device.attributes['gpu.nvidia.com']"
SELECTORS = (
    f"{A}.profile == '1g.18gb'",
    f"{A}.profile.endsWith('gb') && {A}.type == 'mig'",
    f"{A}.productName == 'NVIDIA H100' || {A}.profile == '3g.71gb'",
    "'memorySlice4' in device.capacity['gpu.nvidia.com']",
    f"{A}.profile.matches('^[34]g')",
)


@pytest.fixture(scope="module")
def desired() -> DesiredState:
    result = validate_inventory(read_inventory_dir(resources.inventory_dir()), catalog=load_catalog())
    assert result.desired is not None and result.valid
    return result.desired


@pytest.fixture(scope="module")
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(resources.inventory_dir(), tls=False) as tw:
        tw.settle()
        for node in NODES:
            tw.dra_driver(node).start_plugin()
        yield tw


def _published(twin: ClusterTwin, node: str) -> list[dict[str, Any]]:
    return twin.store.list("resourceslices.resource.k8s.io", field_selector=f"spec.nodeName={node}")


@pytest.mark.parametrize("node", NODES)
def test_the_planned_devices_are_the_ones_the_driver_twin_publishes(
    twin: ClusterTwin, desired: DesiredState, node: str
) -> None:
    published = {d["name"] for s in _published(twin, node) for d in s["spec"]["devices"]}
    planned = {d.name for d in draplandevices.planned_devices(desired.nodes[node], load_catalog())}
    assert planned == published


def _twin_fits(twin: ClusterTwin, node: str, expression: str) -> int:
    from reconciler.twin.draallocator import allocate

    classes = {c["metadata"]["name"]: c for c in twin.store.list("deviceclasses.resource.k8s.io")}
    claim = {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "g",
                        "exactly": {
                            "deviceClassName": "mig.nvidia.com",
                            "selectors": [{"cel": {"expression": expression}}],
                        },
                    }
                ]
            }
        }
    }
    taken: list[tuple[str, str, str]] = []
    while True:
        try:
            results = allocate(claim, node=node, slices=_published(twin, node), classes=classes, allocated=taken)
        except AllocationError:
            return len(taken)
        taken.extend((r["driver"], r["pool"], r["device"]) for r in results)


@pytest.mark.parametrize("expression", SELECTORS)
@pytest.mark.parametrize("node", NODES)
def test_claims_per_node_agree_with_the_twin_scheduler(
    twin: ClusterTwin, desired: DesiredState, node: str, expression: str
) -> None:
    manifests, _ = read_manifests(
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec:\n  spec:\n"
            "    devices:\n      requests:\n        - name: g\n          exactly:\n"
            "            deviceClassName: mig.nvidia.com\n"
            f'            selectors: [{{cel: {{expression: "{expression}"}}}}]\n'
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 100\n"
            f"  template:\n    spec:\n      nodeSelector: {{kubernetes.io/hostname: {node}}}\n"
            "      containers: [{name: c}]\n      resourceClaims: [{name: g, resourceClaimTemplateName: t}]\n"
        ).encode(),
        file="m.yaml",
    )
    _, summaries = workloads.check_workloads(
        manifests, desired=desired, nodes=workloads.plan_nodes(desired, load_catalog())
    )
    (summary,) = summaries
    assert summary["claims"]["planFits"] == _twin_fits(twin, node, expression)
