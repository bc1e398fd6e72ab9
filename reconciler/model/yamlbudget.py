"""How much a YAML text would cost once loaded, told from its event stream before anything is built. Pure.

YAML aliases make a few hundred bytes stand for billions of nodes ("billion laughs": nine levels of ten
aliases). A loader expands them all; so would any message that renders the value. `problem()` walks the
parser's events (libyaml's C parser when present: no Python object per node, no expansion) and keeps, for
each anchor, the size its node would have once expanded; an alias adds that size. The text is refused when
the expanded total passes `max_nodes`, or when it nests deeper than `max_depth`, before a loader runs.

Used on every YAML migplan reads from someone else: the mig-parted ConfigMap (read every cycle; anyone
allowed to edit it can poison it), `--from-mig-parted` files, device-plugin config entries, report
branches' drift.yaml, `migplan-roots.yaml`, workload manifests.
"""

from __future__ import annotations

from typing import Any

MAX_NODES = 200_000  # a mig-parted config for 5,000 nodes is ~60,000 nodes; a drift report is read elsewhere
MAX_DEPTH = 64


def problem(text: str | bytes, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> str | None:
    """Why loading `text` would cost too much (a short reason, never quoting the text), or None.

    A text the parser refuses is None here: the caller's loader then reports its own parse error."""
    import yaml  # on first use: `migplan validate DIR` of a plain inventory never loads PyYAML

    loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    sizes: dict[str, int] = {}  # anchor -> expanded size of the node it names
    open_: list[tuple[str | None, int]] = []  # collections being read: (anchor, expanded size so far)
    total = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.CollectionStartEvent):
                if len(open_) >= max_depth:
                    return f"nested deeper than {max_depth} levels"
                open_.append((event.anchor, 1))
                total += 1
                if total > max_nodes:
                    return f"it holds more than {max_nodes} YAML nodes"
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                anchor, size = open_.pop()
                if anchor is not None:
                    sizes[anchor] = size
                if open_:
                    open_[-1] = (open_[-1][0], open_[-1][1] + size)
                continue
            if isinstance(event, yaml.AliasEvent):
                size = sizes.get(str(event.anchor), 1)
            elif isinstance(event, yaml.ScalarEvent):
                size = 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            else:
                continue  # stream and document events
            total += size
            if open_:
                open_[-1] = (open_[-1][0], open_[-1][1] + size)
            if total > max_nodes:
                return f"its aliases expand to more than {max_nodes} YAML nodes"
    except (yaml.YAMLError, UnicodeError, ValueError):
        return None
    if total > max_nodes:
        return f"its aliases expand to more than {max_nodes} YAML nodes"
    return None
