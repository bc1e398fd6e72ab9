"""NVIDIA's DRA driver's device names, read back: which GPU, profile and placement a DRA device is. Pure.

The driver (`gpu.nvidia.com`) publishes each device of a node in its ResourceSlices under a canonical name,
and the kubelet's PodResources API and a ResourceClaim's allocation results name the device the same way:
- a whole GPU: `gpu-<minor>` (cmd/gpu-kubelet-plugin/deviceinfo.go `GpuInfo.CanonicalName`);
- a MIG device: `gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>`
  (cmd/gpu-kubelet-plugin/mig.go `MigSpecTuple.ToCanonicalName`), the profile being go-nvlib's name
  (`3g.71gb`, `1g.18gb+me`) without its dots and made RFC 1123 (`toRFC1123Compliant`: lower case, every
  character outside [a-z0-9-.] turned into `-`, `-` trimmed at both ends), so `1g.18gb+me` is `1g18gb-me`.
  The driver reads names back with `^gpu-(\\d+)-mig-(.+)-(\\d+)-(\\d+)$` (`NewMigSpecTupleFromCanonicalName`).
- VFIO passthrough devices: `gpu-vfio-<index>` (deviceinfo.go `VfioDeviceInfo.CanonicalName`), not MIG.

`<minor>` is the GPU's minor number (NVML `nvmlDeviceGetMinorNumber`, the N of /dev/nvidiaN), not its NVML
index: the two usually agree but nothing guarantees it, so a join goes through the minor number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DRIVER = "gpu.nvidia.com"
# The largest values a name may carry before it is nonsense: minor numbers are 0..255 (/dev/nvidia0..255),
# GI profile ids and placement starts are small (a GPU has at most 8 memory slices).
_MAX_MINOR = 255
_MAX_PROFILE_ID = 63
_MAX_START = 7
_MAX_NAME = 128  # a DRA device name is a DNS label (63) in resource.k8s.io/v1; slack, never more

_MIG = re.compile(r"gpu-([0-9]{1,3})-mig-(.+)-([0-9]{1,2})-([0-9]{1,2})")
_GPU = re.compile(r"gpu-([0-9]{1,3})")  # ASCII digits: \d would take any Unicode digit
_NOT_RFC1123 = re.compile(r"[^a-z0-9.-]")


@dataclass(frozen=True, slots=True)
class DraGpu:
    """A whole GPU as the driver names it."""

    minor: int


@dataclass(frozen=True, slots=True)
class DraMig:
    """A MIG device as the driver names it: parent GPU, mangled profile, GI profile id, placement start."""

    minor: int
    profile_token: str  # the profile as it appears in the name ("3g71gb", "1g18gb-me")
    profile_id: int
    start: int


def profile_token(profile: str) -> str:
    """A catalog profile name as the driver writes it in a device name (`1g.18gb+me` -> `1g18gb-me`)."""
    name = _NOT_RFC1123.sub("-", profile.replace(".", "").lower()).strip("-")
    return name.removesuffix(".")[:253]


def parse(name: str) -> DraGpu | DraMig | None:
    """The GPU or MIG device a canonical device name stands for; None for any other name (VFIO, garbage)."""
    if len(name) > _MAX_NAME:
        return None
    whole = _GPU.fullmatch(name)
    if whole is not None:
        minor = int(whole.group(1))
        return DraGpu(minor) if minor <= _MAX_MINOR else None
    mig = _MIG.fullmatch(name)
    if mig is None:
        return None
    minor, token, profile_id, start = int(mig.group(1)), mig.group(2), int(mig.group(3)), int(mig.group(4))
    if minor > _MAX_MINOR or profile_id > _MAX_PROFILE_ID or start > _MAX_START or profile_token(token) != token:
        return None
    return DraMig(minor, token, profile_id, start)


def mig_name(minor: int, profile: str, profile_id: int, start: int) -> str:
    """The canonical name the driver gives a MIG device (for drift: plan vs published, name for name)."""
    return f"gpu-{minor}-mig-{profile_token(profile)}-{profile_id}-{start}"
