"""Which inventory roots a repository holds: one cluster per root, several clusters per repository.

Pure (paths and bytes in, root paths out). A repository may keep one inventory at its top level
(`cluster.yaml`, `nodes/`, `layouts/`) — then that is the only root and nothing changes — or several,
e.g. `clusters/prod/cluster.yaml` and `clusters/staging/cluster.yaml`. They are found, in order:
1. a repository-level `migplan-roots.yaml` listing them (`roots: [clusters/prod, clusters/staging]`),
   for teams that want the list reviewed like code;
2. otherwise every directory holding a `cluster.yaml`, except inside another root's `nodes/` or
   `layouts/` (a stray file there is that root's problem, reported by its own validation).
Paths are '/'-separated, relative to the repository top level; the top level is "".
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.logic.inventory.reporttarget import normalize_root, path_problem
from reconciler.model import yamlbudget

ROOTS_FILE = "migplan-roots.yaml"
CLUSTER_FILE = "cluster.yaml"
ROOTS_FILE_INVALID = "MP747"  # migplan-roots.yaml is not a list of inventory roots
MAX_ROOTS = 1000
MAX_ROOTS_FILE_BYTES = 64 * 1024


def roots_from_paths(cluster_files: Iterable[str]) -> list[str]:
    """The directories of these `cluster.yaml` paths that are inventory roots, sorted."""
    dirs = sorted(
        {p.rsplit("/", 1)[0] if "/" in p else "" for p in cluster_files if p.rsplit("/", 1)[-1] == CLUSTER_FILE}
    )
    out: list[str] = []
    for d in dirs:
        inside = any(
            d.startswith(f"{r}/nodes/" if r else "nodes/")
            or d.startswith(f"{r}/layouts/" if r else "layouts/")
            or d in ((f"{r}/nodes", f"{r}/layouts") if r else ("nodes", "layouts"))
            for r in out
        )
        if not inside:
            out.append(d)
    return out


def parse_roots_file(data: bytes) -> list[str] | str:
    """The roots `migplan-roots.yaml` lists, or why it cannot be used."""
    if len(data) > MAX_ROOTS_FILE_BYTES:
        return f"larger than {MAX_ROOTS_FILE_BYTES} bytes"
    import yaml  # only a repository with a roots file needs it: `migplan validate DIR` does not import pyyaml

    if (too_much := yamlbudget.problem(data)) is not None:
        return too_much
    try:
        doc = yaml.safe_load(data)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        return f"not YAML ({type(exc).__name__})"
    roots = doc.get("roots") if isinstance(doc, dict) else None
    if not isinstance(roots, list) or not roots or len(roots) > MAX_ROOTS:
        return f"expected `roots:` with a list of 1 to {MAX_ROOTS} inventory directories"
    out: list[str] = []
    for r in roots:
        if not isinstance(r, str):
            return f"root {r!r} is not a string"
        if r.strip() in ("", "."):
            norm = ""
        else:
            problem = path_problem(r.strip().rstrip("/"))
            if problem is not None:
                return f"root {r!r} {problem}"
            norm = normalize_root(r)
        if norm in out:
            return f"root {r!r} is listed twice"
        out.append(norm)
    return out
