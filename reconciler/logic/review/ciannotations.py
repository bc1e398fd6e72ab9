"""Validation diagnostics in the formats CI systems render on the changed line.

Pure: diagnostics in, text or JSON-ready values out. Three formats, one per CI system:

- `github`: GitHub Actions workflow commands, one per diagnostic,
  `::error file=F,line=L,title=CODE::message` (GitHub's runner toolkit escaping: `%`, CR and LF in
  the message; additionally `:` and `,` in property values, actions/toolkit packages/core/src/command.ts);
- `codequality`: GitLab's Code Quality report (a JSON array; description, check_name, fingerprint,
  severity, location.path + location.lines.begin), which GitLab shows in the merge request's diff;
- `sarif`: SARIF 2.1.0 (GitHub code scanning and most other tools), one rule per code of the rule
  registry, results with ruleId, level, message and a physical location relative to the repository.

Every format carries the same code, message, file and line as `-o json`; `prefix` turns a path
relative to the inventory root into one relative to the repository (or the job's working directory),
which is what the CI systems resolve against.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.logic.inventory.rules import CODES, Rule
from reconciler.model.diagnostics import Diagnostic, Severity

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"  # SARIF's conventional base id for "the repository checked out by the job"


def annotated_path(diag: Diagnostic, prefix: str) -> str | None:
    """The diagnostic's file relative to the repository: the inventory root's own path in front."""
    if diag.file is None:
        return None
    return posixpath.normpath(posixpath.join(prefix, diag.file)) if prefix not in ("", ".") else diag.file


# -- GitHub workflow commands ------------------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_commands(diagnostics: Iterable[Diagnostic], *, prefix: str = "") -> str:
    """One `::error`/`::warning` line per diagnostic; file and line where known."""
    lines = []
    for d in diagnostics:
        props: list[tuple[str, str]] = []
        path = annotated_path(d, prefix)
        if path is not None:
            props.append(("file", path))
            if d.line:
                props.append(("line", str(d.line)))
        props.append(("title", d.code))
        rendered = ",".join(f"{k}={_escape_property(v)}" for k, v in props)
        lines.append(f"::{_github_level(d.severity)} {rendered}::{_escape_data(d.message)}")
    return "".join(line + "\n" for line in lines)


def _github_level(severity: Severity) -> str:
    return "error" if severity is Severity.ERROR else "warning"


# -- GitLab Code Quality -----------------------------------------------------------------------

# GitLab's severities are info, minor, major, critical, blocker: an error stops the merge from being
# applied (major), a warning is advice (minor).
_CODEQUALITY_SEVERITY = {Severity.ERROR: "major", Severity.WARNING: "minor"}


_LINE_REF = re.compile(r"\blines? \d+(?:-\d+)?")  # "(line 13)" in a message moves with the file


def codequality(diagnostics: Sequence[Diagnostic], *, prefix: str = "") -> list[dict[str, Any]]:
    """GitLab Code Quality issues. The fingerprint hashes code, file and message with line numbers left
    out (so an edit above a finding does not make GitLab see a new one), plus the finding's rank among
    equal ones."""
    seen: dict[tuple[str, str, str], int] = {}
    out = []
    root = prefix if prefix not in ("", ".") else "."
    for d in diagnostics:
        path = annotated_path(d, prefix) or posixpath.join(root, "cluster.yaml")
        key = (d.code, path, _LINE_REF.sub("line", d.message))
        rank = seen.get(key, 0)
        seen[key] = rank + 1
        digest = hashlib.sha256("\0".join((*key, str(rank))).encode("utf-8")).hexdigest()
        out.append(
            {
                "description": d.message,
                "check_name": d.code,
                "fingerprint": digest,
                "severity": _CODEQUALITY_SEVERITY[d.severity],
                "location": {"path": path, "lines": {"begin": d.line or 1}},
            }
        )
    return out


# -- SARIF 2.1.0 -------------------------------------------------------------------------------


def _sarif_level(severity: Severity) -> str:
    return "error" if severity is Severity.ERROR else "warning"


def _rules(registry: Mapping[str, Rule], diagnostics: Sequence[Diagnostic]) -> list[Rule]:
    rules = dict(registry)
    for d in diagnostics:  # a code outside the registry still gets a rule, so ruleIndex stays valid
        rules.setdefault(d.code, Rule(d.code, d.severity, d.code))
    return sorted(rules.values(), key=lambda r: r.code)


def sarif(
    diagnostics: Sequence[Diagnostic],
    *,
    prefix: str = "",
    version: str,
    registry: Mapping[str, Rule] = CODES,
) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: the registry's rules, then one result per diagnostic."""
    rules = _rules(registry, diagnostics)
    index = {r.code: i for i, r in enumerate(rules)}
    results = []
    for d in diagnostics:
        result: dict[str, Any] = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": _sarif_level(d.severity),
            "message": {"text": d.message},
        }
        path = annotated_path(d, prefix)
        if path is not None:
            physical: dict[str, Any] = {"artifactLocation": {"uri": path, "uriBaseId": SRCROOT}}
            if d.line:
                physical["region"] = {"startLine": d.line}
            result["locations"] = [{"physicalLocation": physical}]
        results.append(result)
    driver = {
        "name": "migplan",
        "version": version,
        "rules": [
            {
                "id": r.code,
                "name": r.code,
                "shortDescription": {"text": r.title},
                "defaultConfiguration": {"level": _sarif_level(r.severity)},
            }
            for r in rules
        ],
    }
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results, "columnKind": "unicodeCodePoints"}],
    }


FORMATS = ("github", "codequality", "sarif")


def render(
    diagnostics: Sequence[Diagnostic],
    *,
    output: str,
    prefix: str = "",
    version: str,
    registry: Mapping[str, Rule] = CODES,
) -> bytes:
    """The bytes a command prints for `-o github|codequality|sarif` (every command renders them alike)."""
    if output == "github":
        return github_commands(diagnostics, prefix=prefix).encode("utf-8")
    doc: Any
    if output == "codequality":
        doc = codequality(diagnostics, prefix=prefix)
    elif output == "sarif":
        doc = sarif(diagnostics, prefix=prefix, version=version, registry=registry)
    else:
        raise ValueError(f"not an annotation format: {output}")
    return json.dumps(doc, indent=2, ensure_ascii=False).encode("utf-8") + b"\n"
