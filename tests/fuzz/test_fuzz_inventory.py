"""Fuzz: the example inventory, mutated structurally (hypothesis), through validation and beyond.

Each case parses the files of inventory/, edits the documents (mutations.py: values of any type, keys
deleted, added, items duplicated or swapped), writes them back as YAML (block or flow style) and
asserts:
- validation never raises, and every diagnostic carries a registered code (logic/inventory/rules.py);
- the fast path (yaml-rs + compiled schema) and the reference path (pyyaml + jsonschema) agree on
  every diagnostic and on the desired state;
- a valid result goes on through the pure pipeline (drift analysis, planner, report rendering)
  against an empty cluster without raising;
- a sample through the real `migplan validate` process exits 0 or 1 (never 2, never a traceback) and
  agrees with the in-process verdict.
Derandomized, so CI runs the same cases every time; deadline=None, bounded by max_examples.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import mutations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.logic.drift import drift
from reconciler.logic.inventory import rules, validation
from reconciler.logic.inventory.validation import ParseCache, ValidationResult, validate_inventory
from reconciler.logic.planning import planner
from reconciler.logic.reports.reports import render_reports
from reconciler.model.observed import ObservedState

EXAMPLE: dict[str, bytes] = {p: b for p, b in read_inventory_dir(resources.inventory_dir()).items()}
DOCS: dict[str, Any] = {p: yaml.safe_load(b) for p, b in EXAMPLE.items() if p.endswith(".yaml")}
NOW = datetime(2026, 1, 1, tzinfo=UTC)
INVENTORY_CASES = 1200
CLI_CASES = 24


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _dump(doc: Any, *, flow: bool) -> bytes:
    return yaml.dump(doc, Dumper=_NoAliases, default_flow_style=flow, sort_keys=False, allow_unicode=True).encode()


@st.composite
def mutated_inventories(draw: st.DrawFn) -> dict[str, bytes]:
    files = dict(EXAMPLE)
    for path in draw(st.lists(st.sampled_from(sorted(DOCS)), min_size=1, max_size=2, unique=True)):
        op = draw(st.sampled_from(["edit", "edit", "edit", "edit", "drop", "copy"]))
        if op == "drop":
            del files[path]
        elif op == "copy":
            # a second file with the same document under another name (duplicates, name mismatches)
            stem = draw(st.sampled_from(["gpu-copy", "gpu-h200-01", "x" * 70, "UPPER", "a.b"]))
            files[f"{path.rsplit('/', 1)[0]}/{stem}.yaml" if "/" in path else f"{stem}.yaml"] = files[path]
        else:
            files[path] = _dump(draw(mutations.mutated(DOCS[path])), flow=draw(st.booleans()))
    return files


# One parse cache per path (never shared, so neither path can hand the other its results): the files
# a case leaves as they were are not parsed again, which keeps a thousand cases within seconds.
_CACHES = {True: ParseCache(), False: ParseCache()}


def both(files: dict[str, bytes]) -> tuple[ValidationResult, ValidationResult]:
    previous = validation.FAST_PATH
    try:
        validation.FAST_PATH = True
        fast = validate_inventory(files, cache=_CACHES[True])
        validation.FAST_PATH = False
        reference = validate_inventory(files, cache=_CACHES[False])
    finally:
        validation.FAST_PATH = previous
    return fast, reference


def _pipeline(result: ValidationResult) -> None:
    """What a cycle does with a valid inventory, against a cluster that shows nothing yet."""
    assert result.desired is not None
    observed = ObservedState(nodes={})
    analysis = drift.analyze(result.desired, observed, now=NOW)
    the_plan = planner.plan(result.desired, observed, now=NOW, rendered=analysis.rendered)
    report = drift.build_report(result.desired, observed, analysis, the_plan)
    assert {f.code for f in report.findings} <= set(drift.FINDING_CODES)
    render_reports(report)


@pytest.mark.timeout(120)  # no hang: a case that never ends fails the suite
@settings(
    max_examples=INVENTORY_CASES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(files=mutated_inventories())
def test_mutated_inventory_validates_the_same_both_ways_and_never_crashes(files: dict[str, bytes]) -> None:
    fast, reference = both(files)
    assert fast.diagnostics == reference.diagnostics
    assert fast.desired == reference.desired
    assert {d.code for d in fast.diagnostics} <= set(rules.CODES), [str(d) for d in fast.diagnostics]
    assert fast.valid == (fast.desired is not None)
    if fast.valid:
        _pipeline(fast)


def _write(files: dict[str, bytes], root: Path) -> None:
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


@pytest.mark.timeout(120)
def test_a_sample_through_the_real_validate_process(tmp_path: Path) -> None:
    # The same generator, drawn deterministically; every case is one `migplan validate` process.
    cases: list[dict[str, bytes]] = []

    @settings(max_examples=CLI_CASES, deadline=None, derandomize=True, database=None)
    @given(files=mutated_inventories())
    def collect(files: dict[str, bytes]) -> None:
        cases.append(files)

    collect()
    assert len(cases) >= CLI_CASES // 2
    procs: list[tuple[int, subprocess.Popen[str]]] = []
    for i, files in enumerate(cases):
        _write(files, tmp_path / f"case-{i}")
        argv = [sys.executable, "-m", "reconciler", "validate", str(tmp_path / f"case-{i}"), "-o", "json"]
        procs.append((i, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        if len(procs) >= 4:  # a few at a time: the sample stays within the suite's time budget
            _check(*procs.pop(0), cases)
    while procs:
        _check(*procs.pop(0), cases)


def _check(i: int, proc: subprocess.Popen[str], cases: list[dict[str, bytes]]) -> None:
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in out + err, err
    assert proc.returncode in (0, 1), err  # a verdict, never a usage/IO error: the files are all there
    expected = validate_inventory(cases[i])
    doc = json.loads(out)
    assert (proc.returncode == 0) == expected.valid == doc["valid"]
    assert sorted(e["code"] for e in doc["errors"]) == sorted(d.code for d in expected.errors)
