"""The bad-input corpus: every case under tests/corpus/ must produce its expected code at its expected
file and line, and must never crash or pass. Adding a case = adding a folder:

    tests/corpus/<case>/root/...      files laid over tests/corpus/_base (a valid inventory)
    tests/corpus/<case>/expect.yaml   {code, file, line[, valid: true for warning-only cases]
                                       [, remove: [paths of _base to delete]] [, pad: bytes]}
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from helpers.corpus import CASES, CORPUS, build_case

from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.logic.inventory.rules import CODES
from reconciler.logic.inventory.validation import validate_inventory


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("name", CASES)
def test_corpus_case(name: str, tmp_path: Path) -> None:
    expect = build_case(name, tmp_path / "inv")
    started = time.perf_counter()
    result = validate_inventory(read_inventory_dir(tmp_path / "inv"))
    elapsed = time.perf_counter() - started
    got = [(d.code, d.file, d.line) for d in result.diagnostics]
    assert (expect["code"], expect["file"], expect["line"]) in got, "\n".join(map(str, result.diagnostics))
    assert expect["code"] in CODES
    if expect.get("valid"):
        assert result.valid and result.desired is not None
    else:
        assert not result.valid, "bad input passed validation"
        assert result.desired is None
    for d in result.diagnostics:
        assert d.code in CODES and d.message and d.file
        assert d.severity is CODES[d.code].severity
    assert elapsed < 5, "a bad input must be rejected fast (alias bombs, deep nesting, huge files)"


def test_base_inventory_is_valid(tmp_path: Path) -> None:
    shutil.copytree(CORPUS / "_base", tmp_path / "inv")
    result = validate_inventory(read_inventory_dir(tmp_path / "inv"))
    assert result.valid and not result.diagnostics, [str(d) for d in result.diagnostics]
