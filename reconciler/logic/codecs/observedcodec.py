"""The `migplan.io/mig-observed` annotation: a NodeObservation as compact, versioned, bounded JSON.

Pure. The observer encodes, the controller (and `migplan import`) decode. The annotation sits on a Node
anyone with write access may edit, so decoding is strict (reconciler.model.strict): JSON only, bounded
size and depth, every field of its exact type; a malformed document is a StrictValueError with a one-line
reason, never a guess.

Size: Kubernetes caps all annotations of an object at 256 KiB together, and a Node carries other
controllers' annotations too, so one observation is kept under MAX_OBSERVED_BYTES. An encoding over it
drops detail in this order, and says so with `"truncated": true`: the PIDs of each instance, then the
devices the kubelet reported that NVML does not know, then the holders. The layout itself (instances and
placements) is never dropped: 8 GPUs of 7 instances each are far below the cap without holders.

Format v2 (keys sorted, no spaces, so equal observations give equal strings and the observer writes only
when something changed):
  {"version": "v2", "observer": "migplan/0.1.0", "observedAt": "2026-12-03T08:00:00Z",
   "sources": {"nvml": "ok", "podResources": "ok" | "<reason>"},
   "gpus": [{"index", "uuid", "name", "migCapable", "mig": {"current", "pending"},
             "minor": 0,                                  # NVML minor number, when known
             "holders": [<holder>],                       # whole-GPU holders
             "instances": [{"profile", "start", "size", "gpuInstanceId", "uuid", "processes": [pid],
                            "holders": [{"namespace", "pod", "container", "resource", "claim"}],
                            "computeUuids": [uuid]}]}],      # only with several compute instances
   "unknownDevices": [{"namespace", "pod", "container", "resource", "deviceId"}],
   "truncated": false}
A holder's "claim" ("<namespace>/<name>" of a ResourceClaim) is present only for a DRA holder, whose "resource"
is then the DRA driver's name; both "claim" and "minor" are additive, so older controllers ignore them.
v1 (the agent's format before observation existed) has only "version" and "gpus" without holders.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC
from typing import Any

from reconciler.model import strict
from reconciler.model.inventory import Placement
from reconciler.model.nodeobservation import (
    Holder,
    NodeObservation,
    ObservedGpu,
    ObservedInstance,
    UnknownDevice,
)

VERSION = "v2"
VERSIONS = ("v1", "v2")
MAX_OBSERVED_BYTES = 64 * 1024
# Freshness. `observedAt` is part of the content, so an observer that wrote only on change would never
# refresh it: it writes when the observation (observedAt aside) changed OR when the published observedAt
# is older than one heartbeat. The controller calls an observer silent once its observedAt is older than
# SILENT_AFTER_HEARTBEATS heartbeats (the setting `observe_heartbeat_seconds` on both sides, this default).
HEARTBEAT_SECONDS = 300.0
SILENT_AFTER_HEARTBEATS = 3
_MAX_GPU_INDEX = 63  # NVML indexes GPUs 0..63
_MAX_SLICE = 8  # the catalog's largest GPU has 8 memory slices
_MAX_NAME = 253  # a Kubernetes object name (DNS subdomain)
_MAX_HOLDERS = 64  # per instance: a MIG device is allocated to one container; slack for time-slicing
_MAX_UNKNOWN = 256
_MAX_PIDS = 1024
_MAX_SOURCES = 8
_MAX_CLAIM = 2 * _MAX_NAME + 1  # "<namespace>/<name>" of a ResourceClaim
_MAX_MINOR = 255  # /dev/nvidia0..255


def _dump(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _holder_doc(h: Holder) -> dict[str, str]:
    doc = {"namespace": h.namespace, "pod": h.pod, "container": h.container, "resource": h.resource}
    if h.claim:  # DRA holders only: device-plugin holders encode exactly as before
        doc["claim"] = h.claim
    return doc


def _doc(obs: NodeObservation, *, pids: bool, unknown: bool, holders: bool, truncated: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": VERSION,
        "observer": obs.observer,
        "observedAt": (
            obs.observed_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if obs.observed_at is not None else None
        ),
        "sources": dict(obs.sources),
        "gpus": [
            {
                "index": g.index,
                "uuid": g.uuid,
                "name": g.name,
                "migCapable": g.mig_capable,
                "mig": {"current": g.mig_current, "pending": g.mig_pending},
                **({"minor": g.minor} if g.minor is not None else {}),
                "holders": [_holder_doc(h) for h in g.holders] if holders else [],
                "instances": [
                    {
                        "profile": i.profile,
                        "start": i.placement.start,
                        "size": i.placement.size,
                        "gpuInstanceId": i.gpu_instance_id,
                        "uuid": i.uuid,
                        "processes": list(i.processes) if pids else [],
                        "holders": [_holder_doc(h) for h in i.holders] if holders else [],
                        **({"computeUuids": list(i.compute_uuids)} if i.compute_uuids else {}),
                    }
                    for i in g.instances
                ],
            }
            for g in obs.gpus
        ],
        "unknownDevices": (
            [{**_holder_doc(u.holder), "deviceId": u.device_id} for u in obs.unknown_devices] if unknown else []
        ),
        "truncated": truncated or obs.truncated,
    }
    return doc


def encode(obs: NodeObservation) -> str:
    """The annotation value for an observation, at most MAX_OBSERVED_BYTES (detail dropped past it)."""
    text = _dump(_doc(obs, pids=True, unknown=True, holders=True, truncated=False))
    # Drop detail cheapest-to-lose first; the layout itself always stays.
    for pids, unknown, holders in ((False, True, True), (False, False, True), (False, False, False)):
        if len(text) <= MAX_OBSERVED_BYTES:
            break
        text = _dump(_doc(obs, pids=pids, unknown=unknown, holders=holders, truncated=True))
    return text


def publish_due(published: str | None, obs: NodeObservation, *, heartbeat_seconds: float = HEARTBEAT_SECONDS) -> bool:
    """Whether the observer must write `obs` over the `published` annotation value.

    Yes when nothing (or something unreadable, or another version) is published, when the observation
    differs in anything but its time, or when the published time is a heartbeat old (or in the future:
    a clock that jumped back must not freeze the heartbeat). No otherwise, so an observer on an
    unchanged node writes once per heartbeat, not once per pass.
    """
    if not published or obs.observed_at is None:
        return True
    try:
        old = decode(published)
    except strict.StrictValueError:
        return True
    if old.version != VERSION or old.observed_at is None:
        return True
    age = (obs.observed_at - old.observed_at).total_seconds()
    if age >= heartbeat_seconds or age < 0:
        return True
    return encode(replace(obs, observed_at=old.observed_at)) != published


def _placement(p: Mapping[str, Any], what: str) -> Placement:
    start = strict.require_int(p.get("start"), f"{what}.start", high=_MAX_SLICE - 1)
    size = strict.require_int(p.get("size"), f"{what}.size", low=1, high=_MAX_SLICE)
    return Placement(start, size)


def _holder(raw: object, what: str) -> Holder:
    m = strict.require_mapping(raw, what)
    return Holder(
        namespace=strict.require_str(m.get("namespace"), f"{what}.namespace", max_len=_MAX_NAME),
        pod=strict.require_str(m.get("pod"), f"{what}.pod", max_len=_MAX_NAME),
        container=strict.require_str(m.get("container"), f"{what}.container", max_len=_MAX_NAME),
        resource=strict.require_str(m.get("resource"), f"{what}.resource", max_len=_MAX_NAME),
        claim=strict.require_str(m.get("claim", ""), f"{what}.claim", max_len=_MAX_CLAIM),
    )


def _holders(raw: object, what: str) -> tuple[Holder, ...]:
    items = strict.require_list([] if raw is None else raw, what, max_len=_MAX_HOLDERS)
    return tuple(_holder(h, f"{what}[{k}]") for k, h in enumerate(items))


def _instance(raw: object, what: str, *, v2: bool) -> ObservedInstance:
    inst = strict.require_mapping(raw, what)
    uuid = inst.get("uuid")
    return ObservedInstance(
        gpu_instance_id=strict.require_int(inst.get("gpuInstanceId"), f"{what}.gpuInstanceId"),
        profile=strict.require_str(inst.get("profile"), f"{what}.profile", max_len=64),
        placement=_placement(inst, what),
        uuid=None if uuid is None else strict.require_str(uuid, f"{what}.uuid"),
        processes=tuple(
            strict.require_int(p, f"{what}.processes")
            for p in strict.require_list(inst.get("processes", []), f"{what}.processes", max_len=_MAX_PIDS)
        ),
        holders=_holders(inst.get("holders"), f"{what}.holders") if v2 else (),
        compute_uuids=tuple(
            strict.require_str(u, f"{what}.computeUuids")
            for u in strict.require_list(inst.get("computeUuids", []), f"{what}.computeUuids", max_len=_MAX_SLICE)
        ),
    )


def _gpu(raw: object, what: str, *, v2: bool) -> ObservedGpu:
    g = strict.require_mapping(raw, what)
    mig = strict.require_mapping(g.get("mig"), f"{what}.mig")
    instances = strict.require_list(g.get("instances"), f"{what}.instances", max_len=_MAX_SLICE)
    return ObservedGpu(
        index=strict.require_int(g.get("index"), f"{what}.index", high=_MAX_GPU_INDEX),
        uuid=strict.require_str(g.get("uuid"), f"{what}.uuid"),
        name=strict.require_str(g.get("name"), f"{what}.name"),
        mig_capable=strict.require_bool(g.get("migCapable"), f"{what}.migCapable"),
        mig_current=strict.require_bool(mig.get("current"), f"{what}.mig.current"),
        mig_pending=strict.require_bool(mig.get("pending"), f"{what}.mig.pending"),
        instances=tuple(_instance(r, f"{what}.instances[{j}]", v2=v2) for j, r in enumerate(instances)),
        holders=_holders(g.get("holders"), f"{what}.holders") if v2 else (),
        minor=None if "minor" not in g else strict.require_int(g["minor"], f"{what}.minor", high=_MAX_MINOR),
    )


def decode(text: object) -> NodeObservation:
    """Parse an observation annotation (v1 or v2); StrictValueError with the reason when malformed."""
    doc = strict.require_mapping(strict.loads_json(text, max_bytes=MAX_OBSERVED_BYTES), "the document")
    version = doc.get("version", "v1")  # the first agents wrote no version at all
    if version not in VERSIONS:
        raise strict.StrictValueError(f"unknown version {strict.short(version)} (this migplan reads v1 and v2)")
    v2 = version == "v2"
    gpus = tuple(
        _gpu(r, f"gpus[{i}]", v2=v2)
        for i, r in enumerate(strict.require_list(doc.get("gpus"), "gpus", max_len=_MAX_GPU_INDEX + 1))
    )
    if not v2:
        return NodeObservation(version="v1", gpus=gpus)
    at = doc.get("observedAt")
    sources = strict.require_mapping(doc.get("sources", {}), "sources")
    if len(sources) > _MAX_SOURCES:
        raise strict.StrictValueError(f"sources has more than {_MAX_SOURCES} entries")
    unknown = strict.require_list(doc.get("unknownDevices", []), "unknownDevices", max_len=_MAX_UNKNOWN)
    return NodeObservation(
        version="v2",
        gpus=gpus,
        observed_at=None if at is None else strict.parse_timestamp(at),
        observer=strict.require_str(doc.get("observer", ""), "observer", max_len=64),
        sources={
            strict.require_str(k, "sources key", max_len=32): strict.require_str(
                v, f"sources[{strict.short(k, 40)}]", max_len=512
            )
            for k, v in sources.items()
        },
        unknown_devices=tuple(
            UnknownDevice(
                holder=_holder(u, f"unknownDevices[{k}]"),
                device_id=strict.require_str(
                    strict.require_mapping(u, f"unknownDevices[{k}]").get("deviceId"),
                    f"unknownDevices[{k}].deviceId",
                ),
            )
            for k, u in enumerate(unknown)
        ),
        truncated=strict.require_bool(doc.get("truncated", False), "truncated"),
    )
