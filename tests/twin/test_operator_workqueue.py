"""The twin operator's work queue and typed keys (reconciler/twin/operator/workqueue.py, cache.py): the order in
which the coordinator's components see their work, which the whole twin's determinism rests on."""

from __future__ import annotations

import threading

import pytest

from reconciler.twin.operator.cache import PodKey
from reconciler.twin.operator.workqueue import (
    DevicePluginPodGone,
    Job,
    MigManagerPodGone,
    NodeWork,
    ReleasePod,
    Work,
    WorkQueue,
)


def drain(queue: WorkQueue, *, fail: Work | None = None) -> tuple[list[Work], list[str]]:
    """Run the queue's worker over what is queued now; the keys in the order worked, and the errors."""
    seen: list[Work] = []
    errors: list[str] = []

    def work(key: Work) -> None:
        seen.append(key)
        if key == fail:
            raise ValueError("boom")

    queue.start(work, errors)
    try:
        queue.settle(lambda: 0, timeout=10)
    finally:
        queue.stop()
    return seen, errors


def test_operator_job_first_then_first_marked_order_and_no_duplicates() -> None:
    queue = WorkQueue(threading.Condition())
    queue.add(NodeWork("b"), Job.SCHEDULE, NodeWork("a"), NodeWork("b"), Job.OPERATOR, Job.SCHEDULE)
    seen, errors = drain(queue)
    assert seen == [Job.OPERATOR, NodeWork("b"), Job.SCHEDULE, NodeWork("a")]
    assert errors == []


def test_keys_of_different_kinds_with_the_same_fields_stay_apart() -> None:
    queue = WorkQueue(threading.Condition())
    queue.add(DevicePluginPodGone("n", "p"), MigManagerPodGone("n", "p"), NodeWork("n"))
    seen, _ = drain(queue)
    assert seen == [DevicePluginPodGone("n", "p"), MigManagerPodGone("n", "p"), NodeWork("n")]


def test_a_failing_key_is_an_error_and_the_worker_goes_on() -> None:
    queue = WorkQueue(threading.Condition())
    queue.add(ReleasePod(PodKey("team-a", "job-1")), NodeWork("n"))
    seen, errors = drain(queue, fail=ReleasePod(PodKey("team-a", "job-1")))
    assert seen == [ReleasePod(PodKey("team-a", "job-1")), NodeWork("n")]
    assert errors == ["release:team-a/job-1: ValueError: boom"]


def test_settle_times_out_naming_the_pending_keys() -> None:
    queue = WorkQueue(threading.Condition())
    queue.add(NodeWork("gpu-1"), Job.DAEMONSET_STATUS)  # no worker started: nothing drains
    with pytest.raises(TimeoutError, match=r"\['node:gpu-1', 'dsstatus'\]"):
        queue.settle(lambda: 0, timeout=0.05)


def test_pod_key_prints_as_the_namespaced_name_the_nvml_twin_records() -> None:
    key = PodKey("default", "holder")
    assert str(key) == "default/holder"
    assert (key.namespace, key.name) == ("default", "holder")
    assert Job("global") is Job.OPERATOR  # what GpuOperator.mark("global") queues
