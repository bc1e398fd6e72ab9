"""Test-suite wide setup: `tests/` on sys.path so every test imports the shared helpers as `helpers.*`.

tests/ is not a package (pytest's rootdir-relative imports are the suite's convention), so the helpers
used by several test files live in tests/helpers/ and are imported by name, never loaded by path.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
