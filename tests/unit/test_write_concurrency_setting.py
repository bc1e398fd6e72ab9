"""spec.apply.writeConcurrency: the engine's write pool bound, read from cluster.yaml and refused when absurd."""

from __future__ import annotations

import pytest

from reconciler.logic.validation import validate_inventory
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
