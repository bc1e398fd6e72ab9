"""The bulk report rendered and written by two processes (issue 29, adapters/git/bulkfork.py).

A real report of a cluster twin's fleet stored forked and in one process gives the same blob ids, page index, tree,
memo and counts; a child that raises, is killed, leaves without a reply, sends garbage or names a blob that is not
there has its pages rendered by the parent (the same report), and a child still running at the cycle deadline fails
the report (GIT_FAILED) without naming a blob that is not in the object database. No child is left behind, and a
process with another thread alive, without os.fork or with one CPU never forks.

Real repositories, a real `git daemon` on loopback for the commits, real forks; what is patched is named where it
is (the CPUs the process may use, so that a one-CPU runner still tests the forked path; the child's reply bytes)."""

from __future__ import annotations

import _thread
import errno
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pygit2
import pytest
from gitserver import GitDaemon, make_bare, seed
from helpers import load_script
from helpers.reportfleet import fleet

from reconciler.adapters import deadline
from reconciler.adapters.git import bulkfork
from reconciler.adapters.git.reports import BotIdentity, commit_report
from reconciler.adapters.git.reportstore import StoredReport, store_report
from reconciler.adapters.git.source import GIT_FAILED, GitAuth, GitFailure, GitRemote, InventoryRepo
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import reconcile_once
from reconciler.logic.reports import pageindex, reports
from reconciler.logic.reports.reports import PageSource, RenderMemo
from reconciler.model.drift import DriftReport
from reconciler.model.inventory import ReportSettings
from reconciler.twin.cluster import ClusterTwin

REPO = Path(__file__).parents[2]
SETTINGS = ReportSettings(branch="migplan-reports", path="reports/par1")
BOT = BotIdentity("migplan-bot", "bot@example.com")
FP = "c0" * 32
# 40 nodes of one GPU: 80 files, the bulk path, several packs
SMALL: dict[str, Any] = {"bulk_from": 10, "pack_bytes": 20_000}


@pytest.fixture()
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process may run on two CPUs, whatever the runner has: the forked path is what is tested."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})


@pytest.fixture()
def forks(monkeypatch: pytest.MonkeyPatch) -> list[bulkfork.Rendered]:
    """What each render_in_two call gave (none: store_report kept one process)."""
    seen: list[bulkfork.Rendered] = []
    real = bulkfork.render_in_two

    def spy(*args: Any, **kwargs: Any) -> bulkfork.Rendered:
        out = real(*args, **kwargs)
        seen.append(out)
        return out

    monkeypatch.setattr(bulkfork, "render_in_two", spy)
    return seen


@pytest.fixture()
def remote(tmp_path: Path) -> Iterator[GitDaemon]:
    srv = tmp_path / "srv"
    srv.mkdir()
    for name in ("one", "two"):
        seed(make_bare(srv, name), tmp_path / f"work-{name}", {"inv/cluster.yaml": "kind: Cluster\n"})
    daemon = GitDaemon(srv).start()
    yield daemon
    daemon.stop()


def _repo(url: str, cache: Path) -> InventoryRepo:
    repo = InventoryRepo.open(GitRemote(url, cache, GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    return repo


def _local(tmp_path: Path, name: str) -> InventoryRepo:
    """A repository of its own (no remote needed to store a report: store_report only writes objects)."""
    bare = tmp_path / f"{name}.git"
    pygit2.init_repository(str(bare), bare=True)
    return _repo(str(bare), tmp_path / f"cache-{name}")


def _store(
    repo: InventoryRepo, report: DriftReport, *, pages: list[PageSource] | None = None, **kw: Any
) -> StoredReport | GitFailure:
    return store_report(
        repo,
        branch=SETTINGS.branch,
        path=SETTINGS.path,
        top=reports.render_top_files(report),
        pages=pages if pages is not None else reports.page_sources(report),
        fingerprint=FP,
        **kw,
    )


def _in_odb(repo: InventoryRepo, stored: StoredReport) -> None:
    """Every blob the report names reads back from a fresh handle, equal to a full render's bytes."""
    other = pygit2.Repository(repo.repo.path)
    for path, oid in stored.blobs.items():
        assert other.odb.read_header(oid)[0] == pygit2.enums.ObjectType.BLOB, path


def _gone(pid: int) -> bool:
    """The child was reaped: not even a zombie is left (a zombie is still a child waitpid can see)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _fds() -> set[str]:
    """The pipes this process holds open (a pipe end left open would show here). Only pipes: other descriptors
    (a repository's pack files, an earlier test's sockets) may close while the garbage collector runs."""
    pipes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed between the listing and the read
            continue
        if target.startswith("pipe:"):
            pipes.add(f"{fd}:{target}")
    return pipes


def _twin_report(root: Path, nodes: int) -> DriftReport:
    """The first cycle's report of a twin fleet (benchmarks/validate.py's block inventory, 8 GPUs a node)."""
    inventory = root / "inventory"
    load_script("bench_validate_fork", REPO / "benchmarks" / "validate.py").generate(inventory, nodes, "block")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=inventory, check=True)
    desired, diagnostics = load_desired(inventory)
    assert desired is not None, diagnostics
    with ClusterTwin.from_inventory(inventory, kubeconfig=root / "kubeconfig") as twin:
        twin.settle(timeout=300)
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
        try:
            result = reconcile_once(desired=desired, cluster=cluster, dry_run=True)
        finally:
            cluster.close()
    assert result.report is not None
    return result.report


def _tree(bare: Path) -> str:
    return str(pygit2.Repository(str(bare)).revparse_single(f"{SETTINGS.branch}:{SETTINGS.path}").id)


def test_a_twin_fleets_report_stored_forked_is_the_one_stored_in_one_process(
    remote: GitDaemon, tmp_path: Path, two_cpus: None, forks: list[bulkfork.Rendered]
) -> None:
    report = _twin_report(tmp_path, 150)
    assert bulkfork.may_fork()  # the twin's threads are gone: this process is single-threaded again
    kw: dict[str, Any] = {"bulk_from": 200, "pack_bytes": 200_000}
    one, two = _repo(remote.url("one"), tmp_path / "c1"), _repo(remote.url("two"), tmp_path / "c2")
    memo_one, memo_two = RenderMemo(), RenderMemo()
    single = _store(one, report, memo=memo_one, fork=False, **kw)
    assert forks == []
    forked = _store(two, report, memo=memo_two, **kw)
    assert isinstance(single, StoredReport) and isinstance(forked, StoredReport)
    assert len(forks) == 1 and forks[0].forked and forks[0].child_maxrss_kb > 0  # the child's share came from it
    pages = len(report.nodes) + sum(len(g) for g in report.slice_maps.values())
    assert forked.rendered == pages > 1000  # every node page and map of 150 nodes of 8 GPUs
    assert (forked.rendered, forked.reused, forked.packed) == (single.rendered, single.reused, single.packed)
    assert forked.blobs == single.blobs  # the same ids, the page index's and the top files' included
    assert memo_two.stored == memo_one.stored and memo_two.rendered == memo_one.rendered
    _in_odb(two, forked)
    packs = list((Path(two.repo.path) / "objects" / "pack").glob("*.pack"))
    assert len(packs) >= 4  # each process wrote packs of its own
    for repo, stored in ((one, single), (two, forked)):
        out = commit_report(repo, settings=SETTINGS, files={}, blobs=stored.blobs, message="r1\n", bot=BOT)
        assert out.status == "committed", out
    assert _tree(tmp_path / "srv" / "two.git") == _tree(tmp_path / "srv" / "one.git")
    # what the remote holds is the full render, byte for byte
    bare = pygit2.Repository(str(tmp_path / "srv" / "two.git"))
    files = reports.render_reports(report)
    for path, data in files.items():
        spec = f"{SETTINGS.branch}:{SETTINGS.path}/{path}"
        assert bytes(bare.revparse_single(spec).peel(pygit2.Blob).data) == data, path
    assert pageindex.INDEX_FILE in forked.blobs


def _child_only(report: DriftReport, act: Any) -> list[PageSource]:
    """The report's pages, each of which calls `act()` first when rendered in a process other than this one."""
    parent = os.getpid()

    def wrap(page: PageSource) -> PageSource:
        def render() -> bytes:
            if os.getpid() != parent:
                act()
            return page.render()

        return replace(page, render=render)

    return [wrap(p) for p in reports.page_sources(report)]


def _pid_file(tmp_path: Path) -> Path:
    return tmp_path / "child.pid"


def _note_pid(path: Path) -> None:
    if not path.exists():
        path.write_text(str(os.getpid()))


def _hang(pid_file: Path) -> Callable[[], None]:
    """What a child that never answers does when it renders: note its pid, then sleep past any deadline."""

    def hang() -> None:
        _note_pid(pid_file)
        time.sleep(60)

    return hang


@pytest.mark.parametrize("how", ["raises", "killed", "leaves-without-reply"])
def test_a_failed_child_has_its_pages_rendered_by_the_parent(
    tmp_path: Path, two_cpus: None, forks: list[bulkfork.Rendered], how: str, caplog: pytest.LogCaptureFixture
) -> None:
    report = fleet(40, set(range(40)))
    pid_file = _pid_file(tmp_path)

    def act() -> None:
        _note_pid(pid_file)
        if how == "raises":
            raise RuntimeError("renderer broke")
        if how == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(0)  # exit status 0, nothing sent

    expected = _store(_local(tmp_path, "single"), report, fork=False, **SMALL)
    repo = _local(tmp_path, "forked")
    fds = _fds()
    with caplog.at_level(logging.WARNING, logger="migplan.report"):
        stored = _store(repo, report, pages=_child_only(report, act), **SMALL)
    assert _fds() <= fds  # both pipe ends closed: no pipe left open that was not there before
    assert isinstance(stored, StoredReport) and isinstance(expected, StoredReport)
    assert len(forks) == 1 and not forks[0].forked  # a child ran, and its share came from the parent
    assert stored == expected
    _in_odb(repo, stored)
    assert _gone(int(pid_file.read_text()))
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "the forked renderer failed" in said
    if how == "raises":
        assert "RuntimeError: renderer broke" in said
    elif how == "killed":
        assert "exit status -9" in said


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _with(reply: dict[str, Any], **changed: Any) -> bytes:
    return json.dumps({**reply, **changed}).encode()


GARBAGE = {
    "not json": lambda reply: b"\x00\xffgarbage",
    "short": lambda reply: _with(reply)[:-7],
    "empty": lambda reply: b"",
    "paths of another share": lambda reply: _with(reply, paths=reply["paths"][::-1]),
    "one id short": lambda reply: _with(reply, ids=reply["ids"][:-1]),
    "malformed id": lambda reply: _with(reply, ids=["../x" * 10, *reply["ids"][1:]]),
    "an id not in the database": lambda reply: _with(reply, ids=["ab" * 20, *reply["ids"][1:]]),
    "the id of a tree": lambda reply: _with(reply, ids=[EMPTY_TREE, *reply["ids"][1:]]),  # libgit2 always has it
    "packed count a string": lambda reply: _with(reply, packed="40"),
    "packed more than sent": lambda reply: _with(reply, packed=10**6),
    "oversized": lambda reply: b" " * 2_000_000,
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_a_child_reply_that_cannot_be_believed_is_rendered_again_by_the_parent(
    tmp_path: Path, two_cpus: None, forks: list[bulkfork.Rendered], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    report = fleet(40, set(range(40)))
    expected = _store(_local(tmp_path, "single"), report, fork=False, **SMALL)
    monkeypatch.setattr(bulkfork, "_reply_bytes", GARBAGE[kind])  # inherited by the child: what it sends back
    repo = _local(tmp_path, "forked")
    stored = _store(repo, report, **SMALL)
    assert isinstance(stored, StoredReport) and isinstance(expected, StoredReport)
    assert len(forks) == 1 and not forks[0].forked
    assert stored == expected
    _in_odb(repo, stored)


def test_a_child_past_the_cycle_deadline_is_killed_and_the_report_fails(
    tmp_path: Path, two_cpus: None, forks: list[bulkfork.Rendered]
) -> None:
    report = fleet(40, set(range(40)))
    pid_file = _pid_file(tmp_path)
    repo = _local(tmp_path, "forked")
    started = time.monotonic()
    with deadline.cycle_deadline(2.0):
        failed = _store(repo, report, pages=_child_only(report, _hang(pid_file)), **SMALL)
    assert isinstance(failed, GitFailure) and failed.code == GIT_FAILED
    assert "cycle deadline" in failed.message
    assert time.monotonic() - started < 30  # killed at the deadline, not waited for (a bound, not a timing claim)
    assert forks == []  # render_in_two raised: nothing came back
    assert _gone(int(pid_file.read_text()))


def test_a_child_past_its_own_timeout_without_a_cycle_deadline_is_replaced_by_the_parent(
    tmp_path: Path, two_cpus: None, forks: list[bulkfork.Rendered], monkeypatch: pytest.MonkeyPatch
) -> None:
    report = fleet(40, set(range(40)))
    pid_file = _pid_file(tmp_path)
    monkeypatch.setattr(bulkfork, "CHILD_TIMEOUT", 1.0)
    expected = _store(_local(tmp_path, "single"), report, fork=False, **SMALL)
    stored = _store(_local(tmp_path, "forked"), report, pages=_child_only(report, _hang(pid_file)), **SMALL)
    assert isinstance(stored, StoredReport) and stored == expected
    assert len(forks) == 1 and not forks[0].forked
    assert _gone(int(pid_file.read_text()))


def test_a_page_that_fails_in_the_parent_fails_as_in_one_process_and_leaves_no_child(
    tmp_path: Path, two_cpus: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = fleet(40, set(range(40)))
    children: list[int] = []
    fork = os.fork

    def recorded() -> int:
        pid = fork()
        if pid:
            children.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recorded)
    pages = list(reports.page_sources(report))

    def broken() -> bytes:
        raise ValueError("page cannot be rendered")

    pages[0] = replace(pages[0], render=broken)  # position 0: the parent's share
    with pytest.raises(ValueError, match="page cannot be rendered"):
        _store(_local(tmp_path, "forked"), report, pages=pages, **SMALL)
    assert len(children) == 1 and _gone(children[0])


@pytest.mark.parametrize("why", ["another thread", "a thread Python does not count", "one cpu", "no fork"])
def test_no_fork_where_it_is_not_safe(
    tmp_path: Path, two_cpus: None, forks: list[bulkfork.Rendered], monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    report = fleet(40, set(range(40)))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="watch")
    raw = _thread.allocate_lock()  # held by a thread started below the threading module, as a C library's would be
    raw_done = _thread.allocate_lock()
    if why == "another thread":
        other.start()
    elif why == "a thread Python does not count":
        raw.acquire()
        raw_done.acquire()

        def wait_raw() -> None:
            with raw:
                pass
            raw_done.release()

        _thread.start_new_thread(wait_raw, ())
        assert threading.active_count() == 1  # invisible to Python's count: only the kernel's task list shows it
    elif why == "one cpu":
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    else:
        monkeypatch.delattr(os, "fork")
    try:
        assert not bulkfork.may_fork()
        stored = _store(_local(tmp_path, "r"), report, **SMALL)
    finally:
        stop.set()
        if other.is_alive():
            other.join()
        if raw.locked():
            raw.release()
            with raw_done:  # the raw thread has left its function
                pass
            for _ in range(500):  # and then the process (the next test must find one task again)
                if len(os.listdir("/proc/self/task")) == 1:
                    break
                time.sleep(0.01)
    assert isinstance(stored, StoredReport) and (stored.rendered, stored.packed) == (80, 80)
    assert forks == []  # one process, as before


def test_a_memo_naming_blobs_another_repository_holds_renders_them_again(tmp_path: Path) -> None:
    # The memo's check is the object database's (the object's header, not the object): a page whose remembered blob
    # is not in this repository is rendered again, never named unwritten.
    report = fleet(40, set(range(40)))
    memo = RenderMemo()
    first = _store(_local(tmp_path, "a"), report, memo=memo, fork=False)
    assert isinstance(first, StoredReport) and first.rendered == 80
    again = _store(_local(tmp_path, "a2"), report, memo=memo, fork=False)  # the same memo, another repository
    assert isinstance(again, StoredReport) and (again.rendered, again.reused) == (80, 0)
    repo = _local(tmp_path, "a3")
    third = _store(repo, report, memo=memo, fork=False)
    fourth = _store(repo, report, memo=memo, fork=False)  # now the memo's blobs are here
    assert isinstance(third, StoredReport) and isinstance(fourth, StoredReport)
    assert (fourth.rendered, fourth.reused) == (0, 80) and fourth.blobs == third.blobs
    _in_odb(repo, fourth)


def test_no_process_to_fork_renders_every_page_here(
    tmp_path: Path, two_cpus: None, forks: list[bulkfork.Rendered], monkeypatch: pytest.MonkeyPatch
) -> None:
    report = fleet(40, set(range(40)))
    expected = _store(_local(tmp_path, "single"), report, fork=False, **SMALL)

    def refused() -> int:
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")  # fork(2) at the process limit

    monkeypatch.setattr(os, "fork", refused)
    repo = _local(tmp_path, "forked")
    fds = _fds()
    stored = _store(repo, report, **SMALL)
    assert _fds() <= fds
    assert isinstance(stored, StoredReport) and stored == expected
    assert len(forks) == 1 and not forks[0].forked
    _in_odb(repo, stored)
