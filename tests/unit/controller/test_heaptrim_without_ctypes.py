"""A Python built without ctypes (no libffi) still runs the controller: heaptrim.py imports ctypes only where it
looks for glibc's malloc_trim, and without it the heap's release is a no-op (reconciler/controller/heaptrim.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from reconciler.controller import heaptrim


@pytest.fixture
def no_ctypes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`import ctypes` fails as it does on such an interpreter; heaptrim read again afterwards with ctypes back."""
    monkeypatch.setitem(sys.modules, "ctypes", None)  # None in sys.modules: the import raises ImportError
    try:
        yield
    finally:
        monkeypatch.undo()
        importlib.reload(heaptrim)


def test_heaptrim_loads_without_ctypes_and_releases_nothing(no_ctypes: None) -> None:
    with pytest.raises(ImportError):
        import ctypes  # noqa: F401  (the interpreter this test stands for)
    importlib.reload(heaptrim)
    assert heaptrim._TRIM is None
    assert not heaptrim.trim_available()
    assert heaptrim.release_free_heap() is False


def test_the_controller_imports_in_a_process_without_ctypes() -> None:
    probe = (
        "import sys\n"
        "sys.modules['ctypes'] = None\n"
        "import reconciler.controller.loop\n"
        "from reconciler.controller import heaptrim\n"
        "print(heaptrim.trim_available(), heaptrim.release_free_heap())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]
