"""One twin node's GPUs as a JSON document, and back: how the NVML twin crosses to another process.

`migplan twin` keeps the GPUs in its own memory; `migplan agent` is a separate process. The twin writes each
node's GPUs to a file (`dump`, rewritten whenever they change) and the pynvml-shaped module
reconciler.twin.nvml.fromfile rebuilds them (`load`) at every `nvmlInit`, so one agent pass sees the node as it
was when the pass began, as a real NVML client sees the driver's state of the moment. Everything NVML reports is
kept: MIG mode (current and pending), GPU and compute instances with their ids, placements and serials, the UUID
seeds (the MIG UUIDs the kubelet's PodResources lists) and the pods holding each device.

`load` trusts nothing: a document that is not this format, a model the catalog does not know, a profile the
model does not offer or a value of the wrong type is a ValueError naming what is wrong.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from reconciler.catalog import load_catalog
from reconciler.twin.gpus import ComputeInstance, GpuInstance, TwinGpu

__all__ = ["FORMAT", "dump", "load"]

FORMAT = "migplan-twin-nvml/v1"
_MAX_BYTES = 8 * 1024 * 1024  # a node of 8 GPUs x 7 MIG devices is a few KB; anything this big is not ours


def _ci(ci: ComputeInstance) -> dict[str, Any]:
    return {
        "id": ci.id,
        "profileEnum": ci.profile_enum,
        "start": ci.start,
        "size": ci.size,
        "serial": ci.serial,
        "uuidSeed": ci.uuid_seed,
        "holder": ci.holder,
    }


def _gpu(gpu: TwinGpu) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "minor": gpu.minor,
        "model": gpu.model.key,
        "migCurrent": gpu.mig_current,
        "migPending": gpu.mig_pending,
        "resetsOnModeChange": gpu.resets_on_mode_change,
        "resetNeedsReboot": gpu.reset_needs_reboot,
        "pciSubsystemId": gpu.pci_subsystem_id,
        "holder": gpu.holder,
        "gpuInstances": [
            {
                "id": gi.id,
                "profileEnum": gi.profile.enum,
                "start": gi.start,
                "serial": gi.serial,
                "computeInstances": [_ci(ci) for ci in gi.compute_instances.values()],
            }
            for gi in gpu.gpu_instances.values()
        ],
    }


def dump(node: str, gpus: Sequence[TwinGpu]) -> bytes:
    """The node's GPUs as this format's JSON (call it under the node's lock: the GPUs must not move meanwhile)."""
    doc = {"format": FORMAT, "node": node, "gpus": [_gpu(g) for g in gpus]}
    return json.dumps(doc, sort_keys=True).encode()


def _int(obj: dict[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
        raise ValueError(f"{where}.{key}: expected an integer in [0, 2^31), got {value!r}")
    return value


def _bool(obj: dict[str, Any], key: str, where: str) -> bool:
    value = obj.get(key)
    if not isinstance(value, bool):
        raise ValueError(f"{where}.{key}: expected true or false, got {value!r}")
    return value


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}.{key}: expected a string or null, got {value!r}")
    return value


def _list(obj: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    value = obj.get(key)
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"{where}.{key}: expected a list of objects")
    return value


def load(data: bytes) -> tuple[str, list[TwinGpu]]:
    """(node, GPUs) from `dump`'s bytes; ValueError for anything else."""
    if len(data) > _MAX_BYTES:
        raise ValueError(f"larger than {_MAX_BYTES} bytes")
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    node = doc.get("node")
    if not isinstance(node, str) or not node:
        raise ValueError("node: expected a non-empty string")
    catalog = load_catalog()
    lock = threading.RLock()  # one lock per node, as the twin's fleet has
    gpus: list[TwinGpu] = []
    for n, g in enumerate(_list(doc, "gpus", "")):
        where = f"gpus[{n}]"
        key = g.get("model")
        model = catalog.get(key) if isinstance(key, str) else None
        if model is None:
            raise ValueError(f"{where}.model: not a GPU model of the catalog: {key!r}")
        gpu = TwinGpu(
            node=node,
            index=_int(g, "index", where),
            model=model,
            mig_enabled=_bool(g, "migCurrent", where),
            resets_on_mode_change=_bool(g, "resetsOnModeChange", where),
            reset_needs_reboot=_bool(g, "resetNeedsReboot", where),
            lock=lock,
            pci_subsystem_id=_int(g, "pciSubsystemId", where),
            minor=_int(g, "minor", where),
        )
        gpu.mig_pending = _bool(g, "migPending", where)
        gpu.holder = _opt_str(g, "holder", where)
        for m, gi_doc in enumerate(_list(g, "gpuInstances", where)):
            gwhere = f"{where}.gpuInstances[{m}]"
            profile = gpu.profiles.get(_int(gi_doc, "profileEnum", gwhere))
            if profile is None:
                raise ValueError(f"{gwhere}.profileEnum: not a profile of {model.key}")
            gi = GpuInstance(
                id=_int(gi_doc, "id", gwhere),
                profile=profile,
                start=_int(gi_doc, "start", gwhere),
                serial=_int(gi_doc, "serial", gwhere),
            )
            for k, ci_doc in enumerate(_list(gi_doc, "computeInstances", gwhere)):
                cwhere = f"{gwhere}.computeInstances[{k}]"
                seed = ci_doc.get("uuidSeed")
                if not isinstance(seed, str):
                    raise ValueError(f"{cwhere}.uuidSeed: expected a string")
                ci = ComputeInstance(
                    id=_int(ci_doc, "id", cwhere),
                    profile_enum=_int(ci_doc, "profileEnum", cwhere),
                    start=_int(ci_doc, "start", cwhere),
                    size=_int(ci_doc, "size", cwhere),
                    serial=_int(ci_doc, "serial", cwhere),
                    uuid_seed=seed,
                    holder=_opt_str(ci_doc, "holder", cwhere),
                )
                gi.compute_instances[ci.id] = ci
            gpu.gpu_instances[gi.id] = gi
        gpus.append(gpu)
    return node, gpus
