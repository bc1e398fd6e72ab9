"""The first report at fleet size written in bulk (issue 29): many new blobs go into packs, a few stay loose objects.

Against a real `git daemon` on loopback, with small thresholds so that a few dozen pages take the bulk path (and
split into several packs): the report committed from packs is the same tree as the one stored loose, every blob reads
back equal to a full render on the remote the push reached; the outbox entry is written only once the packs are in
place (checked from a second handle at the moment the entry is queued); a crash at each step of the bulk write
leaves no entry, and a new process pushes the whole report; packed and loose report objects live side by side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pygit2
import pytest
from gitserver import GitDaemon, make_bare, seed
from helpers.reportfleet import fleet

from reconciler.adapters.git import packwrite
from reconciler.adapters.git.packwrite import BlobSink
from reconciler.adapters.git.reports import BotIdentity, Outbox, commit_report
from reconciler.adapters.git.reportstore import StoredReport, store_report
from reconciler.adapters.git.source import GitAuth, GitFailure, GitRemote, InventoryRepo
from reconciler.logic.reports import pageindex, reports
from reconciler.model.drift import DriftReport
from reconciler.model.inventory import ReportSettings

SETTINGS = ReportSettings(branch="migplan-reports", path="reports/par1")
BOT = BotIdentity("migplan-bot", "bot@example.com")
FP = "c0" * 32  # the renderer's fingerprint, fixed so the tests do not depend on the source on disk
BULK = {"bulk_from": 10, "pack_bytes": 20_000}  # 40 nodes (80 files, ~3 KB each): the bulk path, several packs


@pytest.fixture()
def remote(tmp_path: Path):
    srv = tmp_path / "srv"
    srv.mkdir()
    for name in ("inv", "inv2"):
        seed(make_bare(srv, name), tmp_path / f"work-{name}", {"inv/cluster.yaml": "kind: Cluster\n"})
    daemon = GitDaemon(srv).start()
    yield daemon, srv
    daemon.stop()


def _repo(url: str, cache: Path) -> InventoryRepo:
    repo = InventoryRepo.open(GitRemote(url, cache, GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    return repo


def store(repo: InventoryRepo, report: DriftReport, **bulk: int) -> StoredReport | GitFailure:
    return store_report(
        repo,
        branch=SETTINGS.branch,
        path=SETTINGS.path,
        top=reports.render_top_files(report),
        pages=reports.page_sources(report),
        fingerprint=FP,
        **bulk,
    )


def commit(repo: InventoryRepo, stored: StoredReport, message: str) -> str:
    out = commit_report(repo, settings=SETTINGS, files={}, blobs=stored.blobs, message=message, bot=BOT)
    assert out.status in ("committed", "unchanged"), out
    return out.status


def _tree(bare: Path) -> tuple[str, dict[str, bytes]]:
    """The report subtree's id at the reports branch tip, and every file under it read from `bare`."""
    repo = pygit2.Repository(str(bare))
    tree = repo.revparse_single(f"{SETTINGS.branch}:{SETTINGS.path}").peel(pygit2.Tree)
    out: dict[str, bytes] = {}

    def walk(t: pygit2.Tree, prefix: str) -> None:
        for e in t:
            obj = repo[e.id]
            if isinstance(obj, pygit2.Tree):
                walk(obj, f"{prefix}{e.name}/")
            else:
                out[f"{prefix}{e.name}"] = bytes(obj.peel(pygit2.Blob).data)

    walk(tree, "")
    return str(tree.id), out


def _assert_complete(bare: Path, report: DriftReport) -> str:
    tree_id, committed = _tree(bare)
    index = committed.pop(pageindex.INDEX_FILE)
    assert committed == reports.render_reports(report)  # byte for byte, nothing more, nothing less
    assert pageindex.parse_index(index, FP) is not None
    return tree_id


def _packs(repo: InventoryRepo) -> set[str]:
    return {p.name for p in (Path(repo.repo.path) / "objects" / "pack").glob("*.pack")}


def _loose(repo: InventoryRepo, oid: str) -> bool:
    return (Path(repo.repo.path) / "objects" / oid[:2] / oid[2:]).is_file()


def test_a_report_written_in_packs_commits_the_same_tree_as_written_loose(remote, tmp_path: Path) -> None:
    daemon, srv = remote
    report = fleet(40, set(range(40)))
    loose_repo = _repo(daemon.url("inv"), tmp_path / "cache-loose")
    before = _packs(loose_repo)
    stored_loose = store(loose_repo, report)
    assert isinstance(stored_loose, StoredReport) and stored_loose.packed == 0 and _packs(loose_repo) == before
    packed_repo = _repo(daemon.url("inv2"), tmp_path / "cache-packed")
    before = _packs(packed_repo)
    stored_packed = store(packed_repo, report, **BULK)
    assert isinstance(stored_packed, StoredReport)
    assert stored_packed.rendered == stored_packed.packed == 80  # 40 pages and 40 maps, all packed
    assert len(_packs(packed_repo) - before) >= 3  # ~240 KB of content in packs of 20 KB
    assert stored_packed.blobs == stored_loose.blobs  # the same ids, so the same blobs
    page_ids = [oid for name, oid in stored_packed.blobs.items() if "/" in name and name != pageindex.INDEX_FILE]
    assert not any(_loose(packed_repo, oid) for oid in page_ids)
    assert all(_loose(loose_repo, oid) for oid in page_ids)
    commit(loose_repo, stored_loose, "loose")
    commit(packed_repo, stored_packed, "packed")
    # the push over git:// carried the packed objects: the remote reads them all, equal to a full render
    assert _assert_complete(srv / "inv2.git", report) == _assert_complete(srv / "inv.git", report)


def test_the_outbox_entry_is_written_only_once_the_packs_are_in_place(remote, tmp_path: Path, monkeypatch: Any) -> None:
    daemon, srv = remote
    cache = tmp_path / "cache"
    repo = _repo(daemon.url("inv"), cache)
    report = fleet(40, set(range(40)))
    seen: list[int] = []
    put = Outbox.put

    def checked_put(self: Outbox, entry: dict[str, Any]) -> Path:
        # A second handle on the repository, as a new process would open it: every blob the entry names is there.
        other = pygit2.Repository(repo.repo.path)
        for oid in entry["blobs"].values():
            assert other.odb.read_header(oid)[0] == pygit2.enums.ObjectType.BLOB
        seen.append(len(entry["blobs"]))
        return put(self, entry)

    monkeypatch.setattr(Outbox, "put", checked_put)
    stored = store(repo, report, **BULK)
    assert isinstance(stored, StoredReport) and stored.packed == 80
    assert commit(repo, stored, "r1") == "committed"
    assert seen == [83]  # 80 pages and maps, the page index, README.md and drift.yaml
    _assert_complete(srv / "inv.git", report)


class SimulatedCrash(Exception):
    """The process stops here: nothing after this point runs (not a Git or OS error store_report would catch)."""


def _crash_at(step: str, monkeypatch: Any) -> None:
    def crash(*args: Any, **kwargs: Any) -> Any:
        raise SimulatedCrash(step)

    if step == "holding":  # a blob handed to the in-memory backend
        monkeypatch.setattr(packwrite._HeldBlobs, "write_cb", crash)
    elif step == "adding":  # the pack builder collecting the blobs
        monkeypatch.setattr(pygit2.PackBuilder, "add", crash)
    elif step == "writing":  # the pack and its index being written
        monkeypatch.setattr(pygit2.PackBuilder, "write", crash)
    elif step == "between-packs":  # one pack in place, the next one not
        write = packwrite.BlobSink._write_pack

        def once(self: BlobSink) -> None:
            if self.packs:
                raise SimulatedCrash(step)
            write(self)

        monkeypatch.setattr(packwrite.BlobSink, "_write_pack", once)
    elif step == "after-packs":  # every pack in place, the entry not yet written
        monkeypatch.setattr(Outbox, "put", crash)
    else:
        raise AssertionError(step)


_NEW_PROCESS = """
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2], sys.argv[5]]
from pathlib import Path
from test_report_pack import BULK, commit, fleet, store, _repo
repo = _repo(sys.argv[3], Path(sys.argv[4]))
assert repo.fetch() is None
stored = store(repo, fleet(40, set(range(40))), **BULK)
print(stored.rendered, stored.packed, commit(repo, stored, "after the crash"))
"""


@pytest.mark.parametrize("step", ["holding", "adding", "writing", "between-packs", "after-packs"])
def test_a_crash_at_each_step_queues_nothing_and_a_new_process_pushes_the_whole_report(
    remote, tmp_path: Path, monkeypatch: Any, step: str
) -> None:
    daemon, srv = remote
    cache = tmp_path / "cache"
    repo = _repo(daemon.url("inv"), cache)
    report = fleet(40, set(range(40)))
    _crash_at(step, monkeypatch)
    with pytest.raises(SimulatedCrash):
        stored = store(repo, report, **BULK)
        assert isinstance(stored, StoredReport)
        commit(repo, stored, "r1")
    monkeypatch.undo()
    assert Outbox.for_repo(repo).entries() == []  # nothing queued that names a blob not on disk
    bare = pygit2.Repository(str(srv / "inv.git"))
    assert bare.references.get(f"refs/heads/{SETTINGS.branch}") is None  # and nothing pushed
    here = Path(__file__).resolve()
    env = {**os.environ, "PYTHONPATH": str(here.parents[2])}
    argv = [
        sys.executable,
        "-c",
        _NEW_PROCESS,
        str(here.parent),
        str(here.parents[2]),
        daemon.url("inv"),
        str(cache),
        str(here.parents[1]),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["80", "80", "committed"]  # rendered again (no tip yet), packed, pushed
    _assert_complete(srv / "inv.git", report)


def test_loose_and_packed_report_objects_live_side_by_side(remote, tmp_path: Path) -> None:
    daemon, srv = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    first = fleet(40, set(range(40)))
    stored = store(repo, first, **BULK)
    assert isinstance(stored, StoredReport) and stored.packed == 80
    commit(repo, stored, "r1")
    packs = _packs(repo)
    # one pod more on gpu-007: its page only, below the bulk threshold, so written loose
    second = fleet(40, set(range(40)), held=7)
    changed = store(repo, second, **BULK)
    assert isinstance(changed, StoredReport) and (changed.rendered, changed.packed) == (1, 0)
    assert _packs(repo) == packs
    assert _loose(repo, changed.blobs["nodes/gpu-007.md"])
    assert not _loose(repo, changed.blobs["nodes/gpu-008.md"])  # still in the first report's packs
    commit(repo, changed, "r2")
    _assert_complete(srv / "inv.git", second)
    # a new process with a new cache: every blob comes from the remote, the index vouches for every page
    fresh = _repo(daemon.url("inv"), tmp_path / "cache2")
    assert fresh.fetch() is None
    again = store(fresh, second, **BULK)
    assert isinstance(again, StoredReport) and (again.rendered, again.reused) == (0, 80)
    assert commit(fresh, again, "r3") == "unchanged"


def test_a_blob_sink_names_each_blob_as_libgit2_does_and_writes_each_once(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r"), bare=True)
    contents = [b"", b"same\n", b"same\n", *(f"page {i}\n".encode() * 200 for i in range(30))]
    sink = BlobSink(repo, bulk_from=5, pack_bytes=10_000)
    ids = [sink.add(data) for data in contents]
    sink.close()
    assert ids == [str(pygit2.hash(data)) for data in contents]
    assert sink.packed == 32 and sink.loose == 0  # 33 contents, one of them twice: written once
    assert sink.packs == len(list((tmp_path / "r" / "objects" / "pack").glob("*.idx")))
    assert sink.packs >= 5  # ~55 KB in packs of 10 KB
    for oid, data in zip(ids, contents, strict=True):
        assert bytes(repo[oid].peel(pygit2.Blob).data) == data  # the same handle sees the new packs
    small = BlobSink(repo, bulk_from=5)
    new = [small.add(f"small {i}\n".encode()) for i in range(4)]
    small.close()
    assert (small.loose, small.packed, small.packs) == (4, 0, 0)
    assert all((tmp_path / "r" / "objects" / oid[:2] / oid[2:]).is_file() for oid in new)
