"""`migplan reconcile --once` (--repo or a local inventory) runs its cycle with the cycle collector paused
(reconciler/commands/gcpause.py), as `migplan run` does per cycle, and gives it back as it found it, whatever the cycle
did."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from reconciler import gitops
from reconciler.commands import reconcile


class _Stop(Exception):
    pass


def _from_repo(tmp_path: Path) -> int:
    return reconcile._from_repo(
        repo=str(tmp_path / "repo"),
        branch="main",
        path="",
        cache_dir=tmp_path / "cache",
        cluster=object(),
        dry_run=False,
        output="json",
        lock_timeout=1.0,
        deadline=10.0,
    )


def test_the_cycle_runs_with_the_collector_paused_and_it_is_back_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    def cycle(**kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        raise _Stop  # whatever the cycle does, even an exception, the collector is given back

    monkeypatch.setattr(gitops, "run_gitops_cycle", cycle)
    assert gc.isenabled()
    with pytest.raises(_Stop):
        _from_repo(tmp_path)
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_someone_turned_off_stays_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitops, "run_gitops_cycle", lambda **kwargs: (_ for _ in ()).throw(_Stop()))
    gc.disable()
    try:
        with pytest.raises(_Stop):
            _from_repo(tmp_path)
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Cluster:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_local_inventory_cycle_runs_with_the_collector_paused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    cluster = _Cluster()

    def cycle(**kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        raise _Stop

    monkeypatch.setattr(reconcile, "load_desired", lambda inventory: (object(), ()))
    monkeypatch.setattr(reconcile, "_connect", lambda kubeconfig, context: cluster)
    monkeypatch.setattr(reconcile, "reconcile_once", cycle)
    assert reconcile.command.callback is not None
    with pytest.raises(_Stop):
        reconcile.command.callback(
            once=True,
            kubeconfig=None,
            context=None,
            inventory=tmp_path,
            repo=None,
            branch="main",
            root="",
            cache_dir=None,
            dry_run=False,
            deadline=10.0,
            lock_timeout=1.0,
            output="json",
        )
    assert seen == [False]
    assert gc.isenabled() and cluster.closed
