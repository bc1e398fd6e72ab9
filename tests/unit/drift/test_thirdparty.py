"""HAMi's MIG mode read from `hami.io/node-nvidia-register` (reconciler.logic.drift.thirdparty): worst values."""

from __future__ import annotations

import json

import pytest

from reconciler.logic.drift.thirdparty import HAMI_REGISTER, HAMI_WRITER, conflict_code, node_writer


def _register(*modes: object) -> dict[str, str]:
    return {HAMI_REGISTER: json.dumps([{"id": f"GPU-{i}", "devmem": 1, "mode": m} for i, m in enumerate(modes)])}


def test_no_annotation_is_no_other_writer() -> None:
    assert node_writer({}) is None
    assert node_writer({"hami.io/node-handshake": "Requesting_2026.12.03"}) is None


def test_one_gpu_in_mig_mode_makes_hami_the_writer() -> None:
    found = node_writer(_register("hami-core", "mig"))
    assert found is not None and found.writer == HAMI_WRITER and found.problem is None
    assert conflict_code(found.writer) == "MP575"


@pytest.mark.parametrize("modes", [("hami-core",), ("mps", "hami-core"), ()])
def test_sharing_modes_lay_nothing_out(modes: tuple[str, ...]) -> None:
    assert node_writer(_register(*modes)) is None


@pytest.mark.parametrize(
    "value",
    [
        "",
        "GPU-0,10,32768,100,NVIDIA-H200,0,true:",  # HAMi's older colon form: no mode
        "{}",
        "[1, 2]",
        '[{"id": "GPU-0"}]',  # no mode
        json.dumps([{"id": "GPU-0", "mode": 1}]),
        json.dumps([{"id": "GPU-0", "mode": None}]),
        "[" * 100_000,  # nesting past the parser's recursion limit
        "x" * (256 * 1024 + 1),  # larger than the API server lets an object's annotations be
        "[\x00]",
    ],
)
def test_a_register_that_cannot_be_read_counts_as_mig_mode_with_the_reason(value: str) -> None:
    found = node_writer({HAMI_REGISTER: value})
    assert found is not None and found.writer == HAMI_WRITER
    assert found.problem is not None and HAMI_REGISTER in found.problem


def test_the_dra_driver_keeps_its_own_code() -> None:
    assert conflict_code("NVIDIA's DRA driver (DynamicMIG)") == "MP570"
