"""The twin's device plugin shares devices as NVIDIA's does (reconciler/twin/operator/sharing.py, deviceplugin.py
`replicate`): replicas under `<id>::<i>`, renameByDefault, MPS refused on MIG devices and with mixed, a config it
cannot load stops it."""

from __future__ import annotations

import pytest

from reconciler.twin.operator.deviceplugin import Advertised, Unit, config_failure, replicate
from reconciler.twin.operator.sharing import ConfigError, load_sharing

MIXED = Advertised(
    "mixed",
    {"nvidia.com/mig-1g.18gb": 2, "nvidia.com/mig-3g.71gb": 1},
    {
        "nvidia.com/mig-1g.18gb": (Unit(0, 1, 0), Unit(0, 2, 0)),
        "nvidia.com/mig-3g.71gb": (Unit(0, 3, 0),),
    },
)


def test_time_slicing_replicates_each_device_of_the_named_resource() -> None:
    shared = load_sharing("version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: mig-1g.18gb, replicas: 4}]\n")
    adv = replicate(MIXED, shared)
    assert adv.resources == {"nvidia.com/mig-1g.18gb": 8, "nvidia.com/mig-3g.71gb": 1}
    assert {u.replica for u in adv.units["nvidia.com/mig-1g.18gb"]} == {0, 1, 2, 3}
    assert adv.units["nvidia.com/mig-3g.71gb"] == (Unit(0, 3, 0),)


def test_rename_by_default_advertises_the_shared_name_alone() -> None:
    text = "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources: [{name: mig-3g.71gb, replicas: 2}]\n"
    adv = replicate(MIXED, load_sharing(text))
    assert adv.resources == {"nvidia.com/mig-1g.18gb": 2, "nvidia.com/mig-3g.71gb.shared": 2}


def test_mps_is_refused_with_mixed_and_on_mig_devices() -> None:
    mps = load_sharing("sharing:\n  mps:\n    resources: [{name: gpu, replicas: 2}]\n")
    assert "not supported with MPS" in (replicate(MIXED, mps).error or "")
    single = Advertised("single", {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": (Unit(0, 1, 0),)})
    assert "sharing using MPS is not supported for MIG devices" in (replicate(single, mps).error or "")
    whole = Advertised("none", {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": (Unit(0),)})
    assert replicate(whole, mps).resources == {"nvidia.com/gpu": 2}


@pytest.mark.parametrize(
    "text",
    [
        "version: v9\n",
        "sharing:\n  timeSlicing:\n    resources: []\n",
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 1}]\n",
        "sharing:\n  timeSlicing:\n    resources: [{replicas: 2}]\n",
    ],
)
def test_a_config_the_plugin_cannot_load_stops_it(text: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_sharing(text)
    failed = config_failure("mixed", e.value)
    assert not failed.ok and failed.error is not None and "unable to load config" in failed.error


def test_no_sharing_leaves_what_the_plugin_advertises() -> None:
    assert replicate(MIXED, load_sharing("version: v1\nflags: {migStrategy: mixed}\n")) == MIXED
