"""reconciler.adapters.nvml names a GB200's profiles as the device's driver does (issue 26 item 5).

go-nvlib derives a profile's `<N>gb` from the GPU-instance memory and the device memory; a GB200 whose driver
reports 189 GiB says `1g.24gb ... 7g.189gb`, one reporting 186 GiB `1g.23gb ... 7g.186gb`. The totals below are
chosen to give each documented naming through that formula; they are not measured device values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pynvml

from reconciler.adapters.nvml import NvmlGpu
from reconciler.catalog import load_catalog

GIB = 1024**3
# NVML GPU-instance profile enum -> memorySizeMB, lgip-like (20.00 / 45.50 / ~93 / ~186 GiB)
MEMORY_MB = {0x0: 20480, 0x7: 20480, 0x9: 46592, 0x1: 46592, 0x2: 95232, 0x3: 95232, 0x4: 190464}


@dataclass
class _Info:
    id: int
    memorySizeMB: int


@dataclass
class _Memory:
    total: int


class _FakeNvml:
    NVMLError = pynvml.NVMLError

    def __init__(self, total: int) -> None:
        self.total = total
        self.memory_calls = 0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> _Memory:
        self.memory_calls += 1
        if self.total < 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _Memory(self.total)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: Any, profile: int) -> _Info:
        if profile not in MEMORY_MB:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _Info(id=100 + profile, memorySizeMB=MEMORY_MB[profile])


def _names(model_key: str, total: int) -> tuple[dict[str, int], int]:
    model = load_catalog().get(model_key)
    assert model is not None
    fake = _FakeNvml(total)
    with NvmlGpu(nvml=fake) as gpus:
        return gpus._profile_ids(object(), model), fake.memory_calls


def test_an_early_gb200_is_observed_in_its_own_names() -> None:
    ids, _ = _names("GB200-186GB", 189 * GIB)
    assert set(ids) == {"1g.24gb", "1g.24gb+me", "1g.47gb", "2g.47gb", "3g.95gb", "4g.95gb", "7g.189gb"}
    assert ids["1g.24gb"] == 100 and ids["7g.189gb"] == 104


def test_a_production_gb200_keeps_the_catalogs_names() -> None:
    ids, _ = _names("GB200-186GB", 186 * GIB)
    assert set(ids) == {"1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"}


def test_a_model_with_one_naming_does_not_ask_for_the_memory() -> None:
    ids, calls = _names("H100-80GB", 189 * GIB)
    assert calls == 0 and "1g.10gb" in ids


def test_a_device_that_cannot_say_its_memory_keeps_the_catalogs_names() -> None:
    ids, calls = _names("GB200-186GB", -1)
    assert calls == 1 and "1g.23gb" in ids and "1g.24gb" not in ids
