"""Report files written into the Git object database as they are rendered, each page only when its inputs changed.

`store_report(repo, ...)` takes the report's top files (drift.yaml, README.md: always rendered, guarded) and its
per-node pages as reports.PageSource values (path, the values it is rendered from, how to render it), and returns
the blob id of every file, the page index (logic/reports/pageindex.py) included. A page is rendered only when
neither of these knows it:
- the process's RenderMemo (a long-lived `migplan run`): the same input digest as the page it wrote last cycle gives
  that page's blob id (the memo keeps the digest and the id per path, not the inputs: issue 29, `runrss4`);
- the reports branch tip (a new process, `migplan reconcile --once`): its `index/pages.tsv` names the page with the
  same input digest and the same blob id the tip's tree holds at that path.
Everything else is rendered and handed to a BlobSink (adapters/git/packwrite.py): a few changed pages are written as
loose objects (pygit2 `create_blob`), many (the first report at fleet size) as packs, and all of them are in the object
database when store_report returns, before the outbox entry naming them is written. From `bulk_from` pages to render
on, where the process may fork safely (one thread, two CPUs: adapters/git/bulkfork.py), a forked child renders and
writes every other one of them on its own handle; the ids, index and tree are those of one process. The process
keeps blob ids, not the report's bytes, and the commit (adapters/git/reports.py) builds its tree from them, so a
report commit writes only the blobs of the pages that changed. The tip is read from the cache without network, as
`last_report` does: this cycle's fetch brought it up to date; an unreadable tip, index or tree only costs renders.

Not pure: writes objects into the repository's object database (the cache of a remote, or the local repository,
where unreferenced blobs are what `git gc` prunes, as for any abandoned commit).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType

import pygit2
from pygit2.enums import FileMode

from reconciler.adapters.git import bulkfork
from reconciler.adapters.git.packwrite import BULK_FROM, PACK_BYTES, BlobSink
from reconciler.adapters.git.reports import check_branch, guard_files
from reconciler.adapters.git.source import GIT_FAILED, ORIGIN, GitFailure, InventoryRepo
from reconciler.logic.drift.drift import FINDING_CODES
from reconciler.logic.inventory.reporttarget import normalize_root
from reconciler.logic.reports import markdown, nodepages, pageindex, slicesvg
from reconciler.logic.reports.pageindex import INDEX_FILE, IndexedPage
from reconciler.logic.reports.reports import PageSource, RenderMemo


@dataclass(frozen=True, slots=True)
class StoredReport:
    """Every report file as the id of a blob in the repository's object database (hex), and what it cost."""

    blobs: Mapping[str, str]
    rendered: int  # per-node files rendered (and written) by this report
    reused: int  # per-node files whose blob came from the memo or the branch tip, not rendered
    packed: int = 0  # rendered files written into packs (the bulk path), not as loose objects


@functools.cache
def renderer_fingerprint() -> str:
    """What the page code is: the source of the modules pages are rendered by, the finding codes' meanings
    (the page legend) and tabulate's version. A change renders every page again (the index's header differs)."""
    h = hashlib.sha256()
    modules: tuple[ModuleType, ...] = (nodepages, slicesvg, markdown, pageindex)
    for module in modules:
        try:
            h.update(inspect.getsource(module).encode("utf-8", "surrogatepass"))
        except (OSError, TypeError):  # no source shipped: the version stands for the code
            h.update(f"{module.__name__} without source".encode())
    h.update(repr(sorted(FINDING_CODES.items())).encode("utf-8", "surrogatepass"))
    for dist in ("migplan", "tabulate"):
        try:
            h.update(f"{dist} {importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{dist} unknown".encode())
    return h.hexdigest()


class _Tip:
    """The report tree at the reports branch tip and its page index (empty when unknown or untrusted)."""

    def __init__(self, repo: InventoryRepo, branch: str, path: str, fingerprint: str) -> None:
        self.tree: pygit2.Tree | None = None
        self.index: dict[str, IndexedPage] = {}
        self.repo = repo.repo
        self._folders: dict[str, dict[str, tuple[str, int]]] = {}
        if check_branch(repo, branch) is not None:
            return
        git = repo.repo
        name = f"refs/heads/{branch}" if repo.remote.is_local else f"refs/remotes/{ORIGIN}/{branch}"
        try:
            ref = git.references.get(name)
            if ref is None:
                return
            tree = ref.peel(pygit2.Commit).tree
            root = normalize_root(path)
            if root:
                entry = tree[root]
                if entry.filemode != FileMode.TREE:
                    return
                tree = git[entry.id].peel(pygit2.Tree)
            self.tree = tree
            entry = tree[INDEX_FILE]
            if entry.filemode != FileMode.BLOB:
                return
            # Size before read: the object header says it without inflating the blob.
            if int(git.odb.read_header(entry.id)[1]) > pageindex.MAX_INDEX_BYTES:
                return
            parsed = pageindex.parse_index(bytes(git[entry.id].peel(pygit2.Blob).data), fingerprint)
        except (KeyError, ValueError, TypeError, pygit2.GitError):
            return
        self.index = parsed or {}

    def blob(self, path: str, indexed: IndexedPage | None, digest: str) -> str | None:
        """The tip's blob id at `path` when the index vouches for it: same digest, same blob, a regular file."""
        if indexed is None or indexed.digest != digest or self.tree is None:
            return None
        folder, _, name = path.rpartition("/")
        found = self._folder(folder).get(name)  # never trust a digest for a path the tree does not hold
        if found is None or found[1] != FileMode.BLOB or found[0] != indexed.oid:
            return None  # edited on the branch (or a symlink, a folder): rendered again
        return indexed.oid

    def _folder(self, folder: str) -> dict[str, tuple[str, int]]:
        """{name: (id, mode)} of one folder of the tip's report tree, read once: looking a path up in a pygit2
        tree parses every tree on the way each time (9,000 pages under two folders: seconds, quadratic)."""
        known = self._folders.get(folder)
        if known is not None:
            return known
        known = {}
        try:
            sub = self.tree[folder] if folder and self.tree is not None else None
            if sub is not None and sub.filemode == FileMode.TREE:
                for entry in self.repo[sub.id].peel(pygit2.Tree):
                    known[str(entry.name)] = (str(entry.id), int(entry.filemode))
        except (KeyError, ValueError, pygit2.GitError):
            known = {}
        self._folders[folder] = known
        return known


def store_report(
    repo: InventoryRepo,
    *,
    branch: str,
    path: str,
    top: Mapping[str, bytes],
    pages: Iterable[PageSource],
    memo: RenderMemo | None = None,
    fingerprint: str | None = None,
    bulk_from: int = BULK_FROM,
    pack_bytes: int = PACK_BYTES,
    fork: bool = True,
) -> StoredReport | GitFailure:
    """Write the report into `repo`'s object database (see the module docstring). `bulk_from`, `pack_bytes`: when
    rendered files go into packs, and how much content one pack holds (adapters/git/packwrite.py). `fork`: from
    `bulk_from` pages to render on, split them with a forked child where that is safe (adapters/git/bulkfork.py);
    False keeps one process."""
    fp = fingerprint if fingerprint is not None else renderer_fingerprint()
    git = repo.repo
    tip = _Tip(repo, branch, path, fp)
    last = memo.stored if memo is not None else {}
    stored: dict[str, tuple[str, str]] = {}  # path -> (input digest, blob id): what the memo keeps
    blobs: dict[str, str] = {}
    rendered = reused = packed = 0
    # Where a child may render half of a bulk report, the pages to render are gathered first (their count decides);
    # elsewhere each is rendered as it comes, as one process always did.
    later: list[PageSource] | None = [] if fork and bulkfork.may_fork() else None
    try:
        sink = BlobSink(git, bulk_from=bulk_from, pack_bytes=pack_bytes)
        for page in pages:
            digest = pageindex.input_digest(page.inputs, fp)
            remembered = last.get(page.path)
            if (
                remembered is not None
                and digest != pageindex.NO_DIGEST  # inputs that cannot be digested are never reused
                and remembered[0] == digest
                and git.odb.exists(remembered[1])
            ):
                oid = remembered[1]
                reused += 1
            else:
                found = tip.blob(page.path, tip.index.get(page.path), digest)
                if found is not None:
                    oid = found
                    reused += 1
                elif later is not None:
                    oid = ""  # named once rendered, below
                    later.append(page)
                    rendered += 1
                else:
                    oid = sink.add(page.render())
                    rendered += 1
            stored[page.path] = (digest, oid)
            blobs[page.path] = oid
        if later is not None and len(later) >= max(2, bulk_from) and bulkfork.may_fork():
            two = bulkfork.render_in_two(git, later, pack_bytes=pack_bytes)
            ids, packed = two.ids, two.packed
        else:
            ids = [sink.add(page.render()) for page in later or ()]
        for page, oid in zip(later or (), ids, strict=True):
            stored[page.path] = (stored[page.path][0], oid)
            blobs[page.path] = oid
        sink.close()  # every page's blob is in the object database from here on (loose or packed)
        packed += sink.packed
        entries = pageindex.index_entries((p, d, o) for p, (d, o) in stored.items())
        blobs[INDEX_FILE] = str(git.create_blob(pageindex.render_index(entries, fp)))
        # The top files quote settings, URLs and error texts: guarded before they become objects.
        for name, data in guard_files(top).items():
            blobs[name] = str(git.create_blob(data))
    except (pygit2.GitError, OSError) as exc:
        return GitFailure(GIT_FAILED, f"cannot write the report into the Git object database: {exc}", repo.remote.url)
    if memo is not None:
        memo.stored = stored
        memo.pages, memo.maps = {}, {}  # the bytes are in the object database now
        memo.rendered = rendered
    return StoredReport(blobs=blobs, rendered=rendered, reused=reused, packed=packed)
