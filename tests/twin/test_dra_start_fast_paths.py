"""The shortcuts `migplan twin --dra static` takes at fleet size (issue 29 item 4) publish and accept exactly what
the plain derivations do: the GPU and MIG device UUIDs (uuid5 without a UUID object), the static devices built
from a memo per GI profile x placement x CI size, and the ResourceSlice validation's path for plainly valid
devices (it must report the same errors as the whole check, for any device)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.twin.apiserver.dra import _device, validate_resource_slice
from reconciler.twin.dra import canonical_profile, static_devices
from reconciler.twin.gpus import SLICES_TO_CI_PROFILE, TwinGpu, uuid5_url


def _reference_uuid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


@pytest.mark.parametrize(
    "name",
    ["", "migplan-twin/gpu-00001/7", "migplan-twin/gpu-00001/7/123", "ü-ünïcode/名前", "x" * 5000, "\x00\n\t"],
)
def test_uuid5_url_is_the_uuid_modules_text(name: str) -> None:
    assert uuid5_url(name) == _reference_uuid(name)


def _gpus() -> list[TwinGpu]:
    """Two H200s cut alike but created in another order (GI ids differ from placement order), one with a 3g GI
    split in 1-slice CIs ("1c.3g.71gb"), and one with MIG disabled."""
    model = load_catalog().get("H200-141GB")
    assert model is not None
    gpus = [TwinGpu(node="node-a", index=i, model=model, mig_enabled=i < 3, minor=7 - i) for i in range(4)]
    for gpu in gpus[:2]:
        gpu.add_partition("3g.71gb", 4)
        gpu.add_partition("1g.18gb", 0)
        gpu.add_partition("2g.35gb", 2)
    split = gpus[2].create_gpu_instance(gpus[2].profile_by_name("3g.71gb").id, 0, 4)  # type: ignore[union-attr]
    gpus[2].create_compute_instance(split, SLICES_TO_CI_PROFILE[1], 2)
    gpus[2].create_compute_instance(split, SLICES_TO_CI_PROFILE[1], 0)
    gpus[2].add_partition("1g.18gb", 6)
    return gpus


def _reference_devices(gpus: list[TwinGpu]) -> list[dict[str, Any]]:
    """The devices as derived one by one (the twin's derivation before the memo), UUIDs by the uuid module."""
    out: list[dict[str, Any]] = []
    for gpu in gpus:
        gpu_uuid = "GPU-" + _reference_uuid(f"migplan-twin/{gpu.node}/{gpu.index}")
        product = {"string": gpu.name}
        if not gpu.mig_current:
            attrs = {"type": {"string": "gpu"}, "uuid": {"string": gpu_uuid}, "productName": product}
            out.append({"name": f"gpu-{gpu.minor}", "attributes": attrs})
            continue
        for gi in sorted(gpu.gpu_instances.values(), key=lambda g: g.start):
            for ci in sorted(gi.compute_instances.values(), key=lambda c: c.id):
                profile = gi.profile.name if ci.size == gi.profile.compute_slices else f"{ci.size}c.{gi.profile.name}"
                capacity: dict[str, Any] = {"memory": {"value": f"{gi.profile.memory_mb}Mi"}}
                for i in range(gi.start, gi.start + gi.profile.memory_slices):
                    capacity[f"memorySlice{i}"] = {"value": "1"}
                out.append(
                    {
                        "name": f"gpu-{gpu.minor}-mig-{canonical_profile(profile)}-{gi.profile.id}-{gi.start}",
                        "attributes": {
                            "type": {"string": "mig"},
                            "profile": {"string": profile},
                            "uuid": {"string": "MIG-" + _reference_uuid(ci.uuid_seed)},
                            "parentUUID": {"string": gpu_uuid},
                            "productName": product,
                        },
                        "capacity": capacity,
                    }
                )
    return out


def test_static_devices_are_the_one_by_one_derivation_key_order_included() -> None:
    gpus = _gpus()
    published = static_devices(gpus)
    reference = _reference_devices(gpus)
    assert published == reference
    # the API serves the keys in the order they were built: the same order, at every level
    assert [list(d) for d in published] == [list(d) for d in reference]
    assert [list(d["attributes"]) for d in published] == [list(d["attributes"]) for d in reference]
    assert [list(d.get("capacity", {})) for d in published] == [list(d.get("capacity", {})) for d in reference]
    profiles = {d["attributes"].get("profile", {}).get("string") for d in published}
    assert {"1c.3g.71gb", "3g.71gb", "2g.35gb", "1g.18gb", None} <= profiles  # every branch was taken
    # a second call (memo filled) builds fresh dicts: mutating one result leaves the next one as it was
    published[0]["attributes"]["profile"]["string"] = "mutated"
    published[1]["capacity"]["memory"]["value"] = "0Mi"
    assert static_devices(gpus) == reference


def _mig(**over: Any) -> dict[str, Any]:
    device: dict[str, Any] = {
        "name": "gpu-0-mig-1g18gb-19-0",
        "attributes": {"type": {"string": "mig"}, "uuid": {"string": "MIG-" + "a" * 36}},
        "capacity": {"memory": {"value": "16384Mi"}},
    }
    device.update(over)
    return device


# What a driver could put in a device: every field at its worst (types, bounds, emptiness, several kinds).
DEVICES: list[Any] = [
    _mig(),
    _mig(name=""),
    _mig(name=None),
    _mig(name=7),
    _mig(name="A"),
    _mig(name="a" * 63),
    _mig(name="a" * 64),
    _mig(name="-a"),
    _mig(name="a.b"),
    _mig(attributes={"s": {"string": "x" * 64}}),
    _mig(attributes={"s": {"string": "x" * 65}}),
    _mig(attributes={"s": {"string": ""}}),
    _mig(attributes={"s": {"string": None}}),
    _mig(attributes={"s": {"string": 5}}),
    _mig(attributes={"s": {"int": 5}}),
    _mig(attributes={"s": {"int": True}}),
    _mig(attributes={"s": {"bool": "yes"}}),
    _mig(attributes={"s": {"version": "1.2.3"}}),
    _mig(attributes={"s": {"version": "v1"}}),
    _mig(attributes={"s": {"string": "x", "int": 1}}),
    _mig(attributes={"s": {"string": "x", "other": 1}}),
    _mig(attributes={"s": {}}),
    _mig(attributes={"s": "x"}),
    _mig(attributes={"s": None}),
    _mig(attributes={"z": {"string": "x" * 65}, "a": {"int": "1"}}),
    _mig(attributes=[]),
    _mig(attributes=None),
    _mig(capacity=[1]),
    _mig(attributes={f"a{i}": {"string": "x"} for i in range(31)}),
    _mig(attributes={f"a{i}": {"string": "x"} for i in range(32)}),
    _mig(attributes={f"a{i}": {"string": "x"} for i in range(33)}, capacity=None),
    "not a device",
    None,
    [],
]


@pytest.mark.parametrize("device", DEVICES, ids=range(len(DEVICES)))
def test_a_slices_errors_are_the_whole_checks_for_any_device(device: Any) -> None:
    other = _mig(name="gpu-1-mig-1g18gb-19-1")
    obj = {
        "metadata": {"name": "n-gpu.nvidia.com-abcde"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "resourceSliceCount": 1}},
    }
    obj["spec"]["devices"] = [other, device]
    whole = _device(other, "spec.devices[0]") + _device(device, "spec.devices[1]")
    assert validate_resource_slice(obj, None) == whole
