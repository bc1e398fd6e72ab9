"""Create a Git repository holding an inventory (pygit2): what `migplan demo` starts from.

A real team already has its inventory repository; the demo makes one from the embedded example so
the whole job (Git source, reconcile, report committed back) runs with nothing set up beforehand.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pygit2

from reconciler.model.revisions import Revision


def seed_repository(
    path: Path,
    files: Mapping[str, bytes],
    *,
    branch: str = "main",
    message: str = "Inventory: initial MIG plan",
    author: tuple[str, str] = ("Platform Team", "platform@example.com"),
) -> Revision:
    """Initialise a repository with a work tree at `path`, commit `files` on `branch`, return the commit."""
    if path.exists() and any(path.iterdir()):
        raise FileExistsError(f"{path} exists and is not empty")
    repo = pygit2.init_repository(str(path), bare=False, initial_head=branch)
    for name, data in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    sig = pygit2.Signature(*author)
    oid = repo.create_commit("HEAD", sig, sig, message, tree, [])
    return Revision(ref=branch, sha=str(oid))
