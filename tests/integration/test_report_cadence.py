"""reports.minInterval end to end: the GitOps cycle (the one `migplan run`, `reconcile --once` and the
demo share) against the cluster twin, the report pushed over git:// to a real daemon on loopback.

Pods start and stop every cycle (occupancy-only changes): the reports branch gets at most one commit
per interval for them. A pod that asks for a whole GPU on a MIG node (a finding, a status change) and
its removal are each committed in the very cycle that first sees them. A held report is still what
`-o json` prints. Figures (cycles, commits, commits per hour, held cycles, the longest wait of a
status change in cycles) are printed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from gitserver import GitDaemon, git
from servedcluster import h200_fleet, served

from reconciler.adapters.git.reports import commit_report
from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.gitops import run_gitops_cycle
from reconciler.logic.reports import reportcadence
from reconciler.model.inventory import ReportSettings
from reconciler.outcome import CycleOutcome
from reconciler.sourcing import InventorySource
from reconciler.twin.cluster import ClusterTwin

pytestmark = [pytest.mark.timeout(240)]

INTERVAL_S = 3
NODES = 4
BRANCH = "migplan-reports"


@contextlib.contextmanager
def _cluster(tmp_path: Path, min_interval: str) -> Iterator[tuple[GitDaemon, KubeCluster, ClusterTwin, Path]]:
    files = h200_fleet("cadence", NODES, "{profile: 1g.18gb}", 7, min_interval=min_interval)
    with served(tmp_path, files) as up:
        yield up


def _source(daemon: GitDaemon, cache: Path) -> InventorySource:
    return InventorySource(GitRemote(daemon.url("inv"), cache, GitAuth(), timeout_ms=5000), ref="main")


@pytest.fixture()
def setup(tmp_path: Path) -> Iterator[tuple[InventorySource, KubeCluster, ClusterTwin, Path]]:
    with _cluster(tmp_path, f"{INTERVAL_S}s") as (daemon, cluster, twin, bare):
        yield _source(daemon, tmp_path / "cache"), cluster, twin, bare


def _converge(source: InventorySource, cluster: KubeCluster, twin: ClusterTwin) -> None:
    for _ in range(6):
        first = run_gitops_cycle(source=source, cluster=cluster, deadline=60)
        twin.settle()
        if first.result is not None and first.result.converged:
            return
    raise AssertionError(first.to_json())


def _pod(name: str, node: str) -> dict[str, Any]:
    request = {"nvidia.com/mig-1g.18gb": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "churn"}},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "image": "registry.example/x", "resources": {"requests": request, "limits": request}}
            ],
        },
    }


def _commits(bare: Path) -> list[tuple[int, str]]:
    """(commit time, message) of every report commit, oldest first."""
    out = git("log", "--reverse", "--format=%ct%x00%B%x01", BRANCH, cwd=bare, check=False)
    rows = []
    for chunk in out.split("\x01"):
        if "\x00" in chunk:
            stamp, message = chunk.split("\x00", 1)
            rows.append((int(stamp.strip()), message))
    return rows


def _has_finding(cycle: CycleOutcome, code: str) -> bool:
    report = cycle.result.report if cycle.result is not None else None
    return report is not None and any(f.code == code for f in report.findings)


def test_occupancy_churn_is_coalesced_and_status_changes_commit_at_once(setup: Any) -> None:
    source, cluster, twin, bare = setup
    store = twin.store

    def cycle() -> CycleOutcome:
        return run_gitops_cycle(source=source, cluster=cluster, deadline=60)

    _converge(source, cluster, twin)  # adoption labels, the first report
    base_commits = len(_commits(bare))
    assert base_commits >= 1

    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    running: list[str] = []
    status_delays: list[int] = []
    waiting_for: str | None = None  # "appear" / "clear": a status change made, not yet committed
    waited = 0
    n = 0
    while time.monotonic() - started < 4 * INTERVAL_S + 1:
        # churn: start a pod every cycle, stop the oldest once three run
        name = f"churn-{n}"
        store.create("pods", _pod(name, f"n{n % NODES}"), "default")
        store.patch("pods", name, {"status": {"phase": "Running"}}, "default", subresource="status")
        running.append(name)
        if len(running) > 3:
            store.delete("pods", running.pop(0), "default", grace_period_seconds=0)
        if n == 3:
            twin.inject("pod-wants-gpu")  # a finding: must be committed in this very cycle
            waiting_for, waited = "appear", 0
        if n == 8:
            twin.heal("pod-wants-gpu")  # the finding gone: also at once
            waiting_for, waited = "clear", 0
        before = datetime.now(UTC)
        c = cycle()
        n += 1
        time.sleep(0.2)  # a controller's interval, scaled down (and the shared CPUs spared)
        assert c.report is not None, c.to_json()
        has = _has_finding(c, "MP506")
        if (waiting_for == "appear" and has) or (waiting_for == "clear" and not has):
            status_delays.append(waited)
            assert c.report.status == "committed", c.to_json()
            assert c.to_json()["report"]["heldUntil"] is None
            tip = git("show", f"{BRANCH}:reports/drift.yaml", cwd=bare)
            assert ("MP506" in tip) == has
            waiting_for = None
        elif waiting_for is not None:
            waited += 1
        doc = c.to_json()
        rows.append({"status": c.report.status, "held_until": doc["report"]["heldUntil"]})
        if c.report.status == "held":
            # held back, yet this cycle's report is what -o json prints (the pod just started holds a
            # slice there) while the reports branch does not have it yet
            assert datetime.fromisoformat(doc["report"]["heldUntil"]) > before
            assert f"default/{name}" in json.dumps(doc["cycle"]["report"]["nodes"])
            assert f"default/{name}" not in git("show", f"{BRANCH}:reports/drift.yaml", cwd=bare)
    elapsed = time.monotonic() - started
    commits = _commits(bare)[base_commits - 1 :]  # the one before the churn, then those made during it

    # every report commit carries its digests; consecutive occupancy-only commits are an interval apart
    # (commit times are whole seconds, so one second of truncation is allowed)
    parsed = [(t, reportcadence.parse_trailers(m, "reports")) for t, m in commits]
    assert all(d is not None for _, d in parsed[1:]), commits
    occupancy_only_gaps = [
        b[0] - a[0]
        for a, b in itertools.pairwise(parsed)
        if a[1] is not None and b[1] is not None and a[1].status == b[1].status
    ]
    assert occupancy_only_gaps, "the churn never produced an occupancy-only commit"
    assert min(occupancy_only_gaps) >= INTERVAL_S - 1, occupancy_only_gaps
    held = sum(1 for r in rows if r["status"] == "held")
    made = sum(1 for r in rows if r["status"] == "committed")
    assert held > 0 and made == len(commits) - 1
    assert status_delays == [0, 0], status_delays
    status_commits = len(status_delays)
    # occupancy-only commits: at most one per interval (+1 for the boundary)
    assert made - status_commits <= elapsed / INTERVAL_S + 1, (made, status_commits, elapsed)
    print(
        f"\ncadence figures: cycles={len(rows)} wall_s={elapsed:.1f} minInterval={INTERVAL_S}s "
        f"commits={made} (status {status_commits}, occupancy {made - status_commits}) held={held} "
        f"commits_per_hour={made / elapsed * 3600:.0f} (uncoalesced: {len(rows) / elapsed * 3600:.0f}) "
        f"occupancy_gaps_s={occupancy_only_gaps} status_change_max_delay_cycles={max(status_delays)}"
    )


def test_cadence_survives_a_fresh_cache_and_another_clusters_commits(tmp_path: Path) -> None:
    """The last report commit is read from the branch, not from the process or its cache: a replica
    starting on an empty cache still holds occupancy churn back, and another cluster's reports
    committed on the same branch (under another reports.path) neither reset nor confuse it."""
    with _cluster(tmp_path, "1h") as (daemon, cluster, twin, bare):
        _converge(_source(daemon, tmp_path / "cache-a"), cluster, twin)
        ours = len(_commits(bare))
        # another cluster's report lands on the same branch
        other = InventoryRepo.open(GitRemote(daemon.url("inv"), tmp_path / "cache-other", GitAuth(), timeout_ms=5000))
        assert isinstance(other, InventoryRepo)
        digests = reportcadence.digests({"nodes": []}, {"drift.yaml": b"x: 1\n"}, {})
        pushed = commit_report(
            other,
            settings=ReportSettings(branch=BRANCH, path="reports-staging"),
            files={"drift.yaml": b"x: 1\n"},
            message=f"staging report\n\n{digests.trailers('reports-staging')}\n",
        )
        assert pushed.status == "committed"
        # a new replica, empty cache: a pod starts (occupancy only) -> held, not committed
        fresh = _source(daemon, tmp_path / "cache-b")
        store = twin.store
        store.create("pods", _pod("late", "n1"), "default")
        store.patch("pods", "late", {"status": {"phase": "Running"}}, "default", subresource="status")
        held = run_gitops_cycle(source=fresh, cluster=cluster, deadline=60)
        assert held.report is not None and held.report.status == "held", held.to_json()
        assert held.report.held_until is not None and held.report.held_until > datetime.now(UTC)
        assert "default/late" in json.dumps(held.to_json()["cycle"]["report"])
        assert len(_commits(bare)) == ours + 1  # only the other cluster's
        # a finding: committed at once, by the same fresh replica; the other cluster's files kept
        twin.inject("pod-wants-gpu")
        now = run_gitops_cycle(source=fresh, cluster=cluster, deadline=60)
        assert now.report is not None and now.report.status == "committed", now.to_json()
        assert "MP506" in git("show", f"{BRANCH}:reports/drift.yaml", cwd=bare)
        assert git("show", f"{BRANCH}:reports-staging/drift.yaml", cwd=bare) == "x: 1"
        # dry-run: the same cycle, nothing committed whatever changed
        twin.heal("pod-wants-gpu")
        dry = run_gitops_cycle(source=fresh, cluster=cluster, dry_run=True, deadline=60)
        assert dry.report is None and dry.to_json()["report"] is None
        assert len(_commits(bare)) == ours + 2
