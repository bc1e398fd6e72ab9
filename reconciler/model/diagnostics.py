"""Diagnostics: errors and warnings as values, with a stable code, a message, a file and a line.

Users see these, never tracebacks. Every layer that finds a problem returns Diagnostics instead of
raising, so one run can report every problem of every file at once.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str  # stable, e.g. "MP203"; in docs/reference/codes.md and never reused for another meaning
    message: str  # one sentence a person can act on
    file: str | None = None  # path relative to the inventory root, "/" separated
    line: int | None = None  # 1-based
    severity: Severity = Severity.ERROR
    extra: Mapping[str, Any] = field(default_factory=dict)  # machine-readable details (node, gpu, ...)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def location(self) -> str:
        if self.file is None:
            return "<inventory>"
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        return f"{self.location()}: {self.severity.value} {self.code}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "severity": self.severity.value,
        }
        out.update(self.extra)
        return out
