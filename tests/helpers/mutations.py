"""Hypothesis strategies that mutate JSON/YAML-like trees: the fuzz suite's one mutation engine.

`mutated(tree, values=...)` draws a copy of `tree` with 1-4 edits, each at a node reached by a random
walk from the root: replace the node with a drawn value, delete a mapping key or a list item,
duplicate a list item, add a key, or swap two list items. `values` decides what may be written:
`ANY_VALUE` (anything YAML can say, for inventory files a person writes) or `same_type` (a value of
the node's own JSON type, for objects an API server has already validated against its schema).

Not collected by pytest (no test_ prefix); the fuzz tests import it by path.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

# Strings that mean something to some parser on the way: YAML 1.1/1.2 scalars, Kubernetes quantities,
# timestamps with and without an offset, names with a trailing newline, Markdown, huge numbers.
NASTY_STRINGS = [
    "", " ", "\n", "x\n", "a" * 300, "-1", "0", "1e3", "2Ki", "1.5", "100m", "+4", "010", "0b100", "1_000",
    "0x1F", "Infinity", "-Infinity", "NaN", ".inf", "null", "~", "yes", "no", "on", "true", "False",
    "9" * 40, "2026-01-01T00:00:00", "2026-01-01T00:00:00Z", "2026-13-45T99:99:99+25:00", "not a time",
    "pending", "failed", "success", "rebooting", "3g.71gb", "1g.18gb", "mig-1g.18gb", "nvidia.com/gpu",
    "single", "mixed", "none", "gpu-h200-01", "../etc", "nodes/x", "C:\\x", "\x00", "\u202e", "é", "🙂",
    "| a | b |", "![x](http://e/x.png)", "@here", "[link](javascript:x)", "{", "}", "[", "]", ":", "#",
    '{"a": 1}', "[[[[[[[[[[]]]]]]]]]]", "https://user:secret@example.com/x.git",
]  # fmt: skip

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(NASTY_STRINGS),
    st.text(max_size=12),
)
ANY_VALUE: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(NASTY_STRINGS), st.text(max_size=8)), children, max_size=3),
    ),
    max_leaves=6,
)
STRINGS: st.SearchStrategy[str] = st.one_of(st.sampled_from(NASTY_STRINGS), st.text(max_size=16))


def same_type(node: Any) -> st.SearchStrategy[Any]:
    """A value the API server's schema would let stand where `node` is."""
    if isinstance(node, bool):
        return st.booleans()
    if isinstance(node, int):
        return st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.integers(-3, 20))
    if isinstance(node, float):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(node, str):
        return STRINGS
    if isinstance(node, list):
        return st.just([])
    if isinstance(node, dict):
        return st.dictionaries(STRINGS, STRINGS, max_size=3)
    return st.none()


def _walk(draw: st.DrawFn, root: Any) -> tuple[Any, Any] | None:
    """(parent, key) of a node reached by a random walk (None: the root itself)."""
    parent, key, node = None, None, root
    while isinstance(node, dict | list) and node and draw(st.integers(0, 4)) > 0:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        parent, key = node, draw(st.sampled_from(keys))
        node = node[key]
    return None if parent is None else (parent, key)


# Keys an API server always returns: deleting them would fuzz objects no server can produce.
REQUIRED_KEYS = frozenset({"metadata", "name", "namespace", "kind", "apiVersion"})


@st.composite
def mutated(draw: st.DrawFn, tree: Any, *, typed: bool = False) -> Any:
    """A deep copy of `tree` with 1-4 random edits (see the module docstring). With `typed`, the
    edits are those a schema allows: same JSON types, and REQUIRED_KEYS are never deleted."""
    out = copy.deepcopy(tree)
    for _ in range(draw(st.integers(1, 4))):
        spot = _walk(draw, out)
        if spot is None:
            continue
        parent, key = spot
        node = parent[key]
        op = draw(st.sampled_from(["replace", "replace", "delete", "add", "duplicate", "swap"]))
        if op == "replace" and typed and isinstance(node, dict | list):
            continue  # a schema keeps an object an object: edit inside it instead
        if op == "replace":
            parent[key] = draw(same_type(node) if typed else ANY_VALUE)
        elif op == "delete" and not (typed and key in REQUIRED_KEYS):
            del parent[key]
        elif op == "add" and isinstance(node, dict):
            node[draw(STRINGS)] = draw(STRINGS if typed else ANY_VALUE)
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(node))
        elif op == "swap" and isinstance(parent, list) and len(parent) > 1:
            other = draw(st.integers(0, len(parent) - 1))
            parent[key], parent[other] = parent[other], parent[key]
    return out
