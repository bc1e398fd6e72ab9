"""The twin's DRA kubelet plugin restarts and republishes like the real one (issue 30 item 5, the driver part).

NVIDIA's GPU kubelet plugin enumerates the MIG devices only when it starts: a re-cut through NVML is invisible
in the node's ResourceSlices until its pod is deleted; the DaemonSet then creates a new pod (another uid) whose
plugin publishes what NVML shows now, and the resourceslice controller updates the one slice in place at the
same pool generation (one update), or bumps the generation when a new slice is needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.draintwin import GPU0, GPU1_CUT, NODE, write_inventory
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.controller.loop import kube_configuration
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.dra import DRIVER_NAMESPACE

SELECTOR = "dra-driver-nvidia-gpu-component=kubelet-plugin"


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(write_inventory(tmp_path / "inv", [GPU0, GPU1_CUT]), tls=False) as tw:
        tw.settle()
        tw.install_dra_driver_chart([NODE], None)
        tw.dra_driver(NODE).start_plugin()
        yield tw


def _core(twin: ClusterTwin) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))


def _plugin_pods(twin: ClusterTwin) -> list[dict[str, Any]]:
    return list(twin.store.list("pods", DRIVER_NAMESPACE, label_selector=SELECTOR))


def _slices(twin: ClusterTwin) -> list[dict[str, Any]]:
    api = client.ResourceV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))
    resp: Any = api.list_resource_slice(field_selector=f"spec.nodeName={NODE}", _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


def _names(twin: ClusterTwin) -> list[str]:
    return sorted(d["name"] for s in _slices(twin) for d in s["spec"].get("devices") or ())


def _recut_behind_the_plugins_back(twin: ClusterTwin) -> None:
    """Destroy GPU 1's 2g.35gb through the twin's NVML (what migplan's agent does), as the plugin keeps running."""
    gpu1 = twin.gpus(NODE)[1]
    (gi_id,) = [i for i, gi in gpu1.gpu_instances.items() if gi.profile.name == "2g.35gb"]
    gi = gpu1.gpu_instances[gi_id]
    for ci_id in list(gi.compute_instances):
        gpu1.destroy_compute_instance(gi, ci_id)
    gpu1.destroy_gpu_instance(gi_id)


def test_deleting_the_plugin_pod_restarts_it_and_republishes_what_nvml_shows(twin: ClusterTwin) -> None:
    (before,) = _plugin_pods(twin)
    (published,) = _slices(twin)
    names = _names(twin)
    _recut_behind_the_plugins_back(twin)
    assert _names(twin) == names  # the plugin does not rescan
    _core(twin).delete_namespaced_pod(
        before["metadata"]["name"],
        DRIVER_NAMESPACE,
        body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=before["metadata"]["uid"])),
    )
    (after,) = _plugin_pods(twin)  # the DaemonSet's new pod on the node, the old one gone
    assert after["metadata"]["uid"] != before["metadata"]["uid"] and after["spec"]["nodeName"] == NODE
    assert after["metadata"]["name"].startswith("dra-driver-nvidia-gpu-kubelet-plugin-")
    gone = [n for n in names if "-mig-2g35gb-" in n and n.startswith("gpu-1-")]
    assert len(gone) == 1 and _names(twin) == sorted(set(names) - set(gone))
    (again,) = _slices(twin)
    assert again["metadata"]["name"] == published["metadata"]["name"]  # updated in place
    assert again["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert twin.dra_driver(NODE).starts == 2


def test_a_stale_uid_precondition_deletes_nothing_and_restarts_nothing(twin: ClusterTwin) -> None:
    (before,) = _plugin_pods(twin)
    _recut_behind_the_plugins_back(twin)
    names = _names(twin)
    with pytest.raises(ApiException) as refused:
        _core(twin).delete_namespaced_pod(
            before["metadata"]["name"],
            DRIVER_NAMESPACE,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-this-pod")),
        )
    assert refused.value.status == 409
    (still,) = _plugin_pods(twin)
    assert still["metadata"]["uid"] == before["metadata"]["uid"] and _names(twin) == names
    assert twin.dra_driver(NODE).starts == 1


def test_another_pod_deleted_restarts_no_plugin(twin: ClusterTwin) -> None:
    twin.store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "other", "labels": {"app": "other"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "registry.example/c:1"}]},
        },
        DRIVER_NAMESPACE,
    )
    _core(twin).delete_namespaced_pod("other", DRIVER_NAMESPACE, grace_period_seconds=0)
    assert twin.dra_driver(NODE).starts == 1 and len(_plugin_pods(twin)) == 1


def test_a_restart_that_needs_a_new_slice_bumps_the_generation(twin: ClusterTwin) -> None:
    """Two slices where the plugin publishes one (a slice left by an earlier plugin version, say): the one
    beyond what is wanted is obsolete and deleted, the kept one updated; more than one slice wanted from one
    published (DynamicMIG's counters and devices) needs new slices, so the generation goes up by one."""
    driver = twin.dra_driver(NODE)
    driver.dynamic_mig = True  # the same node's plugin restarted with DynamicMIG: counters + devices slices
    (before,) = _slices(twin)
    driver.start_plugin()
    after = _slices(twin)
    assert len(after) == 2 and {s["spec"]["pool"]["generation"] for s in after} == {2}
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in after} == {2}
    assert before["metadata"]["name"] in {s["metadata"]["name"] for s in after}  # matched, updated
