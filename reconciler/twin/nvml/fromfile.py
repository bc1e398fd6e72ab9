"""A module with pynvml's surface over the NVML twin of one node, read from the file `migplan twin` writes.

For `migplan agent` in its own process: `PYNVML_MODULE=reconciler.twin.nvml.fromfile` makes the agent's
NVML adapter import this module instead of pynvml, and `NVML_TWIN_FILE=FILE` names the node's file (the
command lines `migplan twin` prints set both). The agent calls it exactly as it calls pynvml; nothing in
migplan knows it is a twin.

Every `nvmlInit` reads the file again (reconciler.twin.nvml.snapshot) and serves the calls up to the matching
`nvmlShutdown` from that state, through the same NvmlTwin the in-process twin uses. The copy is read-only: a
call that would change MIG state raises NVMLError_NoPermission, because a change made on a copy would never
reach the twin's GPUs (the agent in apply mode is tested in-process, where it gets the live NvmlTwin).
A file that is absent, unreadable or not the twin's format raises NVMLError_LibraryNotFound at nvmlInit, as
pynvml does when libnvidia-ml cannot be loaded, with the file and the reason in its message.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import Any

import pynvml

from reconciler.twin.nvml import NvmlTwin
from reconciler.twin.nvml.snapshot import load

ENV = "NVML_TWIN_FILE"

# pynvml's return-code constants as module attributes (vars() of this module lists them, as it does pynvml's).
globals().update({k: v for k, v in vars(pynvml).items() if k.startswith("NVML_")})

_state = threading.local()  # the NvmlTwin between nvmlInit and nvmlShutdown (per thread: one agent pass)


class _TwinFileNotLoaded(pynvml.NVMLError_LibraryNotFound):  # type: ignore[misc]
    """NVMLError_LibraryNotFound whose message names the file and why it could not be used."""

    def __init__(self, why: str) -> None:
        super().__init__(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        self.why = why

    def __str__(self) -> str:
        return f"NVML twin not loaded: {self.why}"


def _read() -> NvmlTwin:
    path = os.environ.get(ENV, "")
    if not path:
        raise _TwinFileNotLoaded(f"{ENV} is not set (the file `migplan twin` prints for the node)")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise _TwinFileNotLoaded(f"{path}: {exc.strerror or exc}") from exc
    try:
        _node, gpus = load(data)
    except ValueError as exc:
        raise _TwinFileNotLoaded(f"{path}: {exc}") from exc
    return NvmlTwin(gpus)


def nvmlInit() -> None:
    twin = getattr(_state, "twin", None)
    if twin is None:
        twin = _read()
        _state.twin, _state.inits = twin, 0
    twin.nvmlInit()
    _state.inits += 1


def nvmlInitWithFlags(flags: int) -> None:
    nvmlInit()


def nvmlShutdown() -> None:
    twin = getattr(_state, "twin", None)
    if twin is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
    twin.nvmlShutdown()
    _state.inits -= 1
    if _state.inits <= 0:  # the last shutdown: the next nvmlInit reads the node's state afresh
        _state.twin = None


def _call(name: str, *args: Any, **kwargs: Any) -> Any:
    twin = getattr(_state, "twin", None)
    if twin is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
    method = getattr(twin, name)
    if getattr(getattr(NvmlTwin, name, None), "__wrapped__", None) is not None:
        # a MIG change (NvmlTwin marks those): it would change this copy only, never the twin's GPUs
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)
    return method(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name.startswith("nvml") and callable(getattr(NvmlTwin, name, None)):
        return functools.partial(_call, name)
    return getattr(pynvml, name)
