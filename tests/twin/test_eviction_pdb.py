"""The twin's pods/eviction subresource and PodDisruptionBudget status, through the official client.

Each expectation comes from kubernetes/kubernetes: pkg/registry/core/pod/storage/eviction.go (EvictionREST.Create,
checkAndDecrement, canIgnorePDB, getPodDisruptionBudgets) and pkg/controller/disruption/disruption.go (trySync,
getExpectedPodCount, countHealthyPods, buildDisruptedPodMap, updatePdbStatus, failSafe).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.twin.apiserver import ApiServerTwin

NS = "ml"


@pytest.fixture
def api() -> Iterator[tuple[ApiServerTwin, client.CoreV1Api, client.PolicyV1Api]]:
    with ApiServerTwin(namespaces=("default", NS), tls=False) as twin:
        cfg = client.Configuration()
        cfg.host = twin.url
        cfg.api_key = {"authorization": f"Bearer {twin.token}"}
        with client.ApiClient(cfg) as c:
            yield twin, client.CoreV1Api(c), client.PolicyV1Api(c)


def _pod(twin: ApiServerTwin, name: str, *, ready: bool = True, phase: str = "Running", owner: str = "web") -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "web"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "uid": "u-1", "controller": True}
            ],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "busybox"}]},
    }
    twin.store.create("pods", pod, NS)
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    twin.store.patch("pods", name, {"status": status}, NS, subresource="status")


def _pdb(policy: client.PolicyV1Api, name: str = "web", **spec: Any) -> None:
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }
    policy.create_namespaced_pod_disruption_budget(NS, body)


def _status(twin: ApiServerTwin, name: str = "web") -> dict[str, Any]:
    status: dict[str, Any] = twin.store.get("poddisruptionbudgets.policy", name, NS)["status"]
    return status


def _evict(core: client.CoreV1Api, name: str, *, dry_run: bool = False) -> None:
    body = client.V1Eviction(
        api_version="policy/v1", kind="Eviction", metadata=client.V1ObjectMeta(name=name, namespace=NS)
    )
    core.create_namespaced_pod_eviction(name, NS, body, dry_run="All" if dry_run else None, _preload_content=False)


def test_pdb_status_as_the_disruption_controller_keeps_it(api: Any) -> None:
    twin, _, policy = api
    _pod(twin, "web-a")
    _pod(twin, "web-b")
    _pod(twin, "web-c", ready=False)
    _pdb(policy, minAvailable=1)
    status = _status(twin)
    assert {k: status[k] for k in ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed")} == {
        "currentHealthy": 2,
        "desiredHealthy": 1,
        "expectedPods": 3,
        "disruptionsAllowed": 1,
    }
    assert status["observedGeneration"] == 1
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionAllowed", "True", "SufficientPods")


def test_eviction_spends_the_budget_then_429_with_the_real_message(api: Any) -> None:
    twin, core, policy = api
    _pod(twin, "web-a")
    _pod(twin, "web-b")
    _pdb(policy, minAvailable=1)
    _evict(core, "web-a")
    gone = twin.store.get("pods", "web-a", NS)
    assert gone["metadata"].get("deletionTimestamp")  # bound pod: terminating, the kubelet finishes it
    status = _status(twin)
    assert status["disruptionsAllowed"] == 0 and status["currentHealthy"] == 1
    assert "disruptedPods" not in status  # dropped once the pod is terminating (buildDisruptedPodMap)
    assert status["conditions"][0]["reason"] == "InsufficientPods"
    with pytest.raises(ApiException) as refused:
        _evict(core, "web-b")
    assert refused.value.status == 429
    body = json.loads(refused.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [
        {"reason": "DisruptionBudget", "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}
    ]
    assert not twin.store.get("pods", "web-b", NS)["metadata"].get("deletionTimestamp")  # nothing forced


def test_dry_run_eviction_changes_nothing(api: Any) -> None:
    twin, core, policy = api
    _pod(twin, "web-a")
    _pod(twin, "web-b")
    _pdb(policy, minAvailable=1)
    _evict(core, "web-a", dry_run=True)
    assert not twin.store.get("pods", "web-a", NS)["metadata"].get("deletionTimestamp")
    assert _status(twin)["disruptionsAllowed"] == 1


def test_unhealthy_and_pending_pods_are_evicted_without_spending_the_budget(api: Any) -> None:
    twin, core, policy = api
    _pod(twin, "web-a")
    _pod(twin, "web-b")
    _pod(twin, "web-sick", ready=False)
    _pod(twin, "web-new", phase="Pending", ready=False)
    _pdb(policy, minAvailable=2)
    assert _status(twin)["disruptionsAllowed"] == 0
    _evict(core, "web-new")  # canIgnorePDB: Pending
    # IfHealthyBudget (default): not Ready, and currentHealthy 2 >= desiredHealthy 2 > 0
    _evict(core, "web-sick")
    for name in ("web-new", "web-sick"):
        assert twin.store.get("pods", name, NS)["metadata"].get("deletionTimestamp")
    with pytest.raises(ApiException) as refused:
        _evict(core, "web-a")
    assert refused.value.status == 429


def test_always_allow_evicts_an_unready_pod_of_an_unhealthy_application(api: Any) -> None:
    twin, core, policy = api
    _pod(twin, "web-a", ready=False)
    _pdb(policy, minAvailable=1, unhealthyPodEvictionPolicy="IfHealthyBudget")
    with pytest.raises(ApiException) as refused:  # currentHealthy 0 < desiredHealthy 1: the budget decides
        _evict(core, "web-a")
    assert refused.value.status == 429
    twin.store.patch("poddisruptionbudgets.policy", "web", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}, NS)
    _evict(core, "web-a")
    assert twin.store.get("pods", "web-a", NS)["metadata"].get("deletionTimestamp")


def test_two_pdbs_is_a_500_and_an_unknown_controller_fails_the_sync(api: Any) -> None:
    twin, core, policy = api
    _pod(twin, "web-a")
    _pdb(policy, "one", minAvailable=0)
    _pdb(policy, "two", maxUnavailable=1)
    two = _status(twin, "two")  # the pod's Deployment `web` is not in the cluster: failSafe
    assert two["disruptionsAllowed"] == 0
    assert two["conditions"][0]["reason"] == "SyncFailed"
    assert two["conditions"][0]["message"] == 'found no controllers for pod "web-a"'
    with pytest.raises(ApiException) as refused:
        _evict(core, "web-a")
    assert refused.value.status == 500
    assert json.loads(refused.value.body)["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )
    twin.store.delete("poddisruptionbudgets.policy", "one", NS)
    with pytest.raises(ApiException) as processing:  # observedGeneration never caught up with generation 1
        _evict(core, "web-a")
    assert processing.value.status == 429
    cause = json.loads(processing.value.body)["details"]["causes"][0]["message"]
    assert cause == "The disruption budget two is still being processed by the server."


def test_max_unavailable_uses_the_deployment_scale(api: Any) -> None:
    twin, _, policy = api
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "m", "image": "b"}]}},
        },
    }
    twin.store.create("deployments.apps", deployment, NS)
    _pod(twin, "web-a")
    _pod(twin, "web-b")
    _pdb(policy, maxUnavailable="50%")
    status = _status(twin)  # expected 3 (the scale), maxUnavailable ceil(1.5) = 2, desired 1, healthy 2
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (3, 1, 1)


def test_eviction_body_is_checked(api: Any) -> None:
    twin, core, _ = api
    _pod(twin, "web-a")
    body = client.V1Eviction(
        api_version="policy/v1", kind="Eviction", metadata=client.V1ObjectMeta(name="other", namespace=NS)
    )
    with pytest.raises(ApiException) as bad:
        core.create_namespaced_pod_eviction("web-a", NS, body)
    assert bad.value.status == 400
    assert json.loads(bad.value.body)["message"] == "name in URL does not match name in Eviction object"
    with pytest.raises(ApiException) as missing:
        _evict(core, "nope")
    assert missing.value.status == 404


def test_terminal_pods_skip_the_budget_and_delete_options_are_the_evictions(api: Any) -> None:
    twin, core, policy = api
    _pod(twin, "web-a")
    _pod(twin, "web-done", phase="Succeeded", ready=False)
    _pdb(policy, minAvailable=1)
    assert _status(twin)["disruptionsAllowed"] == 0
    body = client.V1Eviction(
        api_version="policy/v1",
        kind="Eviction",
        metadata=client.V1ObjectMeta(name="web-done", namespace=NS),
        delete_options=client.V1DeleteOptions(grace_period_seconds=0),
    )
    core.create_namespaced_pod_eviction("web-done", NS, body, _preload_content=False)  # canIgnorePDB: Succeeded
    names = [p["metadata"]["name"] for p in twin.store.list("pods", NS)]
    assert names == ["web-a"]  # gracePeriodSeconds 0 from the Eviction's deleteOptions: removed at once
    with pytest.raises(ApiException) as refused:
        _evict(core, "web-a")
    assert refused.value.status == 429
