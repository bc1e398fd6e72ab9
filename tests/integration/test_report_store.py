"""Reports cost what changed (issue 29): pages written into Git as rendered, an unchanged page neither rendered nor
written again, in a new process (the page index on the reports branch) as in a long-lived one (the memo).

Against a real `git daemon` on loopback: the report is stored (adapters/git/reportstore.py), committed through the
outbox by blob id (adapters/git/reports.py), and every committed file is compared byte for byte with what
render_reports gives for the same report, so reusing a page can never hide a stale one. Pages rendered are counted
by store_report (and, in the cycle test, by wrapping the page renderers); pages written are read from the commit's
diff. Hostile indexes and hand-edited pages on the branch are rendered again."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pygit2
import pytest
from gitserver import GitDaemon, git, make_bare, seed
from helpers.reportfleet import fleet
from servedcluster import h200_fleet, served

from reconciler.adapters.git.reports import BotIdentity, Outbox, commit_report, flush_outbox
from reconciler.adapters.git.reportstore import StoredReport, store_report
from reconciler.adapters.git.source import GitAuth, GitFailure, GitRemote, InventoryRepo
from reconciler.logic.reports import pageindex, reports
from reconciler.model.drift import DriftReport, GpuSliceMap, NodeReport
from reconciler.model.inventory import ReportSettings

SETTINGS = ReportSettings(branch="migplan-reports", path="reports/par1")
BOT = BotIdentity("migplan-bot", "bot@example.com")
FP = "c0" * 32  # the renderer's fingerprint, fixed so the tests do not depend on the source on disk


@pytest.fixture()
def remote(tmp_path: Path):
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "work", {"inv/cluster.yaml": "kind: Cluster\n"})
    daemon = GitDaemon(srv).start()
    yield daemon, bare
    daemon.stop()


def _repo(url: str, cache: Path) -> InventoryRepo:
    repo = InventoryRepo.open(GitRemote(url, cache, GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    return repo


def _store(repo: InventoryRepo, report: DriftReport, memo: reports.RenderMemo | None = None) -> StoredReport:
    top = reports.render_top_files(report)
    out = store_report(
        repo,
        branch=SETTINGS.branch,
        path=SETTINGS.path,
        top=top,
        pages=reports.page_sources(report),
        memo=memo,
        fingerprint=FP,
    )
    assert isinstance(out, StoredReport), out
    return out


def _commit(repo: InventoryRepo, stored: StoredReport, message: str) -> str:
    out = commit_report(repo, settings=SETTINGS, files={}, blobs=stored.blobs, message=message, bot=BOT)
    assert out.status in ("committed", "unchanged"), out
    return out.status


def _tree(bare: Path) -> dict[str, bytes]:
    """Every file under reports.path at the reports branch tip, by path relative to it."""
    store = pygit2.Repository(str(bare))
    tree = store.revparse_single(f"{SETTINGS.branch}:{SETTINGS.path}").peel(pygit2.Tree)
    out: dict[str, bytes] = {}

    def walk(t: pygit2.Tree, prefix: str) -> None:
        for e in t:
            obj = store[e.id]
            if isinstance(obj, pygit2.Tree):
                walk(obj, f"{prefix}{e.name}/")
            else:
                out[f"{prefix}{e.name}"] = bytes(obj.peel(pygit2.Blob).data)

    walk(tree, "")
    return out


def _changed(bare: Path) -> list[str]:
    prefix = SETTINGS.path + "/"
    out = git("diff", "--name-only", f"{SETTINGS.branch}~1", SETTINGS.branch, cwd=bare).splitlines()
    return [p.removeprefix(prefix) for p in out]


def _assert_same_as_full_render(bare: Path, report: DriftReport) -> None:
    committed = _tree(bare)
    expected = reports.render_reports(report)
    index = committed.pop(pageindex.INDEX_FILE)
    assert committed == expected  # every page byte for byte as a full render gives it, nothing more
    parsed = pageindex.parse_index(index, FP)
    assert parsed is not None and set(parsed) == {k for k in expected if "/" in k}


def test_a_new_process_renders_and_writes_only_the_changed_node(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    first = fleet(150, {3, 40})
    stored = _store(_repo(daemon.url("inv"), tmp_path / "cache"), first)
    assert (stored.rendered, stored.reused) == (152, 0)  # 150 pages and the two drifted nodes' maps
    _commit(_repo(daemon.url("inv"), tmp_path / "cache"), stored, "r1")
    _assert_same_as_full_render(bare, first)

    # a new process (new repository object, no memo), a new revision, node 7 drifts: its page and map only
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    assert repo.fetch() is None
    second = fleet(150, {3, 7, 40}, rev="b")
    stored = _store(repo, second)
    assert (stored.rendered, stored.reused) == (2, 151)
    assert _commit(repo, stored, "r2") == "committed"
    assert _changed(bare) == [
        "README.md",
        "drift.yaml",
        "index/pages.tsv",
        "maps/gpu-007-gpu0.svg",
        "nodes/gpu-007.md",
    ]
    _assert_same_as_full_render(bare, second)

    # the same report again from yet another process: nothing rendered, nothing committed
    repo = _repo(daemon.url("inv"), tmp_path / "cache2")  # a fresh cache: the index comes from the remote
    assert repo.fetch() is None
    stored = _store(repo, second)
    assert (stored.rendered, stored.reused) == (0, 153)
    assert _commit(repo, stored, "r3") == "unchanged"


def test_a_long_lived_process_reuses_its_memo_without_reading_the_bytes(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    memo = reports.RenderMemo()
    _commit(repo, _store(repo, fleet(20, set()), memo), "r1")
    assert memo.pages == {} and memo.maps == {} and len(memo.stored) == 40  # ids kept, not bytes
    held = fleet(20, set(), held=5)
    stored = _store(repo, held, memo)
    assert (stored.rendered, memo.rendered) == (1, 1)  # a pod on gpu-005: its page (its map has no holders here)
    _commit(repo, stored, "r2")
    assert _changed(bare) == ["README.md", "drift.yaml", "index/pages.tsv", "nodes/gpu-005.md"]
    _assert_same_as_full_render(bare, held)


def _push_on_branch(bare: Path, work: Path, edit: dict[str, bytes]) -> None:
    git("clone", "-q", "-b", SETTINGS.branch, str(bare), str(work))
    for rel, data in edit.items():
        target = work / SETTINGS.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "by hand", cwd=work)
    git("push", "-q", "origin", f"HEAD:{SETTINGS.branch}", cwd=work)


def _hostile_indexes(tree: dict[str, bytes]) -> list[bytes]:
    """Indexes someone with push access could write: pointing a page at another file's blob, naming paths
    outside the report tree, a damaged line, another renderer, an index over the size limit."""
    index = tree[pageindex.INDEX_FILE]
    parsed = pageindex.parse_index(index, FP)
    assert parsed is not None
    readme_oid = str(pygit2.hash(tree["README.md"]))
    swapped = {**parsed, "nodes/gpu-001.md": dataclasses.replace(parsed["nodes/gpu-001.md"], oid=readme_oid)}
    climbing = "/".join([".."] * 3 + ["inv", "cluster.yaml"]).encode()  # out of the report tree, to the inventory
    outside = index + climbing + b"\t" + b"0" * 32 + b"\t" + b"1" * 40 + b"\n"
    return [
        pageindex.render_index(swapped, FP),
        outside,
        index.replace(b"\n", b"\nnot a line\n", 1),
        pageindex.render_index(parsed, "d1" * 32),
        index + b"x" * (pageindex.MAX_INDEX_BYTES + 1),
    ]


@pytest.mark.parametrize("case", range(5))
def test_a_hostile_index_only_costs_renders(remote, tmp_path: Path, case: int) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    report = fleet(6, {1})
    _commit(repo, _store(repo, report), "r1")
    hostile = _hostile_indexes(_tree(bare))[case]
    _push_on_branch(bare, tmp_path / "work2", {pageindex.INDEX_FILE: hostile})
    assert repo.fetch() is None
    stored = _store(repo, report)
    if case == 0:
        # one line points a page at README.md's blob: that page is rendered, the others are still reused
        assert (stored.rendered, stored.reused) == (1, 11)  # 6 pages, 6 maps (a small fleet maps every node)
    else:
        assert (stored.rendered, stored.reused) == (12, 0)
    assert _commit(repo, stored, "restored") == "committed"  # the index is rewritten
    _assert_same_as_full_render(bare, report)


def test_the_index_of_the_repr_digests_renders_every_page_once_after_an_upgrade(remote, tmp_path: Path) -> None:
    """Issue 29 (`first5k`): the digests were sha256 of the inputs' repr under a v1 header. An index written so by
    the version before, naming every page at its very blob, is ignored whole: every page rendered once (nothing
    fails, no page reused on a digest of the other scheme), then reused from the v2 index it writes."""
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    report = fleet(6, {1})
    _commit(repo, _store(repo, report), "r1")
    parsed = pageindex.parse_index(_tree(bare)[pageindex.INDEX_FILE], FP)
    assert parsed is not None
    lines = [f"# migplan page index v1 {FP}"]
    for page in sorted(reports.page_sources(report), key=lambda p: p.path):
        digest = hashlib.sha256(FP.encode() + b"\0" + repr(page.inputs).encode()).hexdigest()[:32]
        lines.append(f"{page.path}\t{digest}\t{parsed[page.path].oid}")
    _push_on_branch(bare, tmp_path / "work2", {pageindex.INDEX_FILE: ("\n".join(lines) + "\n").encode()})
    assert repo.fetch() is None
    stored = _store(repo, report)
    assert (stored.rendered, stored.reused) == (12, 0)  # 6 pages, 6 maps
    assert _commit(repo, stored, "upgraded") == "committed"  # the index, rewritten as v2
    _assert_same_as_full_render(bare, report)
    repo = _repo(daemon.url("inv"), tmp_path / "cache2")  # the next process
    assert repo.fetch() is None
    assert (_store(repo, report).rendered, _store(repo, report).reused) == (0, 12)


def test_a_page_edited_or_removed_on_the_branch_is_rendered_again(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    report = fleet(6, {1})
    _commit(repo, _store(repo, report), "r1")
    _push_on_branch(bare, tmp_path / "work2", {"nodes/gpu-002.md": b"edited by hand\n"})
    work = tmp_path / "work2"
    git("rm", "-q", f"{SETTINGS.path}/nodes/gpu-003.md", cwd=work)
    git("commit", "-q", "-m", "removed by hand", cwd=work)
    git("push", "-q", "origin", f"HEAD:{SETTINGS.branch}", cwd=work)
    assert repo.fetch() is None
    stored = _store(repo, report)
    assert stored.rendered == 2  # the index still vouches for both paths: one blob differs, one path is gone
    _commit(repo, stored, "restored")
    _assert_same_as_full_render(bare, report)


def test_a_queued_report_holds_blob_ids_survives_a_restart_and_a_bad_id_is_set_aside(remote, tmp_path: Path) -> None:
    daemon, bare = remote
    cache = tmp_path / "cache"
    repo = _repo(daemon.url("inv"), cache)
    _commit(repo, _store(repo, fleet(150, set(range(150)))), "r1")
    daemon.stop()
    report = fleet(150, set(range(150)), held=9)
    stored = _store(repo, report)
    out = commit_report(repo, settings=SETTINGS, files={}, blobs=stored.blobs, message="r2", bot=BOT)
    assert out.status == "queued" and out.pending == 1
    (entry_file,) = Outbox.for_repo(repo).entries()
    entry = json.loads(entry_file.read_text())
    assert entry["files"] == {} and entry["blobs"] == dict(sorted(stored.blobs.items()))
    # ~100 bytes a file, not the report base64 (301 files, the maps alone some KB each)
    whole = sum(len(base64.b64encode(data)) for data in reports.render_reports(report).values())
    assert entry_file.stat().st_size < whole / 10
    # the process restarts; the server comes back: the queued report is pushed from the blobs in the cache
    daemon.start()
    restarted = _repo(daemon.url("inv"), cache)
    assert flush_outbox(restarted).status == "committed"
    _assert_same_as_full_render(bare, report)
    # an entry naming a blob the cache does not hold (or a tree) is set aside, never pushed
    for bad in ("0" * 40, git("rev-parse", f"{SETTINGS.branch}^{{tree}}", cwd=bare)):
        Outbox.for_repo(restarted).put({**entry, "blobs": {**entry["blobs"], "nodes/gpu-001.md": bad}})
        assert flush_outbox(restarted).status == "unchanged"
    assert sorted(p.suffix for p in Outbox.for_repo(restarted).directory.iterdir()) == [".unreadable"] * 2


def test_files_and_blobs_naming_the_same_file_are_refused(remote, tmp_path: Path) -> None:
    daemon, _ = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    stored = _store(repo, fleet(2, set()))
    out = commit_report(repo, settings=SETTINGS, files={"README.md": b"x"}, blobs=stored.blobs, message="m", bot=BOT)
    assert out.status == "refused" and out.failure is not None and "twice" in out.failure.message
    assert Outbox.for_repo(repo).entries() == []


def test_an_unwritable_object_database_is_a_failure_value(remote, tmp_path: Path, monkeypatch: Any) -> None:
    daemon, _ = remote
    repo = _repo(daemon.url("inv"), tmp_path / "cache")

    def full(data: bytes) -> pygit2.Oid:
        raise pygit2.GitError("failed to write object: No space left on device")

    monkeypatch.setattr(repo.repo, "create_blob", full)
    memo = reports.RenderMemo()
    out = store_report(repo, branch="r", path="reports", top={}, pages=reports.page_sources(fleet(3, set())), memo=memo)
    assert isinstance(out, GitFailure) and "object database" in out.message and "No space" in out.message
    assert memo.stored == {}  # nothing remembered from a report that was not stored


# --- the whole cycle: `reconcile --once` twice, one node changed in between ---------------------------------


def test_a_second_reconcile_once_rewrites_only_the_changed_nodes_pages(tmp_path: Path, monkeypatch: Any) -> None:
    from reconciler.gitops import run_gitops_cycle
    from reconciler.logic.reports import slicesvg
    from reconciler.sourcing import InventorySource

    rendered: list[str] = []
    page, svg = reports.render_node_page, slicesvg.gpu_svg

    def counted_page(n: NodeReport, *args: Any, **kwargs: Any) -> bytes:
        rendered.append(f"nodes/{n.name}.md")
        return page(n, *args, **kwargs)

    def counted_svg(g: GpuSliceMap, *, node: str, **kwargs: Any) -> bytes:
        rendered.append(slicesvg.gpu_map_name(node, g.index))
        return svg(g, node=node, **kwargs)

    monkeypatch.setattr(reports, "render_node_page", counted_page)
    monkeypatch.setattr(slicesvg, "gpu_svg", counted_svg)
    with served(tmp_path, h200_fleet("store", 4, "{profile: 1g.18gb}", 7)) as (daemon, cluster, twin, bare):

        def once() -> Any:
            # a new process each time: a new source on the same cache directory, no memo
            source = InventorySource(
                GitRemote(daemon.url("inv"), tmp_path / "cache", GitAuth(), timeout_ms=5000), ref="main"
            )
            rendered.clear()
            out = run_gitops_cycle(source=source, cluster=cluster, deadline=60)
            twin.settle()
            return out

        for _ in range(6):  # adoption, then in sync
            first = once()
            if first.result is not None and first.result.converged:
                break
        assert first.result is not None and first.result.converged, first.to_json()
        assert once().report.status == "unchanged" and rendered == []  # nothing changed: nothing rendered
        request = {"nvidia.com/mig-1g.18gb": "1"}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "x"}},
            "spec": {
                "nodeName": "n2",
                "containers": [{"name": "m", "image": "i", "resources": {"requests": request, "limits": request}}],
            },
        }
        twin.store.create("pods", pod, "default")
        twin.store.patch("pods", "p", {"status": {"phase": "Running"}}, "default", subresource="status")
        changed = once()
        assert changed.report is not None and changed.report.status == "committed", changed.to_json()
        pages = [p for p in _changed_at(bare, "reports") if p.startswith(("nodes/", "maps/"))]
        assert pages and all("n2" in p for p in pages), pages  # n2's page (and map), nothing else
        assert sorted(rendered) == pages  # rendered exactly what the commit rewrote
        assert "index/pages.tsv" in _changed_at(bare, "reports")


def _changed_at(bare: Path, root: str) -> list[str]:
    out = git("diff", "--name-only", f"{SETTINGS.branch}~1", SETTINGS.branch, cwd=bare).splitlines()
    return [p.removeprefix(root + "/") for p in out]
