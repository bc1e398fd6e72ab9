"""Helpers shared by several test files: the planning-fixture reader, the validation corpus builder, the twin clock,
hostile-value mutations for the fuzz suite, and loading a benchmark script as a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(name: str, path: Path) -> ModuleType:
    """A script outside the package (benchmarks/*.py) as a module, for tests that reuse its generators."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
