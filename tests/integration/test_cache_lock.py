"""Concurrent runs on one cache directory are safe: two `migplan reconcile --once` (or a CronJob
overlapping the controller) sharing `--cache-dir` run their cycles one after the other on the cache's
lock, or the second gives up cleanly (MP830, exit 2) having touched nothing. No process reports a
commit that is not on the remote, and no outbox entry is lost or pushed twice.

Real processes, a real `git daemon` on loopback, the cluster twin.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from gitserver import GitDaemon, git, make_bare, seed

from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
REPORTS = "migplan-reports"


@dataclass
class Rig:
    bare: Path
    work: Path
    url: str
    kubeconfig: Path


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    files = {str(p.relative_to(INVENTORY)): p.read_text() for p in INVENTORY.rglob("*.yaml")}
    bare = make_bare(tmp_path / "srv", "inventory")
    seed(bare, tmp_path / "work", files)
    daemon = GitDaemon(tmp_path / "srv").start()
    try:
        with ClusterTwin.from_inventory(INVENTORY) as twin:
            twin.settle()
            yield Rig(bare, tmp_path / "work", daemon.url("inventory"), Path(twin.kubeconfig))
    finally:
        daemon.stop()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGPLAN_")}
    env.pop("KUBECONFIG", None)
    return env


def _reconcile(rig: Rig, cache: Path, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "reconciler", "reconcile", "--once", "--kubeconfig", str(rig.kubeconfig),
            "--repo", rig.url, "--cache-dir", str(cache), "-o", "json", *extra]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=180)
    return proc.returncode, out, err


def _report_commits(bare: Path) -> list[str]:
    if not git("rev-parse", "--verify", "-q", f"refs/heads/{REPORTS}", cwd=bare, check=False):
        return []
    return git("rev-list", REPORTS, cwd=bare).split()


def _outbox_entries(cache: Path) -> list[Path]:
    return sorted((cache / "outbox").rglob("*.json")) if (cache / "outbox").exists() else []


def test_a_run_waits_for_the_lock_then_gives_up_cleanly_having_touched_nothing(rig: Rig, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    # Another migplan process mid-cycle, as far as the lock protocol goes: it holds the flock.
    with open(cache / "migplan.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, out, err = _finish(_reconcile(rig, cache, "--lock-timeout", "1"))
    assert code == 2 and "Traceback" not in out + err, out + err
    assert "MP830" in err, err
    assert sorted(p.name for p in cache.iterdir()) == ["migplan.lock"]  # no fetch, no state, no outbox
    assert _report_commits(rig.bare) == []


def test_the_controller_cycle_waits_for_the_same_lock(rig: Rig, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {**_env(), "MIGPLAN_CACHE_LOCK_TIMEOUT_SECONDS": "1"}
    argv = [sys.executable, "-m", "reconciler", "run", "--once", "--repo", rig.url,
            "--kubeconfig", str(rig.kubeconfig), "--cache-dir", str(cache)]  # fmt: skip
    with open(cache / "migplan.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "MP830" in proc.stdout + proc.stderr
    assert sorted(p.name for p in cache.iterdir()) == ["migplan.lock"]


def test_two_runs_sharing_a_cache_serialize_and_lose_or_duplicate_nothing(rig: Rig, tmp_path: Path) -> None:
    cache = tmp_path / "shared-cache"
    reported: list[str] = []
    for round_ in range(3):
        if round_:
            # A change in every round, so that each round has a new report to commit.
            node = rig.work / "nodes" / "gpu-h100-01.yaml"
            node.write_text(node.read_text().replace("owner: eval", f"owner: eval-r{round_}", 1))
            git("commit", "-qam", f"round {round_}", cwd=rig.work)
            git("push", "-q", "origin", "HEAD:main", cwd=rig.work)
        procs = [_reconcile(rig, cache) for _ in range(2)]
        for code, out, err in map(_finish, procs):
            assert "Traceback" not in out + err, out + err
            assert code in (0, 1), out + err  # serialized: neither failed, neither gave up
            report = json.loads(out)["report"]
            assert report is not None and report["status"] in ("committed", "unchanged"), report
            assert report["pending"] == 0, report
            if report["commit"]:
                reported.append(report["commit"])
    on_remote = _report_commits(rig.bare)
    # Every commit a process reported is on the remote's reports branch ...
    assert reported and set(reported) <= set(on_remote), (reported, on_remote)
    # ... none twice, and no two commits on the branch carry the same report (nothing pushed twice) ...
    assert len(reported) == len(set(reported))
    trees = [git("rev-parse", f"{c}^{{tree}}", cwd=rig.bare) for c in on_remote]
    assert len(trees) == len(set(trees)), "a report was committed twice"
    # ... and the outbox holds nothing: no entry was left behind or set aside.
    assert _outbox_entries(cache) == []
    assert not [p for p in (cache / "outbox").rglob("*") if p.is_file()]
