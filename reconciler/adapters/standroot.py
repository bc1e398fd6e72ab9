"""Which inventory a command run without one means: the root the user stands in, found as git finds its repository.

`migplan validate` and `migplan check-workloads` without an inventory argument used to fall back to the embedded
example, so a user inside their own broken inventory got the example's green verdict. Now they look where they
stand: the working directory, then each parent, for `cluster.yaml` (an inventory root) or `migplan-roots.yaml` (a
repository of several roots). The walk stops, as git's repository discovery does, after the top of a Git work tree
(a directory holding `.git`), before a directory named in GIT_CEILING_DIRECTORIES, at the file-system root, or
after MAX_LEVELS directories. Only names are looked at, never contents. Finding nothing is a value (`NotInInventory`)
the command words as an error and exit 2; the example is used only when asked for by name (`--example`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.logic.inventory.inventoryroots import CLUSTER_FILE, ROOTS_FILE

NO_INVENTORY_HERE = "MP413"  # no inventory root where the command stands, and none named
MAX_LEVELS = 256  # deeper than any real path; a bound all the same


@dataclass(frozen=True, slots=True)
class NotInInventory:
    """Nothing to validate where the command stands: where it looked, and why it stopped there."""

    start: str
    stopped_at: str
    why: str  # "the top of the Git work tree", "GIT_CEILING_DIRECTORIES", "the file-system root"

    def message(self, named: str, example: str) -> str:
        """The error, with the ways out: `named` and `example` are the command lines that name an inventory."""
        return (
            f"error {NO_INVENTORY_HERE}: not inside an inventory: no {CLUSTER_FILE} or {ROOTS_FILE} in {self.start} "
            f"or any directory above it (looked up to {self.stopped_at}, {self.why}). "
            f"Name one (`{named}`), use the embedded example by name (`{example}`), or start one (`migplan init`)."
        )


def _ceilings(env: Mapping[str, str]) -> frozenset[Path]:
    """GIT_CEILING_DIRECTORIES as git reads it: absolute paths, ':'-separated, empty entries ignored."""
    raw = env.get("GIT_CEILING_DIRECTORIES", "")
    return frozenset(Path(p) for p in raw.split(os.pathsep) if p and os.path.isabs(p))


def _present(directory: Path, name: str) -> bool:
    """The name exists (a dangling link too: the validator then says what is wrong with it)."""
    candidate = directory / name
    try:
        return candidate.exists() or candidate.is_symlink()
    except OSError:  # a name too long, a directory that cannot be searched: not there
        return False


def standing_root(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Path | NotInInventory:
    """The inventory root (or repository of roots) the working directory is in, or where it looked for one.

    Raises OSError only when the working directory itself cannot be had (deleted under the shell)."""
    start = (cwd if cwd is not None else Path.cwd()).absolute()
    ceilings = _ceilings(os.environ if env is None else env)
    here = start
    for _ in range(MAX_LEVELS):
        if _present(here, CLUSTER_FILE) or _present(here, ROOTS_FILE):
            return here
        if _present(here, ".git"):
            return NotInInventory(str(start), str(here), "the top of the Git work tree")
        parent = here.parent
        if parent == here:
            return NotInInventory(str(start), str(here), "the file-system root")
        if parent in ceilings:
            return NotInInventory(str(start), str(here), "GIT_CEILING_DIRECTORIES")
        here = parent
    return NotInInventory(str(start), str(here), f"{MAX_LEVELS} directories up")
