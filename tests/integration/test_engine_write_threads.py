"""The engine's write threads take the node groups themselves (issue 29, adoptcpu).

One task per writer thread, not one per group: a group per task cost a Future, a queue round trip and a wake-up
of the waiting caller per write, under the GIL the writers need. What must not change with it: every group's
outcome in plan order, the caller's context in every group and no group's context leaking into the next one,
and a group that raises stopping the groups not started yet.
"""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from reconciler import engine
from reconciler.model.errors import MigplanError
from reconciler.model.plans import Action, Change, Kind

TAG: contextvars.ContextVar[str] = contextvars.ContextVar("TAG", default="unset")


def _groups(n: int) -> tuple[tuple[Change, ...], ...]:
    return tuple(
        (
            Change(
                f"node/n{i:04d}", Action.CONFIGURE, Kind.NODE_MIG_CONFIG, patch={"metadata": {"labels": {"i": str(i)}}}
            ),
        )
        for i in range(n)
    )


class _Cluster:
    """Records which thread made each write and the context it saw; fails the writes it is told to."""

    def __init__(self, fail: frozenset[str] = frozenset(), raise_base: frozenset[str] = frozenset()) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, tuple[int, str]] = {}
        self.fail = fail
        self.raise_base = raise_base

    def apply(self, change: Change, *, dry_run: bool = False) -> None:
        before = TAG.get()
        TAG.set(change.subject)  # a write that sets the variable must not leak it into the next group
        with self.lock:
            self.seen[change.subject] = (threading.get_ident(), before)
        time.sleep(0.0005)  # a socket wait: the GIL released, so the other writers run
        if change.subject in self.fail:
            raise MigplanError(f"refused {change.subject}")
        if change.subject in self.raise_base:
            raise KeyboardInterrupt


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many tasks the engine hands its pool."""
    count: list[int] = []

    class Counting(ThreadPoolExecutor):
        def submit(self, *args: Any, **kwargs: Any) -> Any:
            count.append(1)
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(engine, "ThreadPoolExecutor", Counting)
    return count


def test_one_task_per_writer_thread_and_every_outcome_in_plan_order(submitted: list[int]) -> None:
    groups = _groups(200)
    cluster = _Cluster()
    outcomes = engine._run_stage(cluster, groups, dry_run=False, workers=8)  # type: ignore[arg-type]
    assert len(submitted) == 8  # not 200: each thread takes the next group itself
    assert [o.applied for o in outcomes] == list(groups)
    assert all(o.error is None and o.failed is None for o in outcomes)
    assert len({thread for thread, _ in cluster.seen.values()}) > 1  # the writes really ran in several threads


def test_fewer_groups_than_threads_starts_one_thread_per_group(submitted: list[int]) -> None:
    outcomes = engine._run_stage(_Cluster(), _groups(3), dry_run=False, workers=16)  # type: ignore[arg-type]
    assert len(submitted) == 3
    assert [len(o.applied) for o in outcomes] == [1, 1, 1]


def test_every_group_runs_in_the_callers_context_and_none_leaks_into_the_next() -> None:
    cluster = _Cluster()
    token = TAG.set("caller")
    try:
        engine._run_stage(cluster, _groups(64), dry_run=False, workers=4)  # type: ignore[arg-type]
    finally:
        TAG.reset(token)
    assert len(cluster.seen) == 64
    assert {before for _, before in cluster.seen.values()} == {"caller"}


def test_a_failed_group_stops_the_groups_not_started_and_keeps_its_place() -> None:
    groups = _groups(400)
    failing = groups[5][0].subject
    outcomes = engine._run_stage(_Cluster(fail=frozenset({failing})), groups, dry_run=False, workers=4)  # type: ignore[arg-type]
    assert len(outcomes) == 400
    assert outcomes[5].failed is groups[5][0] and outcomes[5].error is not None
    assert outcomes[5].applied == ()
    made = [i for i, o in enumerate(outcomes) if o.applied]
    assert made and max(made) < 399  # the groups not started when it failed never started
    assert all(o.failed is None for i, o in enumerate(outcomes) if i != 5)


def test_an_exception_beyond_migplans_own_reaches_the_caller_and_stops_the_rest() -> None:
    groups = _groups(400)
    cluster = _Cluster(raise_base=frozenset({groups[3][0].subject}))
    with pytest.raises(KeyboardInterrupt):
        engine._run_stage(cluster, groups, dry_run=False, workers=4)  # type: ignore[arg-type]
    assert len(cluster.seen) < 400
