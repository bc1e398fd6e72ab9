"""DeviceClasses rendered from the plan, end to end on the cluster twin (issue 30 item 2).

Node `n` is a DRA-static node: NVIDIA's DRA driver publishes its MIG devices and the device plugin does not run
there (its deploy label is off). A cycle of the controller (production KubeCluster through the official client)
creates one DeviceClass per planned profile, with migplan's label and `extendedResourceName nvidia.com/mig-<p>`; a
pod written for the device plugin (`nvidia.com/mig-1g.18gb: 1`) is then placed by the twin's scheduler through the
extended-resource path: a special ResourceClaim allocated from the rendered class, a MIG device of that profile.
A second cycle writes nothing; a class migplan did not create is never written and is reported (MP596).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers.draintwin import GPU0, GPU1_CUT, NODE, write_inventory

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Kind
from reconciler.twin.cluster import ClusterTwin

T0 = datetime(2026, 12, 3, 10, tzinfo=UTC)
CLASSES = "deviceclasses.resource.k8s.io"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_inventory(tmp_path / "inv", [GPU0, GPU1_CUT], mode="agent")


@pytest.fixture
def twin(root: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(root, tls=False) as tw:
        tw.settle()
        # A DRA node: the device plugin does not run there, the DRA driver's kubelet plugin publishes.
        tw.store.patch("nodes", NODE, {"metadata": {"labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}}})
        tw.settle()
        tw.dra_driver(NODE).start_plugin()
        yield tw


def _desired(root: Path) -> DesiredState:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


def _cycle(twin: ClusterTwin, desired: DesiredState) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=T0)
    finally:
        cluster.close()


def _class_writes(result: CycleResult) -> list[Any]:
    return [c for c in result.applied if c.kind is Kind.DEVICE_CLASS]


def _mig_pod(twin: ClusterTwin, name: str, resource: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/emb:1",
                    "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}},
                }
            ]
        },
    }
    twin.store.create("pods", pod, "default")


def test_rendered_classes_let_a_device_plugin_pod_spec_run_on_a_dra_node(twin: ClusterTwin, root: Path) -> None:
    allocatable = twin.store.get("nodes", NODE)["status"].get("allocatable") or {}
    assert int(allocatable.get("nvidia.com/mig-1g.18gb", 0)) == 0  # nothing through the device plugin
    desired = _desired(root)
    first = _cycle(twin, desired)
    assert not first.errors, first.errors
    made = {c.subject: c.action for c in _class_writes(first)}
    assert made == {
        "deviceclass/migplan-mig-1g.18gb": Action.CREATE,
        "deviceclass/migplan-mig-2g.35gb": Action.CREATE,
        "deviceclass/migplan-mig-3g.71gb": Action.CREATE,
        "deviceclass/migplan-mig-7g.141gb": Action.CREATE,
    }
    cls = twin.store.get(CLASSES, "migplan-mig-1g.18gb")
    assert cls["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "migplan"
    assert cls["spec"]["extendedResourceName"] == "nvidia.com/mig-1g.18gb"
    assert [f["manager"] for f in cls["metadata"].get("managedFields") or []] == ["migplan"]

    # In step: the next cycle writes no class.
    assert _class_writes(_cycle(twin, desired)) == []
    # Someone widens migplan's class: the next cycle patches it back, at the resourceVersion it read.
    twin.store.patch(CLASSES, "migplan-mig-1g.18gb", {"spec": {"selectors": [{"cel": {"expression": "true"}}]}})
    (patched,) = _class_writes(_cycle(twin, desired))
    assert (patched.subject, patched.action) == ("deviceclass/migplan-mig-1g.18gb", Action.CONFIGURE)
    assert twin.store.get(CLASSES, "migplan-mig-1g.18gb")["spec"] == cls["spec"]

    _mig_pod(twin, "emb-0", "nvidia.com/mig-1g.18gb")
    twin.settle()
    pod = twin.store.get("pods", "emb-0", "default")
    assert pod["spec"].get("nodeName") == NODE
    ext = pod["status"]["extendedResourceClaimStatus"]
    claim = twin.store.get("resourceclaims.resource.k8s.io", ext["resourceClaimName"], "default")
    assert claim["metadata"]["name"].startswith("emb-0-extended-resources-")
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert claim["metadata"]["ownerReferences"][0]["name"] == "emb-0"
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["name"] == "container-0-request-0"
    assert request["exactly"]["deviceClassName"] == "migplan-mig-1g.18gb"
    assert ext["requestMappings"] == [
        {"containerName": "main", "resourceName": "nvidia.com/mig-1g.18gb", "requestName": "container-0-request-0"}
    ]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == "gpu.nvidia.com" and result["pool"] == NODE
    assert "-mig-1g18gb-" in result["device"]
    assert pod["status"]["phase"] == "Running"  # the kubelet left the DRA-mapped resource to DRA


def test_without_the_rendered_classes_the_same_pod_stays_pending(twin: ClusterTwin) -> None:
    _mig_pod(twin, "emb-0", "nvidia.com/mig-1g.18gb")
    twin.settle()
    pod = twin.store.get("pods", "emb-0", "default")
    assert not pod["spec"].get("nodeName") and pod["status"]["phase"] == "Pending"
    assert not twin.store.list("resourceclaims.resource.k8s.io")


def test_a_class_migplan_did_not_create_is_left_alone_and_reported(twin: ClusterTwin, root: Path) -> None:
    theirs = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "migplan-mig-1g.18gb"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
    }
    twin.store.create(CLASSES, theirs)
    before = twin.store.get(CLASSES, "migplan-mig-1g.18gb")
    result = _cycle(twin, _desired(root))
    assert "deviceclass/migplan-mig-1g.18gb" not in {c.subject for c in _class_writes(result)}
    after = twin.store.get(CLASSES, "migplan-mig-1g.18gb")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert result.report is not None
    assert [f.code for f in result.report.cluster_findings if f.code == "MP596"] == ["MP596"]
