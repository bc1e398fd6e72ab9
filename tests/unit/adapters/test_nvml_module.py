"""The NVML adapter's loader seam: PYNVML_MODULE names the module used as pynvml (default: pynvml itself).

A name that is not a module name or cannot be imported is MP985, a module without pynvml's surface MP986; both
are MigplanErrors the observer publishes as the NVML source's reason, never an ImportError out of a pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pynvml
import pytest

from reconciler.adapters.nvml import NvmlGpu, load_nvml_module
from reconciler.model.errors import MigplanError

SHAPED = """
import pynvml
from pynvml import NVMLError
calls = []
def nvmlInit():
    calls.append("init")
def nvmlShutdown():
    calls.append("shutdown")
def nvmlDeviceGetCount():
    return 0
def nvmlDeviceGetHandleByIndex(index):
    raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
"""


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "shaped_nvml.py").write_text(SHAPED)
    (tmp_path / "not_nvml.py").write_text("def nvmlInit():\n    pass\n")
    (tmp_path / "broken_nvml.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("shaped_nvml", "not_nvml", "broken_nvml"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def test_default_is_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYNVML_MODULE", raising=False)
    assert load_nvml_module() is pynvml
    monkeypatch.setenv("PYNVML_MODULE", "  ")
    assert load_nvml_module() is pynvml


def test_the_named_module_is_used_as_pynvml(modules: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNVML_MODULE", "shaped_nvml")
    with NvmlGpu() as gpus:
        assert gpus.survey() == ((), ())
    assert sys.modules["shaped_nvml"].calls == ["init", "shutdown"]


@pytest.mark.parametrize(
    ("name", "code", "says"),
    [
        ("os; import x", "MP985", "not a Python module name"),
        ("../etc/passwd", "MP985", "not a Python module name"),
        ("a" * 300, "MP985", "not a Python module name"),
        ("no_such_nvml_module_here", "MP985", "cannot import"),
        ("broken_nvml", "MP985", "boom at import"),
        ("not_nvml", "MP986", "nvmlShutdown"),
        ("json", "MP986", "pynvml's surface"),
    ],
)
def test_a_wrong_module_is_an_error_with_a_code(
    modules: Path, monkeypatch: pytest.MonkeyPatch, name: str, code: str, says: str
) -> None:
    monkeypatch.setenv("PYNVML_MODULE", name)
    with pytest.raises(MigplanError) as err:
        NvmlGpu().__enter__()
    assert err.value.code == code and says in err.value.message
