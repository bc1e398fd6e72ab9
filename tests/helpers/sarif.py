"""What a SARIF 2.1.0 log must be, checked by our own code: `sarif_problems(log)` lists every way it breaks the rules.

Written here from the SARIF 2.1.0 specification (OASIS Standard, with its errata 01), for the objects migplan writes:
the sarifLog, run, tool, toolComponent, reportingDescriptor, reportingConfiguration, result, message,
multiformatMessageString, location, physicalLocation, artifactLocation and region objects. Each check below names
the rule it stands for; objects migplan never writes are not checked. No schema file of another project is used.
Some rules are the specification's prose rather than its JSON schema (a ruleIndex points at the rule whose id is
the ruleId, a region does not end before it starts, a URI uses '/'); one is ours (rule ids are unique).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

VERSION = "2.1.0"
LEVELS = ("none", "note", "warning", "error")  # result.level and reportingConfiguration.level
COLUMN_KINDS = ("utf16CodeUnits", "unicodeCodePoints")  # run.columnKind

Check = Callable[[Any, str, list[str]], None]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _object(value: Any, where: str, problems: list[str]) -> bool:
    if not isinstance(value, dict):
        problems.append(f"{where}: must be an object")
        return False
    return True


def _string(obj: dict[str, Any], key: str, where: str, problems: list[str], *, required: bool = False) -> None:
    if key not in obj:
        if required:
            problems.append(f"{where}.{key}: required")
        return
    if not isinstance(obj[key], str):
        problems.append(f"{where}.{key}: must be a string")


def _array(obj: dict[str, Any], key: str, where: str, problems: list[str], each: Check) -> list[Any]:
    """An optional array property, every element checked; [] where absent or wrong."""
    if key not in obj:
        return []
    items = obj[key]
    if not isinstance(items, list):
        problems.append(f"{where}.{key}: must be an array")
        return []
    for i, item in enumerate(items):
        each(item, f"{where}.{key}[{i}]", problems)
    return items


def _message(value: Any, where: str, problems: list[str]) -> None:
    """A message object carries its text, or the id of a message string the rule defines."""
    if not _object(value, where, problems):
        return
    if "text" not in value and "id" not in value:
        problems.append(f"{where}: needs text or id")
    _string(value, "text", where, problems)
    _string(value, "id", where, problems)


def _multiformat(value: Any, where: str, problems: list[str]) -> None:
    """A multiformatMessageString must have its plain text."""
    if _object(value, where, problems):
        _string(value, "text", where, problems, required=True)


def _level(obj: dict[str, Any], where: str, problems: list[str]) -> None:
    if "level" in obj and obj["level"] not in LEVELS:
        problems.append(f"{where}.level: {obj['level']!r} is not one of {', '.join(LEVELS)}")


def _rule(value: Any, where: str, problems: list[str]) -> None:
    """A reportingDescriptor is named by a stable id; its default configuration's level is a result level."""
    if not _object(value, where, problems):
        return
    _string(value, "id", where, problems, required=True)
    _string(value, "name", where, problems)
    for key in ("shortDescription", "fullDescription"):
        if key in value:
            _multiformat(value[key], f"{where}.{key}", problems)
    config = value.get("defaultConfiguration")
    if config is not None and _object(config, f"{where}.defaultConfiguration", problems):
        _level(config, f"{where}.defaultConfiguration", problems)


def _region(value: Any, where: str, problems: list[str]) -> None:
    """Line and column numbers are 1-based; a region does not end before it starts."""
    if not _object(value, where, problems):
        return
    for key in ("startLine", "startColumn", "endLine", "endColumn"):
        if key in value and not (_is_int(value[key]) and value[key] >= 1):
            problems.append(f"{where}.{key}: must be an integer >= 1")
    start, end = value.get("startLine"), value.get("endLine")
    if _is_int(start) and _is_int(end) and end < start:
        problems.append(f"{where}.endLine: before startLine")


def _physical(value: Any, where: str, problems: list[str]) -> None:
    """A physicalLocation names an artifact (or an address); the artifactLocation's uri is a URI reference."""
    if not _object(value, where, problems):
        return
    if "artifactLocation" not in value and "address" not in value:
        problems.append(f"{where}: needs artifactLocation or address")
    artifact = value.get("artifactLocation")
    if artifact is not None and _object(artifact, f"{where}.artifactLocation", problems):
        _string(artifact, "uri", f"{where}.artifactLocation", problems)
        _string(artifact, "uriBaseId", f"{where}.artifactLocation", problems)
        if "\\" in str(artifact.get("uri", "")):
            problems.append(f"{where}.artifactLocation.uri: a URI separates with '/', not '\\'")
    if "region" in value:
        _region(value["region"], f"{where}.region", problems)


def _location(value: Any, where: str, problems: list[str]) -> None:
    if _object(value, where, problems) and "physicalLocation" in value:
        _physical(value["physicalLocation"], f"{where}.physicalLocation", problems)


def _result(rules: list[Any]) -> Check:
    """A result has a message; its ruleIndex, when given, points into the driver's rules at the rule whose id is
    the result's ruleId."""

    def check(value: Any, where: str, problems: list[str]) -> None:
        if not _object(value, where, problems):
            return
        if "message" not in value:
            problems.append(f"{where}.message: required")
        else:
            _message(value["message"], f"{where}.message", problems)
        _string(value, "ruleId", where, problems)
        _level(value, where, problems)
        if "ruleIndex" in value:
            index = value["ruleIndex"]
            if not (_is_int(index) and index >= -1):
                problems.append(f"{where}.ruleIndex: must be an integer >= -1")
            elif index >= 0:
                if index >= len(rules):
                    problems.append(f"{where}.ruleIndex: {index} is past the {len(rules)} rules")
                elif "ruleId" in value and isinstance(rules[index], dict) and rules[index].get("id") != value["ruleId"]:
                    problems.append(f"{where}.ruleIndex: rule {index} is {rules[index].get('id')!r}, not ruleId")
        _array(value, "locations", where, problems, _location)

    return check


def _run(value: Any, where: str, problems: list[str]) -> None:
    """A run names its tool (the driver, a toolComponent with a name); results are optional."""
    if not _object(value, where, problems):
        return
    tool = value.get("tool")
    if tool is None:
        problems.append(f"{where}.tool: required")
        return
    if not _object(tool, f"{where}.tool", problems):
        return
    driver = tool.get("driver")
    if driver is None:
        problems.append(f"{where}.tool.driver: required")
        return
    if not _object(driver, f"{where}.tool.driver", problems):
        return
    _string(driver, "name", f"{where}.tool.driver", problems, required=True)
    _string(driver, "version", f"{where}.tool.driver", problems)
    rules = _array(driver, "rules", f"{where}.tool.driver", problems, _rule)
    ids = [r.get("id") for r in rules if isinstance(r, dict)]
    if len(ids) != len(set(ids)):  # ours, beyond the spec's words: a ruleId must name one rule
        problems.append(f"{where}.tool.driver.rules: two rules share an id")
    if "columnKind" in value and value["columnKind"] not in COLUMN_KINDS:
        problems.append(f"{where}.columnKind: {value['columnKind']!r} is not one of {', '.join(COLUMN_KINDS)}")
    if value.get("results") is not None:
        _array(value, "results", where, problems, _result(rules))


def sarif_problems(log: Any) -> list[str]:
    """Every rule of SARIF 2.1.0 the log breaks (for the objects listed above); [] for a valid log."""
    problems: list[str] = []
    if not _object(log, "sarifLog", problems):
        return problems
    if log.get("version") != VERSION:
        problems.append(f"sarifLog.version: must be {VERSION!r}, is {log.get('version')!r}")
    _string(log, "$schema", "sarifLog", problems)
    if "runs" not in log:
        problems.append("sarifLog.runs: required")
    elif log["runs"] is not None:  # null: the tool could not start a run
        _array(log, "runs", "sarifLog", problems, _run)
    return problems
