"""The C heap's free pages go back to the system after each controller cycle (reconciler/controller/heaptrim.py)."""

from __future__ import annotations

import io
import logging
import platform
import weakref
from pathlib import Path

import pytest
from kubernetes import client

from reconciler.controller import heaptrim
from reconciler.controller.loop import Controller, CycleContext, CycleFailed
from reconciler.model.cycles import CycleStatus
from reconciler.outcome import CycleOutcome
from reconciler.scheduling import CycleRunner
from reconciler.settings import load_settings

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's: elsewhere the release is a no-op")
def test_freed_heap_memory_is_resident_until_released() -> None:
    assert heaptrim.trim_available()
    # 8 KiB buffers: over CPython's small-object limit (glibc's malloc) and under its mmap threshold (the heap).
    freed = [bytes(8192) for _ in range(8192)]  # 64 MiB, every page touched
    pinned = bytes(8192)  # allocated after them: the heap's top stays in use, so free() alone returns nothing
    del freed
    before = _rss_kib()
    assert heaptrim.release_free_heap()
    after = _rss_kib()
    assert before - after > 32 * 1024, (before, after)  # most of the 64 MiB left the process
    del pinned


def test_the_release_is_a_no_op_where_there_is_no_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heaptrim, "_TRIM", None)
    assert not heaptrim.trim_available()
    assert heaptrim.release_free_heap() is False


class _Files(dict[str, bytes]):
    """The outcome's report files, weakly referable: the test sees when the outcome is gone."""


@pytest.mark.parametrize("status", [CycleStatus.SUCCESS, CycleStatus.FAILED])
def test_the_controller_releases_after_each_cycle_once_its_outcome_is_gone(
    status: CycleStatus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(
        env={},
        flags={
            "repo": str(tmp_path / "repo"),
            "cache_dir": str(tmp_path / "c"),
            "leader_election": False,
            "listen": "127.0.0.1:0",
        },
    )
    files: list[weakref.ref[_Files]] = []
    steps: list[str] = []

    def cycle(ctx: CycleContext) -> CycleOutcome:
        steps.append("cycle")
        report = _Files({"drift.yaml": b"x" * 1024})
        files.append(weakref.ref(report))
        return CycleOutcome(status, report_files=report)

    def release() -> bool:
        # Released once the cycle's values are unreachable: else their memory could not have been freed yet.
        steps.append("release" if files and files[-1]() is None else "release with the outcome alive")
        return True

    monkeypatch.setattr(heaptrim, "release_free_heap", release)
    config = client.Configuration()
    config.host = "http://127.0.0.1:1"  # never contacted: the outcome has nothing to publish
    controller = Controller(settings, cycle, kube_config=config)
    _logs_kept_by_no_one(monkeypatch)
    if status is CycleStatus.FAILED:
        record = controller.runner.run("test")  # the cycle raises CycleFailed: the runner handles it
        assert record is not None and not record.ok and record.error is not None
        assert record.error.startswith(CycleFailed.__name__)
    else:
        controller.runner.run("test")
        controller.runner.run("interval")  # and again after the next one
    assert steps == ["cycle", "release"] * (1 if status is CycleStatus.FAILED else 2)


def _logs_kept_by_no_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller's and the runner's log lines formatted and dropped, as the process's handler does: pytest's
    own capture keeps every record, and a failed cycle's record holds its exception, traceback and frames."""
    for name in ("migplan.controller", "migplan.scheduling"):
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "propagate", False)
        monkeypatch.setattr(logger, "handlers", [logging.StreamHandler(io.StringIO())])


class _Observation:
    """Something only the failed cycle's frame holds (a half-built observation), weakly referable."""


def test_the_controller_releases_after_a_cycle_that_raised_once_its_frames_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(
        env={},
        flags={"repo": str(tmp_path / "repo"), "cache_dir": str(tmp_path / "c"), "leader_election": False},
    )
    held: list[weakref.ref[_Observation]] = []
    released: list[str] = []

    def release() -> bool:
        # A traceback still alive would hold the cycle's frame, and the frame what it was building.
        released.append("release" if held and held[-1]() is None else "release with the failed cycle alive")
        return True

    monkeypatch.setattr(heaptrim, "release_free_heap", release)

    def cycle(ctx: CycleContext) -> CycleOutcome:
        observation = _Observation()
        held.append(weakref.ref(observation))
        raise RuntimeError("the cycle broke")

    config = client.Configuration()
    config.host = "http://127.0.0.1:1"
    controller = Controller(settings, cycle, kube_config=config)
    _logs_kept_by_no_one(monkeypatch)
    for trigger in ("test", "webhook"):
        record = controller.runner.run(trigger)  # the loop survives it: logged, counted, then released
        assert record is not None and record.error == "RuntimeError: the cycle broke"
    assert released == ["release", "release"]
    assert controller.runner.failures == 2


def test_a_runner_calls_its_after_hook_once_per_cycle_that_ran() -> None:
    """Not for a cycle skipped (one already running, or backing off), and after a raised one too."""
    calls: list[str] = []

    def cycle(trigger: str) -> None:
        calls.append(trigger)
        if trigger == "bad":
            raise RuntimeError("broke")

    runner = CycleRunner(cycle, after=lambda: calls.append("after"), backoff_base=3600)
    runner.run("good")
    runner.run("bad")
    assert runner.run("interval") is None  # backing off after the failure: no cycle, no hook
    assert calls == ["good", "after", "bad", "after"]
