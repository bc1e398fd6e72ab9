"""The finding-code table is the single documented source: every code used is in it, none is reused."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.logic.drift import drift
from reconciler.logic.inventory.rules import CODES as VALIDATION_CODES

SOURCES = sorted(Path(drift.__file__).parents[1].rglob("*.py"))  # every pure logic module that may make a finding


def test_every_code_used_is_documented_and_distinct_from_validation() -> None:
    used = set()
    for src in SOURCES:
        used |= set(re.findall(r'"(MP5(?:[0-4]|[679])\d)"', src.read_text()))
    assert used == set(drift.FINDING_CODES)  # every documented code can be emitted
    assert not set(drift.FINDING_CODES) & set(VALIDATION_CODES)
    for code, (severity, meaning) in drift.FINDING_CODES.items():
        assert re.fullmatch(r"MP5(?:[0-4]|[679])\d", code) and meaning and severity in drift.FindingSeverity


def test_node_status_precedence() -> None:
    f = drift.finding
    assert drift.node_status([]) is drift.NodeStatus.IN_SYNC
    assert drift.node_status([f("MP513", "x")]) is drift.NodeStatus.IN_SYNC
    assert drift.node_status([f("MP509", "x")]) is drift.NodeStatus.DRIFTED
    # the planned partitions at other places: not what the plan says, so not InSync even as an info finding
    placed = f("MP540", "x")
    assert placed.severity is drift.FindingSeverity.INFO
    assert drift.node_status([placed]) is drift.NodeStatus.DRIFTED
    assert drift.node_status([f("MP501", "x"), f("MP507", "y")]) is drift.NodeStatus.ERROR
    assert drift.node_status([f("MP510", "x"), f("MP507", "y")]) is drift.NodeStatus.MISSING
