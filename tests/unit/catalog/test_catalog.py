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


def test_the_packaged_catalog_reads_the_same_with_yaml_rs_as_with_pyyaml() -> None:
    """load_catalog reads the packaged file with yaml-rs (YAML 1.2, no pyyaml import); parse_catalog reads YAML
    as pyyaml (1.1) does. On the packaged file both give the same values of the same types, hence the same
    catalog."""
    import json

    import yaml_rs

    from reconciler.catalog import parse_catalog

    packaged = importlib_resources.files("reconciler.catalog").joinpath("data/gpu-catalog.yaml").read_text("utf-8")
    by_pyyaml = yaml.load(packaged, Loader=yaml.CSafeLoader)
    by_yaml_rs = yaml_rs.loads(packaged, parse_datetime=False)
    # JSON text, not ==: True == 1 and 1.0 == 1 in Python, and a type that differs must fail here.
    assert json.dumps(by_yaml_rs, sort_keys=True) == json.dumps(by_pyyaml, sort_keys=True)
    assert load_catalog()._models == parse_catalog(packaged)._models


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


def test_every_gfd_product_and_pci_id_of_a_supported_model_is_recognised() -> None:
    """Day-one names (issue 11 item 7): PCIe/NVL/H800 products, GFD's -MIG-/-SHARED forms, filter and lspci ids."""
    cat = load_catalog()
    expected = {
        "NVIDIA-H200-NVL": "H200-141GB",
        "NVIDIA-A100-PCIE-40GB": "A100-40GB",
        "NVIDIA-A100-PCIE-40GB-SHARED": "A100-40GB",
        "NVIDIA-A100-80GB-PCIe": "A100-80GB",
        "NVIDIA-A100-80GB-PCIe-MIG-1g.10gb": "A100-80GB",
        "NVIDIA-H800": "H100-80GB",
        "NVIDIA-H200-MIG-INVALID": "H200-141GB",
        "NVIDIA-GB200": "GB200-186GB",
        "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition": "RTX-PRO-6000-96GB",
        "10de:2bb5": "RTX-PRO-6000-96GB",
        "0x31C210DE": "GB300-288GB",
        "0x318210de": "B300-288GB",
    }
    for name, key in expected.items():
        model = cat.resolve(name)
        assert model is not None and model.key == key, name
    for bogus in ("NVIDIA-MIG-1g.10gb", "-SHARED", "0x12345678", "10de:zzzz", "A100", ""):
        assert cat.resolve(bogus) is None, bogus
    # every PCI id the reference lists, for every model, resolves to that model
    ref = yaml.safe_load(REFERENCE.read_bytes())
    for m in ref["models"]:
        for raw in m.get("pci_device_ids", []):
            pci = str(raw).split(" ")[0]
            model = cat.resolve(pci)
            assert model is not None and model.key == m["key"], pci
            assert cat.by_pci_device_id(pci) is model


def test_models_added_from_the_reference_are_checked_on_slice_counts_with_unconfirmed_ids() -> None:
    cat = load_catalog()
    for key in ("GB200-186GB", "B300-288GB", "GB300-288GB", "RTX-PRO-6000-96GB"):
        model = cat.get(key)
        assert model is not None, key
        assert not model.placements_known, key  # MP312: slice counts only
    rtx = cat.get("RTX-PRO-6000-96GB")
    assert rtx is not None and (rtx.compute_slices, rtx.memory_slices) == (4, 4)
    gfx, no_me, all_me = rtx.profiles["1g.24gb+gfx"], rtx.profiles["2g.48gb-me"], rtx.profiles["1g.24gb+me.all"]
    assert (gfx.nvml_profile, gfx.nvml_profile_value) == ("1_SLICE_GFX", 0xA)
    assert (no_me.nvml_profile, no_me.nvml_profile_value) == ("2_SLICE_NO_ME", 0xE)
    assert (all_me.nvml_profile, all_me.nvml_profile_value, all_me.max_instances) == ("1_SLICE_ALL_ME", 0xF, 1)
    assert all(p.nvml_profile_derived and not p.profile_id_confirmed for p in rtx.profiles.values())
    assert gfx.resource_name == "nvidia.com/mig-1g.24gb.gfx" and no_me.resource_name == "nvidia.com/mig-2g.48gb-me"
    gb200 = cat.get("GB200-186GB")
    assert gb200 is not None
    assert gb200.profiles["1g.23gb"].profile_id == 19 and gb200.profiles["1g.23gb"].profile_id_confirmed
    assert gb200.profiles["3g.93gb"].profile_id is None and not gb200.profiles["3g.93gb"].profile_id_confirmed
    b300 = cat.get("B300-288GB")
    assert b300 is not None and b300.profiles["1g.34gb"].max_instances == 7
