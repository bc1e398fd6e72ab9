"""Markdown that means what it says: the one escape for every string migplan puts into Markdown.

Pure. The drift README committed to Git, `migplan plan`'s merge-request comment and the error
messages quoted in them carry strings migplan did not write: names and values from the inventory,
labels, pod names and log lines from the cluster, branch names, signers, diagnostics that quote a
bad value. Rendered as they are, such a string could break a table (`|`, a newline), turn into an
image or a link (`![x](https://…)`, `[x](…)`, a bare URL), inject HTML (`<img …>`, entities) or ping
people (`@team`, `#123`). `text()` makes any string inert inline Markdown, and is the only function
that does so; `code()` and `table()` build on it.

What it does, and why each:
- newlines and other line breaks become spaces (a table row or list item is one line);
- the ASCII punctuation Markdown gives a meaning to inside a line is backslash-escaped (CommonMark
  §2.4: any ASCII punctuation may be escaped), so emphasis, links, images (no `[`, so no `](`), code spans, math and
  table pipes are text; `-`, `.`, `:` and quotes are left alone (they matter only at the start of a
  line, where a leading `-` or `.` is escaped), so names and messages stay readable in the raw file;
- `<`, `>` and `&` become entities: no HTML, no entity tricks;
- `@` and `#` are followed by a zero-width space and `://` / `www.` are broken the same way: GitHub
  and GitLab link mentions, issue references and bare URLs in *rendered text*, after escaping, so
  only a character in between stops them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

ZWSP = "\u200b"
_BREAKS = "\r\n\v\f\x85\u2028\u2029"
_LINE_BREAKS = re.compile(f"[{_BREAKS}]+")
# ( ) and ! need no escape once [ and ] are escaped: no link or image can open. $: GitHub math.
_ESCAPED = frozenset("\\`*_[]|~$")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_NOT_AFTER = ("@", "#")
_TICKS = re.compile("`+")
# What each character becomes inside a line, for str.translate; characters not in it stay as they are.
_INERT = str.maketrans({**_ENTITIES, **{ch: "\\" + ch for ch in _ESCAPED}, **{ch: ch + ZWSP for ch in _NOT_AFTER}})
# Whatever text() changes anywhere in a string: a line break, a character of _INERT, a URL's "://" or "www.". Most
# values have none (numbers, profiles, pod names: issue 29, 50 values a node page): one search returns them as is.
_TOUCHED = re.compile("[" + re.escape(_BREAKS + "".join(map(chr, _INERT))) + "]|://|www\\.")


def text(value: object) -> str:
    """Any value as inert inline Markdown (safe in a paragraph, a list item and a table cell)."""
    s = str(value)
    if _TOUCHED.search(s) is None and s[:1] not in ("-", "."):
        return s
    s = _LINE_BREAKS.sub(" ", s)
    s = s.replace("://", f":{ZWSP}//").replace("www.", f"www{ZWSP}.")
    # One C-level pass instead of a Python loop per character (a fleet-wide report calls this ~50 times a node):
    # every character maps on its own, except a leading "-" or "." (">" is an entity wherever it is).
    if s[:1] in ("-", "."):
        return "\\" + s[0] + s[1:].translate(_INERT)
    return s.translate(_INERT)


def code(value: object) -> str:
    """An inline code span for identifiers (revisions, node names); falls back to text() for a value
    that would break out of one (a backtick) so it is never rendered as anything else."""
    s = _LINE_BREAKS.sub(" ", str(value))
    if "`" in s or not s.strip():
        return text(s)
    return "`" + s.replace("|", "\\|") + "`"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured table; every cell through text() (headers are migplan's own words). No
    padding: renderers ignore it, and a 5,000-node report renders in milliseconds without it."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines.extend("| " + " | ".join(text(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def fence(lines: Sequence[str]) -> list[str]:
    """Lines as a fenced code block whose fence no line can close (CommonMark §4.5)."""
    # Only a line with a backtick can hold a run of them (a node page's slice maps have none: one C-level test each).
    longest = max((len(m) for ln in lines if "`" in ln for m in _TICKS.findall(ln)), default=0)
    marker = "`" * max(3, longest + 1)
    return [marker, *lines, marker]
