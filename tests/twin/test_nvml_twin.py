"""The NVML twin against stack-facts.md §6 (pynvml names, error codes, placement units, calling conventions).

Every assertion names the fact it pins. The twin is driven exactly like the real pynvml module, with pynvml's own
structs and ctypes references; errors are pynvml's own exception classes.
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_uint

import pynvml
import pytest

from reconciler.catalog import load_catalog
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.nvml import NvmlTwin


def make(model: str = "A100-40GB", *, mig: bool = True, count: int = 1, resets: bool = True) -> NvmlTwin:
    gm = load_catalog().get(model)
    assert gm is not None
    gpus = [TwinGpu(node="n1", index=i, model=gm, mig_enabled=mig, resets_on_mode_change=resets) for i in range(count)]
    nv = NvmlTwin(gpus)
    nv.nvmlInit()
    return nv


def profile_ids(nv: NvmlTwin, dev: object) -> dict[str, int]:
    """Enumerate GI profile enums from 0 until INVALID_ARGUMENT, skipping NOT_SUPPORTED (§6)."""
    out = {}
    enum = 0
    while True:
        try:
            info = nv.nvmlDeviceGetGpuInstanceProfileInfo(dev, enum)
        except pynvml.NVMLError_InvalidArgument:
            break
        except pynvml.NVMLError_NotSupported:
            enum += 1
            continue
        name = info.name.decode() if isinstance(info.name, bytes) else info.name  # pynvml's struct decodes it
        out[name.removeprefix("MIG ")] = info.id
        enum += 1
    return out


def test_uninitialized_before_init_and_after_shutdown() -> None:
    gm = load_catalog().get("H200-141GB")
    assert gm is not None
    nv = NvmlTwin([TwinGpu(node="n", index=0, model=gm)])
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetCount()
    nv.nvmlInit()
    assert nv.nvmlDeviceGetCount() == 1
    nv.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetHandleByIndex(0)


def test_constants_structs_and_errors_are_pynvmls_own() -> None:
    nv = make()
    assert nv.NVMLError_InUse is pynvml.NVMLError_InUse
    assert nv.c_nvmlGpuInstancePlacement_t is pynvml.c_nvmlGpuInstancePlacement_t
    assert nv.NVML_ERROR_INSUFFICIENT_RESOURCES == 23 and nv.NVML_ERROR_IN_USE == 19  # §6 error-code table
    assert nv.nvmlExceptionClass(19) is pynvml.NVMLError_InUse


def test_identity_matches_catalog() -> None:
    nv = make("H200-141GB", count=2)
    h = nv.nvmlDeviceGetHandleByIndex(1)
    assert nv.nvmlDeviceGetName(h) == "NVIDIA H200"
    assert nv.nvmlDeviceGetPciInfo(h).pciDeviceId == 0x233510DE
    assert nv.nvmlDeviceGetUUID(h).startswith("GPU-")
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetHandleByIndex(2)


def test_profile_enumeration_ids_from_catalog() -> None:
    """§6: enumerate enums until INVALID_ARGUMENT; NOT_SUPPORTED for profiles the GPU lacks; ids = nvidia-smi IDs."""
    nv = make("A100-40GB")
    ids = profile_ids(nv, nv.nvmlDeviceGetHandleByIndex(0))
    assert ids == {
        "1g.5gb": 19,
        "1g.5gb+me": 20,
        "1g.10gb": 15,
        "2g.10gb": 14,
        "3g.20gb": 9,
        "4g.20gb": 5,
        "7g.40gb": 0,
    }


def test_profile_info_v2_not_supported_without_mig() -> None:
    """§6: ...InfoV returns NOT_SUPPORTED if the GPU 'doesn't have MIG mode enabled'."""
    nv = make(mig=False)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetGpuInstanceProfileInfo(
            nv.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE
        )


def test_possible_placements_calling_convention_and_units() -> None:
    """§6: count query with None, then a c_nvmlGpuInstancePlacement_t array; placements in memory slices."""
    nv = make("A100-40GB")
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    pid = profile_ids(nv, dev)["3g.20gb"]
    count = c_uint(0)
    assert nv.nvmlDeviceGetGpuInstancePossiblePlacements(dev, pid, None, byref(count)) == pynvml.NVML_SUCCESS
    assert count.value == 2
    too_small = c_uint(1)
    with pytest.raises(pynvml.NVMLError_InsufficientSize):
        nv.nvmlDeviceGetGpuInstancePossiblePlacements(
            dev, pid, (pynvml.c_nvmlGpuInstancePlacement_t * 1)(), byref(too_small)
        )
    arr = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
    nv.nvmlDeviceGetGpuInstancePossiblePlacements(dev, pid, arr, byref(count))
    assert [(p.start, p.size) for p in arr] == [(0, 4), (4, 4)]


def test_a100_ordering_example_insufficient_resources() -> None:
    """MIG User Guide via §6: -cgi 19,19,14,9 → the 3g.20gb fails with Insufficient Resources; 9 first works."""
    nv = make("A100-40GB")
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    for pid in (19, 19, 14):
        nv.nvmlDeviceCreateGpuInstance(dev, pid)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        nv.nvmlDeviceCreateGpuInstance(dev, 9)
    nv2 = make("A100-40GB")
    dev2 = nv2.nvmlDeviceGetHandleByIndex(0)
    for pid in (9, 19, 19, 14):
        nv2.nvmlDeviceCreateGpuInstance(dev2, pid)


def test_create_with_placement_invalid_vs_occupied() -> None:
    """§6/§8: invalid placement → INVALID_ARGUMENT; valid but occupied → INSUFFICIENT_RESOURCES (twin choice)."""
    nv = make("H200-141GB")
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    ids = profile_ids(nv, dev)
    place = pynvml.c_nvmlGpuInstancePlacement_t
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceCreateGpuInstanceWithPlacement(dev, ids["3g.71gb"], byref(place(2, 4)))
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceCreateGpuInstanceWithPlacement(dev, ids["3g.71gb"], byref(place(4, 2)))
    gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(dev, ids["3g.71gb"], byref(place(4, 4)))
    info = nv.nvmlGpuInstanceGetInfo(gi)
    assert (info.placement.start, info.placement.size, info.profileId) == (4, 4, ids["3g.71gb"])
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        nv.nvmlDeviceCreateGpuInstanceWithPlacement(dev, ids["1g.18gb"], byref(place(5, 1)))


def test_article_layout_fits_only_with_3g_at_4() -> None:
    """DESIGN.md: on an H200 3g+2g+1g+1g fits only with the 3g at 4; with the 3g at 0 the rest cannot follow."""
    nv = make("H200-141GB")
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    ids = profile_ids(nv, dev)
    place = pynvml.c_nvmlGpuInstancePlacement_t
    nv.nvmlDeviceCreateGpuInstanceWithPlacement(dev, ids["3g.71gb"], byref(place(0, 4)))
    nv.nvmlDeviceCreateGpuInstance(dev, ids["2g.35gb"])
    nv.nvmlDeviceCreateGpuInstance(dev, ids["1g.18gb"])
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        nv.nvmlDeviceCreateGpuInstance(dev, ids["1g.18gb"])


def test_instance_count_exhausted() -> None:
    nv = make("H200-141GB")
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    pid = profile_ids(nv, dev)["3g.71gb"]
    assert nv.nvmlDeviceGetGpuInstanceRemainingCapacity(dev, pid) == 2
    nv.nvmlDeviceCreateGpuInstance(dev, pid)
    nv.nvmlDeviceCreateGpuInstance(dev, pid)
    assert nv.nvmlDeviceGetGpuInstanceRemainingCapacity(dev, pid) == 0
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        nv.nvmlDeviceCreateGpuInstance(dev, pid)


def test_list_get_destroy_gpu_instances_with_ctypes_refs() -> None:
    nv = make("H200-141GB")
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    pid = profile_ids(nv, dev)["1g.18gb"]
    created = [nv.nvmlGpuInstanceGetInfo(nv.nvmlDeviceCreateGpuInstance(dev, pid)).id for _ in range(3)]
    count = c_uint(7)
    arr = (pynvml.c_nvmlGpuInstance_t * 7)()
    nv.nvmlDeviceGetGpuInstances(dev, pid, arr, byref(count))
    assert count.value == 3
    assert sorted(nv.nvmlGpuInstanceGetInfo(arr[i]).id for i in range(count.value)) == sorted(created)
    gi = nv.nvmlDeviceGetGpuInstanceById(dev, created[0])
    nv.nvmlGpuInstanceDestroy(gi)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetGpuInstanceById(dev, created[0])
    with pytest.raises(pynvml.NVMLError_InvalidArgument):  # the destroyed handle stays invalid
        nv.nvmlGpuInstanceGetInfo(gi)


def test_compute_instances_and_in_use() -> None:
    """§6: GpuInstanceDestroy → IN_USE while compute instances exist; ComputeInstanceDestroy → IN_USE with processes."""
    nv = make("H200-141GB")
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    pid = profile_ids(nv, dev)["3g.71gb"]
    gi = nv.nvmlDeviceCreateGpuInstance(dev, pid)
    ci_prof = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
        gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
    )
    assert ci_prof.sliceCount == 3
    ci = nv.nvmlGpuInstanceCreateComputeInstance(gi, ci_prof.id)
    cinfo = nv.nvmlComputeInstanceGetInfo(ci)
    assert (cinfo.placement.start, cinfo.placement.size) == (0, 3)
    count = c_uint(1)
    arr = (pynvml.c_nvmlComputeInstance_t * 1)()
    nv.nvmlGpuInstanceGetComputeInstances(gi, ci_prof.id, arr, byref(count))
    assert count.value == 1
    with pytest.raises(pynvml.NVMLError_InUse):
        nv.nvmlGpuInstanceDestroy(gi)
    # A pod holding the MIG device = a process on it.
    nv._gpus[0].gpu_instances[nv.nvmlGpuInstanceGetInfo(gi).id].compute_instances[cinfo.id].holder = "default/p"
    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(dev, 0)
    procs = nv.nvmlDeviceGetComputeRunningProcesses(mig)
    assert len(procs) == 1 and procs[0].gpuInstanceId == nv.nvmlGpuInstanceGetInfo(gi).id
    with pytest.raises(pynvml.NVMLError_InUse):
        nv.nvmlComputeInstanceDestroy(ci)
    nv._gpus[0].gpu_instances[nv.nvmlGpuInstanceGetInfo(gi).id].compute_instances[cinfo.id].holder = None
    assert nv.nvmlDeviceGetComputeRunningProcesses(mig) == []
    nv.nvmlComputeInstanceDestroy(ci)
    nv.nvmlGpuInstanceDestroy(gi)


def test_mig_device_handles_and_pynvml_quirk() -> None:
    """§6: IsMigDeviceHandle returns the c_uint itself; MigDeviceHandleByIndex → NOT_FOUND past the devices."""
    nv = make("H200-141GB")
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetMaxMigDeviceCount(dev) == 7
    nv._gpus[0].add_partition("2g.35gb")
    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(dev, 0)
    flag = nv.nvmlDeviceIsMigDeviceHandle(mig)
    assert isinstance(flag, ctypes.c_uint) and flag.value == 1
    assert nv.nvmlDeviceIsMigDeviceHandle(dev).value == 0
    assert nv.nvmlDeviceGetUUID(mig).startswith("MIG-")
    assert nv.nvmlDeviceGetGpuInstanceId(mig) == 1 and nv.nvmlDeviceGetComputeInstanceId(mig) == 0
    parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
    assert nv.nvmlDeviceGetUUID(parent) == nv.nvmlDeviceGetUUID(dev)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetMigDeviceHandleByIndex(dev, 1)


def test_mig_mode_pending_until_reset_and_in_use() -> None:
    """§6: GetMigMode → [current, pending]; SetMigMode returns the activation status (not raised)."""
    nv = make("H200-141GB", mig=False, resets=False)
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetMigMode(dev) == [0, 0]
    status = nv.nvmlDeviceSetMigMode(dev, pynvml.NVML_DEVICE_MIG_ENABLE)
    assert status == pynvml.NVML_ERROR_RESET_REQUIRED
    assert nv.nvmlDeviceGetMigMode(dev) == [0, 1]
    with pytest.raises(pynvml.NVMLError_NotSupported):  # not yet effective
        nv.nvmlDeviceCreateGpuInstance(dev, 9)
    assert nv._gpus[0].reset()
    assert nv.nvmlDeviceGetMigMode(dev) == [1, 1]
    # Busy GPU: the mode change is refused with IN_USE as activation status and stays pending.
    nv._gpus[0].add_partition("1g.18gb")
    assert nv.nvmlDeviceSetMigMode(dev, pynvml.NVML_DEVICE_MIG_DISABLE) == pynvml.NVML_ERROR_IN_USE
    assert nv.nvmlDeviceGetMigMode(dev) == [1, 0]


def test_mig_mode_bare_metal_resets_when_idle() -> None:
    nv = make("H200-141GB", mig=False)
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceSetMigMode(dev, pynvml.NVML_DEVICE_MIG_ENABLE) == pynvml.NVML_SUCCESS
    assert nv.nvmlDeviceGetMigMode(dev) == [1, 1]


def test_unmodelled_function_is_a_loud_attribute_error() -> None:
    nv = make()
    with pytest.raises(AttributeError):
        nv.nvmlDeviceGetPowerUsage  # noqa: B018
