"""The twin's replacement of a workload's evicted or deleted pod, after kubernetes
pkg/controller/replicaset/replica_set.go (`syncReplicaSet` / `manageReplicas`: when fewer active pods than
`spec.replicas` match, the missing ones are created from `spec.template` with `generateName: <owner>-` and a
controller ownerReference; `controller.FilterActivePods` does not count a pod that is terminating or finished).

Simplification (ASSUMPTIONS.md): the twin serves no ReplicaSets, so a pod whose controller is an apps/v1 Deployment
is replaced from that Deployment's template, and only when one of its pods starts terminating or disappears (a
Deployment created in the twin gets no pods of its own: tests and the deploy/ manifests create what they need).
The replacement is created unbound; the twin's scheduler places it (or leaves it Pending, e.g. while the only node
that fits is cordoned).
"""

from __future__ import annotations

import contextlib
from typing import Any

from .errors import ApiError
from .store import Store


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return dict(ref)
    return None


def _of_deployment(pod: dict[str, Any]) -> bool:
    """The pods `_on_event` may act on: those a Deployment controls (the others are never replaced)."""
    ref = _controller(pod)
    return ref is not None and ref.get("kind") == "Deployment"


def _active(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return not pod["metadata"].get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


class ReplacementController:
    """Creates the replacement of a Deployment's pod once it is terminating or gone."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._unsubscribe = store.subscribe(self._on_event, kinds=("Pod",), wants=_of_deployment)

    def stop(self) -> None:
        self._unsubscribe()

    def _on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        if obj.get("kind") != "Pod":
            return
        going = event_type == "DELETED" or bool((obj.get("metadata") or {}).get("deletionTimestamp"))
        ref = _controller(obj)
        if not going or ref is None or ref.get("kind") != "Deployment":
            return
        if str(ref.get("apiVersion", "")).split("/")[0] != "apps":
            return
        namespace = obj["metadata"].get("namespace", "")
        try:
            deployment = self.store.get("deployments.apps", str(ref.get("name", "")), namespace)
        except ApiError:
            return  # the owner is gone: nothing replaces the pod
        self.manage_replicas(deployment)

    def manage_replicas(self, deployment: dict[str, Any]) -> None:
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        namespace, name = meta.get("namespace", ""), meta["name"]
        owned = [
            p
            for p in self.store.list("pods", namespace)
            if (_controller(p) or {}).get("uid") == meta.get("uid")
            or ((_controller(p) or {}).get("kind") == "Deployment" and (_controller(p) or {}).get("name") == name)
        ]
        missing = int(spec.get("replicas", 1)) - sum(1 for p in owned if _active(p))
        template = spec.get("template") or {}
        for _ in range(max(missing, 0)):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "generateName": f"{name}-",
                    "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": name,
                            "uid": meta.get("uid", ""),
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": dict(template.get("spec") or {}),
            }
            with contextlib.suppress(ApiError):  # an invalid template: the real controller records a FailedCreate
                self.store.create("pods", pod, namespace)
