"""The validation bad-input corpus (tests/corpus/): case names and laying a case out as an inventory root."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir() and not p.name.startswith("_"))


def build_case(name: str, dest: Path) -> dict[str, Any]:
    case = CORPUS / name
    expect: dict[str, Any] = yaml.safe_load((case / "expect.yaml").read_text("utf-8"))
    shutil.copytree(CORPUS / "_base", dest)
    for rel in expect.get("remove", []):
        (dest / rel).unlink()
    overlay = case / "root"
    if overlay.is_dir():
        shutil.copytree(overlay, dest, dirs_exist_ok=True)
    if "pad" in expect:
        target = dest / expect["file"]
        data = target.read_bytes()
        target.write_bytes(data + b"# padding\n" * ((expect["pad"] - len(data)) // 10 + 1))
    return expect
