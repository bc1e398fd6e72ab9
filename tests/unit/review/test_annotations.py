"""The annotation renderers on crafted diagnostics: GitHub's escaping, Code Quality fingerprints, SARIF rules."""

from __future__ import annotations

from reconciler.logic.inventory.rules import CODES
from reconciler.logic.review import ciannotations
from reconciler.model.diagnostics import Diagnostic, Severity


def test_github_escapes_data_and_properties() -> None:
    diag = Diagnostic("MP107", "100% broken:\r\nsee, here", file="nodes/a,b:c%.yaml", line=3)
    out = ciannotations.github_commands([diag], prefix="clusters/x")
    assert out == (
        "::error file=clusters/x/nodes/a%2Cb%3Ac%25.yaml,line=3,title=MP107::100%25 broken:%0D%0Asee, here\n"
    )


def test_github_warning_without_file_or_line() -> None:
    diag = Diagnostic("MP403", "partitions under none", severity=Severity.WARNING)
    assert ciannotations.github_commands([diag]) == "::warning title=MP403::partitions under none\n"
    assert ciannotations.github_commands([Diagnostic("MP409", "m", file="cluster.yaml")]) == (
        "::error file=cluster.yaml,title=MP409::m\n"
    )


def test_codequality_fingerprint_separates_equal_findings_and_ignores_lines() -> None:
    a = Diagnostic("MP307", "overlaps 2g at 0 (line 13)", file="nodes/n.yaml", line=14)
    b = Diagnostic("MP307", "overlaps 2g at 0 (line 13)", file="nodes/n.yaml", line=15)
    moved = Diagnostic("MP307", "overlaps 2g at 0 (line 20)", file="nodes/n.yaml", line=21)
    first, second = ciannotations.codequality([a, b])
    assert first["fingerprint"] != second["fingerprint"]
    assert ciannotations.codequality([moved])[0]["fingerprint"] == first["fingerprint"]
    assert first["severity"] == "major" and first["location"] == {"path": "nodes/n.yaml", "lines": {"begin": 14}}
    warn = ciannotations.codequality([Diagnostic("MP410", "x", severity=Severity.WARNING)], prefix="inv")
    assert warn[0]["severity"] == "minor" and warn[0]["location"]["path"] == "inv/cluster.yaml"


def test_sarif_rules_come_from_the_registry() -> None:
    log = ciannotations.sarif([Diagnostic("MP999", "new", file="x.yaml", line=1)], version="1.2.3")
    driver = log["runs"][0]["tool"]["driver"]
    ids = [r["id"] for r in driver["rules"]]
    assert set(ids) == set(CODES) | {"MP999"}
    assert driver["rules"][ids.index("MP312")]["defaultConfiguration"]["level"] == "warning"
    assert driver["rules"][ids.index("MP307")]["shortDescription"]["text"] == CODES["MP307"].title
    (result,) = log["runs"][0]["results"]
    assert ids[result["ruleIndex"]] == "MP999" and driver["version"] == "1.2.3"
