"""Reports committed back: change detection, orphan branch, unsafe paths, outbox across a server
outage and a restart, and a concurrent pusher racing migplan on the reports branch."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from gitserver import GitDaemon, HttpGitServer, SshGitServer, git, make_bare, seed

from reconciler.adapters.git import source as gitsource
from reconciler.adapters.git.reports import BotIdentity, Outbox, commit_report, flush_outbox, report_message
from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
from reconciler.model.inventory import ReportSettings
from reconciler.model.revisions import Revision

SETTINGS = ReportSettings(branch="migplan-reports", path="reports/par1")
BOT = BotIdentity("migplan-bot", "bot@example.com")
REV = Revision("main", "ab" * 20)


def _report(n: int) -> dict[str, bytes]:
    return {"drift.yaml": f"drifted: {n}\n".encode(), "README.md": f"# Drift\n\n{n} drifted\n".encode()}


@pytest.fixture()
def remote(tmp_path: Path):
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "work", {"inv/cluster.yaml": "kind: Cluster\n"})
    daemon = GitDaemon(srv).start()
    yield daemon, bare
    daemon.stop()


def _repo(url: str, cache: Path, auth: GitAuth | None = None) -> InventoryRepo:
    repo = InventoryRepo.open(GitRemote(url, cache, auth or GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    return repo


def _log(bare: Path, branch: str) -> list[str]:
    out = git("log", "--format=%H %P|%an <%ae>|%s", branch, cwd=bare)
    return out.splitlines() if out else []


def test_first_report_creates_orphan_branch_then_only_changes_commit(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    msg = report_message(REV, {"drifted": 3, "missing": 1, "undocumented": 0})
    assert msg == f"migplan: drift report for main@sha1:{'ab' * 20} — 3 drifted, 1 missing"
    assert report_message(REV, {"InSync": 4, "Drifted": 1, "Error": 0}).endswith("— 4 in sync, 1 drifted")
    assert report_message(REV, {"Drifted": 0}).endswith("— in sync")
    first = commit_report(repo, settings=SETTINGS, files=_report(3), message=msg, bot=BOT)
    assert first.status == "committed" and first.commit is not None and first.pending == 0
    log = _log(bare, SETTINGS.branch)
    assert len(log) == 1
    sha_parents, author, subject = log[0].split("|")
    assert sha_parents.strip() == first.commit  # orphan: no parent
    assert author == "migplan-bot <bot@example.com>" and subject == msg
    assert git("show", f"{SETTINGS.branch}:reports/par1/drift.yaml", cwd=bare) == "drifted: 3"
    assert git("ls-tree", "-r", "--name-only", SETTINGS.branch, cwd=bare).splitlines() == [
        "reports/par1/README.md",
        "reports/par1/drift.yaml",
    ]
    # same content again (a new process, same cache): no commit
    again = commit_report(repo, settings=SETTINGS, files=_report(3), message=msg, bot=BOT)
    assert again.status == "unchanged" and again.commit is None
    assert len(_log(bare, SETTINGS.branch)) == 1
    # changed content: one commit on top, and a report file that disappeared is removed
    changed = commit_report(repo, settings=SETTINGS, files={"drift.yaml": b"drifted: 0\n"}, message="m2", bot=BOT)
    assert changed.status == "committed"
    log = _log(bare, SETTINGS.branch)
    assert len(log) == 2 and log[0].split("|")[0].split()[1] == first.commit
    assert git("ls-tree", "-r", "--name-only", SETTINGS.branch, cwd=bare).splitlines() == ["reports/par1/drift.yaml"]
    # the inventory branch was never touched
    assert "migplan" not in git("log", "--format=%an", "main", cwd=bare)


def test_other_files_on_the_branch_are_kept(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    seed(bare, tmp_path / "work", {"NOTES.md": "human notes\n"}, message="notes", branch=SETTINGS.branch)
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    out = commit_report(repo, settings=SETTINGS, files=_report(1), message="m", bot=BOT)
    assert out.status == "committed"
    names = git("ls-tree", "-r", "--name-only", SETTINGS.branch, cwd=bare).splitlines()
    assert "NOTES.md" in names and "reports/par1/drift.yaml" in names


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("reports", "../escape.yaml"),
        ("reports", "/etc/passwd"),
        ("reports", "a\\b.yaml"),
        ("reports", "nul\x00.yaml"),
        ("reports", "sub//x.yaml"),
        ("reports", ".git/config"),
        ("../reports", "drift.yaml"),
        ("/abs", "drift.yaml"),
        ("", "drift.yaml"),
    ],
)
def test_unsafe_paths_are_refused_and_nothing_is_written(remote, tmp_path: Path, path: str, name: str) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    out = commit_report(
        repo, settings=ReportSettings(branch="r", path=path), files={name: b"x", "ok.yaml": b"y"}, message="m"
    )
    assert out.status == "refused" and out.failure is not None and out.failure.code == gitsource.UNSAFE_PATH
    assert git("branch", "--list", "r", cwd=bare) == ""
    assert Outbox.for_repo(repo).entries() == []


def test_server_down_mid_cycle_keeps_report_in_outbox_until_it_is_back(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    assert repo.fetch() is None  # the cycle's fetch worked ...
    daemon.stop()  # ... then the server goes down before the report is pushed
    down = commit_report(repo, settings=SETTINGS, files=_report(1), message="report 1", bot=BOT)
    assert down.status == "queued" and down.pending == 1
    assert down.failure is not None and down.failure.code == gitsource.UNREACHABLE
    down2 = commit_report(repo, settings=SETTINGS, files=_report(2), message="report 2", bot=BOT)
    assert down2.status == "queued" and down2.pending == 2
    # the process restarts: a new InventoryRepo on the same cache dir finds the outbox
    daemon.start()
    restarted = _repo(daemon.url("inv"), tmp_path / "cache")
    assert len(Outbox.for_repo(restarted).entries()) == 2
    back = flush_outbox(restarted)
    assert back.status == "committed" and len(back.pushed) == 2 and back.pending == 0
    subjects = [line.split("|")[2] for line in _log(bare, SETTINGS.branch)]
    assert subjects == ["report 2", "report 1"]  # both kept, in order
    assert Outbox.for_repo(restarted).entries() == []


def test_concurrent_pusher_races_migplan(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    seed(bare, tmp_path / "work", {"other/0.txt": "0\n"}, message="pusher 0", branch=SETTINGS.branch)
    pusher_dir = tmp_path / "pusher"
    git("clone", "-q", "-b", SETTINGS.branch, daemon.url("inv"), str(pusher_dir))
    stop, first_push = threading.Event(), threading.Event()
    pushed_by_pusher: list[str] = []
    errors: list[str] = []

    def pusher() -> None:
        n = 0
        while not stop.is_set() and n < 40:
            n += 1
            (pusher_dir / "other").mkdir(exist_ok=True)
            (pusher_dir / "other" / f"{n}.txt").write_text(f"{n}\n")
            git("add", "-A", cwd=pusher_dir)
            git("commit", "-q", "-m", f"pusher {n}", cwd=pusher_dir)
            for _ in range(50):  # a well-behaved human: rebase on rejection, retry
                if git("push", "-q", "origin", f"HEAD:{SETTINGS.branch}", cwd=pusher_dir, check=False) == "" and (
                    git("rev-parse", "HEAD", cwd=pusher_dir) == git("rev-parse", SETTINGS.branch, cwd=bare)
                ):
                    pushed_by_pusher.append(f"pusher {n}")
                    first_push.set()
                    break
                git("pull", "-q", "--rebase", "origin", SETTINGS.branch, cwd=pusher_dir, check=False)
            else:
                errors.append(f"pusher {n} never got in")

    thread = threading.Thread(target=pusher)
    thread.start()
    assert first_push.wait(60), "the pusher could not push at all"  # the race is on from here
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    outcomes = [
        commit_report(repo, settings=SETTINGS, files=_report(i), message=f"report {i}", bot=BOT, max_attempts=30)
        for i in range(8)
    ]
    stop.set()
    thread.join(timeout=120)
    print("report attempts:", [o.attempts for o in outcomes], "pusher commits:", len(pushed_by_pusher))
    assert not errors
    # A report that lost every retry against this busy pusher stays queued, in order; nothing is lost.
    assert all(o.status in ("committed", "queued") for o in outcomes), outcomes
    assert flush_outbox(repo).pending == 0
    log = _log(bare, SETTINGS.branch)
    subjects = [line.split("|")[2] for line in log]
    for i in range(8):
        assert subjects.count(f"report {i}") == 1
    for s in pushed_by_pusher:
        assert s in subjects
    assert pushed_by_pusher, "the pusher never pushed: the race was not exercised"
    assert all(len(line.split("|")[0].split()) <= 2 for line in log)  # linear: at most one parent each
    assert git("show", f"{SETTINGS.branch}:reports/par1/drift.yaml", cwd=bare) == "drifted: 7"


def test_local_repository_gets_the_report_on_its_branch_only(tmp_path: Path) -> None:
    work = tmp_path / "local"
    git("init", "-q", "-b", "main", str(work))
    (work / "cluster.yaml").write_text("kind: Cluster\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "init", cwd=work)
    repo = _repo(str(work), tmp_path / "cache")
    out = commit_report(repo, settings=SETTINGS, files=_report(5), message="local report", bot=BOT)
    assert out.status == "committed"
    assert git("show", f"{SETTINGS.branch}:reports/par1/drift.yaml", cwd=work) == "drifted: 5"
    assert git("status", "--porcelain", cwd=work) == ""  # work tree and index untouched
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=work) == "main"
    assert commit_report(repo, settings=SETTINGS, files=_report(5), message="again", bot=BOT).status == "unchanged"


def test_push_with_wrong_http_credentials_is_kept(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "work", {"inv/cluster.yaml": "x\n"})
    http = HttpGitServer(srv).start()
    try:
        bad = _repo(http.url("inv"), tmp_path / "cache", GitAuth(username=http.user, password="nope"))
        out = commit_report(bad, settings=SETTINGS, files=_report(1), message="r", bot=BOT)
        assert out.status == "queued" and out.failure is not None
        assert out.failure.code == gitsource.AUTH_REFUSED
        good = _repo(http.url("inv"), tmp_path / "cache", GitAuth(username=http.user, password=http.password))
        back = flush_outbox(good)
        assert back.status == "committed" and back.pending == 0
        assert git("show", f"{SETTINGS.branch}:reports/par1/drift.yaml", cwd=bare) == "drifted: 1"
    finally:
        http.stop()


@pytest.mark.parametrize("server_denies_non_ff", [True, False], ids=["server-denies", "server-allows-force"])
def test_push_rejected_after_fetch_is_recreated_on_the_new_tip(
    remote, tmp_path: Path, monkeypatch, server_denies_non_ff: bool
) -> None:
    """Deterministic race: someone pushes right after migplan fetched, so migplan's push is refused —
    also on a server that would accept a non-fast-forward (most hosted ones do for force pushes)."""
    daemon, bare = remote
    git("config", "receive.denyNonFastForwards", str(server_denies_non_ff).lower(), cwd=bare)
    seed(bare, tmp_path / "work", {"other/a.txt": "a\n"}, message="human 1", branch=SETTINGS.branch)
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    real_fetch = InventoryRepo.fetch
    calls = {"n": 0}

    def fetch_then_someone_pushes(self: InventoryRepo):  # type: ignore[no-untyped-def]
        got = real_fetch(self)
        calls["n"] += 1
        if calls["n"] == 1:
            seed(bare, tmp_path / "work", {"other/b.txt": "b\n"}, message="human 2", branch=SETTINGS.branch)
        return got

    monkeypatch.setattr(InventoryRepo, "fetch", fetch_then_someone_pushes)
    out = commit_report(repo, settings=SETTINGS, files=_report(1), message="report", bot=BOT)
    assert out.status == "committed" and out.attempts == 2, out
    subjects = [line.split("|")[2] for line in _log(bare, SETTINGS.branch)]
    assert subjects == ["report", "human 2", "human 1", "seed"]
    assert git("show", f"{SETTINGS.branch}:other/b.txt", cwd=bare) == "b"


def test_outbox_does_not_grow_with_identical_reports_during_an_outage(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    daemon.stop()
    for _ in range(5):
        out = commit_report(repo, settings=SETTINGS, files=_report(1), message="same", bot=BOT)
        assert out.status == "queued"
    assert out.pending == 1
    daemon.start()
    back = flush_outbox(repo)
    assert back.status == "committed" and len(_log(bare, SETTINGS.branch)) == 1


def test_report_pushed_over_ssh(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "work", {"inv/cluster.yaml": "x\n"})
    ssh = SshGitServer(srv).start()
    try:
        auth = GitAuth(ssh_private_key=ssh.client_key, known_hosts=ssh.known_hosts)
        out = commit_report(
            _repo(ssh.url("inv"), tmp_path / "cache", auth), settings=SETTINGS, files=_report(4), message="r"
        )
    finally:
        ssh.stop()
    assert out.status == "committed", out
    assert git("show", f"{SETTINGS.branch}:reports/par1/drift.yaml", cwd=bare) == "drifted: 4"


@pytest.mark.parametrize("branch", ["", "a:refs/heads/main", "+main", "refs/heads/x", "bad..name", "-x", "a b"])
def test_unsafe_branch_names_are_refused(remote, tmp_path: Path, branch: str) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    before = git("for-each-ref", cwd=bare)
    out = commit_report(repo, settings=ReportSettings(branch=branch, path="reports"), files=_report(1), message="m")
    assert out.status == "refused" and out.failure is not None and out.failure.code == gitsource.UNSAFE_PATH
    assert git("for-each-ref", cwd=bare) == before


def test_checked_out_branch_of_a_local_work_tree_is_not_moved(tmp_path: Path) -> None:
    work = tmp_path / "local"
    git("init", "-q", "-b", "main", str(work))
    (work / "cluster.yaml").write_text("kind: Cluster\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "init", cwd=work)
    head = git("rev-parse", "HEAD", cwd=work)
    repo = _repo(str(work), tmp_path / "cache")
    out = commit_report(repo, settings=ReportSettings(branch="main", path="reports"), files=_report(1), message="m")
    assert out.status == "refused" and out.failure is not None and "checked out" in out.failure.message
    assert git("rev-parse", "HEAD", cwd=work) == head and git("status", "--porcelain", cwd=work) == ""


def test_damaged_or_edited_outbox_entries_are_set_aside_not_pushed(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    outbox = Outbox.for_repo(repo)
    (outbox.directory / "0000000001.json").write_text("{not json")
    outbox.put({"branch": "r", "path": "../../etc", "message": "m", "author": ["a", "b"], "files": {"x": ""}})
    out = commit_report(repo, settings=SETTINGS, files=_report(2), message="good", bot=BOT)
    assert out.status == "committed" and out.pending == 0
    assert sorted(p.suffix for p in outbox.directory.iterdir()) == [".refused", ".unreadable"]
    assert git("branch", "--list", "r", cwd=bare) == ""
    assert [line.split("|")[2] for line in _log(bare, SETTINGS.branch)] == ["good"]


def test_unwritable_outbox_is_a_failure_not_a_silent_loss(remote, tmp_path: Path) -> None:
    daemon, _bare = remote
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "outbox").write_text("a file where the outbox directory should be")
    out = commit_report(_repo(daemon.url("inv"), cache), settings=SETTINGS, files=_report(1), message="m")
    assert out.status == "failed" and out.failure is not None and "outbox" in out.failure.message


def _fleet_report(names: list[str], *, drifted: str | None = None, held: str | None = None) -> dict[str, bytes]:
    """The real rendered report of a small fleet: one node Drifted, one with a partition held."""
    from reconciler.logic.reports import reports
    from reconciler.model.drift import DriftReport, Finding, Holder, NodeReport, NodeStatus, Occupancy

    nodes = []
    for name in names:
        used = 1 if name == held else 0
        occ = (Occupancy(name, "1g.18gb", 7, used, (Holder("ml/p", 1),) if used else ()),)
        if name == drifted:
            nodes.append(NodeReport(name, NodeStatus.DRIFTED, (Finding("MP501", "differs", node=name),), occ))
        else:
            nodes.append(NodeReport(name, NodeStatus.IN_SYNC, (), occ))
    return reports.render_reports(DriftReport("c", REV, "mixed", tuple(nodes)))


def _changed(bare: Path) -> list[str]:
    return git("diff", "--name-only", f"{SETTINGS.branch}~1", SETTINGS.branch, cwd=bare).splitlines()


def test_a_report_commit_touches_only_the_pages_that_changed(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    names = [f"gpu-{i:02d}" for i in range(30)]
    assert commit_report(repo, settings=SETTINGS, files=_fleet_report(names), message="m1", bot=BOT).commit
    pages = [p for p in git("ls-tree", "-r", "--name-only", SETTINGS.branch, cwd=bare).splitlines() if "/nodes/" in p]
    assert len(pages) == 30 and "reports/par1/nodes/gpu-07.md" in pages
    # a pod starts on gpu-07: its page, and the totals in README.md and drift.yaml; no other page
    out = commit_report(repo, settings=SETTINGS, files=_fleet_report(names, held="gpu-07"), message="m2", bot=BOT)
    assert out.status == "committed"
    assert _changed(bare) == ["reports/par1/README.md", "reports/par1/drift.yaml", "reports/par1/nodes/gpu-07.md"]
    # gpu-07 drifts and gpu-29 leaves the cluster: its page is removed with it
    files = _fleet_report(names[:-1], held="gpu-07", drifted="gpu-07")
    assert commit_report(repo, settings=SETTINGS, files=files, message="m3", bot=BOT).status == "committed"
    assert _changed(bare) == [
        "reports/par1/README.md",
        "reports/par1/drift.yaml",
        "reports/par1/nodes/gpu-07.md",
        "reports/par1/nodes/gpu-29.md",
    ]
    assert "reports/par1/nodes/gpu-29.md" not in git("ls-tree", "-r", "--name-only", SETTINGS.branch, cwd=bare)
    readme = git("show", f"{SETTINGS.branch}:reports/par1/README.md", cwd=bare)
    assert "| [gpu-07](nodes/gpu-07.md) | Drifted |" in readme


def _edit_report_by_hand(bare: Path, work: Path) -> None:
    git("clone", "-q", "-b", SETTINGS.branch, str(bare), str(work))
    (work / "reports" / "par1" / "drift.yaml").write_text("edited\n")
    git("commit", "-q", "-am", "by hand", cwd=work)
    git("push", "-q", "origin", f"HEAD:{SETTINGS.branch}", cwd=work)


def test_an_unchanged_report_writes_nothing_to_the_outbox(remote, tmp_path: Path, monkeypatch) -> None:
    """A report the same as the last one pushed is not queued (tens of MB at 5,000 nodes, every cycle), yet it is
    still set against the branch tip, and queued after all when it cannot be pushed now."""
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    queued: list[object] = []
    put = Outbox.put

    def counting_put(self: Outbox, entry: dict[str, object]) -> Path:
        queued.append(entry)
        return put(self, entry)

    monkeypatch.setattr(Outbox, "put", counting_put)
    assert commit_report(repo, settings=SETTINGS, files=_report(1), message="r1", bot=BOT).status == "committed"
    assert len(queued) == 1
    for _ in range(3):
        again = commit_report(repo, settings=SETTINGS, files=_report(1), message="r1 again", bot=BOT)
        assert again.status == "unchanged" and again.pending == 0
    assert len(queued) == 1  # nothing written for the three unchanged reports
    assert len(_log(bare, SETTINGS.branch)) == 1
    # someone rewrites the report on the branch: the unchanged report is committed again, still unqueued
    _edit_report_by_hand(bare, tmp_path / "work2")
    assert repo.fetch() is None
    back = commit_report(repo, settings=SETTINGS, files=_report(1), message="r1 restored", bot=BOT)
    assert back.status == "committed" and len(queued) == 1
    assert git("show", f"{SETTINGS.branch}:reports/par1/drift.yaml", cwd=bare) == "drifted: 1"
    # a changed report is queued as always
    assert commit_report(repo, settings=SETTINGS, files=_report(2), message="r2", bot=BOT).status == "committed"
    assert len(queued) == 2
    # the server is down and the branch was changed meanwhile: the unchanged report cannot be pushed: queued
    _edit_report_by_hand(bare, tmp_path / "work3")
    assert repo.fetch() is None
    daemon.stop()
    down = commit_report(repo, settings=SETTINGS, files=_report(2), message="r2 restored", bot=BOT)
    assert down.status == "queued" and down.pending == 1 and len(queued) == 3
    daemon.start()
    assert flush_outbox(repo).status == "committed"
    assert git("show", f"{SETTINGS.branch}:reports/par1/drift.yaml", cwd=bare) == "drifted: 2"
