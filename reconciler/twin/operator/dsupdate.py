"""How the GPU Operator writes an operand DaemonSet: render it whole, compare hashes, replace it whole.

From NVIDIA/gpu-operator@a22dbf67 `controllers/object_controls.go`:

* `DaemonSet(n)` renders the object from its asset and the ClusterPolicy (for the device plugin `TransformDevicePlugin`,
  which calls `applyMIGConfiguration`: `MIG_STRATEGY=<spec.mig.strategy>` and `NVIDIA_MIG_MONITOR_DEVICES=all`, then
  `spec.devicePlugin.env` on top), sets the ClusterPolicy as its controller (`controllerutil.SetControllerReference`)
  and the `spec.daemonsets.labels/annotations`.
* Not found: `Create` with the annotation `nvidia.com/last-applied-hash` = `utils.GetObjectHash(obj)`.
* Found: `isDaemonsetSpecChanged(found, obj)` compares **only** that annotation of the live object with the hash of
  the newly rendered one. Equal: "DaemonSet identical, skipping update", whatever else was edited on the live object
  (a `kubectl rollout restart` annotation survives). Different: `n.client.Update(ctx, obj)` with the rendered object,
  i.e. a full replace without a resourceVersion: every annotation or label the operator does not render, on the
  DaemonSet and on its pod template, is dropped. A changed template makes the DaemonSet controller roll the pods.

So a `spec.mig.strategy` change alone rolls the operator's device plugin (its env changes), and drops the marker
annotations a tool wrote on the DaemonSet in the same breath.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["HASH_ANNOTATION", "apply_rendered", "object_hash", "with_controller"]

HASH_ANNOTATION = "nvidia.com/last-applied-hash"  # object_controls.go NvidiaAnnotationHashKey


def object_hash(obj: Mapping[str, Any]) -> str:
    """utils.GetObjectHash stand-in: a digest of the rendered object (its exact value is never compared with a
    real operator's, only with the twin's own earlier ones)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def with_controller(obj: dict[str, Any], cp: Mapping[str, Any]) -> dict[str, Any]:
    """SetControllerReference(n.singleton, obj): the ClusterPolicy as the DaemonSet's controlling owner."""
    meta = cp.get("metadata") or {}
    obj.setdefault("metadata", {})["ownerReferences"] = [
        {
            "apiVersion": str(cp.get("apiVersion") or "nvidia.com/v1"),
            "kind": "ClusterPolicy",
            "name": str(meta.get("name") or ""),
            "uid": str(meta.get("uid") or ""),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return obj


def apply_rendered(live: Mapping[str, Any] | None, rendered: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the operator writes: the rendered object with its hash annotation when the live one is missing or
    carries another hash (a full replacement, no resourceVersion), else None ("DaemonSet identical")."""
    digest = object_hash(rendered)
    if live is not None and ((live.get("metadata") or {}).get("annotations") or {}).get(HASH_ANNOTATION) == digest:
        return None
    out = copy.deepcopy(dict(rendered))
    meta = out.setdefault("metadata", {})
    meta.setdefault("annotations", {})[HASH_ANNOTATION] = digest
    meta.pop("resourceVersion", None)
    return out
