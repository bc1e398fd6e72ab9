"""simple_table against tabulate itself: the same bytes on generated, real-shaped and hostile tables."""

from __future__ import annotations

import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tabulate import tabulate

from reconciler.commands import texttable
from reconciler.commands.texttable import simple_table

PLAN_HEADERS = ["action", "subject", "reason"]


def reference(rows: list[list[object]], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="simple")


# Cells from the characters the direct path accepts, biased towards the ones that look like numbers and booleans.
plain_cells = st.text(alphabet=st.sampled_from(string.printable[:95]), max_size=12) | st.sampled_from(
    ["", "1", "-2.5", "1,000", "1e5", "nan", "inf", "True", "False", "1_0", " x", "x ", "skip", "node/gpu-1"]
)


@st.composite
def plain_tables(draw: st.DrawFn) -> tuple[list[list[object]], list[str]]:
    width = draw(st.integers(1, 4))
    headers = draw(st.lists(plain_cells, min_size=width, max_size=width))
    rows = draw(st.lists(st.lists(plain_cells, min_size=width, max_size=width), max_size=6))
    return [list(r) for r in rows], headers


@settings(max_examples=400, deadline=None)
@given(plain_tables())
def test_generated_plain_tables_equal_tabulate(table: tuple[list[list[object]], list[str]]) -> None:
    rows, headers = table
    assert simple_table(rows, headers) == reference(rows, headers)


hostile_cells = (
    st.text(max_size=8)
    | st.sampled_from(["a\nb", "\x1b[31mred\x1b[0m", "\x01", "漢字", "e\u0301", "\t", "a\r\nb", " ", "  pad  "])
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True)
    | st.none()
    | st.booleans()
)


@st.composite
def hostile_tables(draw: st.DrawFn) -> tuple[list[list[object]], list[str]]:
    width = draw(st.integers(1, 4))
    headers = draw(st.lists(plain_cells | st.text(max_size=4), min_size=width, max_size=width))
    rows = draw(st.lists(st.lists(hostile_cells | plain_cells, min_size=width, max_size=width), max_size=5))
    return [list(r) for r in rows], headers


@settings(max_examples=400, deadline=None)
@given(hostile_tables())
@example(([["skip", "node/a", "1,000"]], PLAN_HEADERS))
@example(([["skip", "node/a", "x"], ["write", "node/b"]], PLAN_HEADERS))
@example(([["skip", "漢字", "x"]], PLAN_HEADERS))
@example(([["skip", "a\nb", "x"]], PLAN_HEADERS))
def test_hostile_tables_equal_tabulate(table: tuple[list[list[object]], list[str]]) -> None:
    rows, headers = table
    assert simple_table(rows, headers) == reference(rows, headers)


def plan_rows(n: int) -> list[list[object]]:
    return [
        ["skip" if i % 3 else "relabel", f"node/gpu-node-{i:05d}", f"held back: node {i} (blocked by drain-{i % 7})"]
        for i in range(n)
    ]


def test_the_plan_shape_is_drawn_directly_and_equal() -> None:
    rows = plan_rows(500)
    assert texttable._direct(rows, PLAN_HEADERS)  # the fast path is the one under test here
    assert simple_table(rows, PLAN_HEADERS) == reference(rows, PLAN_HEADERS)


@pytest.mark.parametrize(
    "rows",
    [
        [],  # no rows: tabulate prints the headers alone
        [["skip", "1,000", "x"]],  # a column tabulate reads as a number (right-aligned)
        [["True", "node", "x"]],  # a column tabulate reads as booleans
        [["skip", "node", "a\nb"]],  # a multi-line cell
        [["skip", "node", " x"]],  # a blank tabulate strips
        [["skip", "漢字", "x"]],  # wide characters (two columns each with wcwidth)
        [["skip", "node", 3]],  # not a str
        [["skip", "node"]],  # a short row
    ],
)
def test_what_tabulate_reshapes_goes_to_tabulate(rows: list[list[object]]) -> None:
    assert not texttable._direct(rows, PLAN_HEADERS)
    assert simple_table(rows, PLAN_HEADERS) == reference(rows, PLAN_HEADERS)
