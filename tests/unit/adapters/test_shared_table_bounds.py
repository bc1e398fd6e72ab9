"""Shared's tables stay bounded whatever the pods bring (kube/observe.py Shared): `migplan run`'s pod cache keeps one
Shared between full lists, and a churning cluster (Jobs: each with its own labels, owner, container names; short-lived
namespaces and nodes) brings values that never come back. Each table is cleared when full, and a pod parsed through
it is still equal to the same pod parsed on its own."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.kube import observe as kubeobserve

GPU = "nvidia.com/gpu"
TABLES = ("_texts", "_maps", "_containers", "_owners", "_parsed")


def _job_pod(i: int) -> dict[str, Any]:
    """A pod of its own Job: every part a Shared table keys on is new (namespace, node, labels, owner, containers)."""
    return {
        "metadata": {
            "name": f"job-{i}-abcde",
            "namespace": f"ci-{i}",
            "labels": {"job-name": f"job-{i}", "batch.kubernetes.io/controller-uid": f"uid-{i}"},
            "ownerReferences": [{"kind": "Job", "name": f"job-{i}", "controller": True}],
        },
        "spec": {
            "nodeName": f"node-{i}",
            "containers": [{"name": f"step-{i}", "resources": {"limits": {GPU: str(1 + i % 3)}}}],
        },
        "status": {"phase": "Running"},
    }


def _sizes(shared: kubeobserve.Shared) -> dict[str, int]:
    return {t: len(getattr(shared, t)) for t in TABLES}


def test_every_table_stays_within_its_limit_and_parses_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeobserve, "SHARED_TEXTS_LIMIT", 48)
    monkeypatch.setattr(kubeobserve, "SHARED_TABLE_LIMIT", 16)
    shared = kubeobserve.Shared()
    peak = dict.fromkeys(TABLES, 0)
    for i in range(1_000):
        pod = _job_pod(i)
        assert kubeobserve.gpu_pod_from_json(pod, shared) == kubeobserve.gpu_pod_from_json(pod)
        assert kubeobserve.pod_record(pod, shared=shared) == kubeobserve.pod_record(pod)
        peak = {t: max(peak[t], n) for t, n in _sizes(shared).items()}
    # Each table filled up to its limit (so it was cleared: 1,000 new values each) and never past it.
    assert 40 < peak["_texts"] <= 48
    assert all(12 < peak[t] <= 16 for t in TABLES[1:]), peak


def test_the_real_limits_bound_a_churning_cluster() -> None:
    shared = kubeobserve.Shared()
    n = kubeobserve.SHARED_TABLE_LIMIT + 500
    for i in range(n):
        pod = _job_pod(i)
        assert kubeobserve.gpu_pod_from_json(pod, shared) == kubeobserve.gpu_pod_from_json(pod)
    sizes = _sizes(shared)
    assert all(sizes[t] <= kubeobserve.SHARED_TABLE_LIMIT for t in TABLES[1:]), sizes
    assert sizes["_parsed"] < n  # it was cleared on the way


def test_values_seen_again_are_still_shared_after_a_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clearing loses only sharing with what came before: what follows is kept once again."""
    monkeypatch.setattr(kubeobserve, "SHARED_TABLE_LIMIT", 4)
    shared = kubeobserve.Shared()
    for i in range(10):
        kubeobserve.gpu_pod_from_json(_job_pod(i), shared)
    a = kubeobserve.gpu_pod_from_json(_job_pod(99), shared)
    b = kubeobserve.gpu_pod_from_json(_job_pod(99), shared)
    assert a is not None and b is not None and a == b
    assert a.labels is b.labels and a.containers is b.containers and a.owner is b.owner


def test_the_text_table_holds_a_whole_fleet_of_names() -> None:
    """A single list must not restart the text table: it holds every node name and namespace of a cluster at
    Kubernetes' tested limits (5,000 nodes, 10,000 namespaces) with room left."""
    assert kubeobserve.SHARED_TEXTS_LIMIT > 5_000 + 10_000
    shared = kubeobserve.Shared()
    names = [f"gpu-node-{i:05d}" for i in range(5_000)] + [f"team-{i:05d}" for i in range(10_000)]
    kept = [shared.text(n) for n in names]
    again = [shared.text("".join(n)) for n in names]  # equal strings, other objects
    assert all(x is y for x, y in zip(kept, again, strict=True))
