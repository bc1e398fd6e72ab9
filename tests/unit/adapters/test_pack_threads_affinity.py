"""The report pack's delta-search threads follow the CPUs the process may run on (adapters/git/packwrite.py), not
the host's: a container limited by its cpuset (the affinity mask) to one CPU searches in one thread, never two."""

from __future__ import annotations

import os

import pytest

from reconciler.adapters.git import packwrite


def _host(monkeypatch: pytest.MonkeyPatch, cpus: int | None) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)


@pytest.mark.parametrize(("allowed", "threads"), [({0}, 1), ({5, 9}, 2), ({1, 2, 3}, 3), (set(range(32)), 4)])
def test_the_affinity_mask_counts_not_the_host(
    monkeypatch: pytest.MonkeyPatch, allowed: set[int], threads: int
) -> None:
    _host(monkeypatch, 64)
    asked: list[int] = []

    def affinity(pid: int) -> set[int]:
        asked.append(pid)
        return allowed

    monkeypatch.setattr(os, "sched_getaffinity", affinity, raising=False)
    assert packwrite.usable_cpus() == len(allowed)
    assert packwrite.pack_threads() == threads
    assert asked and set(asked) == {0}  # this process's own mask


@pytest.mark.parametrize(("host", "threads"), [(1, 1), (3, 3), (64, 4), (None, 1)])
def test_without_an_affinity_mask_the_host_count(
    monkeypatch: pytest.MonkeyPatch, host: int | None, threads: int
) -> None:
    _host(monkeypatch, host)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS, Windows
    assert packwrite.pack_threads() == threads


def test_a_mask_that_cannot_be_read_falls_back_to_the_host_count(monkeypatch: pytest.MonkeyPatch) -> None:
    _host(monkeypatch, 2)

    def refused(pid: int) -> set[int]:
        raise PermissionError("sched_getaffinity refused")

    monkeypatch.setattr(os, "sched_getaffinity", refused, raising=False)
    assert packwrite.pack_threads() == 2


def test_an_empty_mask_still_gives_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    _host(monkeypatch, 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(), raising=False)
    assert packwrite.pack_threads() == 1


def test_the_module_constant_is_this_process_s_count() -> None:
    assert packwrite.pack_threads() == packwrite.PACK_THREADS
    assert 1 <= packwrite.PACK_THREADS <= 4
