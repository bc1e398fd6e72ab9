"""Where reports may be committed: never onto the inventory the controller follows.

Pure. One rule, used twice (defence in depth): by validation (`migplan validate`, and so every
revision the controller considers: MP412 refuses it) and by the report writer
(reconciler/adapters/git/reports.py) before it builds a commit.

`reports.path` is relative to the repository's top level; the inventory root (`--path`) too. A
report commit replaces exactly the subtree at `reports.path` on `reports.branch`. That is harmless
on another branch, and harmless on the followed branch as long as the subtree holds no inventory
file. It is refused when:

- `reports.path` is not a plain relative path: absolute, `.`/`..`/empty components (`./nodes`,
  `a/../nodes`, `reports/`), a backslash, NUL — it could escape or alias what it seems to name;
- on the followed branch (or when that branch is unknown: `migplan validate ROOT` cannot know what a
  controller will follow, so it assumes the worst), `reports.path` is the inventory root, contains
  it, or lies inside `cluster.yaml`, `nodes/` or `layouts/` of it.

Names are compared case-insensitively: a checkout on a case-insensitive file system (macOS,
Windows) makes `Nodes/` and `nodes/` one directory. Symlinks cannot be seen here (no tree): the
writer refuses a `reports.path` whose components are not plain directories at the branch tip.
"""

from __future__ import annotations

from reconciler.model.inventory import ReportSettings

CODE = "MP412"
# The entries of an inventory root that hold inventory (DESIGN.md: the inventory format).
INVENTORY_ENTRIES = ("cluster.yaml", "nodes", "layouts")


def normalize_root(root: str) -> str:
    """An inventory root as given (`--path`): './inv/' -> 'inv', '' or '.' -> '' (the top level)."""
    parts = [p for p in root.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


def path_problem(path: str) -> str | None:
    """Why `path` is not a plain '/'-separated relative path, or None."""
    if not path:
        return "is empty (the whole repository)"
    if "\x00" in path or "\\" in path:
        return "contains NUL or a backslash"
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return "is absolute"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' component (it could name another directory than it seems)"
    if any(part.casefold() == ".git" for part in parts):
        return "names .git"
    return None


def same_branch(a: str, b: str) -> bool:
    """Whether two branch names (`main`, `refs/heads/main`) name one branch, case-insensitively."""
    return a.removeprefix("refs/heads/").casefold() == b.removeprefix("refs/heads/").casefold()


def inventory_overlap(path: str, root: str) -> str | None:
    """How report path `path` would touch the inventory at `root` on the same branch, or None."""
    p = path.casefold().strip("/")
    r = normalize_root(root).casefold()
    if r and (p == r or r.startswith(p + "/")):
        return f"it is or contains the inventory root {root!r}: a report commit would replace the inventory"
    if r and not p.startswith(r + "/"):
        return None
    inside = p[len(r) + 1 :] if r else p
    first = inside.split("/", 1)[0]
    if first in INVENTORY_ENTRIES:
        return f"it lies in the inventory's {first}{'' if first.endswith('.yaml') else '/'}: a report would rewrite it"
    return None


def report_target_problem(reports: ReportSettings, *, followed_branch: str | None, root: str) -> str | None:
    """A sentence saying why reports may not be committed where `reports` says, or None."""
    problem = path_problem(reports.path)
    if problem is not None:
        return f"reports.path {reports.path!r} {problem}"
    if followed_branch is not None and not same_branch(followed_branch, reports.branch):
        return None
    overlap = inventory_overlap(reports.path, root)
    if overlap is None:
        return None
    where = (
        f"reports.branch {reports.branch!r} is the branch being followed"
        if followed_branch is not None
        else f"if the controller follows reports.branch {reports.branch!r}"
    )
    return (
        f"reports.path {reports.path!r}: {where}, and {overlap}; "
        "use another reports.branch, or a reports.path outside cluster.yaml, nodes/ and layouts/"
    )
