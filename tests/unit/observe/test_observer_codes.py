"""The observer's codes (MP930-MP949): declared once, documented in docs/reference/codes.md, and the only ones used."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler import observer

ROOT = Path(__file__).resolve().parents[3]


def test_every_observer_code_is_declared_documented_and_in_range() -> None:
    reference = (ROOT / "docs" / "reference" / "codes.md").read_text(encoding="utf-8")
    documented = {c for c in re.findall(r"^\| (MP\d{3}) \|", reference, flags=re.M) if "MP930" <= c <= "MP949"}
    assert documented == set(observer.CODES)
    assert all("MP930" <= c <= "MP949" for c in observer.CODES)
    used: set[str] = set()
    for path in (ROOT / "reconciler").rglob("*.py"):
        used |= set(re.findall(r"\bMP9[34]\d\b", path.read_text(encoding="utf-8")))
    assert used <= set(observer.CODES), sorted(used - set(observer.CODES))
    assert {"MP930", "MP931", "MP932", "MP933", "MP934", "MP935", "MP936", "MP937"} <= used
