"""The README documents every stable code, and its Quickstart is exactly two commands."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.logic import adopt, drift, rules, workloads

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_every_validation_and_drift_code_is_documented() -> None:
    documented = set(re.findall(r"^\| (MP\d{3}) \|", README, flags=re.M))
    known = set(rules.CODES) | set(drift.FINDING_CODES) | set(adopt.IMPORT_CODES) | set(workloads.CODES)
    missing = known - documented
    assert not missing, f"codes missing from README.md tables: {sorted(missing)}"
    unknown = {c for c in documented if c.startswith(("MP1", "MP2", "MP3", "MP4", "MP5", "MP6"))} - (known)
    assert not unknown, f"README documents codes that do not exist: {sorted(unknown)}"


def test_quickstart_is_two_commands_and_ci_runs_the_second() -> None:
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", quickstart, flags=re.S)
    assert len(blocks) == 2
    assert all(len(b.strip().splitlines()) == 1 for b in blocks)
    assert "migplan demo" in blocks[0]
    assert blocks[1].strip() == "bash .ci/run"
