"""NVML adapter: the node agent's only way to the GPUs, and the only module that imports pynvml.

`NvmlGpu` is a context manager (`with NvmlGpu() as gpus:`) that calls nvmlInit/nvmlShutdown around one
agent pass and never at import time, so `import reconciler` works on machines without libnvidia-ml.
The pynvml module is injectable (`NvmlGpu(nvml=twin_module)`): tests hand it the NVML twin, production
leaves it None and gets the module `load_nvml_module` names: `pynvml` from nvidia-ml-py, or the module the
environment variable PYNVML_MODULE names (anything with pynvml's surface: how `migplan agent` runs against
`migplan twin`'s NVML, docs/how-to/observe-the-twin.md). Either is only ever called as pynvml.
The calls follow nvidia-ml-py's own conventions exactly (ctypes arrays and `byref` counts for the list calls,
profile *ids* from `nvmlDeviceGetGpuInstanceProfileInfo(...).id`, not profile enums, for create/list/placements).

Every NVMLError is translated at this edge into reconciler.model.errors: IN_USE → Waiting (someone
must stop their processes), UNKNOWN/GPU_IS_LOST/TIMEOUT/DRIVER_NOT_LOADED → Transient, anything else
→ MigplanError with code `NVML_ERROR_<NAME>` and NVML's own message. Nothing above adapters/ ever
sees a pynvml exception.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import re
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from reconciler.catalog import Catalog, GpuModel, ProfileTable, load_catalog, memory_derived_gb
from reconciler.logic.planning.agentplan import MigMode, ObservedGpu, ObservedInstance
from reconciler.model.errors import MigplanError, Transient, Waiting
from reconciler.model.inventory import Placement

if TYPE_CHECKING:
    from reconciler.agent import GpuPort
    from reconciler.observer import GpuSurveyPort

# NVML return codes (nvml.h; same values in pynvml) that decide the error kind.
_IN_USE = 19
_TRANSIENT = {
    999,  # UNKNOWN
    15,  # GPU_IS_LOST
    10,  # TIMEOUT
    9,  # DRIVER_NOT_LOADED
    1,  # UNINITIALIZED
}
_NOT_SUPPORTED = 3
_NOT_FOUND = 6
_INVALID_ARGUMENT = 2

# Compute-instance profile enum per compute-slice count (NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE): the
# agent creates one compute instance spanning the whole GPU instance, as mig-parted does for "<G>g" names.
_CI_PROFILE_FOR_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
_CI_ENGINE_PROFILE_SHARED = 0


NVML_MODULE_ENV = "PYNVML_MODULE"
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# What every caller below uses unconditionally: a module without these is not pynvml-shaped.
_REQUIRED = ("nvmlInit", "nvmlShutdown", "NVMLError", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex")


def load_nvml_module() -> Any:
    """The pynvml module: `pynvml`, or the module PYNVML_MODULE names (MP985 when it cannot be imported,
    MP986 when it lacks pynvml's surface). Imported on first use, never at migplan's import."""
    name = os.environ.get(NVML_MODULE_ENV, "").strip() or "pynvml"
    if len(name) > 200 or not _MODULE_NAME.fullmatch(name):
        raise MigplanError(f"{NVML_MODULE_ENV}={name[:200]!r} is not a Python module name", code="MP985")
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # any failure of the import is the same answer for the user: no NVML module
        raise MigplanError(f"cannot import the NVML module {name!r}: {exc}", code="MP985") from exc
    missing = [attr for attr in _REQUIRED if not hasattr(module, attr)]
    if missing or not (isinstance(module.NVMLError, type) and issubclass(module.NVMLError, BaseException)):
        raise MigplanError(
            f"the NVML module {name!r} does not have pynvml's surface (missing: {', '.join(missing) or 'NVMLError'})",
            code="MP986",
        )
    return module


def _code_name(nvml: Any, code: int) -> str:
    for name, value in vars(nvml).items():
        if name.startswith("NVML_ERROR_") and value == code:
            return str(name)
    return f"NVML_ERROR_{code}"


@contextlib.contextmanager
def translate_nvml_errors(nvml: Any, what: str) -> Iterator[None]:
    """Run NVML calls, turning NVMLError into our error kinds (with the cause chained)."""
    try:
        yield
    except nvml.NVMLError as exc:
        code = int(getattr(exc, "value", 0) or 0)
        message = f"{what}: {exc}"
        if code == _IN_USE:
            raise Waiting(message) from exc
        if code in _TRANSIENT:
            raise Transient(message) from exc
        raise MigplanError(message, code=_code_name(nvml, code)) from exc


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlGpu:
    """The node's GPUs through NVML (implements reconciler.agent.GpuPort)."""

    def __init__(self, nvml: Any = None, *, catalog: Catalog | None = None) -> None:
        # `nvml`: anything with pynvml's surface (the module itself, or the NVML twin object).
        self._injected = nvml
        self._nvml: Any = None
        self._catalog = catalog or load_catalog()

    # --- lifecycle ------------------------------------------------------------------------------------

    def __enter__(self) -> NvmlGpu:
        nvml = self._injected
        if nvml is None:
            nvml = load_nvml_module()  # here, not at module level: no libnvidia-ml needed to import migplan
        with translate_nvml_errors(nvml, "nvmlInit"):
            nvml.nvmlInit()
        self._nvml = nvml
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        nvml, self._nvml = self._nvml, None
        if nvml is not None:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlShutdown()

    @property
    def nvml(self) -> Any:
        if self._nvml is None:
            raise MigplanError("NvmlGpu used outside its `with` block", code="MP900")
        return self._nvml

    # --- helpers --------------------------------------------------------------------------------------

    def _handle(self, index: int) -> Any:
        with translate_nvml_errors(self.nvml, f"gpu {index}: get handle"):
            return self.nvml.nvmlDeviceGetHandleByIndex(index)

    def _model(self, handle: Any) -> GpuModel | None:
        with translate_nvml_errors(self.nvml, "get device name"):
            name = _text(self.nvml.nvmlDeviceGetName(handle))
        return self._catalog.resolve(name)

    def _profile_ids(self, handle: Any, model: GpuModel | None) -> dict[str, int]:
        """profile name -> NVML profile id on this device (ids are device specific)."""
        out: dict[str, int] = {}
        if model is None:
            return out
        nvml = self.nvml
        renamed = bool(model.profiles.renames) if isinstance(model.profiles, ProfileTable) else False
        total = 0
        if renamed:
            # A model with two documented namings (GB200): name each profile as this device's driver does
            # (go-nvlib derives the <N>gb from the memory), so plans and observations use the node's own names.
            # Best effort: without the memory the catalog's names stay (total 0 derives no other name).
            with contextlib.suppress(nvml.NVMLError):
                total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
        for p in model.profiles.values():
            try:
                info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, p.nvml_profile_value)
            except nvml.NVMLError as exc:
                # NOT_SUPPORTED: this device (or driver) does not offer the profile; INVALID_ARGUMENT: the
                # enum is past the driver's range. Both mean "not offered", nothing to report.
                if getattr(exc, "value", None) in (_NOT_SUPPORTED, _INVALID_ARGUMENT, _NOT_FOUND):
                    continue
                with translate_nvml_errors(nvml, f"profile info {p.name}"):
                    raise
            name = p.name
            if renamed:
                name = model.name_on_device(p.name, memory_derived_gb(total, int(info.memorySizeMB)))
            out[name] = int(info.id)
        return out

    def _possible(self, handle: Any, profile_id: int) -> tuple[Placement, ...]:
        nvml = self.nvml
        count = ctypes.c_uint(0)
        with translate_nvml_errors(nvml, "possible placements"):
            # First call with no array to learn the count, as NVML's API asks.
            nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, None, ctypes.byref(count))
            if count.value == 0:
                return ()
            array = (nvml.c_nvmlGpuInstancePlacement_t * count.value)()
            nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, array, ctypes.byref(count))
        return tuple(Placement(int(array[i].start), int(array[i].size)) for i in range(count.value))

    def _gpu_instances(self, handle: Any, profile_id: int) -> list[Any]:
        nvml = self.nvml
        size = 8  # at most 8 memory slices, so never more than 8 instances of one profile
        array = (nvml.c_nvmlGpuInstance_t * size)()
        count = ctypes.c_uint(size)
        with translate_nvml_errors(nvml, "list GPU instances"):
            nvml.nvmlDeviceGetGpuInstances(handle, profile_id, array, ctypes.byref(count))
        return [array[i] for i in range(count.value)]

    def _compute_instances(self, gi: Any) -> list[Any]:
        nvml = self.nvml
        out: list[Any] = []
        for ci_enum in sorted(set(_CI_PROFILE_FOR_SLICES.values())):
            try:
                info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, ci_enum, _CI_ENGINE_PROFILE_SHARED)
            except nvml.NVMLError:
                continue  # profile not offered by this GPU instance
            array = (nvml.c_nvmlComputeInstance_t * 8)()
            count = ctypes.c_uint(8)
            with translate_nvml_errors(nvml, "list compute instances"):
                nvml.nvmlGpuInstanceGetComputeInstances(gi, info.id, array, ctypes.byref(count))
            out.extend(array[i] for i in range(count.value))
        return out

    def _mig_devices(self, handle: Any) -> dict[int, tuple[str, tuple[int, ...]]]:
        """GPU instance id -> (first MIG device UUID, PIDs running on any of its MIG devices)."""
        return {gi: (uuids[0], pids) for gi, (uuids, pids) in self._mig_device_uuids(handle).items()}

    def _mig_device_uuids(self, handle: Any) -> dict[int, tuple[tuple[str, ...], tuple[int, ...]]]:
        """GPU instance id -> (every MIG device UUID, in NVML's MIG-device order; PIDs on any of them)."""
        nvml = self.nvml
        out: dict[int, tuple[tuple[str, ...], tuple[int, ...]]] = {}
        with translate_nvml_errors(nvml, "max MIG device count"):
            slots = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
        for k in range(slots):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, k)
            except nvml.NVMLError as exc:
                # NOT_FOUND (and INVALID_ARGUMENT, which go-nvlib also skips): no MIG device in that slot.
                if getattr(exc, "value", None) in (_NOT_FOUND, _INVALID_ARGUMENT):
                    continue
                with translate_nvml_errors(nvml, "MIG device handle"):
                    raise
            with translate_nvml_errors(nvml, "MIG device"):
                gi_id = int(nvml.nvmlDeviceGetGpuInstanceId(mig))
                uuid = _text(nvml.nvmlDeviceGetUUID(mig))
            try:
                procs = nvml.nvmlDeviceGetComputeRunningProcesses(mig)
                pids = tuple(sorted(int(p.pid) for p in procs))
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) != _NOT_SUPPORTED:
                    with translate_nvml_errors(nvml, "running processes"):
                        raise
                pids = ()
            prev_uuids, prev_pids = out.get(gi_id, ((), ()))
            out[gi_id] = ((*prev_uuids, uuid), tuple(sorted({*prev_pids, *pids})))
        return out

    # --- GpuPort --------------------------------------------------------------------------------------

    def _count(self) -> int:
        with translate_nvml_errors(self.nvml, "device count"):
            return int(self.nvml.nvmlDeviceGetCount())

    def observe(self) -> tuple[ObservedGpu, ...]:
        """Every GPU, or the first NVML error (the actuator must not plan on a partial read)."""
        return tuple(self._observe_gpu(index) for index in range(self._count()))

    def survey(self) -> tuple[tuple[ObservedGpu, ...], tuple[str, ...]]:
        """Every GPU NVML can read, and one line per GPU it cannot (reconciler.observer.GpuSurveyPort).

        The observer publishes what it could read; a GPU whose MIG mode or instances NVML refuses is left
        out and named, never published with a guessed layout. The device count failing raises."""
        read: list[ObservedGpu] = []
        problems: list[str] = []
        for index in range(self._count()):
            try:
                read.append(self._observe_gpu(index))
            except MigplanError as exc:
                where = "" if exc.message.startswith(f"gpu {index}:") else f"gpu {index}: "
                problems.append(f"{where}{exc.message} [{exc.code}]")
        return tuple(read), tuple(problems)

    def _observe_gpu(self, index: int) -> ObservedGpu:
        nvml = self.nvml
        handle = self._handle(index)
        with translate_nvml_errors(nvml, f"gpu {index}: name/uuid"):
            name = _text(nvml.nvmlDeviceGetName(handle))
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        try:
            current, pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) != _NOT_SUPPORTED:
                with translate_nvml_errors(nvml, f"gpu {index}: MIG mode"):
                    raise
            # NOT_SUPPORTED is NVML's way of saying "not MIG-capable" (mig-parted's IsMigCapable).
            return ObservedGpu(index, uuid, name, False, False, False, minor=self._minor(handle))
        model = self._catalog.resolve(name)
        ids = self._profile_ids(handle, model)
        possible = {p: self._possible(handle, pid) for p, pid in ids.items()}
        instances: list[ObservedInstance] = []
        if current:
            names = {pid: p for p, pid in ids.items()}
            devices = self._mig_device_uuids(handle)
            for pid in sorted(set(ids.values())):
                for gi in self._gpu_instances(handle, pid):
                    with translate_nvml_errors(nvml, f"gpu {index}: instance info"):
                        info = nvml.nvmlGpuInstanceGetInfo(gi)
                    gi_id = int(info.id)
                    uuids, pids = devices.get(gi_id, ((), ()))
                    instances.append(
                        ObservedInstance(
                            gpu_instance_id=gi_id,
                            profile=names.get(int(info.profileId), f"profile-id:{int(info.profileId)}"),
                            placement=Placement(int(info.placement.start), int(info.placement.size)),
                            uuid=uuids[0] if uuids else None,
                            processes=pids,
                            compute_uuids=uuids if len(uuids) > 1 else (),
                        )
                    )
        instances.sort(key=lambda i: i.placement.start)
        return ObservedGpu(
            index=index,
            uuid=uuid,
            name=name,
            mig_capable=True,
            mig_current=bool(current),
            mig_pending=bool(pending),
            instances=tuple(instances),
            possible={k: v for k, v in possible.items() if v},
            minor=self._minor(handle),
        )

    def _minor(self, handle: Any) -> int | None:
        """The GPU's minor number (NVIDIA's DRA driver names devices by it), None when NVML cannot say.

        Best effort on purpose: a driver without it must not cost the GPU its observation, only the join of
        DRA holders (which then show as unknown devices, never as free partitions on the wrong GPU).
        """
        nvml = self.nvml
        getter = getattr(nvml, "nvmlDeviceGetMinorNumber", None)
        if getter is None:
            return None
        try:
            minor = int(getter(handle))
        except nvml.NVMLError:
            return None
        return minor if 0 <= minor <= 255 else None

    def set_mig_mode(self, index: int, *, enabled: bool) -> MigMode:
        nvml = self.nvml
        handle = self._handle(index)
        mode = nvml.NVML_DEVICE_MIG_ENABLE if enabled else nvml.NVML_DEVICE_MIG_DISABLE
        with translate_nvml_errors(nvml, f"gpu {index}: set MIG mode"):
            # SetMigMode returns the activation status instead of raising it: IN_USE means the driver
            # could not reset the GPU because it is busy, RESET_REQUIRED that a reset must follow.
            activation = int(nvml.nvmlDeviceSetMigMode(handle, mode) or 0)
            current, pending = nvml.nvmlDeviceGetMigMode(handle)
        if activation == _IN_USE:
            raise Waiting(f"gpu {index}: MIG mode change pending: the GPU is in use (NVML_ERROR_IN_USE)")
        return MigMode(current=bool(current), pending=bool(pending), activation_status=activation)

    def create_instance(self, index: int, *, profile: str, placement: Placement) -> ObservedInstance:
        nvml = self.nvml
        handle = self._handle(index)
        model = self._model(handle)
        prof = model.profiles.get(profile) if model else None
        if model is None or prof is None:
            raise MigplanError(f"gpu {index}: profile {profile} is not known for this GPU", code="MP901")
        where = f"gpu {index}: create {profile}@{placement}"
        with translate_nvml_errors(nvml, where):
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, prof.nvml_profile_value)
            pl = nvml.c_nvmlGpuInstancePlacement_t()
            pl.start = placement.start
            pl.size = placement.size
            gi = nvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, info.id, ctypes.byref(pl))
            gi_info = nvml.nvmlGpuInstanceGetInfo(gi)
        try:
            with translate_nvml_errors(nvml, f"{where}: compute instance"):
                ci_enum = _CI_PROFILE_FOR_SLICES[prof.compute_slices]
                ci_info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, ci_enum, _CI_ENGINE_PROFILE_SHARED)
                nvml.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id)
        except MigplanError:
            # Do not leave a GPU instance without its compute instance behind: roll back.
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlGpuInstanceDestroy(gi)
            raise
        gi_id = int(gi_info.id)
        uuid = self._mig_devices(handle).get(gi_id, (None, ()))[0]
        return ObservedInstance(
            gpu_instance_id=gi_id,
            profile=profile,
            placement=Placement(int(gi_info.placement.start), int(gi_info.placement.size)),
            uuid=uuid,
        )

    def destroy_instance(self, index: int, *, gpu_instance_id: int) -> None:
        nvml = self.nvml
        handle = self._handle(index)
        where = f"gpu {index}: destroy gpu instance {gpu_instance_id}"
        with translate_nvml_errors(nvml, where):
            gi = nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance_id)
        # Compute instances first: NVML refuses to destroy a GPU instance that still has some (IN_USE).
        for ci in self._compute_instances(gi):
            with translate_nvml_errors(nvml, f"{where}: compute instance"):
                nvml.nvmlComputeInstanceDestroy(ci)
        with translate_nvml_errors(nvml, where):
            nvml.nvmlGpuInstanceDestroy(gi)


if TYPE_CHECKING:

    def _conforms(x: NvmlGpu) -> GpuPort:
        return x

    def _surveys(x: NvmlGpu) -> GpuSurveyPort:
        return x
