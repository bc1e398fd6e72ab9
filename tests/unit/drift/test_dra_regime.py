"""Who writes a DRA node's layout, and DRA drift, as pure values; hostile ResourceSlices are findings, never a
crash (issue 27 items 2 and 5)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.kube.observe import claims_from_json, dra_from_slices, gpu_cluster_from_json
from reconciler.logic.drift import draregime
from reconciler.logic.observe import draclaims
from reconciler.model.dra import DraDevice, NodeDra, Regime
from reconciler.model.inventory import GpuSpec, NodeSpec, Partition, Placement


def _slice(
    node: Any = "n", devices: Any = None, counters: Any = None, driver: str = "gpu.nvidia.com"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "nodeName": node, "pool": {"name": node}}
    if devices is not None:
        spec["devices"] = devices
    if counters is not None:
        spec["sharedCounters"] = counters
    return {"metadata": {"name": f"{node}-slice"}, "spec": spec}


def _mig(name: str, profile: str = "3g.71gb", **extra: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}}, **extra}


def test_static_dynamic_and_no_slices_are_told_apart() -> None:
    static = dra_from_slices([_slice(devices=[_mig("gpu-0-mig-3g71gb-9-4")])])["n"]
    dynamic = dra_from_slices(
        [
            _slice(counters=[{"name": "gpu-0-counter-set", "counters": {"memory-slice-0": {"value": "1"}}}]),
            _slice(devices=[_mig("gpu-0-mig-3g71gb-9-4", consumesCounters=[{"counterSet": "gpu-0-counter-set"}])]),
        ]
    )["n"]
    assert draregime.regime(static) is Regime.DRA_STATIC and draregime.other_writer(static) is None
    assert draregime.regime(dynamic) is Regime.DRA_DYNAMIC_MIG
    assert draregime.other_writer(dynamic) == "NVIDIA's DRA driver (DynamicMIG)"
    assert draregime.regime(None) is Regime.DEVICE_PLUGIN
    # another driver's slices, or a slice for no node, say nothing about GPU nodes
    assert dra_from_slices([_slice(driver="sriov.example.com", devices=[_mig("vf-0")]), _slice(node=None)]) == {}


@pytest.mark.parametrize(
    ("devices", "problem"),
    [
        (
            [{"name": "gpu-0-mig-3g71gb-9-4", "attributes": {"profile": {"int": 3}}}],
            "attribute profile is not a string",
        ),
        ([{"name": "gpu-0-mig-3g71gb-9-4", "attributes": {"uuid": "MIG-x"}}], "attribute uuid is not a string"),
        ([{"name": "gpu-0", "attributes": {"type": {"string": "x" * 65}}}], "attribute type is not a string"),
        ([{"attributes": {}}], "a device without a readable name"),
        ([{"name": 7}], "a device without a readable name"),
        (["gpu-0"], "a device that is not an object"),
        ([{"name": "gpu-0", "attributes": ["type"]}], "attributes are not a map"),
        ("not-a-list", "devices or sharedCounters is not a list"),
    ],
)
def test_a_hostile_slice_is_a_problem_on_its_node_and_the_rest_is_read(devices: Any, problem: str) -> None:
    good = _slice(devices=[_mig("gpu-1-mig-1g18gb-19-0", "1g.18gb")])
    read = dra_from_slices([good, _slice(devices=devices)])["n"]
    assert any(problem in p for p in read.problems), read.problems
    assert [d.name for d in read.devices] == ["gpu-1-mig-1g18gb-19-0"]


def test_problems_are_bounded() -> None:
    read = dra_from_slices([_slice(devices=[{"name": 7}] * 1000)])["n"]
    assert len(read.problems) == 16 and read.devices == ()


def _plan(*parts: tuple[str, int], index: int = 0, mig: bool = True) -> NodeSpec:
    return NodeSpec(
        name="n",
        gpus=(
            GpuSpec(
                index=index,
                model="H200-141GB",
                mig_enabled=mig,
                partitions=tuple(Partition(profile=p) for p, _ in parts),
                placements=tuple(Placement(s, 4 if p.startswith("3g") else 1) for p, s in parts),
            ),
        ),
    )


def test_the_plan_and_the_published_devices_are_compared_name_for_name_with_the_measured_minor() -> None:
    plan = _plan(("3g.71gb", 4), ("1g.18gb+me", 0), index=0)
    published = NodeDra(
        "n", devices=(DraDevice("gpu-2-mig-3g71gb-9-4", "mig"), DraDevice("gpu-2-mig-1g18gb-19-1", "mig"))
    )
    found, bad = draregime.published_devices(published)
    planned = draregime.planned_devices(plan, {0: 2})  # GPU 0 is /dev/nvidia2 on this node
    assert bad == []
    assert sorted(set(planned) - set(found)) == [(2, "1g18gb-me", 0)]  # placement included: 0 planned, 1 published
    assert sorted(set(found) - set(planned)) == [(2, "1g18gb", 1)]
    assert draregime.planned_devices(plan, {})[(0, "3g71gb", 4)] == (0, "3g.71gb@4")  # no observer: index taken


def test_names_that_do_not_parse_are_bad_input_and_vfio_is_not() -> None:
    published = NodeDra("n", devices=(DraDevice("gpu-0-mig-3g.71gb-9-4", "mig"), DraDevice("gpu-vfio-0", "vfio")))
    assert draregime.published_devices(published) == ({}, ["gpu-0-mig-3g.71gb-9-4"])


def test_mig_enabled_without_partitions_is_named() -> None:
    assert list(draregime.unpublished_gpus(_plan(index=3))) == [3]
    assert list(draregime.unpublished_gpus(_plan(("3g.71gb", 4)))) == []
    assert list(draregime.unpublished_gpus(_plan(mig=False))) == []


# --- holders from ResourceClaims alone ---------------------------------------------------------------------


def _claim_json(**status: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ml", "name": "c"}, "status": status}


def _allocated(device: Any = "gpu-1-mig-2g35gb-14-0", pool: Any = "n", reserved: Any = None) -> dict[str, Any]:
    return _claim_json(
        allocation={
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}]}
        },
        reservedFor=reserved if reserved is not None else [{"resource": "pods", "name": "p", "uid": "u"}],
    )


def test_claims_name_their_pods_on_the_gpu_their_device_is() -> None:
    claims, problems = claims_from_json(
        [_allocated(), _claim_json(), _claim_json(allocation={"devices": {"results": []}})]
    )
    assert problems == () and [(c.key, c.reserved_for) for c in claims] == [("ml/c", ("ml/p",))]
    held = draclaims.holds(draclaims.by_node(claims)["n"], {0: 1, 1: 0})  # minor 1 is GPU 0 on this node
    assert held == [(0, "ml/p")]
    assert draclaims.holders_on(held, frozenset({0})) == ("ml/p",) and draclaims.holders_on(held, frozenset({1})) == ()
    # a device name that does not say which GPU: held everywhere, the guard errs on the pod's side
    odd = draclaims.holds([("gpu-1-mig-2g.35gb-14-0", "ml/p")], {})
    assert draclaims.holders_on(odd, frozenset({5})) == ("ml/p",)


@pytest.mark.parametrize(
    "claim",
    [
        {"metadata": "x"},
        {"metadata": {"namespace": "ml"}, "status": {}},
        _claim_json(allocation={"devices": {"results": "x"}}),
        _allocated(device=7),
        _allocated(pool=""),
    ],
)
def test_unreadable_claims_are_named_never_raised(claim: dict[str, Any]) -> None:
    claims, problems = claims_from_json([claim, _allocated()])
    assert [c.key for c in claims] == ["ml/c"] and len(problems) == 1


def test_hostile_reservations_name_no_pod_and_unknown_pools_are_found() -> None:
    (claim,), _ = claims_from_json(
        [_allocated(reserved=[{"resource": "pods", "name": 5}, "x", {"resource": "jobs", "name": "j"}])]
    )
    assert claim.reserved_for == ()
    (elsewhere,), _ = claims_from_json([_allocated(pool="ghost")])
    assert draclaims.unknown_pools([elsewhere], ["n"]) == [("ml/c", "ghost")]


# --- the GPU Operator's GPUCluster ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "dynamic", "problem"),
    [
        (
            {"apiVersion": "nvidia.com/v1alpha1", "spec": {"draDriver": {"featureGates": {"DynamicMIG": True}}}},
            True,
            None,
        ),
        ({"apiVersion": "nvidia.com/v1alpha1", "spec": {"draDriver": {}}}, False, None),
        (
            {"apiVersion": "nvidia.com/v1alpha1", "spec": {"draDriver": {"featureGates": {"DynamicMIG": 1}}}},
            None,
            "not true or false",
        ),
        (
            {"apiVersion": "nvidia.com/v1alpha1", "spec": {"draDriver": {"featureGates": ["DynamicMIG"]}}},
            None,
            "not a map",
        ),
        ({"apiVersion": "nvidia.com/v1alpha1", "spec": {"draDriver": "x"}}, None, "not a map"),
        ({"apiVersion": "nvidia.com/v1beta1", "spec": {"draDriver": {}}}, None, "not nvidia.com/v1alpha1"),
    ],
)
def test_gpucluster_dynamic_mig_is_read_or_named(
    obj: dict[str, Any], dynamic: bool | None, problem: str | None
) -> None:
    state = gpu_cluster_from_json({"metadata": {"name": "gc"}, **obj})
    assert state.dynamic_mig is dynamic
    assert (problem is None and state.problem is None) or (problem is not None and problem in (state.problem or ""))
    # unknown counts as on: a guess never leads to a write
    assert (draregime.cluster_dynamic_mig([state]) == "gc") is (dynamic is not False)


def test_an_ignored_duplicate_gpucluster_says_nothing() -> None:
    dup = gpu_cluster_from_json(
        {
            "metadata": {"name": "dup"},
            "spec": {"draDriver": {"featureGates": {"DynamicMIG": True}}},
            "status": {"state": "ignored"},
        }
    )
    assert draregime.cluster_dynamic_mig([dup]) is None
    assert draregime.other_writer(None, "gc") == "NVIDIA's DRA driver (DynamicMIG, GPUCluster gc)"
