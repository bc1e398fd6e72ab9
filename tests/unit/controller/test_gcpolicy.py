"""The controller's collector policy (reconciler/controller/gcpolicy.py): off during a cycle, one pass after it."""

from __future__ import annotations

import gc
import weakref

import pytest

from reconciler.controller.gcpolicy import collector_per_cycle


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_the_collector_is_off_during_the_cycle_and_its_garbage_is_gone_after() -> None:
    assert gc.isenabled()
    with collector_per_cycle():
        assert not gc.isenabled()
        garbage = _Node()
        alive = weakref.ref(garbage)
        del garbage
        assert alive() is not None  # nothing collects it while the cycle runs
    assert gc.isenabled()
    assert alive() is None  # the pass after the cycle did


def test_a_failing_cycle_still_restores_and_collects() -> None:
    alive: weakref.ref[_Node] | None = None
    with pytest.raises(RuntimeError), collector_per_cycle():
        garbage = _Node()
        alive = weakref.ref(garbage)
        del garbage
        raise RuntimeError("the cycle failed")
    assert gc.isenabled()
    assert alive is not None and alive() is None


def test_a_collector_someone_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_per_cycle():
            garbage = _Node()
            alive = weakref.ref(garbage)
            del garbage
        assert not gc.isenabled()
        assert alive() is not None  # no pass was made on the owner's behalf
    finally:
        gc.enable()
        gc.collect()
