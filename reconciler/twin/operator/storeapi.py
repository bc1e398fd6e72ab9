"""The writes and reads the twin's GPU Operator components make on the API store, each in one place.

The components talk to the store (reconciler/twin/apiserver) directly, not over HTTP, as the real controllers
talk to their API server through a client: a read of an object that is gone is None, a delete of a pod that is
already gone is no error, and a DaemonSet's pod gets another generated name when its name is taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.twin.operator.kubeobjects import suffix

__all__ = ["StoreApi"]


class StoreApi:
    """The store, seen from the operator's namespace `namespace`."""

    def __init__(self, store: Any, namespace: str) -> None:
        self.store = store
        self.ns = namespace

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it cannot be read (gone, or never there)."""
        try:
            obj: dict[str, Any] = self.store.get(resource, name, namespace)
        except Exception:
            return None
        return obj

    def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> None:
        self.store.patch("nodes", node, {"metadata": {"labels": dict(labels)}})

    def patch_pod_status(self, name: str, namespace: str, status: Mapping[str, Any]) -> None:
        """Write a pod's status as its kubelet does: a condition whose status did not change keeps its
        lastTransitionTime (kubernetes pkg/kubelet/status/status_manager.go updateLastTransitionTime), so a
        re-read of a Ready plugin (config-manager's SIGHUP) does not look like a pod that just became Ready."""
        new = dict(status)
        current = self.get("pods", name, namespace)
        before = {
            c.get("type"): c
            for c in ((current or {}).get("status") or {}).get("conditions") or ()
            if isinstance(c, Mapping)
        }
        conditions = []
        for cond in new.get("conditions") or ():
            old = before.get(cond.get("type"))
            if old is not None and old.get("status") == cond.get("status") and old.get("lastTransitionTime"):
                cond = {**cond, "lastTransitionTime": old["lastTransitionTime"]}
            conditions.append(cond)
        if conditions:
            new["conditions"] = conditions
        self.store.patch("pods", name, {"status": new}, namespace, subresource="status")

    def set_pod_log(self, pod: str, lines: str, container: str) -> None:
        """The log of a container of a pod in the operator's namespace."""
        self.store.set_pod_log(self.ns, pod, lines, container=container)

    def delete_pod(self, name: str, namespace: str, *, graceful: bool = False) -> None:
        """Delete the pod at once (grace period 0), or gracefully (it stays Terminating until its kubelet is done)."""
        try:
            self.store.delete("pods", name, namespace, grace_period_seconds=None if graceful else 0)
        except Exception as exc:
            if getattr(exc, "code", None) != 404:
                raise

    def free_daemon_pod_name(self, ds: str, node: str, name: str, taken: set[str]) -> str:
        """The name `create_daemon_pod` would give a DaemonSet's pod for `node` when the store's names and `taken`
        (those of a bulk load being made) are in use."""
        for salt in range(1, 100):
            if name not in taken and not self.store.exists("pods", self.ns, name):
                return name
            name = f"{ds}-{suffix(f'{node}/{salt}/{name}')}"
        raise RuntimeError(f"no free pod name for {ds} on {node}")

    def create_daemon_pod(self, ds: str, node: str, pod: dict[str, Any]) -> str:
        """Create a DaemonSet's pod for `node`; returns the name it got.

        Like generateName: five random characters collide now and then in a big fleet; pick others."""
        name: str = pod["metadata"]["name"]
        for salt in range(1, 100):
            try:
                self.store.create("pods", pod, self.ns)
                return name
            except Exception as exc:
                if getattr(exc, "code", None) != 409:
                    raise
                name = f"{ds}-{suffix(f'{node}/{salt}/{name}')}"
                pod["metadata"]["name"] = name
        raise RuntimeError(f"no free pod name for {ds} on {node}")
