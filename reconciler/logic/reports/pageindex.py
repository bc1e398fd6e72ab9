"""The per-page input index committed with a report: which values each node page and map was rendered from.

A new process (`migplan reconcile --once`) has no memory of the last report. So that it neither renders nor
scans again a page whose node did not change, the report carries `index/pages.tsv`: one line per per-node file,
`<path> TAB <input digest> TAB <blob id>`, the digest taken over the values the page is rendered from (see
reports.page_sources) and over the renderer itself (`fingerprint`: a change of the page code renders every page
again), the blob id being the Git object of the bytes rendered from them. The report writer reuses a page's blob
from the reports branch tip only when the tip's tree holds, at that very path, that very blob and the index names
it with the same digest: a page edited by hand on the branch (its blob id changed) is rendered again.

The index is data anyone with push access to the reports branch can write, so it is never trusted further than
that: a header other than this version's with this fingerprint, a line that is not exactly three fields of the
expected shapes, a path that is not a per-node file of the report tree (nodes/*.md, maps/*.svg, one component
under them), or a path named twice, and the whole index is ignored (every page is rendered). An index larger than
MAX_INDEX_BYTES is not read at all (the reader checks the blob's size first).

Pure: bytes and values in, values out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

INDEX_FILE = "index/pages.tsv"  # under reports.path; in a folder, so the top-file guard does not scan it
_HEADER = "# migplan page index v1 "
# 5,000 nodes x (1 page + 8 maps) at ~120 bytes a line is ~5.4 MB: anything far larger is not ours.
MAX_INDEX_BYTES = 32 * 1024 * 1024

_DIGEST = re.compile(r"[0-9a-f]{32}")
_OID = re.compile(r"[0-9a-f]{40}")
# Exactly the names reports.py gives per-node files: one component under nodes/ or maps/, the report writer's
# character set, no leading dot (never '.', '..' or '.git').
_PAGE_PATH = re.compile(r"(?:nodes/[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*\.md|maps/[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*\.svg)")


@dataclass(frozen=True, slots=True)
class IndexedPage:
    """One line of the index: the page's input digest and the blob id of the bytes rendered from those inputs."""

    digest: str
    oid: str


def is_page_path(path: str) -> bool:
    """Whether `path` may be named by the index (a per-node file of the report tree, nothing else)."""
    return _PAGE_PATH.fullmatch(path) is not None


def input_digest(inputs: object, fingerprint: str) -> str:
    """The digest of a page's inputs: frozen values (NodeReport, GpuSliceMap, tuples, str, bool) whose repr is
    their content; `fingerprint` stands for the page code. Equal values give equal digests in any process;
    a value whose repr were not stable (an object without one) only costs a render, never a stale page."""
    h = hashlib.sha256(fingerprint.encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(repr(inputs).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def render_index(entries: Mapping[str, IndexedPage], fingerprint: str) -> bytes:
    """The index file: the header (version and fingerprint), then one line per page, by path."""
    lines = [_HEADER + _clean_fingerprint(fingerprint)]
    lines += [f"{path}\t{e.digest}\t{e.oid}" for path, e in sorted(entries.items())]
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_index(data: bytes, fingerprint: str) -> dict[str, IndexedPage] | None:
    """The index as {path: IndexedPage}, or None when it cannot be trusted (see the module docstring)."""
    if len(data) > MAX_INDEX_BYTES:
        return None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not text.endswith("\n"):
        return None  # cut short (or not ours)
    lines = text[:-1].split("\n")
    if lines[0] != _HEADER + _clean_fingerprint(fingerprint):
        return None  # another version, another renderer, or not an index
    out: dict[str, IndexedPage] = {}
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) != 3:
            return None
        path, digest, oid = fields
        if not is_page_path(path) or not _DIGEST.fullmatch(digest) or not _OID.fullmatch(oid) or path in out:
            return None
        out[path] = IndexedPage(digest, oid)
    return out


def index_entries(pages: Iterable[tuple[str, str, str]]) -> dict[str, IndexedPage]:
    """{path: IndexedPage} from (path, digest, oid) triples, keeping only what parse_index would accept."""
    return {p: IndexedPage(d, o) for p, d, o in pages if is_page_path(p) and _DIGEST.fullmatch(d) and _OID.fullmatch(o)}


def _clean_fingerprint(fingerprint: str) -> str:
    # The header is one ASCII line: a fingerprint is a hex digest, anything else is reduced to one.
    if re.fullmatch(r"[0-9a-f]{1,64}", fingerprint):
        return fingerprint
    return hashlib.sha256(fingerprint.encode("utf-8", "surrogatepass")).hexdigest()
