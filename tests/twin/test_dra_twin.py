"""The twin's DRA side (issue 27 item 3): resource.k8s.io/v1 served through the official client with the API
server's validation, and NVIDIA's DRA driver twin publishing a node's ResourceSlice when its plugin starts (and
only then), with DynamicMIG's destruction of the MIG devices it did not create."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.draintwin import GPU0, GPU1_CUT, NODE, write_inventory
from kubernetes import client

from reconciler.controller.loop import kube_configuration
from reconciler.twin.apiserver.errors import ApiError
from reconciler.twin.cluster import ClusterTwin


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(write_inventory(tmp_path / "inv", [GPU0, GPU1_CUT]), tls=False) as tw:
        tw.settle()
        yield tw


def _api(twin: ClusterTwin) -> client.ResourceV1Api:
    return client.ResourceV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))


def _slices(twin: ClusterTwin) -> list[dict[str, Any]]:
    api = _api(twin)
    resp = api.list_resource_slice(field_selector=f"spec.nodeName={NODE}", _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


def test_the_plugin_publishes_when_it_starts_and_only_then(twin: ClusterTwin) -> None:
    driver = twin.dra_driver(NODE)
    assert _slices(twin) == []  # the driver is installed, its plugin has not started: nothing published
    driver.start_plugin()
    (published,) = _slices(twin)
    assert published["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert published["spec"]["nodeName"] == NODE and published["spec"]["driver"] == "gpu.nvidia.com"
    names = sorted(d["name"] for d in published["spec"]["devices"])
    gpu1 = twin.gpus(NODE)[1]
    expected = sorted(
        f"gpu-{g.minor}-mig-{gi.profile.name.replace('.', '')}-{gi.profile.id}-{gi.start}"
        for g in twin.gpus(NODE)
        for gi in g.gpu_instances.values()
    )
    assert names == expected and len(gpu1.gpu_instances) == 4
    mig = next(d for d in published["spec"]["devices"] if d["name"].startswith(f"gpu-{gpu1.minor}-mig-3g71gb-"))
    assert mig["attributes"]["type"] == {"string": "mig"} and mig["attributes"]["profile"] == {"string": "3g.71gb"}
    assert mig["attributes"]["parentUUID"] == {"string": gpu1.uuid}
    # a re-cut behind the plugin's back is not seen until the plugin restarts (it does not rescan)
    (gi_id,) = [i for i, gi in gpu1.gpu_instances.items() if gi.profile.name == "1g.18gb"][:1]
    gi = gpu1.gpu_instances[gi_id]
    for ci_id in list(gi.compute_instances):
        gpu1.destroy_compute_instance(gi, ci_id)
    gpu1.destroy_gpu_instance(gi_id)
    assert sorted(d["name"] for d in _slices(twin)[0]["spec"]["devices"]) == names
    driver.start_plugin()
    (again,) = _slices(twin)
    assert len(again["spec"]["devices"]) == len(names) - 1
    # one slice in, one slice out: the resourceslice controller updates it in place and keeps the generation
    # (syncPool: no new slice, at most one changed); a restart that needs a new slice bumps it (next test)
    assert again["metadata"]["name"] == published["metadata"]["name"] and again["spec"]["pool"]["generation"] == 1
    assert int(again["metadata"]["resourceVersion"]) > int(published["metadata"]["resourceVersion"])


def test_dynamic_mig_destroys_unknown_devices_and_publishes_counters(twin: ClusterTwin) -> None:
    before = sum(len(g.gpu_instances) for g in twin.gpus(NODE))
    assert before == 5
    destroyed = twin.dra_driver(NODE, dynamic_mig=True).start_plugin()
    assert len(destroyed) == before and all(not g.gpu_instances for g in twin.gpus(NODE))
    slices = _slices(twin)
    counters = [s for s in slices if s["spec"].get("sharedCounters")]
    assert [c["name"] for s in counters for c in s["spec"]["sharedCounters"]] == [
        "gpu-0-counter-set",
        "gpu-1-counter-set",
    ]
    devices = [d for s in slices for d in s["spec"].get("devices") or ()]
    assert all(d.get("consumesCounters") for d in devices) and all(
        "uuid" not in d["attributes"] or d["name"] in ("gpu-0", "gpu-1") for d in devices
    )
    assert "gpu-1-mig-3g71gb-9-4" in {d["name"] for d in devices}


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s["spec"].pop("driver"), "spec.driver"),
        (lambda s: s["spec"]["pool"].update(name=""), "spec.pool.name"),
        (lambda s: s["spec"]["pool"].update(resourceSliceCount=0), "spec.pool.resourceSliceCount"),
        (lambda s: s["spec"].pop("nodeName"), "spec"),
        (lambda s: s["spec"].update(allNodes=True), "spec"),
        (lambda s: s["spec"]["devices"].append({"name": "GPU_0"}), "spec.devices[1].name"),
        (lambda s: s["spec"]["devices"].append({"name": "gpu-0"}), "spec.devices[1].name"),
        (
            lambda s: s["spec"]["devices"][0]["attributes"].update(profile={"string": "x", "int": 3}),
            "spec.devices[0].attributes[profile]",
        ),
        (
            lambda s: s["spec"]["devices"][0]["attributes"].update(v={"version": "12.8"}),
            "spec.devices[0].attributes[v].version",
        ),
    ],
)
def test_the_api_refuses_a_slice_the_real_server_refuses(twin: ClusterTwin, mutate: Any, field: str) -> None:
    good: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s1"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}],
        },
    }
    twin.store.create("resourceslices.resource.k8s.io", {**good, "metadata": {"name": "s0"}})  # the good one is
    mutate(good)  # accepted; the official client would refuse some of these before sending, so the store is asked
    with pytest.raises(ApiError) as err:
        twin.store.create("resourceslices.resource.k8s.io", good)
    assert err.value.code == 422
    causes = (err.value.details or {})["causes"]
    assert field in [c["field"] for c in causes], causes


def test_the_dra_dynamic_mig_drift_case_starts_the_driver_on_its_node_once_the_api_serves() -> None:
    from reconciler.resources import inventory_dir

    with pytest.raises(ValueError, match="needs a node"):
        ClusterTwin.from_inventory(inventory_dir(), drift=["dra-dynamic-mig"])
    with ClusterTwin.from_inventory(inventory_dir(), drift=["dra-dynamic-mig:gpu-h200-01"], tls=False) as tw:
        tw.settle()
        slices = tw.store.list("resourceslices.resource.k8s.io", field_selector="spec.nodeName=gpu-h200-01")
        assert any(s["spec"].get("sharedCounters") for s in slices)
        assert tw.store.list("resourceslices.resource.k8s.io", field_selector="spec.nodeName=gpu-h100-01") == []
        # what pods hold stays (NVML refuses to destroy it); everything else the driver did not create is gone
        held = {(g.index, gi.id) for g in tw.gpus("gpu-h200-01") for gi in g.gpu_instances.values()}
        assert all(
            any(ci.holder for ci in tw.gpus("gpu-h200-01")[i].gpu_instances[gid].compute_instances.values())
            for i, gid in held
        )
