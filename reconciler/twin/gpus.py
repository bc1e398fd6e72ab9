"""Per-GPU MIG state of the cluster twin, shared by the NVML twin and the GPU Operator twin.

One `TwinGpu` is one physical GPU: its MIG mode (current and pending), its GPU instances (GIs) with their
placements, the compute instances (CIs) inside them, and which pod holds each MIG device. The NVML twin
(reconciler/twin/nvml) exposes it with pynvml's surface; mig-manager, the device plugin and the scheduler
(reconciler/twin/operator) read and change the same objects, so a layout applied through either path is seen
by both.

Rules are taken from tests/reference/stack-facts.md §6 and the GPU catalog (reconciler/catalog), never from
migplan's own planner. Errors are pynvml's own exception classes (`pynvml.NVMLError(code)` builds the
`NVMLError_<Name>` subclass), so callers see exactly what the real library raises.

Assumptions where the references are silent (also listed in reconciler/twin/ASSUMPTIONS-operator.md):
* Occupied-but-valid placement in CreateGpuInstanceWithPlacement → NVML_ERROR_INSUFFICIENT_RESOURCES
  (stack-facts §8 leaves it open; the only NVIDIA example of an overlap conflict printed "Insufficient
  Resources"). A placement that is not in the profile's placement table → NVML_ERROR_INVALID_ARGUMENT.
* Automatic placement (CreateGpuInstance without placement) takes the free candidate with the HIGHEST start.
  That is the only simple policy that reproduces the MIG User Guide example (A100: 1g, 1g, 2g, then 3g →
  Insufficient Resources); lowest-first would place the 3g at 4 and succeed.
* GPU-instance ids are the lowest free id starting at 1 (real ids are placement-specific and unpublished for
  most models); compute-instance ids start at 0 inside each GI.
* Catalog gaps: a profile without an nvidia-smi id or placement table borrows those of the same NVML enum on
  a catalog model with the same compute/memory slice geometry that has them (H100-80GB for the 7/8 models).
* MIG mode: SetMigMode records the pending mode; when the GPU is idle (no GI, no pod holding it) and
  `resets_on_mode_change` is true (bare metal: "the driver will attempt to reset the GPU"), current becomes
  pending at once and the activation status is NVML_SUCCESS. If the GPU is busy the activation status is
  NVML_ERROR_IN_USE; in a pass-through VM (`resets_on_mode_change=False`) it is NVML_ERROR_RESET_REQUIRED and
  the mode takes effect on `reset()`.
"""

from __future__ import annotations

import hashlib
import operator
import threading
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pynvml

from reconciler.catalog import GpuModel, Profile, load_catalog

__all__ = [
    "ComputeInstance",
    "GiProfile",
    "GpuInstance",
    "MigDevice",
    "TwinGpu",
    "gi_profiles",
    "nvml_error",
]

_BY_ID = operator.attrgetter("id")  # GPU and compute instances in NVML's index order

# CI profile enums → compute slices; only the C == G family and its integer sub-divisions are modelled.
CI_PROFILE_SLICES: dict[int, int] = {
    pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE: 1,
    pynvml.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE: 2,
    pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE: 3,
    pynvml.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE: 4,
    pynvml.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE: 7,
}
SLICES_TO_CI_PROFILE = {v: k for k, v in CI_PROFILE_SLICES.items()}


SUCCESS: int = int(pynvml.NVML_SUCCESS)
IN_USE: int = int(pynvml.NVML_ERROR_IN_USE)
RESET_REQUIRED: int = int(pynvml.NVML_ERROR_RESET_REQUIRED)


def nvml_error(code: int) -> pynvml.NVMLError:
    """pynvml's own exception for an NVML return code (NVMLError_InUse for 19, ...)."""
    return pynvml.NVMLError(code)


@dataclass(frozen=True, slots=True)
class GiProfile:
    """A GPU-instance profile as NVML describes it on one GPU model."""

    name: str  # "3g.71gb"
    enum: int  # NVML_GPU_INSTANCE_PROFILE_* value
    id: int  # nvmlGpuInstanceProfileInfo_t.id (nvidia-smi "ID" column)
    compute_slices: int
    memory_slices: int
    max_instances: int
    starts: tuple[int, ...]  # possible placements, memory-slice units
    memory_mb: int


def _borrow(model: GpuModel, prof: Profile) -> tuple[int | None, tuple[int, ...] | None]:
    """Fill a catalog gap (id or placements) from the same enum on a same-geometry model."""
    pid = prof.profile_id
    starts = prof.placements.starts if prof.placements else None
    if pid is not None and starts is not None:
        return pid, starts
    for other in load_catalog():
        if (other.compute_slices, other.memory_slices) != (model.compute_slices, model.memory_slices):
            continue
        for op in other.profiles.values():
            if op.nvml_profile_value != prof.nvml_profile_value or op.memory_slices != prof.memory_slices:
                continue
            if pid is None and op.profile_id is not None:
                pid = op.profile_id
            if starts is None and op.placements is not None:
                starts = op.placements.starts
    return pid, starts


def _memory_mb(prof: Profile) -> int:
    if prof.memory_gib is not None:
        return int(prof.memory_gib * 1024)
    # The profile name carries the rounded size in GB ("3g.40gb"); good enough for a twin (documented).
    gb = prof.name.split(".", 1)[1].split("gb", 1)[0]
    return int(float(gb) * 1024)


_PROFILE_CACHE: dict[str, dict[int, GiProfile]] = {}
_NAMESPACE_URL = uuid.NAMESPACE_URL.bytes


def uuid5_url(name: str) -> str:
    """`str(uuid.uuid5(uuid.NAMESPACE_URL, name))`, the same text, without building a UUID object: RFC 4122's
    name-based SHA-1 UUID (the first 16 bytes of SHA-1(namespace + name), version 5, variant RFC 4122). A
    5,000-node twin derives over 400,000 of them while it starts (device plugin IDs, DRA ResourceSlices)."""
    d = bytearray(hashlib.sha1(_NAMESPACE_URL + name.encode()).digest()[:16])
    d[6] = (d[6] & 0x0F) | 0x50  # version 5
    d[8] = (d[8] & 0x3F) | 0x80  # variant RFC 4122
    h = d.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def gi_profiles(model: GpuModel) -> dict[int, GiProfile]:
    """The model's GPU-instance profiles keyed by NVML enum (profiles whose gaps cannot be filled are left out)."""
    cached = _PROFILE_CACHE.get(model.key)
    if cached is not None:
        return cached
    out: dict[int, GiProfile] = {}
    for prof in model.profiles.values():
        pid, starts = _borrow(model, prof)
        if pid is None or starts is None:
            continue
        out[prof.nvml_profile_value] = GiProfile(
            name=prof.name,
            enum=prof.nvml_profile_value,
            id=pid,
            compute_slices=prof.compute_slices,
            memory_slices=prof.memory_slices,
            max_instances=prof.max_instances,
            starts=tuple(starts),
            memory_mb=_memory_mb(prof),
        )
    _PROFILE_CACHE[model.key] = out
    return out


@dataclass(slots=True)
class ComputeInstance:
    id: int
    profile_enum: int  # NVML_COMPUTE_INSTANCE_PROFILE_*; also its profile id in the twin
    start: int  # compute-slice units inside the GI
    size: int
    serial: int  # unique per creation: NVML handles of destroyed instances stay invalid
    uuid_seed: str  # the MIG device UUID is derived from it on demand (uuid5 is slow at 40,000 GPUs)
    holder: str | None = None  # "namespace/pod" holding this MIG device

    @property
    def uuid(self) -> str:
        return "MIG-" + uuid5_url(self.uuid_seed)


@dataclass(slots=True)
class GpuInstance:
    id: int
    profile: GiProfile
    start: int  # memory-slice units
    serial: int
    compute_instances: dict[int, ComputeInstance] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.profile.memory_slices

    def overlaps(self, start: int, size: int) -> bool:
        return self.start < start + size and start < self.start + self.size


@dataclass(frozen=True, slots=True)
class MigDevice:
    """One MIG device as go-nvlib and the device plugin see it: a CI inside a GI."""

    gpu_index: int
    gi_id: int
    ci_id: int
    profile: str  # "3g.71gb", or "1c.3g.71gb" for a CI smaller than its GI
    start: int
    size: int
    uuid_seed: str
    holder: str | None

    @property
    def uuid(self) -> str:
        return "MIG-" + uuid5_url(self.uuid_seed)


class TwinGpu:
    """One GPU of a twin node. All mutators run under the node lock (`self.lock`)."""

    def __init__(
        self,
        *,
        node: str,
        index: int,
        model: GpuModel,
        mig_enabled: bool = False,
        resets_on_mode_change: bool = True,
        reset_needs_reboot: bool = False,
        lock: threading.RLock | None = None,
        pci_subsystem_id: int = 0,
        minor: int | None = None,
    ) -> None:
        self.node = node
        self.index = index
        # /dev/nvidia<minor>: usually the index, but the driver numbers device files and NVML orders GPUs by PCI
        # bus, so the two may differ; a test can set it apart to catch a join on the wrong one
        self.minor = index if minor is None else minor
        self.model = model
        self.profiles = gi_profiles(model)
        self.profiles_by_id = {p.id: p for p in self.profiles.values()}
        self.mig_current = mig_enabled
        self.mig_pending = mig_enabled
        self.resets_on_mode_change = resets_on_mode_change
        # CSP/pass-through VMs: `nvidia-smi -r` cannot make a MIG mode change effective, only a reboot can
        # (stack-facts §6 "VM pass-through ... may require a VM reboot"; §3.3 WITH_REBOOT).
        self.reset_needs_reboot = reset_needs_reboot
        self.lock = lock if lock is not None else threading.RLock()
        # PCI subsystem device + vendor, packed as mig-parted's filters write them (0x<subdevice><subvendor>): the
        # board maker's id, which mig-parted's `device-filter: "0x<dev><ven>:0x<subdev><subven>"` also matches.
        self.pci_subsystem_id = pci_subsystem_id
        self.gpu_instances: dict[int, GpuInstance] = {}
        self.holder: str | None = None  # pod holding the whole GPU (MIG disabled, or strategy none)
        self._serial = 0
        self._uuid: str | None = None

    @property
    def uuid(self) -> str:
        # derived once: node and index never change, and the device plugin and the DRA plugin ask per device
        if self._uuid is None:
            self._uuid = "GPU-" + uuid5_url(f"migplan-twin/{self.node}/{self.index}")
        return self._uuid

    # ----------------------------------------------------------------- descriptive
    @property
    def name(self) -> str:
        return self.model.nvml_names[0] if self.model.nvml_names else self.model.key

    @property
    def pci_device_id(self) -> int:
        return int(self.model.pci_device_ids[0], 16) if self.model.pci_device_ids else 0

    @property
    def bus_id(self) -> str:
        return f"00000000:{0x18 + self.index * 0x10:02X}:00.0"

    def profile_by_name(self, name: str) -> GiProfile | None:
        for p in self.profiles.values():
            if p.name == name:
                return p
        return None

    def _next_serial(self) -> int:
        self._serial += 1
        return self._serial

    # ----------------------------------------------------------------- occupancy
    def busy(self) -> bool:
        """True when a pod holds the GPU or any of its MIG devices (processes are running)."""
        if self.holder is not None:
            return True
        return any(ci.holder for gi in self.gpu_instances.values() for ci in gi.compute_instances.values())

    def mig_devices(self) -> list[MigDevice]:
        """MIG devices in NVML's MIG-device index order (by GI id, then CI id)."""
        if not self.mig_current:
            return []
        out = []
        for gi in sorted(self.gpu_instances.values(), key=lambda g: g.id):
            for ci in sorted(gi.compute_instances.values(), key=lambda c: c.id):
                prof = gi.profile.name if ci.size == gi.profile.compute_slices else f"{ci.size}c.{gi.profile.name}"
                out.append(MigDevice(self.index, gi.id, ci.id, prof, gi.start, gi.size, ci.uuid_seed, ci.holder))
        return out

    def mig_profiles(self) -> list[str]:
        """The profile of each MIG device, in mig_devices() order: what GFD's labels and `mig-parted assert`
        count, without building the devices (GFD relabels a node on every one of its writes)."""
        if not self.mig_current:
            return []
        out = []
        gis = self.gpu_instances
        for gi in sorted(gis.values(), key=_BY_ID) if len(gis) > 1 else gis.values():
            name, slices, cis = gi.profile.name, gi.profile.compute_slices, gi.compute_instances
            for ci in sorted(cis.values(), key=_BY_ID) if len(cis) > 1 else cis.values():
                out.append(name if ci.size == slices else f"{ci.size}c.{name}")
        return out

    def iter_cis(self) -> Iterator[tuple[GpuInstance, ComputeInstance]]:
        for gi in self.gpu_instances.values():
            for ci in gi.compute_instances.values():
                yield gi, ci

    # ----------------------------------------------------------------- MIG mode
    def set_mig_mode(self, enabled: bool) -> int:
        """nvmlDeviceSetMigMode: records the pending mode; returns the activation status (an NVML code)."""
        self.mig_pending = enabled
        if self.mig_pending == self.mig_current:
            return SUCCESS
        if self.busy() or self.gpu_instances:
            return IN_USE
        if not self.resets_on_mode_change or self.reset_needs_reboot:
            return RESET_REQUIRED
        self._activate()
        return SUCCESS

    def reset(self) -> bool:
        """A GPU reset (nvidia-smi -r): the pending MIG mode takes effect if the GPU is idle (and not in a VM
        that needs a reboot for it)."""
        if self.busy() or (self.reset_needs_reboot and self.mig_current != self.mig_pending):
            return False
        self._activate()
        return True

    def reboot(self) -> None:
        """The node reboots: processes are gone, MIG devices do not survive, the pending MIG mode takes effect."""
        self.holder = None
        self.gpu_instances.clear()
        self._activate()

    def _activate(self) -> None:
        if self.mig_current != self.mig_pending:
            self.gpu_instances.clear()  # MIG devices do not survive a mode change
        self.mig_current = self.mig_pending

    # ----------------------------------------------------------------- GPU instances
    def _require_mig(self) -> None:
        if not self.mig_current:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def _fits(self, prof: GiProfile, start: int) -> bool:
        return not any(gi.overlaps(start, prof.memory_slices) for gi in self.gpu_instances.values())

    def _compute_used(self) -> int:
        return sum(gi.profile.compute_slices for gi in self.gpu_instances.values())

    def _count(self, prof: GiProfile) -> int:
        return sum(1 for gi in self.gpu_instances.values() if gi.profile.id == prof.id)

    def remaining_capacity(self, prof: GiProfile) -> int:
        """How many more instances of `prof` could be created now (greedy is exact for equal-size intervals)."""
        if not self.mig_current:
            return 0
        room = min(
            prof.max_instances - self._count(prof),
            (self.model.compute_slices - self._compute_used()) // prof.compute_slices,
        )
        taken: list[tuple[int, int]] = [(gi.start, gi.size) for gi in self.gpu_instances.values()]
        n = 0
        for s in sorted(prof.starts):
            if n >= room:
                break
            if all(not (a < s + prof.memory_slices and s < a + b) for a, b in taken):
                taken.append((s, prof.memory_slices))
                n += 1
        return max(n, 0)

    def create_gpu_instance(self, profile_id: int, start: int | None = None, size: int | None = None) -> GpuInstance:
        """nvmlDeviceCreateGpuInstance[WithPlacement]; raises pynvml errors like the real library."""
        self._require_mig()
        prof = self.profiles_by_id.get(profile_id)
        if prof is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if start is not None and (start not in prof.starts or size != prof.memory_slices):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if self._count(prof) >= prof.max_instances:
            raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        if self._compute_used() + prof.compute_slices > self.model.compute_slices:
            raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        if start is None:
            free = [s for s in sorted(prof.starts, reverse=True) if self._fits(prof, s)]
            if not free:
                raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
            start = free[0]
        elif not self._fits(prof, start):
            raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi_id = 1
        while gi_id in self.gpu_instances:
            gi_id += 1
        gi = GpuInstance(id=gi_id, profile=prof, start=start, serial=self._next_serial())
        self.gpu_instances[gi_id] = gi
        return gi

    def destroy_gpu_instance(self, gi_id: int) -> None:
        gi = self.gpu_instances.get(gi_id)
        if gi is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if gi.compute_instances:  # "processes ... or compute instances are active on the GPU instance"
            raise nvml_error(pynvml.NVML_ERROR_IN_USE)
        del self.gpu_instances[gi_id]

    # ----------------------------------------------------------------- compute instances
    def ci_starts(self, gi: GpuInstance, slices: int) -> tuple[int, ...]:
        g = gi.profile.compute_slices
        return tuple(s for s in range(0, g - slices + 1, slices))

    def create_compute_instance(self, gi: GpuInstance, ci_profile: int, start: int | None = None) -> ComputeInstance:
        slices = CI_PROFILE_SLICES.get(ci_profile)
        if slices is None or slices > gi.profile.compute_slices:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        starts = self.ci_starts(gi, slices)
        used = [(c.start, c.size) for c in gi.compute_instances.values()]

        def free(s: int) -> bool:
            return all(not (a < s + slices and s < a + b) for a, b in used)

        if start is not None:
            if start not in starts:
                raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            if not free(start):
                raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        else:
            cands = [s for s in starts if free(s)]
            if not cands:
                raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
            start = cands[0]
        ci_id = 0
        while ci_id in gi.compute_instances:
            ci_id += 1
        serial = self._next_serial()
        seed = f"migplan-twin/{self.node}/{self.index}/{serial}"
        ci = ComputeInstance(id=ci_id, profile_enum=ci_profile, start=start, size=slices, serial=serial, uuid_seed=seed)
        gi.compute_instances[ci_id] = ci
        return ci

    def destroy_compute_instance(self, gi: GpuInstance, ci_id: int) -> None:
        ci = gi.compute_instances.get(ci_id)
        if ci is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if ci.holder is not None:
            raise nvml_error(pynvml.NVML_ERROR_IN_USE)
        del gi.compute_instances[ci_id]

    # ----------------------------------------------------------------- conveniences for fleets/mig-manager
    def add_partition(self, profile: str, start: int | None = None) -> tuple[GpuInstance, ComputeInstance]:
        """Create a GI of `profile` (at `start`, or auto-placed) with one full-size CI, as mig-parted does."""
        prof = self.profile_by_name(profile)
        if prof is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        gi = self.create_gpu_instance(prof.id, start, prof.memory_slices if start is not None else None)
        ci = self.create_compute_instance(gi, SLICES_TO_CI_PROFILE.get(prof.compute_slices, 0))
        return gi, ci

    def replay_partition(self, profile: str, start: int, gi_id: int, ci_id: int, ci_profile: int) -> None:
        """Recreate a GI+CI exactly as an earlier, checked add_partition() on an identical empty GPU made it."""
        prof = self.profile_by_name(profile)
        assert prof is not None
        gi = GpuInstance(id=gi_id, profile=prof, start=start, serial=self._next_serial())
        serial = self._next_serial()
        gi.compute_instances[ci_id] = ComputeInstance(
            id=ci_id,
            profile_enum=ci_profile,
            start=0,
            size=CI_PROFILE_SLICES[ci_profile],
            serial=serial,
            uuid_seed=f"migplan-twin/{self.node}/{self.index}/{serial}",
        )
        self.gpu_instances[gi_id] = gi

    def clear(self) -> None:
        """Destroy every CI then GI (mig-parted's ClearMigConfig); IN_USE if a pod holds one."""
        for gi in list(self.gpu_instances.values()):
            for ci_id in list(gi.compute_instances):
                self.destroy_compute_instance(gi, ci_id)
            self.destroy_gpu_instance(gi.id)

    def geometry(self) -> dict[str, int]:
        """Profile → count of MIG devices (what `mig-parted assert` compares, placement ignored)."""
        out: dict[str, int] = {}
        for profile in self.mig_profiles():
            out[profile] = out.get(profile, 0) + 1
        return out

    def pid_of(self, holder: str) -> int:
        """A stable process id for the pod holding a device (NVML reports processes, not pods)."""
        return 1000 + zlib.crc32(holder.encode()) % 4_000_000
