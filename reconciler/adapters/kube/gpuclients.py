"""The node agent's pause and restart of the GPU Operator's GPU clients on its node (apply.mode: agent).

What mig-manager does around a re-cut (NVIDIA/mig-parted@bd7160f4 `pkg/mig/reconfigure/reconfigure.go` `Run`):
`getCurrentNodeLabels` reads the `nvidia.com/gpu.deploy.*` labels; `shutdownKubernetesGPUClients` sets each to
`maybeSetPaused` of its value (`"false"` stays `"false"`, anything else becomes `paused-for-mig-change`;
`gpu.deploy.client` only when it has a value), which takes the operator's client DaemonSets (device plugin, GFD,
DCGM, DCGM exporter) off the node; `waitForPodsToBeDeleted` waits for their pods to be gone (5 minutes each);
the GPUs are changed; `restartKubernetesGPUClients` sets each label to `maybeSetTrue` of the value read at the
start, and the DaemonSets start new pods. A new device-plugin pod enumerates the GPUs again and advertises the new
partitions; without it the running plugin keeps advertising the devices it found when it started.

The agent does the same dance with two differences, both to never leave a node wedged the way mig-manager can:
the values to restore are recorded on the Node (annotation `migplan.io/gpu-clients-paused`, so a pass that dies
half way is undone by the next one), and a wait that runs out restores the labels at once and changes nothing
(the pass ends `pending`, MP912) instead of leaving the clients paused.

Writes: JSON merge patches of those labels and migplan's annotation on the agent's own Node. Reads: the pods
on the node in the GPU Operator's namespace (list, label and field selector).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.cluster import api_error
from reconciler.adapters.kube.nodemeta import patch_node_metadata
from reconciler.model import strict
from reconciler.model.errors import MigplanError
from reconciler.model.observed import GPU_CLIENT_DEPLOY_LABELS, PAUSED_FOR_MIG_CHANGE

PAUSE_RECORD = "migplan.io/gpu-clients-paused"  # JSON {label: value before the pause}; absent when not paused
CLIENT_LABEL = "nvidia.com/gpu.deploy.client"
WAIT_SECONDS = 300.0  # reconfigure.go waitForPodsToBeDeleted: timeout := 5 * time.Minute
POLL_SECONDS = 1.0  # waitForPodDeletion polls every second
# The GPU Operator's client pods mig-manager waits for (reconfigure.go waitForPodsToBeDeleted), by app label; the
# device plugin's is the DaemonSet's name (app=<name>, the operator's convention).
OTHER_CLIENT_APPS = ("gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-dcgm")


def maybe_set_paused(value: str) -> str:
    """reconfigure.go maybeSetPaused."""
    return "false" if value == "false" else PAUSED_FOR_MIG_CHANGE


def maybe_set_true(value: str) -> str:
    """reconfigure.go maybeSetTrue (of the value read before the pause)."""
    return "false" if value == "false" else "true"


def paused_labels(current: Mapping[str, str]) -> dict[str, str]:
    """shutdownKubernetesGPUClients: the label values that take the GPU clients off the node."""
    return {
        k: maybe_set_paused(current.get(k, ""))
        for k in GPU_CLIENT_DEPLOY_LABELS
        if k != CLIENT_LABEL or current.get(k, "")
    }


def restored_labels(before: Mapping[str, str]) -> dict[str, str]:
    """restartKubernetesGPUClients / setState: the label values that bring them back."""
    return {
        k: maybe_set_true(before.get(k, "")) for k in GPU_CLIENT_DEPLOY_LABELS if k != CLIENT_LABEL or before.get(k, "")
    }


def decode_record(text: str) -> dict[str, str]:
    """The pause record, strictly: a JSON object of known deploy labels to short strings (MP913 otherwise)."""
    try:
        doc = strict.require_mapping(strict.loads_json(text), "the record")
        out: dict[str, str] = {}
        for key, value in doc.items():
            if key not in GPU_CLIENT_DEPLOY_LABELS:
                raise strict.StrictValueError(f"unknown label {strict.short(key)}")
            out[key] = strict.require_str(value, key, max_len=63)
        return out
    except strict.StrictValueError as exc:
        raise MigplanError(f"annotation {PAUSE_RECORD} is malformed: {exc}", code="MP913") from exc


class KubeGpuClients:
    """The GPU clients on the agent's node (implements reconciler.agent.GpuClientsPort)."""

    def __init__(
        self,
        api: client.CoreV1Api,
        *,
        namespace: str = "gpu-operator",
        device_plugin_daemonset: str = "nvidia-device-plugin-daemonset",
        wait_seconds: float = WAIT_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._apps = (device_plugin_daemonset, *OTHER_CLIENT_APPS)
        self._wait = wait_seconds
        self._poll = poll_seconds
        self._clock = clock
        self._sleep = sleep

    def _node(self, node: str) -> tuple[dict[str, str], dict[str, str]]:
        try:
            obj: Any = self._api.read_node(node)
        except ApiException as exc:
            raise api_error(exc, f"read node {node}") from exc
        return dict(obj.metadata.labels or {}), dict(obj.metadata.annotations or {})

    def _patch(self, node: str, meta: Mapping[str, Any]) -> None:
        patch_node_metadata(self._api, node, meta)

    def pause(self, node: str) -> None:
        """Record the deploy labels, then pause them, in one write. An earlier record (a pass that died after its
        pause) is kept: the labels now are our own paused values, not the ones to restore."""
        labels, annotations = self._node(node)
        if PAUSE_RECORD in annotations:
            before = decode_record(annotations[PAUSE_RECORD])
            self._patch(node, {"labels": paused_labels(before)})
            return
        before = {k: labels[k] for k in GPU_CLIENT_DEPLOY_LABELS if k in labels}
        record = json.dumps(before, sort_keys=True, separators=(",", ":"))
        self._patch(node, {"labels": paused_labels(before), "annotations": {PAUSE_RECORD: record}})

    def remaining(self, node: str) -> tuple[str, ...]:
        """The GPU client pods still on the node (Terminating ones included, as waitForPodDeletion counts them)."""
        selector = f"app in ({','.join(self._apps)})"
        try:
            pods: Any = self._api.list_namespaced_pod(
                self._namespace, label_selector=selector, field_selector=f"spec.nodeName={node}"
            )
        except ApiException as exc:
            raise api_error(exc, f"list pods in {self._namespace} on {node}") from exc
        return tuple(sorted(f"{self._namespace}/{p.metadata.name}" for p in pods.items or ()))

    def wait_gone(self, node: str) -> str | None:
        """None once no GPU client pod is left on the node; else, after wait_seconds, why not (MP912)."""
        deadline = self._clock() + self._wait
        while True:
            left = self.remaining(node)
            if not left:
                return None
            if self._clock() >= deadline:
                return (
                    f"GPU client pods still on the node after {self._wait:g}s: {', '.join(left[:5])} "
                    "(the GPUs were not changed and the clients were restarted) [MP912]"
                )
            self._sleep(self._poll)

    def restore(self, node: str) -> bool:
        """Bring the clients back from the record and drop it; False (no write) when nothing is recorded."""
        labels, annotations = self._node(node)
        text = annotations.get(PAUSE_RECORD)
        if text is None:
            return False
        try:
            before = decode_record(text)
        except MigplanError:
            # Unreadable: restore as mig-manager's setState would from the paused values (all true).
            before = {k: labels[k] for k in GPU_CLIENT_DEPLOY_LABELS if k in labels}
        self._patch(node, {"labels": restored_labels(before), "annotations": {PAUSE_RECORD: None}})
        return True
