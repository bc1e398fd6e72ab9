"""The per-page input index (issue 29): read back as written, and ignored whole when it is not exactly that."""

from __future__ import annotations

import pytest

from reconciler.logic.reports import pageindex
from reconciler.logic.reports.pageindex import IndexedPage

FP = "ab" * 32
D1, D2 = "0a" * 16, "f" * 32
O1, O2 = "1" * 40, "e" * 40


def _index(*lines: str, header: str | None = None) -> bytes:
    head = header if header is not None else f"# migplan page index v1 {FP}"
    return ("\n".join([head, *lines]) + "\n").encode()


def test_the_index_reads_back_as_written() -> None:
    entries = {"nodes/gpu-1.md": IndexedPage(D1, O1), "maps/gpu-1-gpu0.svg": IndexedPage(D2, O2)}
    data = pageindex.render_index(entries, FP)
    assert pageindex.parse_index(data, FP) == entries
    assert data.splitlines()[1].startswith(b"maps/")  # by path: the same report gives the same bytes
    assert pageindex.parse_index(pageindex.render_index({}, FP), FP) == {}


def test_another_renderer_or_version_ignores_the_whole_index() -> None:
    data = pageindex.render_index({"nodes/a.md": IndexedPage(D1, O1)}, FP)
    assert pageindex.parse_index(data, "cd" * 32) is None
    assert pageindex.parse_index(data.replace(b"v1", b"v2"), FP) is None


@pytest.mark.parametrize(
    "line",
    [
        f"../../etc/passwd\t{D1}\t{O1}",  # outside the report tree
        f"/nodes/a.md\t{D1}\t{O1}",
        f"nodes/../README.md\t{D1}\t{O1}",
        f"nodes/.git\t{D1}\t{O1}",
        f"nodes/sub/a.md\t{D1}\t{O1}",  # one component under nodes/ only
        f"README.md\t{D1}\t{O1}",  # a top file is always rendered, never taken from the index
        f"drift.yaml\t{D1}\t{O1}",
        f"index/pages.tsv\t{D1}\t{O1}",
        f"nodes/a.txt\t{D1}\t{O1}",
        f"maps/a.md\t{D1}\t{O1}",
        f"nodes/a\\b.md\t{D1}\t{O1}",
        f"nodes/a.md\t{D1.upper()}\t{O1}",  # digests are lowercase hex of the exact length
        f"nodes/a.md\t{D1[:-1]}\t{O1}",
        f"nodes/a.md\t{D1}\t{O1}0",
        f"nodes/a.md\t{D1}\t{'g' * 40}",
        f"nodes/a.md\t{D1}",
        f"nodes/a.md\t{D1}\t{O1}\textra",
        f"nodes/a.md {D1} {O1}",
        "",
        f"nodes/a.md\t{D1}\t{O1}\r",
    ],
)
def test_one_hostile_or_malformed_line_ignores_the_whole_index(line: str) -> None:
    good = f"nodes/b.md\t{D2}\t{O2}"
    assert pageindex.parse_index(_index(good), FP) == {"nodes/b.md": IndexedPage(D2, O2)}
    assert pageindex.parse_index(_index(good, line), FP) is None


def test_a_path_named_twice_or_a_damaged_file_ignores_the_whole_index() -> None:
    line = f"nodes/a.md\t{D1}\t{O1}"
    assert pageindex.parse_index(_index(line, line.replace(D1, D2)), FP) is None
    assert pageindex.parse_index(_index(line)[:-1], FP) is None  # cut short: no final newline
    assert pageindex.parse_index(b"", FP) is None
    assert pageindex.parse_index(b"\xff\xfe" + _index(line), FP) is None  # not ASCII
    assert pageindex.parse_index(_index(line, header="# migplan page index v1"), FP) is None
    assert pageindex.parse_index(_index(line).replace(b"nodes/a.md", "nodes/\u00e9.md".encode()), FP) is None


def test_an_index_over_the_size_limit_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _index(f"nodes/a.md\t{D1}\t{O1}")
    monkeypatch.setattr(pageindex, "MAX_INDEX_BYTES", len(data) - 1)
    assert pageindex.parse_index(data, FP) is None


def test_the_input_digest_follows_the_values_and_the_renderer() -> None:
    a = pageindex.input_digest(("gpu-1", 0, True), FP)
    assert a == pageindex.input_digest(("gpu-1", 0, True), FP)
    assert a != pageindex.input_digest(("gpu-1", 0, False), FP)
    assert a != pageindex.input_digest(("gpu-1", 0, True), "cd" * 32)
    assert pageindex.input_digest("1", FP) != pageindex.input_digest(1, FP)


def test_index_entries_drop_what_the_reader_would_refuse() -> None:
    got = pageindex.index_entries([("nodes/a.md", D1, O1), ("../x", D1, O1), ("nodes/b.md", "zz", O1)])
    assert got == {"nodes/a.md": IndexedPage(D1, O1)}


def test_a_fingerprint_that_is_not_hex_cannot_break_the_header() -> None:
    data = pageindex.render_index({}, "evil\nnodes/a.md\tx\ty")
    assert data.count(b"\n") == 1 and pageindex.parse_index(data, "evil\nnodes/a.md\tx\ty") == {}
