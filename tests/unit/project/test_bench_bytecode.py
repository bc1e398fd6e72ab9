"""benchmarks/commands.py writes migplan's bytecode before it times anything (as pip does on install), so a source
checkout run with PYTHONDONTWRITEBYTECODE=1 does not compile every module in every timed process."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from helpers import REPO, load_script


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # the script imports its sibling twinchild
    return load_script("bench_commands", REPO / "benchmarks" / "commands.py")


def _tree(root: Path) -> list[Path]:
    sources = [root / "reconciler" / "__init__.py", root / "reconciler" / "sub" / "__init__.py"]
    sources.append(root / "reconciler" / "sub" / "mod.py")
    for path in sources:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("VALUE = 1\n")
    return sources


def test_precompile_writes_the_bytecode_of_every_module_of_each_tree(bench: ModuleType, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    sources = _tree(first) + _tree(second)
    assert not any(Path(importlib.util.cache_from_source(str(s))).exists() for s in sources)
    assert bench.precompile([first, second, tmp_path / "no-package-here"]) == len(sources)
    for source in sources:  # where the import system looks for it: read even when writing is off
        assert Path(importlib.util.cache_from_source(str(source))).is_file(), source


def test_precompile_leaves_files_outside_the_package_alone(bench: ModuleType, tmp_path: Path) -> None:
    _tree(tmp_path)
    stray = tmp_path / "script.py"
    stray.write_text("VALUE = 2\n")
    bench.precompile([tmp_path])
    assert not Path(importlib.util.cache_from_source(str(stray))).exists()
