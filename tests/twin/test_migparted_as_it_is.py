"""The twin's mig-parted as NVIDIA's is (issue 26 item 4, the rest):

* compute-instance packing (`pkg/mig/config/config.go` `SetMigConfig`, `reuseGI`): a profile whose GPU-instance
  profile is the previous one's first goes into that GI as another compute instance;
* device filters with subsystem ids (`pkg/types/device.go` `NewDeviceIDFromString`, `DeviceID.Matches`;
  `api/spec/v1/helpers.go` `MatchesDeviceFilter`);
* overlapping config entries (`cmd/nvidia-mig-parted/assert/assert.go` `WalkSelectedMigConfigForEachGPU`): every
  entry applied in file order, the last one wins, for apply and for assert alike.
"""

from __future__ import annotations

import pytest

from reconciler.catalog import load_catalog
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.operator import migparted
from reconciler.twin.operator.migparted import MigPartedError, device_id_from_string

H200 = load_catalog().get("H200-141GB")
H100 = load_catalog().get("H100-80GB")
assert H200 is not None and H100 is not None
DELL_SUBSYSTEM = 0x16C110DE  # a board maker's subsystem id, as mig-parted's filters write it (sub-device, sub-vendor)
HPE_SUBSYSTEM = 0x18A11590


def _gpus(n: int = 2, *, mig: bool = True, sub: int = DELL_SUBSYSTEM) -> list[TwinGpu]:
    return [TwinGpu(node="n", index=i, model=H200, mig_enabled=mig, pci_subsystem_id=sub) for i in range(n)]


def _config(text: str) -> tuple[migparted.ConfigEntry, ...]:
    return migparted.select(migparted.parse(text), "c")


# --- reuseGI ---------------------------------------------------------------------------------------------------


def test_compute_instance_profiles_are_packed_into_one_gpu_instance() -> None:
    """Three `1c.3g.71gb`: one 3g GI with three 1-slice CIs (reuseGI). Without packing it would need three 3g GIs
    where the H200 has room for two, and every ordering would fail."""
    gpu = _gpus(1)[0]
    migparted._set_mig_config(gpu, {"1c.3g.71gb": 3})
    assert len(gpu.gpu_instances) == 1
    (gi,) = gpu.gpu_instances.values()
    assert gi.profile.name == "3g.71gb" and sorted(ci.size for ci in gi.compute_instances.values()) == [1, 1, 1]
    assert gpu.geometry() == {"1c.3g.71gb": 3}
    assert migparted.assert_applied(_config(_one_entry({"1c.3g.71gb": 3})), [gpu])


def test_a_full_gi_profile_then_its_ci_profile_falls_back_to_a_new_gi() -> None:
    """`3g.71gb` then `1c.3g.71gb`: the first GI is full (one 3-slice CI), the CI cannot go in it, so a second GI is
    made (`reuseGI = false; continue`)."""
    gpu = _gpus(1)[0]
    migparted._set_mig_config(gpu, {"3g.71gb": 1, "1c.3g.71gb": 2})
    sizes = sorted(sorted(ci.size for ci in gi.compute_instances.values()) for gi in gpu.gpu_instances.values())
    assert sizes == [[1, 1], [3]]
    assert gpu.geometry() == {"3g.71gb": 1, "1c.3g.71gb": 2}


def test_more_cis_than_one_gi_holds_overflow_into_the_next_gi() -> None:
    gpu = _gpus(1)[0]
    migparted._set_mig_config(gpu, {"1c.3g.71gb": 4})
    assert sorted(len(gi.compute_instances) for gi in gpu.gpu_instances.values()) == [1, 3]
    with pytest.raises(MigPartedError, match="all orderings failed") as e:
        migparted._set_mig_config(gpu, {"1c.3g.71gb": 7})  # 2 GIs x 3 CIs at most
    assert any("Error creating GPU instance for '1c.3g.71gb'" in d for d in e.value.details)


def test_a_ci_profile_larger_than_its_gi_is_not_found_on_the_gpu() -> None:
    gpu = _gpus(1)[0]
    with pytest.raises(MigPartedError) as e:
        migparted._set_mig_config(gpu, {"4c.3g.71gb": 1})
    assert e.value.details == ('MIG profile "4c.3g.71gb" not found on this GPU',)
    assert gpu.gpu_instances == {}


# --- device filters with subsystem ids --------------------------------------------------------------------------


def test_device_id_strings_are_read_as_new_device_id_from_string() -> None:
    assert device_id_from_string("0x233510DE") == (0x2335, 0x10DE, 0, 0, False)
    assert device_id_from_string("0x233510de:0x16C110DE") == (0x2335, 0x10DE, 0x16C1, 0x10DE, True)
    assert device_id_from_string(str(0x233510DE)) == (0x2335, 0x10DE, 0, 0, False)  # base 0: decimal too
    assert device_id_from_string("0x2335_10DE") == (0x2335, 0x10DE, 0, 0, False)  # Go literal underscores
    assert device_id_from_string("0x" + "0" * 5000 + "233510DE") == (0x2335, 0x10DE, 0, 0, False)  # Go: leading 0s
    assert device_id_from_string("017") == (0, 15, 0, 0, False)  # a bare leading 0 is octal
    zero = (0, 0, 0, 0, False)
    assert device_id_from_string("9" * 5000) == zero  # out of range, not a crash
    for bad in (
        "",
        "A100-SXM4-40GB",
        "0x233510DE:",
        "0x233510DE:zz",
        "a:b:c",
        "0x1_0000_0000",
        "+0x233510DE",
        "0x_",
        "0x233510DE_",
        "0x",
        "0x2335__10DE",
        "0x233510DE:0x16C110DE:0",
    ):
        assert device_id_from_string(bad) == zero, bad


def test_a_subsystem_filter_matches_only_boards_with_that_subsystem() -> None:
    dell = TwinGpu(node="n", index=0, model=H200, mig_enabled=True, pci_subsystem_id=DELL_SUBSYSTEM)
    hpe = TwinGpu(node="n", index=1, model=H200, mig_enabled=True, pci_subsystem_id=HPE_SUBSYSTEM)
    text = """version: v1
mig-configs:
  c:
    - device-filter: ["0x233510DE:0x16C110DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"3g.71gb": 2}
    - device-filter: "0x233510DE:0x18A11590"
      devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
"""
    migparted.apply(_config(text), [dell, hpe])
    assert dell.geometry() == {"3g.71gb": 2} and hpe.geometry() == {"1g.18gb": 7}
    assert migparted.assert_applied(_config(text), [dell, hpe])


def test_a_filter_without_subsystem_matches_every_board_and_a_bad_one_matches_none() -> None:
    gpus = [
        TwinGpu(node="n", index=0, model=H200, mig_enabled=True, pci_subsystem_id=DELL_SUBSYSTEM),
        TwinGpu(node="n", index=1, model=H200, mig_enabled=True, pci_subsystem_id=HPE_SUBSYSTEM),
    ]
    plain = _config(_one_entry({"2g.35gb": 3}, device_filter='"0x233510DE"'))
    assert [e.matches(g) for e in plain for g in gpus] == [True, True]
    for bad in ('"0x233510DE:0x0000"', '"0x233510DE:garbage"', '"H200-141GB"', '"0x233410DE"'):
        entries = _config(_one_entry({"2g.35gb": 3}, device_filter=bad))
        assert not any(e.matches(g) for e in entries for g in gpus), bad
        # no GPU matched: nothing is cut, and assert fails ("not all GPUs match the specified config")
        migparted.apply(entries, gpus)
        assert all(g.geometry() == {} for g in gpus)
        assert not migparted.assert_applied(entries, gpus)


# --- overlapping entries ----------------------------------------------------------------------------------------


def test_overlapping_entries_are_all_applied_in_order_and_the_last_wins() -> None:
    gpus = _gpus(2)
    text = """version: v1
mig-configs:
  c:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"3g.71gb": 2}
"""
    entries = _config(text)
    migparted.apply(entries, gpus)
    assert gpus[0].geometry() == {"1g.18gb": 7}
    assert gpus[1].geometry() == {"3g.71gb": 2}  # cut twice: first to 7 x 1g, then re-cut by the last entry
    # assert walks the entries the same way: GPU 1's verdict is the last entry's
    assert migparted.assert_applied(entries, gpus)
    # applying again: the first entry re-cuts GPU 1 (it differs from 1g.18gb x7), the second cuts it back
    serials = {ci.serial for gi in gpus[1].gpu_instances.values() for ci in gi.compute_instances.values()}
    migparted.apply(entries, gpus)
    after = {ci.serial for gi in gpus[1].gpu_instances.values() for ci in gi.compute_instances.values()}
    assert gpus[1].geometry() == {"3g.71gb": 2} and not (serials & after)  # new instances: not left alone


def test_overlapping_entries_with_different_modes_fail_as_mig_parted_does() -> None:
    """The mode step applies both in order (the last, disabled, wins); then the config step meets the first entry
    on a GPU whose MIG mode is now off: `unable to apply MIG config with MIG mode disabled`."""
    gpus = _gpus(1)
    text = """version: v1
mig-configs:
  c:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
    - devices: all
      mig-enabled: false
"""
    with pytest.raises(MigPartedError, match="unable to apply MIG config with MIG mode disabled"):
        migparted.apply(_config(text), gpus)
    assert gpus[0].mig_current is False


def _one_entry(devices: dict[str, int], *, device_filter: str | None = None) -> str:
    filt = f"    - device-filter: {device_filter}\n      devices: all\n" if device_filter else "    - devices: all\n"
    body = ", ".join(f'"{k}": {v}' for k, v in devices.items())
    return f"version: v1\nmig-configs:\n  c:\n{filt}      mig-enabled: true\n      mig-devices: {{{body}}}\n"
