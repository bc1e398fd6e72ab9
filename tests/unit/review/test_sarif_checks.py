"""Our SARIF 2.1.0 checks (tests/helpers/sarif.py) pass migplan's own logs and refuse each broken rule.

The checks replace a copy of another project's schema file: they must be able to fail, so every rule they stand
for is broken once below, on a copy of a log migplan really writes, and must be reported at the right place.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from helpers.sarif import sarif_problems

from reconciler.logic.review import ciannotations
from reconciler.model.diagnostics import Diagnostic, Severity


def _log() -> dict[str, Any]:
    diagnostics = [
        Diagnostic("MP307", "overlaps 2g at 0", file="nodes/n.yaml", line=14),
        Diagnostic("MP403", "partitions under none", severity=Severity.WARNING),
        Diagnostic("MP999", "a code outside the registry", file="x.yaml"),
    ]
    return ciannotations.sarif(diagnostics, prefix="inv", version="1.2.3")


def test_migplans_own_log_passes() -> None:
    log = _log()
    assert sarif_problems(log) == []
    assert len(log["runs"][0]["results"]) == 3  # the checks walked real results, not an empty run
    assert sarif_problems(ciannotations.sarif([], version="0")) == []


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(log: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node: Any = log
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is _DELETE:
            del node[int(last) if isinstance(node, list) else last]
        else:
            node[int(last) if isinstance(node, list) else last] = value

    return change


_DELETE = object()


def _repeat_first_rule_id(log: dict[str, Any]) -> None:
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    rules[1]["id"] = rules[0]["id"]


R0 = "runs/0/results/0"
BROKEN: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("not-an-object", lambda log: log.clear(), "sarifLog.version"),
    ("version-missing", _set("version", _DELETE), "sarifLog.version"),
    ("version-other", _set("version", "2.0.0"), "sarifLog.version"),
    ("runs-missing", _set("runs", _DELETE), "sarifLog.runs: required"),
    ("runs-object", _set("runs", {}), "sarifLog.runs: must be an array"),
    ("tool-missing", _set("runs/0/tool", _DELETE), "runs[0].tool: required"),
    ("driver-missing", _set("runs/0/tool/driver", _DELETE), "tool.driver: required"),
    ("driver-name-missing", _set("runs/0/tool/driver/name", _DELETE), "tool.driver.name: required"),
    ("rule-id-missing", _set("runs/0/tool/driver/rules/0/id", _DELETE), "rules[0].id: required"),
    ("rule-ids-repeat", _repeat_first_rule_id, "two rules share an id"),
    ("rule-text-missing", _set("runs/0/tool/driver/rules/0/shortDescription", {}), "shortDescription.text"),
    (
        "rule-level",
        _set("runs/0/tool/driver/rules/0/defaultConfiguration/level", "fatal"),
        "defaultConfiguration.level",
    ),
    ("column-kind", _set("runs/0/columnKind", "bytes"), "runs[0].columnKind"),
    ("results-object", _set("runs/0/results", {}), "results: must be an array"),
    ("message-missing", _set(f"{R0}/message", _DELETE), "results[0].message: required"),
    ("message-empty", _set(f"{R0}/message", {}), "results[0].message: needs text or id"),
    ("message-text-number", _set(f"{R0}/message/text", 7), "message.text: must be a string"),
    ("level", _set(f"{R0}/level", "info"), "results[0].level"),
    ("rule-index-negative", _set(f"{R0}/ruleIndex", -2), "ruleIndex: must be an integer >= -1"),
    ("rule-index-bool", _set(f"{R0}/ruleIndex", True), "ruleIndex: must be an integer >= -1"),
    ("rule-index-past", _set(f"{R0}/ruleIndex", 10_000), "ruleIndex: 10000 is past"),
    ("rule-index-other-rule", _set(f"{R0}/ruleIndex", 0), "not ruleId"),
    ("physical-empty", _set(f"{R0}/locations/0/physicalLocation", {}), "needs artifactLocation or address"),
    ("uri-backslash", _set(f"{R0}/locations/0/physicalLocation/artifactLocation/uri", "inv\\n.yaml"), "'\\'"),
    ("uri-number", _set(f"{R0}/locations/0/physicalLocation/artifactLocation/uri", 1), "uri: must be a string"),
    ("start-line-zero", _set(f"{R0}/locations/0/physicalLocation/region/startLine", 0), "startLine: must be"),
    ("start-line-text", _set(f"{R0}/locations/0/physicalLocation/region/startLine", "14"), "startLine: must be"),
    ("end-before-start", _set(f"{R0}/locations/0/physicalLocation/region/endLine", 3), "endLine: before startLine"),
    ("locations-object", _set(f"{R0}/locations", {}), "locations: must be an array"),
]


@pytest.mark.parametrize(("name", "change", "problem"), BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_rule_is_reported(name: str, change: Callable[[dict[str, Any]], None], problem: str) -> None:
    log = copy.deepcopy(_log())
    assert log["runs"][0]["results"][0]["ruleId"] == "MP307"  # the result the changes above aim at
    change(log)
    problems = sarif_problems(log)
    assert any(problem in p for p in problems), problems
