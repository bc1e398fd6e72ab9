"""Kubernetes resource.Quantity parsing, enough for validation and comparison.

Pure. `parse_quantity` raises ValueError with the real decoder's message for text that is not a quantity.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation

QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def parse_quantity(text: object) -> Decimal:
    """The numeric value of a quantity string (or JSON number)."""
    if isinstance(text, str):
        return _parse_text(text)
    if isinstance(text, bool):
        raise ValueError(QUANTITY_ERROR)
    if isinstance(text, int | float):
        return Decimal(str(text))
    raise ValueError(QUANTITY_ERROR)


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Decimal:
    m = QUANTITY_RE.match(text.strip())
    if not m:
        raise ValueError(QUANTITY_ERROR)
    number, suffix = m.group(1), m.group(2)
    try:
        base = Decimal(number)
    except InvalidOperation as exc:
        raise ValueError(QUANTITY_ERROR) from exc
    if suffix in _SUFFIXES:
        return base * _SUFFIXES[suffix]
    if suffix[:1] in ("e", "E"):
        try:
            return base * (Decimal(10) ** int(suffix[1:]))
        except ValueError as exc:
            raise ValueError(QUANTITY_ERROR) from exc
    raise ValueError(QUANTITY_ERROR)
