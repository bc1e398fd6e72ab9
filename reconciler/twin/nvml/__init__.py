"""The NVML twin: an object with pynvml's surface over one twin node's GPUs.

`NvmlTwin(gpus)` is injected where production code would use the `pynvml` module (the node agent takes "an
nvml module" and gets either `pynvml` or this object); it never patches the real module. Function names,
argument order, return values, ctypes structs and exceptions are pynvml's own (stack-facts.md §6):

* functions are the pynvml names (`nvmlDeviceGetMigMode`, `nvmlDeviceCreateGpuInstanceWithPlacement`, ...);
* every other attribute (`NVML_*` constants, `NVMLError`, `NVMLError_InUse`, `nvmlExceptionClass`,
  `c_nvmlGpuInstancePlacement_t`, ...) is forwarded to the real pynvml module, which is pure Python and
  importable without a driver;
* handles are real ctypes pointers (`c_nvmlDevice_t`, `c_nvmlGpuInstance_t`, `c_nvmlComputeInstance_t`) whose
  addresses are private keys, so they fit into pynvml's structs (`c_nvmlGpuInstanceInfo_t.device`); a handle
  of a destroyed instance stays invalid (NVML_ERROR_INVALID_ARGUMENT), as the real ones do;
* before `nvmlInit()` (or after the matching `nvmlShutdown()`) every call raises NVMLError_Uninitialized;
* the ctypes-ref calling conventions are kept: `nvmlDeviceGetGpuInstancePossiblePlacements(dev, id, None,
  byref(count))` returns the count, a second call fills the array; NVML_ERROR_INSUFFICIENT_SIZE when the
  count passed in is too small.

Processes (`nvmlDeviceGetComputeRunningProcesses`) are the pods holding a MIG device (or the whole GPU): one
process per pod with a stable pid. On the parent handle of a MIG-enabled GPU it lists the processes of all its
MIG devices [assumption, see ASSUMPTIONS-operator.md]. Not pure: state lives in the shared TwinGpu objects.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import pynvml

from reconciler.twin.gpus import (
    CI_PROFILE_SLICES,
    SUCCESS,
    ComputeInstance,
    GiProfile,
    GpuInstance,
    TwinGpu,
    nvml_error,
)

__all__ = ["NvmlTwin"]

# pynvml functions that never touch the library: forwarded as they are.
_PURE_HELPERS = frozenset({"nvmlExceptionClass", "nvmlStructToFriendlyObject", "nvmlFriendlyObjectToStruct"})
_ADDRESSES = itertools.count(0x7E57_0000_1000, 0x40)  # fake, never dereferenced; unique per process


_F = TypeVar("_F", bound=Callable[..., Any])


def _mutates(fn: _F) -> _F:
    """Mark a call that changes MIG state: on success the twin is told (its GFD relabels the node)."""

    @functools.wraps(fn)
    def wrapper(self: NvmlTwin, *args: Any, **kwargs: Any) -> Any:
        result = fn(self, *args, **kwargs)
        self._changed()
        return result

    return cast(_F, wrapper)


def _pointer(ptype: Any, address: int) -> Any:
    return ctypes.cast(ctypes.c_void_p(address), ptype)


def _address(handle: Any) -> int | None:
    try:
        value: int | None = ctypes.cast(handle, ctypes.c_void_p).value
    except (ctypes.ArgumentError, TypeError):
        return None
    return value


def _deref(ref: Any) -> Any:
    """The object behind a byref()/pointer()/plain ctypes argument."""
    if ref is None:
        return None
    if isinstance(ref, ctypes._Pointer):
        return ref.contents
    obj = getattr(ref, "_obj", None)  # ctypes.byref(...) result
    if obj is not None:
        return obj
    return ref


def _array(ref: Any) -> Any:
    if isinstance(ref, ctypes.Array | ctypes._Pointer):
        return ref
    obj = getattr(ref, "_obj", None)
    return obj if obj is not None else ref


class NvmlTwin:
    """pynvml's API over a list of TwinGpu (one node). Thread-safe through the GPUs' node lock."""

    def __init__(
        self,
        gpus: Sequence[TwinGpu],
        *,
        lock: threading.RLock | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._gpus = list(gpus)
        self._on_change = on_change  # told after every successful MIG change (the twin's GFD relabels)
        self._lock = lock if lock is not None else (self._gpus[0].lock if self._gpus else threading.RLock())
        self._refcount = 0
        self._by_address: dict[int, tuple[str, Any]] = {}
        self._address_of: dict[tuple[Any, ...], int] = {}

    # pynvml's constants, structs and exception classes: the real module's own objects.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("nvml") and name[4:5].isupper() and name not in _PURE_HELPERS:
            # A pynvml function the twin does not model: fail loudly, like a missing symbol would.
            raise AttributeError(f"NVML twin does not implement {name}")
        return getattr(pynvml, name)

    # ------------------------------------------------------------------ plumbing
    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    def _check(self) -> None:
        if self._refcount <= 0:
            raise nvml_error(pynvml.NVML_ERROR_UNINITIALIZED)

    def _handle(self, ptype: Any, key: tuple[Any, ...], target: tuple[str, Any]) -> Any:
        addr = self._address_of.get(key)
        if addr is None:
            addr = next(_ADDRESSES)
            self._address_of[key] = addr
        self._by_address[addr] = target
        return _pointer(ptype, addr)

    def _gpu_handle(self, gpu: TwinGpu) -> Any:
        return self._handle(pynvml.c_nvmlDevice_t, ("gpu", gpu.index), ("gpu", gpu))

    def _gi_handle(self, gpu: TwinGpu, gi: GpuInstance) -> Any:
        return self._handle(pynvml.c_nvmlGpuInstance_t, ("gi", gpu.index, gi.serial), ("gi", (gpu, gi)))

    def _ci_handle(self, gpu: TwinGpu, gi: GpuInstance, ci: ComputeInstance) -> Any:
        key = ("ci", gpu.index, ci.serial)
        return self._handle(pynvml.c_nvmlComputeInstance_t, key, ("ci", (gpu, gi, ci)))

    def _mig_handle(self, gpu: TwinGpu, gi: GpuInstance, ci: ComputeInstance) -> Any:
        key = ("mig", gpu.index, ci.serial)
        return self._handle(pynvml.c_nvmlDevice_t, key, ("mig", (gpu, gi, ci)))

    def _resolve(self, handle: Any) -> tuple[str, Any]:
        self._check()
        addr = _address(handle)
        target = self._by_address.get(addr) if addr is not None else None
        if target is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        kind, obj = target
        # Instances that were destroyed (or lost in a MIG mode change) invalidate their handles.
        if kind == "gi":
            gpu, gi = obj
            if gpu.gpu_instances.get(gi.id) is not gi:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        elif kind in ("ci", "mig"):
            gpu, gi, ci = obj
            if gpu.gpu_instances.get(gi.id) is not gi or gi.compute_instances.get(ci.id) is not ci:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return kind, obj

    def _device(self, handle: Any) -> TwinGpu:
        kind, obj = self._resolve(handle)
        if kind != "gpu":
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu: TwinGpu = obj
        return gpu

    def _gi(self, handle: Any) -> tuple[TwinGpu, GpuInstance]:
        kind, obj = self._resolve(handle)
        if kind != "gi":
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu, gi = obj
        return gpu, gi

    def _profile(self, gpu: TwinGpu, profile_id: int) -> GiProfile:
        prof = gpu.profiles_by_id.get(int(profile_id))
        if prof is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return prof

    # ------------------------------------------------------------------ init / system
    def nvmlInit(self) -> None:
        with self._lock:
            self._refcount += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        with self._lock:
            self._check()
            self._refcount -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._check()
        with self._lock:
            if not 0 <= int(index) < len(self._gpus):
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            return self._gpu_handle(self._gpus[int(index)])

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> Any:
        self._check()
        text = uuid.decode() if isinstance(uuid, bytes) else uuid
        with self._lock:
            for gpu in self._gpus:
                if gpu.uuid == text:
                    return self._gpu_handle(gpu)
                for gi, ci in gpu.iter_cis():
                    if ci.uuid == text:
                        return self._mig_handle(gpu, gi, ci)
        raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)

    # ------------------------------------------------------------------ device identity
    def _any_device(self, handle: Any) -> tuple[TwinGpu, ComputeInstance | None, GpuInstance | None]:
        kind, obj = self._resolve(handle)
        if kind == "gpu":
            return obj, None, None
        if kind == "mig":
            gpu, gi, ci = obj
            return gpu, ci, gi
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetName(self, handle: Any) -> str:
        with self._lock:
            gpu, ci, gi = self._any_device(handle)
            if ci is not None and gi is not None:
                return f"{gpu.name} MIG {gi.profile.name}"
            return gpu.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        with self._lock:
            gpu, ci, _ = self._any_device(handle)
            return ci.uuid if ci is not None else gpu.uuid

    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        with self._lock:
            return self._device(handle).index

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        # nvml.h: "the minor number for the device such that the Nvidia device node file for each GPU will
        # have the form /dev/nvidia[minor number]"; a MIG device handle is NVML_ERROR_INVALID_ARGUMENT there
        # like in the other whole-GPU getters (self._device refuses it)
        with self._lock:
            return self._device(handle).minor

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        with self._lock:
            gpu = self._device(handle)
            info = pynvml.nvmlPciInfo_t()
            info.pciDeviceId = gpu.pci_device_id
            info.bus = 0x18 + gpu.index * 0x10
            info.busId = gpu.bus_id.encode()
            info.busIdLegacy = gpu.bus_id.encode()
            return info

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> Any:
        with self._lock:
            gpu, _, gi = self._any_device(handle)
            info = pynvml.c_nvmlMemory_t()
            if gi is not None:
                info.total = gi.profile.memory_mb * 1024 * 1024
            else:
                full = max(gpu.profiles.values(), key=lambda p: p.memory_slices, default=None)
                info.total = (full.memory_mb if full else 0) * 1024 * 1024
            info.free = info.total
            return info

    # ------------------------------------------------------------------ MIG mode
    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        with self._lock:
            gpu = self._device(device)
            return [int(gpu.mig_current), int(gpu.mig_pending)]

    @_mutates
    def nvmlDeviceSetMigMode(self, device: Any, mode: int) -> int:
        with self._lock:
            gpu = self._device(device)
            if mode not in (pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_ENABLE):
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            return gpu.set_mig_mode(mode == pynvml.NVML_DEVICE_MIG_ENABLE)

    # ------------------------------------------------------------------ GPU-instance profiles
    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:
        with self._lock:
            gpu = self._device(device)
            if version not in (1, 2):
                raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            if not 0 <= int(profile) < pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            prof = gpu.profiles.get(int(profile))
            # V: "NOT_SUPPORTED if profile not supported or doesn't have MIG mode enabled" (stack-facts §6).
            if prof is None or (version == 2 and not gpu.mig_current):
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return self._profile_info(prof, version)

    nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo

    def nvmlDeviceGetGpuInstanceProfileInfoById(self, device: Any, profileId: int) -> Any:
        with self._lock:
            gpu = self._device(device)
            if not gpu.mig_current:
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return self._profile_info(self._profile(gpu, profileId), 2)

    nvmlDeviceGetGpuInstanceProfileInfoByIdV = nvmlDeviceGetGpuInstanceProfileInfoById

    @staticmethod
    def _profile_info(prof: GiProfile, version: int) -> Any:
        info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t() if version == 2 else pynvml.c_nvmlGpuInstanceProfileInfo_t()
        info.id = prof.id
        info.isP2pSupported = 0
        info.sliceCount = prof.compute_slices
        info.instanceCount = prof.max_instances
        info.memorySizeMB = prof.memory_mb
        info.copyEngineCount = prof.compute_slices
        if version == 2:
            info.name = f"MIG {prof.name}".encode()  # unverified format (stack-facts §8)
        return info

    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, device: Any, profileId: int) -> int:
        with self._lock:
            gpu = self._device(device)
            if not gpu.mig_current:
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return gpu.remaining_capacity(self._profile(gpu, profileId))

    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, device: Any, profileId: int, placementsRef: Any, countRef: Any
    ) -> int:
        with self._lock:
            gpu = self._device(device)
            prof = self._profile(gpu, profileId)  # "regardless of whether MIG is enabled or not"
            count = _deref(countRef)
            if count is None:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            if placementsRef is None:
                count.value = len(prof.starts)
                return SUCCESS
            if count.value < len(prof.starts):
                count.value = len(prof.starts)
                raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
            arr = _array(placementsRef)
            for i, start in enumerate(prof.starts):
                arr[i].start = start
                arr[i].size = prof.memory_slices
            count.value = len(prof.starts)
            return SUCCESS

    nvmlDeviceGetGpuInstancePossiblePlacements_v2 = nvmlDeviceGetGpuInstancePossiblePlacements

    # ------------------------------------------------------------------ GPU instances
    @_mutates
    def nvmlDeviceCreateGpuInstance(self, device: Any, profileId: int) -> Any:
        with self._lock:
            gpu = self._device(device)
            if not gpu.mig_current:
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            gi = gpu.create_gpu_instance(self._profile(gpu, profileId).id)
            return self._gi_handle(gpu, gi)

    @_mutates
    def nvmlDeviceCreateGpuInstanceWithPlacement(self, device: Any, profileId: int, placement: Any) -> Any:
        with self._lock:
            gpu = self._device(device)
            if not gpu.mig_current:
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            prof = self._profile(gpu, profileId)
            pl = _deref(placement)
            if pl is None:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            gi = gpu.create_gpu_instance(prof.id, int(pl.start), int(pl.size))
            return self._gi_handle(gpu, gi)

    @_mutates
    def nvmlGpuInstanceDestroy(self, gpuInstance: Any) -> int:
        with self._lock:
            gpu, gi = self._gi(gpuInstance)
            gpu.destroy_gpu_instance(gi.id)
            return SUCCESS

    def nvmlDeviceGetGpuInstances(self, device: Any, profileId: int, gpuInstancesRef: Any, countRef: Any) -> int:
        with self._lock:
            gpu = self._device(device)
            if not gpu.mig_current:
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            prof = self._profile(gpu, profileId)
            found = sorted((g for g in gpu.gpu_instances.values() if g.profile.id == prof.id), key=lambda g: g.id)
            count = _deref(countRef)
            if count is None:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            if gpuInstancesRef is not None:
                arr = _array(gpuInstancesRef)
                for i, gi in enumerate(found):
                    arr[i] = self._gi_handle(gpu, gi)
            count.value = len(found)
            return SUCCESS

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:
        with self._lock:
            gpu = self._device(device)
            if not gpu.mig_current:
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            gi = gpu.gpu_instances.get(int(gpuInstanceId))
            if gi is None:
                raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
            return self._gi_handle(gpu, gi)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        with self._lock:
            gpu, gi = self._gi(gpuInstance)
            info = pynvml.c_nvmlGpuInstanceInfo_t()
            info.device = self._gpu_handle(gpu)
            info.id = gi.id
            info.profileId = gi.profile.id
            info.placement.start = gi.start
            info.placement.size = gi.size
            return info

    # ------------------------------------------------------------------ compute instances
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, device: Any, profile: int, engProfile: int, version: int = 2
    ) -> Any:
        with self._lock:
            _, gi = self._gi(device)  # pynvml names it `device`, but it takes a GPU-instance handle
            if version not in (1, 2):
                raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            if not 0 <= int(profile) < pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            if engProfile != pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            slices = CI_PROFILE_SLICES.get(int(profile))
            if slices is None or slices > gi.profile.compute_slices:
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            info = (
                pynvml.c_nvmlComputeInstanceProfileInfo_v2_t()
                if version == 2
                else pynvml.c_nvmlComputeInstanceProfileInfo_t()
            )
            info.id = int(profile)
            info.sliceCount = slices
            info.instanceCount = gi.profile.compute_slices // slices
            if version == 2:
                name = gi.profile.name if slices == gi.profile.compute_slices else f"{slices}c.{gi.profile.name}"
                info.name = f"MIG {name}".encode()
            return info

    nvmlGpuInstanceGetComputeInstanceProfileInfoV = nvmlGpuInstanceGetComputeInstanceProfileInfo

    def _ci_profile(self, gi: GpuInstance, profileId: int) -> int:
        slices = CI_PROFILE_SLICES.get(int(profileId))
        if slices is None or slices > gi.profile.compute_slices:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(profileId)

    def nvmlGpuInstanceGetComputeInstanceRemainingCapacity(self, gpuInstance: Any, profileId: int) -> int:
        with self._lock:
            gpu, gi = self._gi(gpuInstance)
            pid = self._ci_profile(gi, profileId)
            slices = CI_PROFILE_SLICES[pid]
            used = [(c.start, c.size) for c in gi.compute_instances.values()]
            n = 0
            for s in gpu.ci_starts(gi, slices):
                if all(not (a < s + slices and s < a + b) for a, b in used):
                    used.append((s, slices))
                    n += 1
            return n

    def nvmlGpuInstanceGetComputeInstancePossiblePlacements(
        self, gpuInstance: Any, profileId: int, placementsRef: Any, countRef: Any
    ) -> int:
        with self._lock:
            gpu, gi = self._gi(gpuInstance)
            pid = self._ci_profile(gi, profileId)
            starts = gpu.ci_starts(gi, CI_PROFILE_SLICES[pid])
            count = _deref(countRef)
            if placementsRef is None:
                count.value = len(starts)
                return SUCCESS
            if count.value < len(starts):
                count.value = len(starts)
                raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
            arr = _array(placementsRef)
            for i, s in enumerate(starts):
                arr[i].start = s
                arr[i].size = CI_PROFILE_SLICES[pid]
            count.value = len(starts)
            return SUCCESS

    @_mutates
    def nvmlGpuInstanceCreateComputeInstance(self, gpuInstance: Any, profileId: int) -> Any:
        with self._lock:
            gpu, gi = self._gi(gpuInstance)
            ci = gpu.create_compute_instance(gi, self._ci_profile(gi, profileId))
            return self._ci_handle(gpu, gi, ci)

    @_mutates
    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(
        self, gpuInstance: Any, profileId: int, placement: Any
    ) -> Any:
        with self._lock:
            gpu, gi = self._gi(gpuInstance)
            pid = self._ci_profile(gi, profileId)
            pl = _deref(placement)
            if pl is None or int(pl.size) != CI_PROFILE_SLICES[pid]:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            ci = gpu.create_compute_instance(gi, pid, int(pl.start))
            return self._ci_handle(gpu, gi, ci)

    @_mutates
    def nvmlComputeInstanceDestroy(self, computeInstance: Any) -> int:
        with self._lock:
            kind, obj = self._resolve(computeInstance)
            if kind != "ci":
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            gpu, gi, ci = obj
            gpu.destroy_compute_instance(gi, ci.id)
            return SUCCESS

    def nvmlGpuInstanceGetComputeInstances(
        self, gpuInstance: Any, profileId: int, computeInstancesRef: Any, countRef: Any
    ) -> int:
        with self._lock:
            gpu, gi = self._gi(gpuInstance)
            pid = self._ci_profile(gi, profileId)
            found = sorted((c for c in gi.compute_instances.values() if c.profile_enum == pid), key=lambda c: c.id)
            count = _deref(countRef)
            if computeInstancesRef is not None:
                arr = _array(computeInstancesRef)
                for i, ci in enumerate(found):
                    arr[i] = self._ci_handle(gpu, gi, ci)
            count.value = len(found)
            return SUCCESS

    def nvmlGpuInstanceGetComputeInstanceById(self, gpuInstance: Any, computeInstanceId: int) -> Any:
        with self._lock:
            gpu, gi = self._gi(gpuInstance)
            ci = gi.compute_instances.get(int(computeInstanceId))
            if ci is None:
                raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
            return self._ci_handle(gpu, gi, ci)

    def nvmlComputeInstanceGetInfo_v2(self, computeInstance: Any) -> Any:
        with self._lock:
            kind, obj = self._resolve(computeInstance)
            if kind != "ci":
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            gpu, gi, ci = obj
            info = pynvml.c_nvmlComputeInstanceInfo_t()
            info.device = self._gpu_handle(gpu)
            info.gpuInstance = self._gi_handle(gpu, gi)
            info.id = ci.id
            info.profileId = ci.profile_enum
            info.placement.start = ci.start
            info.placement.size = ci.size
            return info

    nvmlComputeInstanceGetInfo = nvmlComputeInstanceGetInfo_v2

    # ------------------------------------------------------------------ MIG device handles
    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        with self._lock:
            gpu = self._device(device)
            return gpu.model.compute_slices if gpu.mig_current else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        with self._lock:
            gpu = self._device(device)
            if not gpu.mig_current:
                raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            if not 0 <= int(index) < gpu.model.compute_slices:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            pairs = [
                (gi, ci)
                for gi in sorted(gpu.gpu_instances.values(), key=lambda g: g.id)
                for ci in sorted(gi.compute_instances.values(), key=lambda c: c.id)
            ]
            if int(index) >= len(pairs):
                raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
            gi, ci = pairs[int(index)]
            return self._mig_handle(gpu, gi, ci)

    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> Any:
        with self._lock:
            kind, _ = self._resolve(device)
            if kind not in ("gpu", "mig"):
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            return ctypes.c_uint(1 if kind == "mig" else 0)  # pynvml quirk: the c_uint, not .value

    def _mig(self, device: Any) -> tuple[TwinGpu, GpuInstance, ComputeInstance]:
        kind, obj = self._resolve(device)
        if kind != "mig":
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu, gi, ci = obj
        return gpu, gi, ci

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        with self._lock:
            return self._mig(device)[1].id

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        with self._lock:
            return self._mig(device)[2].id

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        with self._lock:
            return self._gpu_handle(self._mig(migDevice)[0])

    # ------------------------------------------------------------------ processes
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        with self._lock:
            gpu, ci, gi = self._any_device(handle)
            rows: list[tuple[str, int, int]] = []
            if ci is not None and gi is not None:
                if ci.holder:
                    rows.append((ci.holder, gi.id, ci.id))
            else:
                if gpu.holder:
                    rows.append((gpu.holder, 0xFFFFFFFF, 0xFFFFFFFF))
                for g, c in gpu.iter_cis():
                    if c.holder:
                        rows.append((c.holder, g.id, c.id))
            out = []
            for holder, gi_id, ci_id in rows:
                info = pynvml.c_nvmlProcessInfo_v3_t()
                info.pid = gpu.pid_of(holder)
                info.usedGpuMemory = 0
                info.gpuInstanceId = gi_id
                info.computeInstanceId = ci_id
                out.append(pynvml.nvmlStructToFriendlyObject(info))
            return out

    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses
