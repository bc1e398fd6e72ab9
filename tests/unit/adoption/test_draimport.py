"""A node's GPUs from the ResourceSlices of NVIDIA's DRA driver (reconciler.logic.adoption.draimport): static MIG
devices with their placements, DynamicMIG GPUs without partitions, and every hostile slice refused by code."""

from __future__ import annotations

from reconciler.catalog import load_catalog
from reconciler.logic.adoption import draimport
from reconciler.model.dra import DraDevice, NodeDra, Regime

CATALOG = load_catalog()
H200 = "NVIDIA H200"


def _mig(name: str, profile: str, parent: str = "GPU-a", product: str | None = H200) -> DraDevice:
    return DraDevice(name=name, kind="mig", profile=profile, parent_uuid=parent, product=product)


def _read(
    *devices: DraDevice,
    minors: dict[int, int] | None = None,
    count: int | None = None,
    counter_sets: tuple[str, ...] = (),
    problems: tuple[str, ...] = (),
) -> draimport.DraNodeRead:
    published = NodeDra("n", devices, counter_sets, problems)
    return draimport.read_node(published, CATALOG, minors=minors, gpu_count=count)


def test_static_devices_give_the_cut_with_placements_and_whole_gpus_without_mig() -> None:
    read = _read(
        _mig("gpu-0-mig-3g71gb-9-4", "3g.71gb"),
        _mig("gpu-0-mig-1g18gb-19-2", "1g.18gb"),
        DraDevice(name="gpu-1", kind="gpu", uuid="GPU-b", product=H200),
        count=2,
    )
    assert read.regime is Regime.DRA_STATIC and not read.refused and read.minors_inferred
    assert [(g.index, g.model, g.mig_enabled, g.partitions) for g in read.gpus] == [
        (0, "H200-141GB", True, (("1g.18gb", 2), ("3g.71gb", 4))),
        (1, "H200-141GB", False, ()),
    ]


def test_the_observer_minors_map_devices_to_gpu_indexes() -> None:
    read = _read(_mig("gpu-5-mig-1g18gb-19-0", "1g.18gb"), minors={0: 3, 1: 5})
    assert [(g.index, g.minor) for g in read.gpus] == [(1, 5)] and not read.minors_inferred


def test_dynamic_mig_gives_the_gpus_without_partitions() -> None:
    dev = DraDevice(name="gpu-0-mig-1g18gb-19-0", kind="mig", profile="1g.18gb", product=H200, consumes_counters=True)
    read = _read(dev, DraDevice(name="gpu-0", kind="gpu", product=H200), counter_sets=("gpu-0-counter-set",))
    assert read.regime is Regime.DRA_DYNAMIC_MIG
    assert [(g.index, g.mig_enabled, g.partitions) for g in read.gpus] == [(0, False, ())]


def _codes(read: draimport.DraNodeRead) -> list[str]:
    return [c for c, _ in read.problems]


def test_hostile_devices_are_refused_with_their_code() -> None:
    assert _codes(_read(_mig("gpu-0-mig-x", "1g.18gb"))) == ["MP958"]
    assert _codes(_read(_mig("gpu-0-mig-1g18gb-19-0", "1g.18gb"), problems=("slice s: bad",))) == ["MP958"]
    assert _codes(_read(_mig("gpu-0-mig-1g18gb-19-0", "1g.18gb"), _mig("gpu-0-mig-1g18gb-19-0", "1g.18gb"))) == [
        "MP960"
    ]
    assert _codes(_read(_mig("gpu-0-mig-1g18gb-19-0", "1g.18gb"), _mig("gpu-0-mig-1g18gb-20-0", "1g.18gb+me"))) == [
        "MP959"  # the second's name says 1g18gb, its profile 1g.18gb+me
    ]
    two_at_one_start = _read(_mig("gpu-0-mig-1g18gb-19-0", "1g.18gb"), _mig("gpu-0-mig-2g35gb-14-0", "2g.35gb"))
    assert _codes(two_at_one_start) == ["MP960"]
    assert _codes(_read(_mig("gpu-2-mig-1g18gb-19-0", "1g.18gb"), count=2)) == ["MP961"]
    assert _codes(_read(_mig("gpu-2-mig-1g18gb-19-0", "1g.18gb"), minors={0: 0, 1: 1})) == ["MP961"]
    assert _codes(_read(_mig("gpu-0-mig-1g18gb-19-0", "1g.18gb", product=None))) == ["MP959"]
    assert _codes(_read(_mig("gpu-0-mig-1g18gb-19-0", "1g.18gb", product="NVIDIA Nonesuch"))) == ["MP959"]
    parents = _read(_mig("gpu-0-mig-1g18gb-19-0", "1g.18gb"), _mig("gpu-0-mig-1g18gb-19-1", "1g.18gb", parent="B"))
    assert _codes(parents) == ["MP959"]
    whole_and_cut = _read(DraDevice(name="gpu-0", kind="gpu", product=H200), _mig("gpu-0-mig-1g18gb-19-0", "1g.18gb"))
    assert _codes(whole_and_cut) == ["MP959"]


def test_a_flood_of_bad_devices_is_bounded() -> None:
    read = _read(*(_mig(f"gpu-0-mig-bad{i}", "1g.18gb") for i in range(5000)))
    assert read.refused and len(read.problems) == draimport.MAX_PROBLEMS


def _slice_json(product: object) -> dict[str, object]:
    attrs = {"type": {"string": "mig"}, "profile": {"string": "1g.18gb"}, "parentUUID": {"string": "GPU-a"}}
    device = {"name": "gpu-0-mig-1g18gb-19-3", "attributes": {**attrs, "productName": product}}
    return {"metadata": {"name": "s"}, "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "devices": [device]}}


def test_the_adapter_reads_product_name_and_an_unreadable_one_refuses_the_node() -> None:
    from reconciler.adapters.kube.observe import dra_from_slices

    good = draimport.read_node(dra_from_slices([_slice_json({"string": H200})])["n"], CATALOG, minors=None, gpu_count=1)
    assert [(g.model, g.partitions) for g in good.gpus] == [("H200-141GB", (("1g.18gb", 3),))]
    bad = draimport.read_node(dra_from_slices([_slice_json({"int": 7})])["n"], CATALOG, minors=None, gpu_count=1)
    assert _codes(bad) == ["MP958"] and "productName" in bad.problems[0][1]
