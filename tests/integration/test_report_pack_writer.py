"""The report's packs written by a background thread (issue 29): full batches of blobs are packed off the caller's
thread while it renders the next pages, one batch in flight at most, and the contract of BlobSink holds as before:
every blob is in the object database (read by a fresh handle) once close() returns; a write that fails reaches the
caller (close() or the next add) and the report names nothing; a caller that fails leaves no write running.

Real repositories, real pack writes; the only patched code records which thread called (and how many batches were
in flight), or makes libgit2 fail the way a full disk would (objects/pack not writable as a directory)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest
from gitserver import GitDaemon, make_bare, seed
from helpers.reportfleet import fleet

from reconciler.adapters.git import packwrite
from reconciler.adapters.git.packwrite import BlobSink
from reconciler.adapters.git.reports import Outbox
from reconciler.adapters.git.reportstore import StoredReport, store_report
from reconciler.adapters.git.source import GitAuth, GitFailure, GitRemote, InventoryRepo
from reconciler.logic.reports import reports
from reconciler.logic.reports.reports import PageSource

FP = "c0" * 32
WRITER = "migplan-pack-writer"


def _contents(n: int) -> list[bytes]:
    return [f"page {i}\n".encode() * (200 + i) for i in range(n)]  # ~1.5-2 KB each, all distinct


def _writers_alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WRITER and t.is_alive()]


def _packs(path: Path) -> set[str]:
    return {p.name for p in (path / "objects" / "pack").glob("*.pack")}


def test_packs_are_written_off_the_callers_thread_and_read_back_by_a_fresh_handle(
    tmp_path: Path, monkeypatch: Any
) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r"), bare=True)
    readers: list[str] = []
    header = packwrite._HeldBlobs.read_header_cb

    def recorded(self: packwrite._HeldBlobs, oid: pygit2.Oid) -> tuple[int, int]:
        readers.append(threading.current_thread().name)  # the pack builder reads each held blob's header
        return header(self, oid)

    monkeypatch.setattr(packwrite._HeldBlobs, "read_header_cb", recorded)
    contents = _contents(60)
    sink = BlobSink(repo, bulk_from=5, pack_bytes=10_000)
    ids = [sink.add(data) for data in contents]
    sink.close()
    assert ids == [str(pygit2.hash(data)) for data in contents]
    assert sink.packed == 60 and sink.packs >= 6 and sink.packs == len(_packs(tmp_path / "r"))
    assert len(readers) == 60  # one header read per blob, each by the pack writer...
    assert set(readers) == {WRITER}  # ...never by the caller's thread
    assert _writers_alive() == []  # close() waited for the last one
    fresh = pygit2.Repository(str(tmp_path / "r"))
    for oid, data in zip(ids, contents, strict=True):
        assert bytes(fresh[oid].peel(pygit2.Blob).data) == data


def test_one_batch_at_most_is_in_flight(tmp_path: Path, monkeypatch: Any) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r"), bare=True)
    lock = threading.Lock()
    flying = [0]
    most = [0]
    write = packwrite._Batch.write

    def counted(self: packwrite._Batch) -> None:
        with lock:
            flying[0] += 1
            most[0] = max(most[0], flying[0])
        try:
            write(self)
        finally:
            with lock:
                flying[0] -= 1

    monkeypatch.setattr(packwrite._Batch, "write", counted)
    sink = BlobSink(repo, bulk_from=5, pack_bytes=5_000)
    for data in _contents(80):
        sink.add(data)
    sink.close()
    assert sink.packs >= 20 and most == [1]


def _no_pack_dir(repo_path: Path) -> None:
    """objects/pack a regular file: libgit2 cannot create the pack's temporary file there (as on a full disk)."""
    pack = repo_path / "objects" / "pack"
    for child in pack.iterdir():
        child.unlink()
    pack.rmdir()
    pack.write_bytes(b"")


@pytest.mark.parametrize("failing", ["first", "last"])
def test_a_failed_background_write_reaches_the_caller(tmp_path: Path, failing: str) -> None:
    path = tmp_path / "r"
    repo = pygit2.init_repository(str(path), bare=True)
    contents = _contents(40)
    sink = BlobSink(repo, bulk_from=5, pack_bytes=10_000 if failing == "first" else 1 << 30)
    with pytest.raises(pygit2.GitError, match="pack"):
        _no_pack_dir(path)
        for data in contents:
            sink.add(data)  # "first": the second hand-over waits for the first write and raises its error
        sink.close()  # "last": the one pack, written at close(), fails there
    assert (sink.packs, sink.packed) == (0, 0)
    assert _writers_alive() == []
    assert not any(pygit2.hash(data) in pygit2.Repository(str(path)) for data in contents)


def test_abandon_waits_for_the_write_in_flight_and_drops_the_rest(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r"), bare=True)
    sink = BlobSink(repo, bulk_from=5, pack_bytes=10_000)
    for data in _contents(12):  # ~20 KB: one batch handed to the writer, the rest still gathering
        sink.add(data)
    sink.abandon()  # the caller failed: nothing is named, nothing left running
    assert _writers_alive() == []
    sink.abandon()  # twice is harmless
    assert _writers_alive() == []


@pytest.fixture()
def remote(tmp_path: Path) -> Iterator[GitDaemon]:
    srv = tmp_path / "srv"
    srv.mkdir()
    seed(make_bare(srv, "inv"), tmp_path / "work", {"inv/cluster.yaml": "kind: Cluster\n"})
    daemon = GitDaemon(srv).start()
    yield daemon
    daemon.stop()


def _repo(url: str, cache: Path) -> InventoryRepo:
    repo = InventoryRepo.open(GitRemote(url, cache, GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    return repo


def _store(repo: InventoryRepo, pages: list[PageSource]) -> StoredReport | GitFailure:
    report = fleet(40, set(range(40)))
    return store_report(
        repo,
        branch="migplan-reports",
        path="reports/par1",
        top=reports.render_top_files(report),
        pages=pages,
        fingerprint=FP,
        bulk_from=10,  # 40 nodes (80 files, ~3 KB each): packed, several packs
        pack_bytes=20_000,
    )


def test_a_failed_pack_write_makes_the_report_a_git_failure_that_names_nothing(
    remote: GitDaemon, tmp_path: Path
) -> None:
    repo = _repo(remote.url("inv"), tmp_path / "cache")
    _no_pack_dir(Path(repo.repo.path))
    out = _store(repo, list(reports.page_sources(fleet(40, set(range(40))))))
    assert isinstance(out, GitFailure) and "cannot write the report" in out.message
    assert _writers_alive() == []
    assert Outbox.for_repo(repo).entries() == []


class RenderFailed(Exception):
    """A page's render raising (a bug): not a Git error, it propagates out of store_report."""


def test_a_render_that_fails_mid_report_leaves_no_write_running(remote: GitDaemon, tmp_path: Path) -> None:
    repo = _repo(remote.url("inv"), tmp_path / "cache")
    pages = list(reports.page_sources(fleet(40, set(range(40)))))

    def broken() -> bytes:
        raise RenderFailed("page 60")

    pages[60] = PageSource(pages[60].path, pages[60].inputs, broken)  # after a few packs were handed over
    with pytest.raises(RenderFailed):
        _store(repo, pages)
    assert _writers_alive() == []
