"""spec.apply.writeConcurrency: the engine's write pool bound, read from cluster.yaml and refused when absurd."""

from __future__ import annotations

import pytest

from reconciler.logic.inventory.validation import validate_inventory
from reconciler.model.inventory import DEFAULT_WRITE_CONCURRENCY


def _cluster(apply: str) -> dict[str, bytes]:
    text = f"apiVersion: migplan/v1\nkind: Cluster\nspec:\n  migStrategy: mixed\n  apply: {apply}\n"
    return {"cluster.yaml": text.encode()}


def test_default_and_explicit_values() -> None:
    r = validate_inventory(_cluster("{maxUnavailableNodes: 2}"))
    assert r.valid and r.desired is not None
    assert r.desired.cluster.apply.write_concurrency == DEFAULT_WRITE_CONCURRENCY == 16
    r = validate_inventory(_cluster("{writeConcurrency: 32}"))
    assert r.valid and r.desired is not None and r.desired.cluster.apply.write_concurrency == 32


@pytest.mark.parametrize("value", ["0", "-4", "257", "1e9", "true", "'8'", "8.5", "99999999999999999999999"])
def test_absurd_values_are_refused_at_their_line(value: str) -> None:
    r = validate_inventory(_cluster(f"{{writeConcurrency: {value}}}"))
    assert not r.valid and r.errors
    assert all(d.file == "cluster.yaml" and d.line == 5 for d in r.errors), [str(d) for d in r.errors]


def test_the_highest_allowed_value_is_the_one_the_adapter_keeps_connections_for() -> None:
    """Every writer thread reuses a kept-alive connection at any allowed setting: the urllib3 pool of the
    kube adapter keeps up to MAX_WRITE_CONCURRENCY connections, the schema's maximum (urllib3 would discard a
    connection handed back to a full pool, and the next request would open a new TCP + TLS connection)."""
    from kubernetes import client

    from reconciler.adapters.kube.cluster import KubeCluster, TimeoutApiClient
    from reconciler.model.inventory import MAX_WRITE_CONCURRENCY

    r = validate_inventory(_cluster(f"{{writeConcurrency: {MAX_WRITE_CONCURRENCY}}}"))
    assert r.valid and r.desired is not None
    assert r.desired.cluster.apply.write_concurrency == MAX_WRITE_CONCURRENCY
    assert not validate_inventory(_cluster(f"{{writeConcurrency: {MAX_WRITE_CONCURRENCY + 1}}}")).valid
    cluster = KubeCluster(TimeoutApiClient(client.Configuration(host="https://127.0.0.1:6443")))
    try:
        pool = cluster.api_client.rest_client.pool_manager.connection_from_url("https://127.0.0.1:6443")
        assert pool.pool is not None and pool.pool.maxsize >= MAX_WRITE_CONCURRENCY
        assert pool.num_connections == 0  # nothing opened before a request: a large pool costs nothing
    finally:
        cluster.close()
