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

import msgspec

INDEX_FILE = "index/pages.tsv"  # under reports.path; in a folder, so the top-file guard does not scan it
# v2: digests of the inputs' MessagePack encoding (v1: of their repr). An index of another version is ignored whole,
# so the first report after an upgrade renders every page once and writes a v2 index (the renderer fingerprint,
# which hashes this module's source, says the same where the source is shipped).
_HEADER = "# migplan page index v2 "
_ENCODER = msgspec.msgpack.Encoder(order="deterministic")
# 5,000 nodes x (1 page + 8 maps) at ~120 bytes a line is ~5.4 MB: anything far larger is not ours.
MAX_INDEX_BYTES = 32 * 1024 * 1024

_DIGEST = re.compile(r"[0-9a-f]{32}")
NO_DIGEST = ""  # input_digest of inputs it cannot digest: not of _DIGEST's shape, so never read back nor written
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
    """The digest of a page's inputs: frozen values (NodeReport, GpuSliceMap, tuples, str, int, bool, None);
    `fingerprint` stands for the page code. Equal values give equal digests in any process.

    The values are encoded as MessagePack by msgspec, in C: a dataclass as a map of its field names to its values in
    field order, an enum as its value, sets and dict keys sorted (`order="deterministic"`: a frozenset of strings
    iterates in a per-process hash order). MessagePack is self-delimiting and types what it encodes, so ("a", "bc")
    and ("ab", "c"), None and "", 0, False and 0.0 are distinct bytes. What it does not tell apart is a tuple from a
    list, a dataclass from a dict of its fields, an enum from its value: a page's inputs are typed (reports.py
    page_sources), so a field holds one of these kinds or the other, never both; only Finding.desired and .observed
    are Any, and no page draws them. It replaced `repr` (issue 29, `first5k`): the same purpose, without a Python
    call per dataclass (the generated `__repr__` and its recursion guard, half a million calls in a first report at
    5,000 nodes). A value msgspec cannot encode (an int past 64 bits, a lone surrogate, an object of another kind,
    a set of unorderable values) is digested by its repr, under another tag, as before: at worst a render.
    A value nested too deep for either has NO_DIGEST, which matches no index line and is left out of the index.
    """
    try:
        tag, body = b"msgpack", _ENCODER.encode(inputs)
    except (TypeError, ValueError, OverflowError, RecursionError):  # UnicodeEncodeError is a ValueError
        try:
            tag, body = b"repr", repr(inputs).encode("utf-8", "surrogatepass")
        except RecursionError:  # nested past the interpreter's limit: no digest, so never reused nor indexed
            return NO_DIGEST
    h = hashlib.sha256(fingerprint.encode("utf-8", "surrogatepass"))
    h.update(b"\0" + tag + b"\0")
    h.update(body)
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
