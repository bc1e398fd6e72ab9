"""What a long-lived process's RenderMemo keeps between reports (issue 29, `runrss4`): each page's input digest and
blob id, never the inputs themselves, and a page is reused by it exactly when the inputs digest alike (a changed input
renders again; inputs that cannot be digested are never reused). Against a real `git daemon` on loopback, as
test_report_store.py; pages rendered are counted by wrapping their renderers."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitserver import GitDaemon, make_bare, seed

from reconciler.adapters.git.reportstore import StoredReport, store_report
from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
from reconciler.logic.reports import pageindex
from reconciler.logic.reports.reports import PageSource, RenderMemo

FP = "c0" * 32


class Inputs:
    """Page inputs whose lifetime a test can watch (a weak reference); msgspec cannot encode them, so they are
    digested by their repr, which names their value."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Inputs({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Inputs) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


class Nested:
    """Inputs nested past the interpreter's recursion limit: neither msgspec nor repr digests them (NO_DIGEST), yet
    two of them compare equal."""

    def __init__(self) -> None:
        deep: list[object] = []
        for _ in range(100_000):
            deep = [deep]
        self.deep = deep

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Nested)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return repr(self.deep)


@pytest.fixture()
def repo(tmp_path: Path) -> Iterator[InventoryRepo]:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "work", {"inv/cluster.yaml": "kind: Cluster\n"})
    daemon = GitDaemon(srv).start()
    try:
        opened = InventoryRepo.open(GitRemote(daemon.url("inv"), tmp_path / "cache", GitAuth(), timeout_ms=2000))
        assert isinstance(opened, InventoryRepo)
        yield opened
    finally:
        daemon.stop()


def _store(repo: InventoryRepo, pages: dict[str, object], memo: RenderMemo, renders: list[str]) -> StoredReport:
    def source(path: str, inputs: object) -> PageSource:
        def render() -> bytes:
            renders.append(path)
            return f"{path}: {type(inputs).__name__}\n".encode()

        return PageSource(path, inputs, render)

    out = store_report(
        repo,
        branch="migplan-reports",
        path="reports",
        top={},
        pages=[source(p, i) for p, i in pages.items()],
        memo=memo,
        fingerprint=FP,
        fork=False,
    )
    assert isinstance(out, StoredReport), out
    return out


def test_the_memo_keeps_no_page_inputs(repo: InventoryRepo) -> None:
    memo = RenderMemo()
    inputs = {f"nodes/n{i}.md": Inputs(f"node {i}") for i in range(3)}
    watched = [weakref.ref(i) for i in inputs.values()]
    renders: list[str] = []
    _store(repo, inputs, memo, renders)
    assert len(memo.stored) == 3
    del inputs
    gc.collect()
    assert [w() for w in watched] == [None, None, None]  # the memo (and nothing else) kept them alive
    digest, oid = memo.stored["nodes/n0.md"]
    assert digest == pageindex.input_digest(Inputs("node 0"), FP) and repo.repo.odb.exists(oid)


def test_equal_inputs_are_reused_and_changed_ones_rendered(repo: InventoryRepo) -> None:
    memo = RenderMemo()
    renders: list[str] = []
    _store(repo, {"nodes/a.md": Inputs("a"), "nodes/b.md": Inputs("b")}, memo, renders)
    assert renders == ["nodes/a.md", "nodes/b.md"]
    renders.clear()
    # equal values in new objects: reused; b's changed: rendered again
    second = _store(repo, {"nodes/a.md": Inputs("a"), "nodes/b.md": Inputs("b2")}, memo, renders)
    assert renders == ["nodes/b.md"] and (second.rendered, second.reused) == (1, 1)
    assert memo.stored["nodes/b.md"][0] == pageindex.input_digest(Inputs("b2"), FP)
    renders.clear()
    # b back to its first inputs: its digest is not the memo's (b2's), so it renders again
    _store(repo, {"nodes/a.md": Inputs("a"), "nodes/b.md": Inputs("b")}, memo, renders)
    assert renders == ["nodes/b.md"]


def test_inputs_that_cannot_be_digested_are_never_reused(repo: InventoryRepo) -> None:
    assert pageindex.input_digest(Nested(), FP) == pageindex.NO_DIGEST
    memo = RenderMemo()
    renders: list[str] = []
    _store(repo, {"nodes/deep.md": Nested(), "nodes/a.md": Inputs("a")}, memo, renders)
    renders.clear()
    again = _store(repo, {"nodes/deep.md": Nested(), "nodes/a.md": Inputs("a")}, memo, renders)
    assert renders == ["nodes/deep.md"] and (again.rendered, again.reused) == (1, 1)
