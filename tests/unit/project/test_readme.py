"""The README documents every stable code, and its Quickstart is exactly two commands."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.logic.adoption import adopt
from reconciler.logic.drift import drift
from reconciler.logic.inventory import rules
from reconciler.logic.workloads import workloads
from reconciler.model import codes

README = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")


def test_every_code_of_every_family_is_documented() -> None:
    """Every registered code, of every family, is in a README table row (tests/unit/model/test_code_registry.py checks
    that it is in exactly one, with its severity); the family views are part of the registry."""
    first_cells = re.findall(r"^\| (MP\d{3}[^|]*)\|", README, flags=re.M)  # "MP710 / MP711 / MP712" too
    documented = {c for cell in first_cells for c in re.findall(r"MP\d{3}", cell)}
    known = set(codes.REGISTRY)
    assert set(rules.CODES) | set(drift.FINDING_CODES) | set(adopt.IMPORT_CODES) | set(workloads.CODES) <= known
    missing = known - documented
    assert not missing, f"codes missing from README.md tables: {sorted(missing)}"
    unknown = {c for c in documented if c.startswith("MP")} - known
    assert not unknown, f"README documents codes that do not exist: {sorted(unknown)}"


def test_quickstart_is_two_commands_and_ci_runs_the_second() -> None:
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", quickstart, flags=re.S)
    assert len(blocks) == 2
    assert all(len(b.strip().splitlines()) == 1 for b in blocks)
    assert "migplan demo" in blocks[0]
    assert blocks[1].strip() == "bash .ci/run"
