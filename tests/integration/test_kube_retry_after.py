"""429 Too Many Requests with Retry-After, end to end: the twin rejecting writes beyond its max-mutating-in-flight
limit (as the real server's max-in-flight / Priority and Fairness filters do), the adapter waiting exactly what the
server asked, and the engine's write pool getting every write through a throttled server."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests
from helpers import planning as fixtures
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.cluster import KubeCluster, Throttled, translate_api_errors
from reconciler.engine import Cycle, apply_plan
from reconciler.model.errors import Transient
from reconciler.model.plans import Action, Change, Kind, Plan
from reconciler.twin.apiserver import ApiServerTwin

NOW = datetime(2026, 12, 2, 10, tzinfo=UTC)
SA = ("gpu-operator", "migplan")


@pytest.fixture()
def throttled_twin(tmp_path: Path) -> Iterator[tuple[ApiServerTwin, Path]]:
    """A twin letting one mutating request through at a time, and a kubeconfig for migplan's ServiceAccount."""
    with ApiServerTwin(namespaces=("default", "gpu-operator"), max_mutating_in_flight=1) as api:
        store = api.store
        for i in range(30):
            store.create("nodes", {"metadata": {"name": f"n{i:02d}"}})
        store.create(
            "clusterroles.rbac.authorization.k8s.io",
            {
                "metadata": {"name": "relabel"},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}],
            },
        )
        store.create(
            "clusterrolebindings.rbac.authorization.k8s.io",
            {
                "metadata": {"name": "migplan-relabels"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "relabel"},
                "subjects": [{"kind": "ServiceAccount", "name": SA[1], "namespace": SA[0]}],
            },
        )
        token = api.service_account_token(*SA)
        yield api, api.write_kubeconfig(tmp_path / "config", token=token)


def _relabel(node: str, value: str = "all-balanced") -> Change:
    patch = {"metadata": {"labels": {"nvidia.com/mig.config": value}}}
    return Change(f"node/{node}", Action.CONFIGURE, Kind.NODE_MIG_CONFIG, patch=patch)


def _slots(api: ApiServerTwin) -> threading.BoundedSemaphore:
    server = api._server  # the twin's HTTP server: the test holds its only write slot
    assert server is not None and server.mutating_slots is not None
    return server.mutating_slots


def test_the_twin_answers_429_with_retry_after_and_pf_headers_when_every_slot_is_taken(
    throttled_twin: tuple[ApiServerTwin, Path],
) -> None:
    api, _ = throttled_twin
    token = api.service_account_token(*SA)

    def patch(bearer: str) -> requests.Response:
        return requests.patch(
            api.url + "/api/v1/nodes/n00",
            json={"metadata": {"labels": {"a": "b"}}},
            headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/merge-patch+json"},
            verify=str(api.ca_file),
            timeout=30,
        )

    slots = _slots(api)
    assert slots.acquire(blocking=False)
    try:
        rejected = patch(token)
        assert rejected.status_code == 429
        assert rejected.headers["Retry-After"] == "1"
        assert rejected.text == "Too many requests, please try again later.\n"
        assert rejected.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert (
            rejected.headers["X-Kubernetes-PF-PriorityLevel-UID"] and rejected.headers["X-Kubernetes-PF-FlowSchema-UID"]
        )
        assert patch(api.token).status_code == 200  # system:masters is never limited
        reads = requests.get(
            api.url + "/api/v1/nodes",
            headers={"Authorization": f"Bearer {api.token}"},
            verify=str(api.ca_file),
            timeout=30,
        )
        assert reads.status_code == 200
    finally:
        slots.release()
    assert patch(token).status_code == 200
    assert api.store.get("nodes", "n00")["metadata"]["labels"] == {"a": "b"}


def test_the_adapter_waits_what_retry_after_says_and_gets_through(throttled_twin: tuple[ApiServerTwin, Path]) -> None:
    api, kubeconfig = throttled_twin
    cluster = KubeCluster.from_kubeconfig(str(kubeconfig))
    slots = _slots(api)
    assert slots.acquire(blocking=False)
    # Held for 3.5 s: the default backoff (0.2 + 0.4 + 0.8 s, four attempts) would give up after ~1.4 s;
    # Retry-After: 1 retries once a second, up to ten times, and the fifth attempt gets through.
    releaser = threading.Timer(3.5, slots.release)
    releaser.start()
    start = time.monotonic()
    try:
        cluster.apply(_relabel("n01"))
    finally:
        releaser.join()
        cluster.close()
    assert time.monotonic() - start >= 3.5
    assert api.store.get("nodes", "n01")["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"


def test_retry_after_is_read_like_client_go_and_the_priority_level_is_quoted() -> None:
    def raised(status: int, headers: dict[str, str]) -> Transient:
        exc = ApiException(status=status, reason="Too Many Requests")
        exc.headers = headers
        with pytest.raises(Transient) as info, translate_api_errors("patch node/n01"):
            raise exc
        return info.value

    throttled = raised(429, {"retry-after": "3", "X-Kubernetes-PF-PriorityLevel-UID": "pl-uid"})
    assert isinstance(throttled, Throttled) and throttled.retry_after == 3.0 and throttled.code == "MP554"
    assert "(priority level pl-uid)" in throttled.message
    assert isinstance(raised(503, {"Retry-After": "2"}), Throttled)
    # client-go's checkWait: integer seconds only; anything else falls back to the usual backoff
    for value in ("1.5", "Wed, 21 Oct 2026 07:28:00 GMT", "-1", "9" * 400):
        assert not isinstance(raised(429, {"Retry-After": value}), Throttled), value
    assert raised(429, {"Retry-After": "86400"}).retry_after == 86400.0  # type: ignore[attr-defined]  # waited 60 s at most
    assert not isinstance(raised(429, {}), Throttled)
    assert not isinstance(raised(409, {"Retry-After": "1"}), Throttled)  # a conflict is never waited out


def test_the_write_pool_gets_every_relabel_through_a_throttled_server(
    throttled_twin: tuple[ApiServerTwin, Path],
) -> None:
    api, kubeconfig = throttled_twin
    desired = fixtures.desired_state(fixtures.read("article-single-strategy", "desired.yaml"))
    apply = dataclasses.replace(desired.cluster.apply, write_concurrency=8)
    desired = dataclasses.replace(desired, cluster=dataclasses.replace(desired.cluster, apply=apply))
    plan = Plan(changes=tuple(_relabel(f"n{i:02d}", f"config-{i}") for i in range(30)))
    cluster = KubeCluster.from_kubeconfig(str(kubeconfig))
    c = Cycle(desired=desired, cluster=cluster, now=NOW, dry_run=False)
    c.plan = plan
    try:
        apply_plan(c)
    finally:
        cluster.close()
    assert c.applied == list(plan.writes) and not c.not_applied and not c.errors
    for i in range(30):
        assert api.store.get("nodes", f"n{i:02d}")["metadata"]["labels"]["nvidia.com/mig.config"] == f"config-{i}"


def test_a_long_retry_after_never_outlasts_the_cycle_deadline() -> None:
    from reconciler.adapters import deadline
    from reconciler.adapters.kube.cluster import with_retries

    calls: list[float] = []

    def throttled() -> None:
        calls.append(time.monotonic())
        raise Throttled("patch node/n01: HTTP 429: Too Many Requests", retry_after=86400)

    start = time.monotonic()
    with deadline.cycle_deadline(0.5), pytest.raises(Throttled):
        with_retries(throttled)
    # client-go's ten retries, none waiting for the 86,400 s asked (60 s at most, and never past the deadline)
    assert len(calls) == 11 and time.monotonic() - start < 30
