"""The text tables of `reconcile --once`: tabulate's `simple` format, drawn directly when that is provably the same.

tabulate spends ~0.1 ms a row inferring column types, measuring and padding (1.2 s profiled for the 5,000-row plan
of a first cycle at 5,000 nodes). For the tables we print, the result is plain: every column left-aligned, each
as wide as its widest cell and at least its header plus two, cells joined by two spaces, each line stripped of
trailing blanks, a dashed line under the headers. `simple_table` draws exactly that, but only when every cell is
a `str` that tabulate can neither parse nor reshape; anything else goes to tabulate itself:

- a cell with a character outside printable ASCII (newlines make multi-line rows, ESC starts ANSI codes that
  take no width, `\\x01` is tabulate's separating line, wide East-Asian characters take two columns with wcwidth),
  or with blanks at either end (tabulate strips them): tabulate;
- a column where no cell holds a character that no number or boolean can hold (tabulate would type it as a
  number, or bool, and right-align or reformat it; "1,000", "1e5", "nan", "True" all are): tabulate;
- no rows, no headers, a row of another length: tabulate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from tabulate import tabulate

# Every character a cell may hold for the direct path: printable ASCII, no blank at either end (checked apart).
_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7F))
# Every character any string that tabulate parses as int, float (thousands separators, exponents, inf/nan/infinity,
# underscores) or bool ("True"/"False") can hold; a cell with a character outside this set is text to tabulate.
_NUMERIC = frozenset("0123456789+-.,_ eEiInNfFaAtTyYrRuUlLsS")


def _direct(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> bool:
    """Whether tabulate would draw these rows as plain left-aligned text columns (see the module docstring)."""
    if not rows or not headers or any(type(h) is not str or not _PLAIN.issuperset(h) for h in headers):
        return False
    width = len(headers)
    texty = [False] * width
    for row in rows:
        if len(row) != width:
            return False
        for i, cell in enumerate(row):
            if type(cell) is not str:
                return False
            if cell and (cell[0] == " " or cell[-1] == " " or not _PLAIN.issuperset(cell)):
                return False
            if not texty[i] and not _NUMERIC.issuperset(cell):
                texty[i] = True
    return all(texty)


def simple_table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    """`tabulate(rows, headers=headers, tablefmt="simple")`, byte for byte; drawn directly when provably equal."""
    if not _direct(rows, headers):
        return tabulate(rows, headers=list(headers), tablefmt="simple")
    cells = cast(Sequence[Sequence[str]], rows)  # _direct checked that every cell is a str
    widths = [len(h) + 2 for h in headers]  # tabulate's MIN_PADDING around a header
    for row in cells:
        for i, cell in enumerate(row):
            if len(cell) > widths[i]:
                widths[i] = len(cell)
    formats = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [formats.format(*headers).rstrip(), "  ".join("-" * w for w in widths)]
    lines += [formats.format(*row).rstrip() for row in cells]
    return "\n".join(lines)
