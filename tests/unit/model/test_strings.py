"""Strings mean what they say (issue 10, family 8): full-match validation, YAML number forms, Markdown.

- every `pattern` in schemas/*.json is anchored ^...$ and, as Python's `re` reads it, does not let a
  trailing newline slip past the `$`; the code's own name checks use fullmatch / \\Z;
- YAML 1.1-only number forms are MP116 (corpus cases yaml11-*/yaml12-*, both paths in
  test_validation_fastpath.py);
- every user string that reaches Markdown (drift README, plan comment, quoted error messages) is
  inert: no broken table, no image, link, HTML or @mention.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.git.reports import _path_problem
from reconciler.adapters.git.source import Snapshot
from reconciler.commands import plan as plan_cmd
from reconciler.logic.codecs import migparted
from reconciler.logic.inventory import schemas
from reconciler.logic.inventory.validation import ValidationResult, validate_inventory
from reconciler.logic.reports import markdown, reports
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.drift import DriftReport, Finding, FindingSeverity, NodeReport, NodeStatus
from reconciler.model.revisions import Revision
from reconciler.sourcing import LoadedRevision

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"


def _patterns(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        return own + [p for v in node.values() for p in _patterns(v)]
    if isinstance(node, list):
        return [p for v in node for p in _patterns(v)]
    return []


ALL_PATTERNS = sorted({p for f in SCHEMAS.glob("*.schema.json") for p in _patterns(json.loads(f.read_text()))})


def test_there_are_patterns_to_check() -> None:
    assert len(ALL_PATTERNS) >= 5


@pytest.mark.parametrize("pattern", ALL_PATTERNS)
def test_every_schema_pattern_is_anchored_and_refuses_a_trailing_newline(pattern: str) -> None:
    # JSON Schema's `pattern` is a search: without ^...$ "x!" would match [a-z]+ on its "x".
    assert pattern.startswith("^") and pattern.endswith("$"), pattern
    python = schemas.python_patterns({"pattern": pattern})["pattern"]
    assert python.endswith("\\Z")
    # A value the pattern accepts, found by trying a few typical ones, must not pass with "\n" added.
    samples = ["a", "gpu-h200-01", "3g.71gb", "reports", "rack", "r12", "a/b", "x.y", "1g.18gb+me", "10m"]
    accepted = [s for s in samples if re.search(python, s)]
    assert accepted, f"no sample matches {pattern}"
    for s in accepted:
        assert re.search(pattern, s + "\n"), "the point of the test: Python's $ lets this through"
        assert not re.search(python, s + "\n")


def _inventory(owner: str = "team-a", label: str = "r1", name: str = "corpus") -> dict[str, bytes]:
    return {
        "cluster.yaml": f'apiVersion: migplan/v1\nkind: Cluster\nmetadata: {{name: "{name}"}}\n'
        "spec: {migStrategy: mixed}\n".encode(),
        "nodes/n1.yaml": (
            "apiVersion: migplan/v1\nkind: Node\nmetadata:\n  name: n1\n"
            f'  labels: {{rack: "{label}"}}\nspec:\n  gpus:\n    - index: 0\n      model: H100-80GB\n'
            "      mig:\n        enabled: true\n        partitions:\n"
            f'          - {{profile: 3g.40gb, owner: "{owner}"}}\n'
        ).encode(),
    }


def test_names_owners_and_label_values_are_full_match_validated() -> None:
    assert validate_inventory(_inventory()).valid
    for bad in (_inventory(owner="team-a\\n"), _inventory(label="r1\\n"), _inventory(name="corpus\\n")):
        result = validate_inventory(bad)
        assert not result.valid and "MP205" in {d.code for d in result.errors}, [str(d) for d in result.errors]


def test_code_name_checks_use_fullmatch() -> None:
    assert _path_problem("reports") is None
    assert _path_problem("reports\n") is not None
    good = "version: v1\nmig-configs:\n  a:\n    - devices: [0]\n      mig-enabled: true\n"
    good += "      mig-devices: {1g.10gb: 1}\n"
    assert migparted.parse_strict(good)
    with pytest.raises(migparted.MigPartedFormatError):
        migparted.parse_strict(good.replace("{1g.10gb: 1}", '{"1g.10gb\\n": 1}'))


HOSTILE = "![x](https://evil.example/p.png) [click](http://evil) <img src=x onerror=alert(1)> @team | #1\nnext `x`"


def _no_active_markdown(md: str) -> None:
    # an image or link needs an unescaped [ ... ]( ; HTML needs a raw <
    assert not re.search(r"(?<!\\)\[", md) and not re.search(r"(?<!\\)\]\(", md) and "<img" not in md
    assert "https://evil" not in md and "http://evil" not in md  # bare URLs are autolinked
    assert not re.search(r"@team", md)  # @<zwsp>team: no mention
    assert "#1" not in md


def test_markdown_text_is_inert() -> None:
    out = markdown.text(HOSTILE)
    _no_active_markdown(out)
    assert "\n" not in out and "|" not in out.replace("\\|", "")
    assert markdown.text("gpu-h200-01") == "gpu-h200-01"  # names stay readable in the raw file
    assert markdown.code("main@sha1:abc") == "`main@sha1:abc`"
    assert "`" not in markdown.code("a`b").replace("\\`", "")
    assert markdown.fence(["a```b"])[0] == "````"


def _table_rows(md: str) -> list[str]:
    return [ln for ln in md.splitlines() if ln.startswith("|")]


def _columns(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def test_drift_readme_escapes_every_user_string() -> None:
    finding = Finding(code="MP505", message=HOSTILE, severity=FindingSeverity.WARNING, node="n1", profile=HOSTILE)
    report = DriftReport(
        cluster="corpus",
        revision=Revision("main", "0" * 40),
        strategy="mixed",
        nodes=(NodeReport(name="n1", status=NodeStatus.DRIFTED, findings=(finding,)),),
    )
    source = {
        "revision": "main@sha1:" + "0" * 40,
        "latest": "main`x`@sha1:" + "1" * 40,
        "refused": {"revision": "x", "code": "MP720", "reason": HOSTILE, "signer": "@evil <e@x>", "errors": [
            {"file": "nodes/a|b.yaml", "line": 3, "code": "MP205", "message": HOSTILE}
        ]},
        "source_error": {"code": "MP701", "message": HOSTILE, "url": "https://evil.example/x"},
    }  # fmt: skip
    md = reports.render_readme(report, source=source).decode()
    # the only links are migplan's own, to the node pages it writes; with those taken out nothing is active
    own = re.findall(r"(?<!\\)\[[^\]]*\]\(nodes/[^)]*\)", md)
    assert own == ["[n1](nodes/n1.md)"], own
    _no_active_markdown(md.replace(own[0], "n1"))
    page = reports.render_reports(report)["nodes/n1.md"].decode()
    assert page.count("](../README.md)") == 1
    _no_active_markdown(page.replace("[drift report](../README.md)", ""))
    findings_rows = [r for r in _table_rows(page) if r.count("onerror") == 2]  # profile and message cells
    assert findings_rows and all(_columns(r) == 5 for r in findings_rows), findings_rows
    assert "`main@sha1:" in md  # identifiers stay code spans; one with a backtick is escaped text


def test_plan_markdown_escapes_diagnostics_and_revisions() -> None:
    snap = Snapshot(revision=Revision("mr`x`", "a" * 40), root="", files={}, blob_ids={}, tree_id="")
    bad = ValidationResult(None, (Diagnostic("MP205", HOSTILE, "nodes/a|b.yaml", 3),))
    md = plan_cmd.render_markdown(LoadedRevision(snap, bad), LoadedRevision(snap, bad), None)
    _no_active_markdown(md)
    (row,) = [r for r in _table_rows(md) if "MP205" in r]
    assert _columns(row) == 3, row
