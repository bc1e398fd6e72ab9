"""The `migplan.io/mig-desired` annotation: a node's desired layout, with an exact placement per partition.

Pure. The controller's planner encodes it (in `apply.mode: agent` publishing a node's layout is a change of
the plan like any other write); the node agent decodes it. The annotation sits on a Node anyone with write
access may edit, so decoding is strict (reconciler.model.strict): JSON only (no NaN/Infinity), bounded size
and depth, every field of its exact type (`"migEnabled": "false"` is refused, not read as true); a malformed
document is a StrictValueError with a one-line reason, never a guess. Keys are sorted and the JSON compact,
so equal layouts give equal strings and an unchanged layout is never written again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconciler.logic.planning.agentplan import DesiredGpu, DesiredNode, DesiredPartition
from reconciler.model import strict
from reconciler.model.inventory import Placement

ANNOTATION = "migplan.io/mig-desired"
FORMAT_VERSION = "v1"
# Bounds of what a decoded layout may say: NVML indexes GPUs 0..63 and memory slices 0..7 (the
# catalog's largest GPU has 8); anything else in the annotation is not a layout but a poisoned value.
_MAX_GPU_INDEX = 63
_MAX_SLICE = 8


def dump(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def encode(desired: DesiredNode) -> str:
    return dump(
        {
            "version": FORMAT_VERSION,
            "revision": desired.revision,
            "gpus": [
                {
                    "index": g.index,
                    "migEnabled": g.mig_enabled,
                    "partitions": [
                        {"profile": p.profile, "start": p.placement.start, "size": p.placement.size}
                        for p in g.partitions
                    ],
                }
                for g in desired.gpus
            ],
        }
    )


def _placement(p: Mapping[str, Any], what: str) -> Placement:
    start = strict.require_int(p.get("start"), f"{what}.start", high=_MAX_SLICE - 1)
    size = strict.require_int(p.get("size"), f"{what}.size", low=1, high=_MAX_SLICE)
    return Placement(start, size)


def decode(node: str, text: object) -> DesiredNode:
    """Parse the annotation; StrictValueError with the reason when it is malformed."""
    doc = strict.require_mapping(strict.loads_json(text), "the document")
    if doc.get("version") != FORMAT_VERSION:
        raise strict.StrictValueError(f"unknown version {strict.short(doc.get('version'))}")
    gpus = []
    for i, raw in enumerate(strict.require_list(doc.get("gpus"), "gpus", max_len=_MAX_GPU_INDEX + 1)):
        g = strict.require_mapping(raw, f"gpus[{i}]")
        parts = strict.require_list(g.get("partitions", []), f"gpus[{i}].partitions", max_len=_MAX_SLICE)
        gpus.append(
            DesiredGpu(
                index=strict.require_int(g.get("index"), f"gpus[{i}].index", high=_MAX_GPU_INDEX),
                mig_enabled=strict.require_bool(g.get("migEnabled"), f"gpus[{i}].migEnabled"),
                partitions=tuple(
                    DesiredPartition(
                        strict.require_str(pm.get("profile"), f"gpus[{i}].partitions[{j}].profile", max_len=64),
                        _placement(pm, f"gpus[{i}].partitions[{j}]"),
                    )
                    for j, pm in enumerate(
                        strict.require_mapping(p, f"gpus[{i}].partitions[{j}]") for j, p in enumerate(parts)
                    )
                ),
            )
        )
    revision = strict.require_str(doc.get("revision", ""), "revision")
    return DesiredNode(node=node, revision=revision, gpus=tuple(gpus))


def needs_publishing(current: str | None, desired: DesiredNode) -> bool:
    """Whether the node's annotation must be (re)written for `desired`.

    Not when it already holds this layout, whatever revision it names: the annotation keeps the revision
    that last changed the node's layout, so a commit that does not touch a node costs it no write and no
    agent pass. A malformed annotation is overwritten."""
    if current is None:
        return True
    if current == encode(desired):
        return False
    try:
        return decode(desired.node, current).gpus != desired.gpus
    except strict.StrictValueError:
        return True
