"""The Git revision that desired state came from, stamped on plans, reports and commits."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Revision:
    ref: str  # "main", "refs/tags/v1", or "" for a plain directory
    sha: str  # 40 hex digits, or "" when read from a directory (no Git)

    def __str__(self) -> str:
        if not self.sha:
            return f"{self.ref or 'workdir'}@dir"
        return f"{self.ref}@sha1:{self.sha}" if self.ref else f"sha1:{self.sha}"

    @property
    def short(self) -> str:
        return self.sha[:12] if self.sha else "workdir"


WORKDIR = Revision(ref="", sha="")
