"""The per-page input index (issue 29): read back as written, and ignored whole when it is not exactly that."""

from __future__ import annotations

import dataclasses
import enum
import os
import subprocess
import sys

import pytest

from reconciler.logic.reports import pageindex
from reconciler.logic.reports.pageindex import IndexedPage
from reconciler.model.drift import (
    DraClaimRecord,
    Finding,
    FindingSeverity,
    GpuSliceMap,
    Holder,
    NodeDraRecord,
    NodeReport,
    NodeStatus,
    Occupancy,
    SlicePartition,
)

FP = "ab" * 32
D1, D2 = "0a" * 16, "f" * 32
O1, O2 = "1" * 40, "e" * 40


def _index(*lines: str, header: str | None = None) -> bytes:
    head = header if header is not None else f"# migplan page index v2 {FP}"
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
    assert pageindex.parse_index(data.replace(b"v2", b"v3"), FP) is None
    assert pageindex.parse_index(data.replace(b"v2", b"v1"), FP) is None  # the repr digests' index (issue 29)


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
    assert pageindex.parse_index(_index(line, header="# migplan page index v2"), FP) is None
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


# Issue 29 (`first5k`): the digest is taken over a MessagePack encoding of the inputs (msgspec), not their repr.


@pytest.mark.parametrize(
    "values",
    [
        [("a", "bc"), ("ab", "c"), ("abc",), ("a", "b", "c"), ("", "abc"), ("abc", "")],
        [None, "", 0, False, 0.0, -0.0, (), b"", "None", "0", "False"],
        [1, True, 1.0, "1", (1,), ((1,),)],
        [("a", None), ("a", ""), ("a",), (None, "a"), ("a", ("",))],
        [2**63 - 1, 2**63, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1],  # the last two past msgpack: repr, tagged
        ["\udc80", "\ufffd", "?", "\\udc80", "'\\udc80'"],  # a lone surrogate is not UTF-8: repr, tagged
    ],
)
def test_near_collisions_have_distinct_digests(values: list[object]) -> None:
    digests = [pageindex.input_digest(v, FP) for v in values]
    assert len(set(digests)) == len(values), values
    assert digests == [pageindex.input_digest(v, FP) for v in values]  # and each the same when taken again


def test_a_repr_fallback_cannot_collide_with_an_encoding() -> None:
    """The two schemes are tagged apart: a value whose repr is some other value's encoded bytes is still distinct."""
    big = 2**70  # past msgpack: digested by its repr, "1180591620717411303424"
    assert pageindex.input_digest(big, FP) != pageindex.input_digest(repr(big), FP)
    assert pageindex.input_digest(big, FP) != pageindex.input_digest(str(big).encode(), FP)


def test_inputs_too_deep_to_encode_get_no_digest_and_stay_out_of_the_index() -> None:
    deep: tuple[object, ...] = ()
    for _ in range(100_000):
        deep = (deep,)
    assert pageindex.input_digest(deep, FP) == pageindex.NO_DIGEST
    assert pageindex.index_entries([("nodes/a.md", pageindex.NO_DIGEST, O1)]) == {}


_SCRIPT = """
import sys
from reconciler.logic.reports import pageindex
from reconciler.model.drift import Finding, NodeReport, NodeStatus
value = (
    frozenset({"alpha", "beta", "gamma", "delta", "epsilon"}),
    {"zeta": 1, "eta": [2, 3], "theta": {"b": None, "a": 1.5}},
    NodeReport("n", NodeStatus.DRIFTED, (Finding("MP501", "m", desired={"y": 1, "x": 2}, observed={"q", "p"}),)),
)
print(pageindex.input_digest(value, sys.argv[1]))
"""


def test_the_digest_is_the_same_in_every_process_whatever_its_hash_seed() -> None:
    """Sets iterate, and a dict may be built, in another order in another process: the encoding sorts both."""
    got = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _SCRIPT, FP], env=env, capture_output=True, text=True, check=True)
        got.add(out.stdout.strip())
    assert len(got) == 1 and len(got.pop()) == 32


def test_a_dict_in_another_insertion_order_has_the_same_digest() -> None:
    assert pageindex.input_digest({"a": 1, "b": 2}, FP) == pageindex.input_digest({"b": 2, "a": 1}, FP)
    assert pageindex.input_digest({"a": 1, "b": 2}, FP) != pageindex.input_digest({"a": 2, "b": 1}, FP)


def _rich_inputs() -> list[object]:
    """A node page's and a map's inputs (reports.page_sources) with every field of every value set."""
    gpu = GpuSliceMap(
        2,
        "H200-141GB",
        True,
        8,
        (
            SlicePartition("3g.71gb", 4, 4, "team-a", "ml/vllm-0", "moved", 0),
            SlicePartition("1g.18gb", 0, 1, "team-b", "ml/x-1", "planned", 0),
        ),
        "observed",
        "observed",
    )
    finding = Finding("MP501", "gpu 2 differs", FindingSeverity.ERROR, "gpu-1", 2, "3g.71gb", 2, 1, ("ml/a", "ml/b"))
    dra = NodeDraRecord(
        "dra-static",
        "other",
        ((0, 3), (1, 4)),
        ("gpu-0-mig-1", "gpu-1"),
        2,
        (DraClaimRecord("ml/c", ("gpu-1",), ("ml/p",)),),
        1,
    )
    node = NodeReport(
        "gpu-1",
        NodeStatus.DRIFTED,
        (finding,),
        (Occupancy("gpu-1", "3g.71gb", 4, 1, (Holder("ml/vllm-0", 1, "team-a"),), "observed"),),
        "migplan-1",
        "reporting",
        3,
        ("ml/a", "ml/b"),
        dra,
    )
    return [(node, (gpu,), True), ("gpu-1", gpu)]


def _variants(value: object) -> list[object]:
    """Values that differ from `value` in one place: each field of each dataclass, each item of each tuple, each leaf
    changed to another value of its type, to None, or from None to a value of each kind."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: list[object] = []
        for f in dataclasses.fields(value):
            for v in _variants(getattr(value, f.name)):
                try:
                    out.append(dataclasses.replace(value, **{f.name: v}))
                except TypeError:  # a value its type refuses (Finding's message must be text)
                    continue
        return out
    if isinstance(value, tuple):
        out = [value[:-1], (*value, value[-1] if value else "x")]
        for i, item in enumerate(value):
            out += [(*value[:i], v, *value[i + 1 :]) for v in _variants(item)]
        return out
    if isinstance(value, enum.Enum):
        return [m for m in type(value) if m is not value]
    if isinstance(value, bool):
        return [not value, int(value), None]
    if isinstance(value, int):
        return [value + 1, -value - 1, float(value), str(value), None]
    if isinstance(value, str):
        return [value + "x", value[:-1], value.upper() + "\u00e9", None]
    assert value is None, value
    return ["", 0, False, ()]


def test_a_change_of_any_field_of_any_type_changes_the_digest() -> None:
    """Every field of NodeReport, Finding, Occupancy, Holder, NodeDraRecord, DraClaimRecord, GpuSliceMap and
    SlicePartition (and the page's own values) changed alone: a different digest; two changes that give the same
    digest are the same value (compared by repr, which tells 0, False and 0.0 apart, as == does not)."""
    seen: dict[str, str] = {}
    kinds: set[str] = set()
    for base in _rich_inputs():
        stack = [base]
        while stack:  # every dataclass type the inputs hold
            v = stack.pop()
            if dataclasses.is_dataclass(v):
                kinds.add(type(v).__name__)
                stack += [getattr(v, f.name) for f in dataclasses.fields(v)]
            elif isinstance(v, tuple):
                stack += list(v)
        for changed in [base, *_variants(base)]:
            digest = pageindex.input_digest(changed, FP)
            assert len(digest) == 32
            assert seen.setdefault(digest, repr(changed)) == repr(changed), changed
    assert kinds == {
        "NodeReport", "Finding", "Occupancy", "Holder", "NodeDraRecord", "DraClaimRecord", "GpuSliceMap",
        "SlicePartition",
    }  # fmt: skip
    assert len(seen) > 300
