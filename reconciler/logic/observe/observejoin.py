"""Join what NVML lists on a node with what the kubelet allocated: who holds which partition. Pure.

Inputs: the GPUs as the NVML adapter observed them (each MIG device with its UUID), the kubelet's
PodResources allocations (device IDs per pod, container and resource), and the state of each source.
Output: one `NodeObservation` (reconciler.model.nodeobservation) ready for the v2 annotation codec.

The anchor is the device ID. NVIDIA's device plugin registers every device under its NVML UUID, a MIG
device under its MIG device UUID (k8s-device-plugin internal/rm/devices.go `BuildDevice`: `dev.ID = uuid`;
internal/rm/nvml_devices.go `nvmlMigDevice.GetUUID` asks NVML for the MIG handle's UUID), whatever the MIG
strategy: under `single` the resource is `nvidia.com/gpu` and the IDs are MIG UUIDs, under `mixed` the
resource is `nvidia.com/mig-<profile>`, under `none` (or on a MIG-disabled GPU) the IDs are GPU UUIDs. A
shared device (time-slicing, MPS) gets `<uuid>::<replica>` (`NewAnnotatedID`); the replica is dropped here as
the plugin itself does (`AnnotatedID.GetID`), so every replica's container is a holder of the one device.

Rules, and why:
- A GPU instance with several compute instances has one MIG device (and UUID) per compute instance; a holder
  of any of them is a holder of that GPU instance.
- Only resources under `nvidia.com/` are joined: the kubelet lists every device plugin's devices (NICs,
  FPGAs), which NVML cannot know and which are not unknown GPUs. Likewise only DRA allocations of NVIDIA's
  GPU driver (`gpu.nvidia.com`) are joined.
- A DRA allocation (the kubelet's `dynamic_resources`: claim, driver, pool, device name) is anchored on the
  driver's canonical device name, not on a UUID: `gpu-<minor>` is the GPU of that NVML minor number,
  `gpu-<minor>-mig-<profile>-<id>-<start>` its instance at that placement start with that profile. Its
  holder carries the claim, and counts exactly like a device-plugin holder everywhere downstream.
- A device ID that is neither a GPU UUID nor a MIG device UUID NVML listed is an `UnknownDevice`, but only
  when NVML answered in full: with a GPU unread, the device may well be on it, and saying "unknown" would
  be a guess.
- Values the annotation's decoder would refuse (names over 253 characters, IDs over 256, control
  characters) are not published; the allocation is skipped and the podResources source says so, which
  also tells the controller the holders are not complete.
- The codec's per-list bounds are respected here (holders per device, unknown devices): past them the
  first ones in sorted order are kept and the observation says `truncated`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from reconciler.logic.codecs import dradevices, observedcodec
from reconciler.model.nodeobservation import (
    SOURCE_OK,
    Holder,
    KubeletAllocation,
    NodeObservation,
    ObservedGpu,
    UnknownDevice,
)

NVML = "nvml"
POD_RESOURCES = "podResources"
NVIDIA_PREFIX = "nvidia.com/"
REPLICA_SEPARATOR = "::"  # k8s-device-plugin internal/rm/devices.go NewAnnotatedID: "%s::%d"
MAX_NAME = 253  # what the codec's decoder accepts for namespace/pod/container/resource
MAX_DEVICE_ID = 256
MAX_REASON = 512  # a source's reason, as the decoder bounds it
MAX_HOLDERS = 64  # per device or GPU, as the decoder bounds it
MAX_UNKNOWN = 256


def device_uuid(device_id: str) -> str:
    """The NVML UUID behind a device plugin ID (`MIG-…::3` → `MIG-…`)."""
    return device_id.split(REPLICA_SEPARATOR, 1)[0]


def one_line(reason: str) -> str:
    """A source's reason as the annotation carries it: one line, bounded."""
    text = " ".join(reason.split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def _bad_text(value: str, limit: int) -> bool:
    return not value or len(value) > limit or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)


def _invalid(a: KubeletAllocation) -> str | None:
    for what, value in (("namespace", a.namespace), ("pod", a.pod), ("container", a.container)):
        if _bad_text(value, MAX_NAME):
            return f"a {what} name that is empty, too long or not printable"
    if _bad_text(a.resource, MAX_NAME):
        return "a resource name that is empty, too long or not printable"
    if a.claim and (_bad_text(a.claim, 2 * MAX_NAME + 1) or _bad_text(a.pool, MAX_NAME) or len(a.device_ids) != 1):
        return "a DRA claim, pool or device that is empty, too long or not printable"
    for d in a.device_ids:
        if _bad_text(d, MAX_DEVICE_ID):
            return "a device ID that is empty, too long or not printable"
    return None


def _dra_device(gpus: Sequence[ObservedGpu], by_minor: Mapping[int, int], name: str) -> tuple[int, int] | int | None:
    """(gpu position, instance position) of a DRA MIG device, the GPU position of a whole GPU, or None.

    NVIDIA's DRA driver names devices by minor number, profile and placement start (reconciler.logic.
    dradevices); the device is this node's only if a GPU has that minor number and, for a MIG device, an
    instance starts there with that profile. A name that does not parse, a minor NVML did not report, or a
    placement with no such instance is None: the caller records an unknown device rather than guessing.
    """
    device = dradevices.parse(name)
    if device is None or device.minor not in by_minor:
        return None
    gi = by_minor[device.minor]
    if isinstance(device, dradevices.DraGpu):
        return gi
    for ii, inst in enumerate(gpus[gi].instances):
        if inst.placement.start == device.start and dradevices.profile_token(inst.profile) == device.profile_token:
            return (gi, ii)
    return None


def join(
    gpus: Sequence[ObservedGpu],
    allocations: Sequence[KubeletAllocation],
    *,
    sources: Mapping[str, str],
    observed_at: datetime | None,
    observer: str,
) -> NodeObservation:
    """The node's observation: NVML's layout with the kubelet's holders on each device (see module doc)."""
    src = {k: one_line(v) for k, v in sources.items()}
    nvml_complete = src.get(NVML) == SOURCE_OK
    by_mig: dict[str, tuple[int, int]] = {}  # MIG UUID -> (gpu position, instance position)
    by_gpu: dict[str, int] = {}
    for gi, g in enumerate(gpus):
        by_gpu[g.uuid] = gi
        for ii, inst in enumerate(g.instances):
            for uuid in (inst.uuid, *inst.compute_uuids):
                if uuid:
                    by_mig[uuid] = (gi, ii)
    inst_holders: dict[tuple[int, int], set[Holder]] = {}
    gpu_holders: dict[int, set[Holder]] = {}
    unknown: set[UnknownDevice] = set()
    skipped: list[str] = []
    by_minor = {g.minor: gi for gi, g in enumerate(gpus) if g.minor is not None}
    for a in allocations:
        if a.claim and a.resource != dradevices.DRIVER:
            continue  # another DRA driver's device (a NIC, an FPGA): not a GPU, not unknown
        if not a.claim and not a.resource.startswith(NVIDIA_PREFIX):
            continue
        problem = _invalid(a)
        if problem is not None:
            skipped.append(problem)
            continue
        holder = Holder(a.namespace, a.pod, a.container, a.resource, a.claim)
        if a.claim:
            where = _dra_device(gpus, by_minor, a.device_ids[0])
            if isinstance(where, tuple):
                inst_holders.setdefault(where, set()).add(holder)
            elif where is not None:
                gpu_holders.setdefault(where, set()).add(holder)
            elif nvml_complete:
                unknown.add(UnknownDevice(holder, f"{a.pool}/{a.device_ids[0]}"))
            continue
        for device_id in a.device_ids:
            uuid = device_uuid(device_id)
            if uuid in by_mig:
                inst_holders.setdefault(by_mig[uuid], set()).add(holder)
            elif uuid in by_gpu:
                gpu_holders.setdefault(by_gpu[uuid], set()).add(holder)
            elif nvml_complete:
                unknown.add(UnknownDevice(holder, device_id))
    truncated = False

    def bounded(holders: set[Holder]) -> tuple[Holder, ...]:
        nonlocal truncated
        ordered = sorted(holders, key=lambda h: (h.namespace, h.pod, h.container, h.resource))
        if len(ordered) > MAX_HOLDERS:
            truncated = True
        return tuple(ordered[:MAX_HOLDERS])

    out_gpus = tuple(
        replace(
            g,
            holders=bounded(gpu_holders.get(gi, set())),
            instances=tuple(
                replace(inst, holders=bounded(inst_holders.get((gi, ii), set()))) for ii, inst in enumerate(g.instances)
            ),
        )
        for gi, g in enumerate(gpus)
    )
    ordered_unknown = sorted(
        unknown, key=lambda u: (u.holder.namespace, u.holder.pod, u.holder.container, u.holder.resource, u.device_id)
    )
    if len(ordered_unknown) > MAX_UNKNOWN:
        truncated = True
    if skipped and src.get(POD_RESOURCES) == SOURCE_OK:
        src[POD_RESOURCES] = one_line(
            f"MP939: {len(skipped)} allocation(s) the kubelet listed were not published: {skipped[0]}"
        )
    return NodeObservation(
        version=observedcodec.VERSION,
        gpus=out_gpus,
        observed_at=observed_at,
        observer=observer[:64],
        sources=src,
        unknown_devices=tuple(ordered_unknown[:MAX_UNKNOWN]),
        truncated=truncated,
    )
