"""Reading a fleet's inventory YAML fast: the twin's own reader, one top-level block at a time, memoised.

A 5,000-node inventory is 5,000 node files whose `spec:` blocks repeat (a handful of distinct cuts) and whose
`metadata:` blocks differ. PyYAML builds Python values in Python even with its C parser (~6 ms a node file), so
a file is cut at its top-level keys (lines starting at column 0 with `key:`), each block is parsed alone, and a
block already seen in this read is not parsed again. For a block-style top-level mapping this is what parsing the
whole file gives: each top-level value is a node of its own in the YAML graph, and nothing but an alias can refer
across blocks. Anything else falls back to parsing the whole file: an anchor or alias character, a tab, a
directive or document marker, flow or sequence at the top level, a line at column 0 that is not a key or a
comment, a block that is not a one-key mapping, a key written twice. The values a memo shares between files
are read only (reconciler/twin/fleet.py never changes an inventory document).

The twin does not share migplan's loader (import-linter forbids reconciler.logic and the adapters): this is
PyYAML's safe loader, cut up, nothing else.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["BlockMemo", "load_document"]

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TOP_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*:(?:[ ]|$)")
_FALLBACK = re.compile(r"[&*\t]")

BlockMemo = dict[str, Any]  # a block's text -> its parsed one-key mapping, for one read of an inventory


def _whole(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)


def _blocks(text: str) -> list[str] | None:
    """The file cut before each top-level key; None when it is not a plain block-style top-level mapping."""
    blocks: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        first = line[:1]
        if first in ("", " ", "\n", "\r", "#"):
            if blocks:
                blocks[-1].append(line)
            elif line.strip() and not line.lstrip().startswith("#"):
                return None  # indented content before any key
            continue
        if not _TOP_KEY.match(line):
            return None
        blocks.append([line])
    return ["".join(b) for b in blocks] if blocks else None


def load_document(data: bytes, memo: BlockMemo) -> Any:
    """The file's YAML value (what yaml.safe_load gives), reading through `memo`."""
    text = data.decode("utf-8")
    if _FALLBACK.search(text):
        return _whole(text)
    blocks = _blocks(text)
    if blocks is None:
        return _whole(text)
    out: dict[Any, Any] = {}
    for block in blocks:
        value = memo.get(block)
        if value is None:
            value = _whole(block)
            if not isinstance(value, dict) or len(value) != 1:
                return _whole(text)
            memo[block] = value
        ((key, item),) = value.items()
        if key in out:
            return _whole(text)
        out[key] = item
    return out
