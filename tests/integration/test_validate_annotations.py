"""`migplan validate -o github|codequality|sarif`: the same findings as `-o json`, in CI annotation formats.

Every case of the bad-input corpus is validated once with `-o json` and once per annotation format;
the code, message, file and line of each annotation are derived from the JSON and compared. SARIF is
checked against the SARIF 2.1.0 rules (tests/helpers/sarif.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.corpus import build_case
from helpers.sarif import sarif_problems

from reconciler.commands.validate import command as validate
from reconciler.logic.inventory.rules import CODES

TESTS = Path(__file__).resolve().parents[1]
CORPUS = TESTS / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir() and not p.name.startswith("_"))


def _build(name: str, dest: Path) -> None:
    """Lay a corpus case out as its own test does (tests/helpers/corpus.py)."""
    build_case(name, dest)


@pytest.fixture
def in_tmp(tmp_path: Path) -> Iterator[Path]:
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(cwd)


def _run(*args: str) -> tuple[int, str]:
    got = CliRunner().invoke(validate, list(args))
    assert got.exception is None or isinstance(got.exception, SystemExit), got.exception
    return got.exit_code, got.stdout


def _expected(doc: dict[str, Any], prefix: str) -> list[tuple[str, str, str | None, int | None, str]]:
    """(code, message, file relative to the job's working directory, line, severity) from -o json."""
    return [
        (d["code"], d["message"], None if d["file"] is None else f"{prefix}/{d['file']}", d["line"], d["severity"])
        for d in doc["errors"] + doc["warnings"]
    ]


_COMMAND = re.compile(r"^::(error|warning) (?P<props>[^:]*)::(?P<data>.*)$")


def _unescape(text: str) -> str:
    # GitHub's runner reverses exactly these (actions/runner ActionCommand.cs: _escapeMappings)
    for raw, esc in (("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25")):
        text = text.replace(esc, raw)
    return text


def parse_github(out: str) -> list[tuple[str, str, str | None, int | None, str]]:
    got = []
    for line in out.splitlines():
        m = _COMMAND.match(line)
        assert m, f"not a workflow command: {line!r}"
        props = dict(p.split("=", 1) for p in m["props"].split(","))
        props = {k: _unescape(v) for k, v in props.items()}
        line_no = int(props["line"]) if "line" in props else None
        got.append((props["title"], _unescape(m["data"]), props.get("file"), line_no, m.group(1)))
    return got


def _sort(rows: list[Any]) -> list[Any]:
    return sorted(rows, key=repr)


@pytest.mark.parametrize("name", CASES)
def test_annotation_formats_carry_the_json_findings(name: str, in_tmp: Path) -> None:
    _build(name, in_tmp / "inv")
    code_json, out = _run("inv", "-o", "json")
    expected = _expected(json.loads(out), "inv")
    assert expected, "every corpus case has at least one finding"

    code_gh, out = _run("inv", "-o", "github")
    assert code_gh == code_json
    assert _sort(parse_github(out)) == _sort(expected)

    code_cq, out = _run("inv", "-o", "codequality")
    assert code_cq == code_json
    issues = json.loads(out)
    severity = {"error": "major", "warning": "minor"}
    got = [(i["check_name"], i["description"], i["location"]["path"], i["location"]["lines"]["begin"],
            i["severity"]) for i in issues]  # fmt: skip
    want = [(c, m, f or "inv/cluster.yaml", line or 1, severity[s]) for c, m, f, line, s in expected]
    assert _sort(got) == _sort(want)
    fingerprints = [i["fingerprint"] for i in issues]
    assert len(set(fingerprints)) == len(fingerprints), "a fingerprint names one finding"

    code_sarif, out = _run("inv", "-o", "sarif")
    assert code_sarif == code_json
    log = json.loads(out)
    assert sarif_problems(log) == []
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= set(CODES)
    got = []
    for r in run["results"]:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        loc = r["locations"][0]["physicalLocation"] if "locations" in r else None
        uri = None if loc is None else loc["artifactLocation"]["uri"]
        assert uri is None or not uri.startswith("/"), "SARIF paths are relative to the checkout"
        start = None if loc is None or "region" not in loc else loc["region"]["startLine"]
        got.append((r["ruleId"], r["message"]["text"], uri, start, r["level"]))
    assert _sort(got) == _sort(expected)


def test_fingerprints_stay_when_lines_above_move(in_tmp: Path) -> None:
    _build("placement-overlap", in_tmp / "inv")
    first = json.loads(_run("inv", "-o", "codequality")[1])
    node = in_tmp / "inv" / "nodes" / "bad.yaml"
    node.write_text("# a comment added above the finding\n" + node.read_text("utf-8"), "utf-8")
    second = json.loads(_run("inv", "-o", "codequality")[1])
    assert [i["location"]["lines"]["begin"] + 1 for i in first if i["check_name"] == "MP307"] == [
        i["location"]["lines"]["begin"] for i in second if i["check_name"] == "MP307"
    ]
    assert {i["fingerprint"] for i in first} == {i["fingerprint"] for i in second}


def test_valid_inventory_gives_no_annotations(in_tmp: Path) -> None:
    _build("placement-overlap", in_tmp / "inv")
    (in_tmp / "inv" / "nodes" / "bad.yaml").unlink()
    assert _run("inv", "-o", "github") == (0, "")
    assert _run("inv", "-o", "codequality") == (0, "[]\n")
    code, out = _run("inv", "-o", "sarif")
    assert code == 0 and json.loads(out)["runs"][0]["results"] == []
