"""The packaged GPU catalog equals a rebuild from its vendored reference (reconciler/catalog/reference/)."""

from __future__ import annotations

from importlib import resources as importlib_resources

import yaml

from reconciler.catalog import _build, load_catalog

REFERENCE = _build.REFERENCE


def test_packaged_catalog_matches_reference_rebuild() -> None:
    assert REFERENCE.is_file(), (
        f"the GPU catalog's vendored source {REFERENCE} is missing: "
        "without it the packaged catalog cannot be checked against its reference"
    )
    rebuilt = _build.render(yaml.safe_load(REFERENCE.read_bytes()))
    packaged = importlib_resources.files("reconciler.catalog").joinpath("data/gpu-catalog.yaml").read_text("utf-8")
    assert packaged == rebuilt, "run: python -m reconciler.catalog._build > reconciler/catalog/data/gpu-catalog.yaml"


def test_catalog_facts_the_validator_relies_on() -> None:
    cat = load_catalog()
    h200 = cat.get("H200-141GB")
    assert h200 is not None and h200.placements_derived_from == "H100-80GB"
    assert h200.profiles["3g.71gb"].placements is not None
    assert h200.profiles["3g.71gb"].placements.starts == (0, 4)
    assert h200.profiles["3g.71gb"].placement_source == "derived:H100-80GB"
    assert cat.resolve("NVIDIA-H200") is h200 and cat.resolve("nvidia h200") is h200
    b200 = cat.get("B200-180GB")
    assert b200 is not None and not b200.placements_known
    assert all(p.placement_source == "unknown" for p in b200.profiles.values())
    for key in ("A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB"):
        assert cat.get(key) is not None, key
