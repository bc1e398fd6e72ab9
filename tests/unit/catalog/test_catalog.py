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
    assert all(p.nvml_profile_derived for p in rtx.profiles.values())
    # IDs seen in real lgip output (issue 26 item 5); the 4g rows were never seen
    unconfirmed = {name for name, p in rtx.profiles.items() if not p.profile_id_confirmed}
    assert unconfirmed == {"4g.96gb", "4g.96gb+gfx"}
    assert gfx.resource_name == "nvidia.com/mig-1g.24gb.gfx" and no_me.resource_name == "nvidia.com/mig-2g.48gb-me"
    gb200 = cat.get("GB200-186GB")
    assert gb200 is not None
    assert gb200.profiles["1g.23gb"].profile_id == 19 and gb200.profiles["1g.23gb"].profile_id_confirmed
    assert gb200.profiles["3g.93gb"].profile_id is None and not gb200.profiles["3g.93gb"].profile_id_confirmed
    b300 = cat.get("B300-288GB")
    assert b300 is not None and b300.profiles["1g.34gb"].max_instances == 7


def test_issue_26_catalog_facts_each_pinned() -> None:
    """Each fact added for issue 26 item 5, as the reference README cites it."""
    cat = load_catalog()
    h200 = cat.get("H200-141GB")
    assert h200 is not None
    full = h200.profiles["7g.141gb"]
    assert (full.profile_id, full.profile_id_confirmed, full.memory_gib) == (0, True, 139.75)  # mig-parted #120 lgip
    # pci.ids (go-nvlib default_pci.ids 2025.07.11): 2339 H100 SXM5 94GB, 2338 H100 SXM5 96GB, 2bb1/2bb4 RTX PRO 6000
    for pci, key in (
        ("0x233910DE", "H100-94GB"),
        ("10de:2339", "H100-94GB"),
        ("0x233810DE", "H100-96GB"),
        ("0x2BB110DE", "RTX-PRO-6000-96GB"),
        ("10de:2bb4", "RTX-PRO-6000-96GB"),
    ):
        model = cat.by_pci_device_id(pci)
        assert model is not None and model.key == key, pci
    rtx = cat.get("RTX-PRO-6000-96GB")
    assert rtx is not None
    me = rtx.profiles["1g.24gb+me"]
    assert (me.profile_id, me.max_instances, me.nvml_profile, me.nvml_profile_value) == (21, 1, "1_SLICE_REV1", 0x7)
    assert me.resource_name == "nvidia.com/mig-1g.24gb.me"
    ids = {n: rtx.profiles[n].profile_id for n in ("1g.24gb", "1g.24gb+gfx", "1g.24gb+me.all", "2g.48gb")}
    assert ids == {"1g.24gb": 14, "1g.24gb+gfx": 47, "1g.24gb+me.all": 65, "2g.48gb": 5}
    # B200: memory per profile (fractions from the MIG guide table, GiB from the first driver's lgip)
    b200 = cat.get("B200-180GB")
    assert b200 is not None
    assert {n: p.memory_slices for n, p in b200.profiles.items()} == {
        "1g.23gb": 1,
        "1g.23gb+me": 1,
        "1g.45gb": 2,
        "2g.45gb": 2,
        "3g.90gb": 4,
        "4g.90gb": 4,
        "7g.180gb": 8,
    }
    assert {n: p.memory_gib for n, p in b200.profiles.items()} == {
        "1g.23gb": 22.0,
        "1g.23gb+me": 22.0,
        "1g.45gb": 44.25,
        "2g.45gb": 44.25,
        "3g.90gb": None,  # lgip row never seen whole: not derived
        "4g.90gb": None,
        "7g.180gb": None,
    }


def test_gb200_answers_to_both_documented_namings_and_counts_each_slice_once() -> None:
    cat = load_catalog()
    gb200 = cat.get("GB200-186GB")
    assert gb200 is not None and gb200.alternate_naming == "early boards/drivers"
    late, early = gb200.namings()
    assert late == {"1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"}
    assert early == {"1g.24gb", "1g.24gb+me", "1g.47gb", "2g.47gb", "3g.95gb", "4g.95gb", "7g.189gb"}
    for other, ours in (("1g.24gb", "1g.23gb"), ("3g.95gb", "3g.93gb"), ("7g.189gb", "7g.186gb")):
        assert other in gb200.profiles and gb200.profiles[other] is gb200.profiles[ours]
        assert gb200.profile(other) is gb200.profiles[ours]
    # iteration sees each slice once, under the catalog's name
    assert set(gb200.profiles) == late and len(gb200.profiles) == 7 and len(list(gb200.profiles.values())) == 7
    # the other naming belongs to GB200 only: B200 has no 1g.24gb, H100-94GB's 1g.24gb is its own profile
    b200 = cat.get("B200-180GB")
    assert b200 is not None and "1g.24gb" not in b200.profiles and len(b200.namings()) == 1
    for bogus in ("1g.25gb", "", "7g.189GB"):
        assert bogus not in gb200.profiles and gb200.profile(bogus) is None


def test_alternate_naming_that_is_not_a_rename_is_refused_by_the_build() -> None:
    import pytest

    ref = yaml.safe_load(REFERENCE.read_bytes())
    gb = next(m for m in ref["models"] if m["key"] == "GB200-186GB")
    for bad in ({"1g.99gb": "1g.98gb"}, {"1g.23gb": "1g.47gb"}, {"1g.23gb": "x", "3g.93gb": "x"}):
        gb["alternate_naming"]["profiles"] = bad
        with pytest.raises(ValueError, match="alternate_naming"):
            _build.build(ref)


def test_memory_derived_gb_is_go_nvlibs_formula() -> None:
    """go-nvlib getMigMemorySizeGB: share rounded UP to eighths, times whole GiB rounded up, Go's half-away rounding."""
    from reconciler.catalog import memory_derived_gb

    gib = 1024**3
    assert memory_derived_gb(80 * gib, 10240) == 10  # exactly 1/8 of 80 GiB
    assert memory_derived_gb(80 * gib, 10241) == 20  # a MiB more: rounded up to 2/8
    assert memory_derived_gb(80 * gib + 1, 10240) == 10  # 81 GiB rounded up: 1/8 * 81 = 10.125
    # GB200: 2/8 of 186 GiB is 46.5, which Go rounds away from zero (Python's round() would say 46)
    assert memory_derived_gb(186 * gib, 46592) == 47
    assert memory_derived_gb(186 * gib, 22528) == 23 and memory_derived_gb(189 * gib, 20480) == 24
    assert memory_derived_gb(0, 10) == 0 and memory_derived_gb(80 * gib, -1) == 0
    assert memory_derived_gb(80 * gib, 80 * 1024) == 80 and memory_derived_gb(80 * gib, 0) == 0


def test_a_device_names_a_gb200_profile_by_the_gb_its_driver_derives() -> None:
    cat = load_catalog()
    gb200, h200 = cat.get("GB200-186GB"), cat.get("H200-141GB")
    assert gb200 is not None and h200 is not None
    assert gb200.name_on_device("1g.23gb", 24) == "1g.24gb"
    assert gb200.name_on_device("1g.23gb", 23) == "1g.23gb"
    assert gb200.name_on_device("7g.186gb", 189) == "7g.189gb"
    assert gb200.name_on_device("1g.47gb", 47) == "1g.47gb"  # same in both namings
    assert gb200.name_on_device("1g.23gb", 25) == "1g.23gb"  # an undocumented name is never made up
    assert h200.name_on_device("1g.18gb", 24) == "1g.18gb"  # one naming only
