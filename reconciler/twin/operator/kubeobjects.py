"""Small Kubernetes object pieces the twin's components write or read: timestamps, generated name suffixes, the
status a kubelet reports for a running pod, a container's env. Pure apart from the wall clock in `now`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from reconciler.twin.operator.names import CONFIG_MANAGER, DP_CONTAINER, DP_IMAGE

__all__ = ["config_map_name", "container_env", "now", "pod_status", "suffix"]

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s rand.SafeEncodeString alphabet


def now() -> str:
    """The API's timestamp format (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def suffix(text: str, n: int = 5) -> str:
    """A generateName-like suffix, deterministic in `text`: two twins fed the same writes get the same names."""
    digest = hashlib.sha1(text.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:n])


def container_env(pod: Mapping[str, Any], container: str) -> dict[str, str]:
    """The literal env of `container` in the pod (empty when the pod has no such container)."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            return {e["name"]: str(e.get("value", "")) for e in c.get("env") or [] if "name" in e}
    return {}


def config_map_name(pod: Mapping[str, Any]) -> str | None:
    """The ConfigMap behind the device plugin's `available-configs` volume (None without one)."""
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if v.get("name") == "available-configs":
            name = (v.get("configMap") or {}).get("name")
            return str(name) if name else None
    return None


def _container_status(c: str, at: str, *, ok: bool) -> dict[str, Any]:
    """A container Running, or crash-looping (`CrashLoopBackOff` after one failed start)."""
    cs: dict[str, Any] = {
        "name": c,
        "ready": ok,
        "restartCount": 0 if ok else 1,
        "started": ok,
        "image": DP_IMAGE if c in (DP_CONTAINER, CONFIG_MANAGER) else "",
        "imageID": "",
    }
    if ok:
        cs["state"] = {"running": {"startedAt": at}}
    else:
        cs["state"] = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off 10s restarting failed container={c}",
            }
        }
        cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": at, "finishedAt": at}}
    return cs


def pod_status(node: str, containers: list[str], *, ready: bool, failing: str | None = None) -> dict[str, Any]:
    """A pod's status as its kubelet reports it once its containers run: phase Running, Ready unless a
    container (`failing`) crash-loops."""
    at = now()
    state = "True" if ready else "False"
    statuses = [_container_status(c, at, ok=c != failing) for c in containers]
    reason = (
        {} if ready else {"reason": "ContainersNotReady", "message": f"containers with unready status: [{failing}]"}
    )
    return {
        "phase": "Running",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": at, "lastProbeTime": None},
            {"type": "Initialized", "status": "True", "lastTransitionTime": at, "lastProbeTime": None},
            {"type": "Ready", "status": state, "lastTransitionTime": at, "lastProbeTime": None, **reason},
            {"type": "ContainersReady", "status": state, "lastTransitionTime": at, "lastProbeTime": None, **reason},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": at, "lastProbeTime": None},
        ],
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.10",
        "startTime": at,
        "containerStatuses": statuses,
    }
