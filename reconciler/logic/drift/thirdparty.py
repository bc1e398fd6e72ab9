"""Third-party dynamic partitioners that write a node's MIG layout, read from what they write on the Node. Pure.

HAMi (Project-HAMi/HAMi): its NVIDIA device plugin registers the node's GPUs in the annotation
`hami.io/node-nvidia-register` (pkg/device/nvidia/device.go `RegisterAnnos`), a JSON list with one object per GPU
whose `mode` is the node's operating mode (`MigMode = "mig"`, `HamiCoreMode = "hami-core"`, `MpsMode = "mps"`; set
per node by the device plugin's ConfigMap `nodeconfig[].operatingmode`). In MIG mode HAMi creates and destroys MIG
instances per pod from its `knownMigGeometries` (`GetNodeDevices` attaches them to the `mig` devices): it is the
node's layout writer, and a layout migplan wrote there would fight it. hami-core and MPS share whole GPUs and lay
out nothing, so they are no other writer.

An annotation that is present but cannot be read (not JSON, not a list of objects, a `mode` that is not a string,
or HAMi's older colon-separated form, which carries no mode) counts as MIG mode: a guess never leads to a write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

HAMI_REGISTER = "hami.io/node-nvidia-register"
# The node agent's refusal of a published layout on a node another component lays out (reconciler.agent): said in
# its state reason, as the controller withdraws that layout (MP577).
AGENT_REFUSED = "MP578"
HAMI_WRITER = "HAMi's device plugin (MIG mode)"
_HAMI_MIG_MODE = "mig"
_MAX_REGISTER_BYTES = 256 * 1024  # the API server's cap on all of an object's annotations together


@dataclass(frozen=True, slots=True)
class ThirdPartyWriter:
    """Another component that lays out the node's MIG devices, and why migplan could not tell for sure (or None)."""

    writer: str
    problem: str | None = None


def node_writer(annotations: Mapping[str, str]) -> ThirdPartyWriter | None:
    """The third-party partitioner writing the node's MIG layout, from the node's annotations; None when none."""
    raw = annotations.get(HAMI_REGISTER)
    if raw is None:
        return None
    if not isinstance(raw, str) or len(raw) > _MAX_REGISTER_BYTES:
        return ThirdPartyWriter(HAMI_WRITER, f"{HAMI_REGISTER} is not a readable string")
    try:
        devices = json.loads(raw)
    except (ValueError, RecursionError):
        return ThirdPartyWriter(HAMI_WRITER, f"{HAMI_REGISTER} is not JSON (an older HAMi without modes?)")
    if not isinstance(devices, list) or not all(isinstance(d, Mapping) for d in devices):
        return ThirdPartyWriter(HAMI_WRITER, f"{HAMI_REGISTER} is not a list of devices")
    modes = [d.get("mode") for d in devices]
    if any(not isinstance(m, str) for m in modes):
        return ThirdPartyWriter(HAMI_WRITER, f"{HAMI_REGISTER}: a device without a readable mode")
    if _HAMI_MIG_MODE in modes:
        return ThirdPartyWriter(HAMI_WRITER)
    return None


def conflict_code(writer: str) -> str:
    """The finding code of a conflict with `writer`: MP575 for a third-party partitioner, MP570 for NVIDIA's DRA
    driver (DynamicMIG)."""
    return "MP575" if writer == HAMI_WRITER else "MP570"
