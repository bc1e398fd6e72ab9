"""Find the inventory roots of a Git revision or a directory (reconciler/logic/inventory/inventoryroots.py decides).

Only names are read (trees, directory entries), never file contents, except `migplan-roots.yaml`.
Hidden directories (.git, .github) and symbolic links are skipped; the walk stops at MAX_DEPTH and
after MAX_ENTRIES entries, so a huge repository costs a bounded walk.
"""

from __future__ import annotations

from typing import cast

import pygit2
from pygit2.enums import ObjectType

from reconciler.adapters.dirroots import MAX_DEPTH, MAX_ENTRIES, dir_roots
from reconciler.adapters.git.source import GitFailure, GitRemote, InventoryRepo
from reconciler.logic.inventory import inventoryroots
from reconciler.logic.inventory.inventoryroots import CLUSTER_FILE, ROOTS_FILE, ROOTS_FILE_INVALID
from reconciler.model.revisions import Revision

__all__ = ["dir_roots", "git_roots", "repo_roots"]


def repo_roots(remote: GitRemote, rev: str) -> list[str] | GitFailure:
    """Open the repository (fetching a remote one into its cache), resolve `rev` and find its roots."""
    repo = InventoryRepo.open(remote)
    if isinstance(repo, GitFailure):
        return repo
    if not remote.is_local and (failure := repo.fetch()) is not None:
        return failure
    revision = repo.resolve(rev)
    if isinstance(revision, GitFailure):
        return revision
    return git_roots(repo, revision)


def git_roots(repo: InventoryRepo, revision: Revision) -> list[str] | GitFailure:
    """The inventory roots at `revision` (["" ] when the top level is one, or when none is found)."""
    try:
        tree = repo.repo[revision.sha].peel(pygit2.Commit).tree
        if CLUSTER_FILE in tree:
            return [""]
        if ROOTS_FILE in tree:
            blob = repo.repo[tree[ROOTS_FILE].id]
            if not isinstance(blob, pygit2.Blob):
                return GitFailure(ROOTS_FILE_INVALID, f"{ROOTS_FILE} is not a file")
            listed = inventoryroots.parse_roots_file(blob.data)
            if isinstance(listed, str):
                return GitFailure(ROOTS_FILE_INVALID, f"{ROOTS_FILE} at {revision}: {listed}")
            return listed
        found: list[str] = []
        seen = 0
        stack: list[tuple[pygit2.Tree, str, int]] = [(tree, "", 0)]
        while stack and seen < MAX_ENTRIES:
            top, prefix, depth = stack.pop()
            for entry in top:
                seen += 1
                name = entry.name or ""
                if entry.type == ObjectType.TREE and not name.startswith(".") and depth + 1 < MAX_DEPTH:
                    stack.append((cast(pygit2.Tree, repo.repo[entry.id]), f"{prefix}{name}/", depth + 1))
                elif entry.type == ObjectType.BLOB and name == CLUSTER_FILE and entry.filemode != 0o120000:
                    found.append(f"{prefix}{name}")
    except (KeyError, ValueError, pygit2.GitError) as exc:
        return GitFailure(ROOTS_FILE_INVALID, f"cannot list the inventory roots at {revision}: {exc}")
    return inventoryroots.roots_from_paths(found) or [""]
