"""The state the twin's GPU Operator components share: what the store's events told them, and what they did.

One object per twin (`OperatorCache`), typed throughout: pods are keyed by `PodKey` (namespace, name), nodes by
name, and every value is a small named record instead of a tuple or a `"kind:node:pod"` string. Its `lock` (a
condition over a re-entrant lock) guards the parts that the store's event callback and the hooks called from
other threads touch (the object caches, the pod indexes, the kubelet's device checkpoint, the ConfigMap
versions); the parts only the worker thread writes (daemon pods, plugin state, allocations) are read from
other threads under the same lock where the original code did so.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from reconciler.twin.operator import clientwait
from reconciler.twin.operator.deviceplugin import Advertised, Unit
from reconciler.twin.operator.scheduler import gpu_requests

__all__ = [
    "AllocatedDevice",
    "ConfigVersion",
    "DaemonPod",
    "MigRun",
    "NodeInfo",
    "NodeUnit",
    "OperatorCache",
    "PodInfo",
    "PodKey",
]


class _PodMeta(msgspec.Struct):
    name: Any = msgspec.UNSET
    namespace: Any = msgspec.UNSET
    labels: Any = msgspec.UNSET
    uid: Any = msgspec.UNSET
    creationTimestamp: Any = msgspec.UNSET
    deletionTimestamp: Any = msgspec.UNSET


class _PodSpec(msgspec.Struct):
    nodeName: Any = msgspec.UNSET
    containers: Any = msgspec.UNSET


class _PodStatus(msgspec.Struct):
    phase: Any = msgspec.UNSET
    extendedResourceClaimStatus: Any = msgspec.UNSET


class _PodHead(msgspec.Struct):
    metadata: _PodMeta
    spec: _PodSpec | msgspec.UnsetType = msgspec.UNSET
    status: _PodStatus | msgspec.UnsetType = msgspec.UNSET


_POD_HEAD = msgspec.json.Decoder(_PodHead)


def pod_head(raw: bytes) -> dict[str, Any] | None:
    """Every field of a pod's JSON that `OperatorCache.remember_pod` reads (keep the two in step), as a pod
    dict holding only those, each present exactly when the pod has it; None when the JSON is not a pod of that
    shape (decode it whole then). About 15x cheaper than decoding the whole pod (managedFields, volumes, env):
    the operator's first read of a 5,000-node fleet's 141,156 pods."""
    try:
        head = _POD_HEAD.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    out: dict[str, Any] = msgspec.to_builtins(head)
    return out


class PodKey(NamedTuple):
    """A pod's identity, as apimachinery `types.NamespacedName`; `str()` gives its `String()`, "namespace/name",
    which is also the holder the NVML twin records on the devices the pod uses."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class NodeInfo(NamedTuple):
    """What the scheduler and the DaemonSet controller read of a node: its labels and its cordon."""

    labels: dict[str, str]
    unschedulable: bool


class DaemonPod(NamedTuple):
    """A daemon pod a node runs (device plugin, mig-manager): its name, the DaemonSet template generation it was
    made from, when its container is started and Ready on the twin's clock (operand_ready_seconds after it was
    created), and, for mig-manager, what its container was started with: the ConfigMap behind its
    `mig-parted-config` volume and its literal env (an old pod keeps both until the rollout replaces it)."""

    name: str
    generation: str
    ready_at: float = float("-inf")
    config_map: str = ""
    env: tuple[tuple[str, str], ...] = ()

    def started(self, now: float) -> bool:
        return now >= self.ready_at


class NodeUnit(NamedTuple):
    """One device a pod holds: the node and the unit (whole GPU or MIG device) on it."""

    node: str
    unit: Unit


class AllocatedDevice(NamedTuple):
    """One entry of the kubelet's device manager checkpoint: a container, a resource, the plugin's device ID."""

    container: str
    resource: str
    device_id: str


class ConfigVersion(NamedTuple):
    """One version of a ConfigMap's `config.yaml`: when it was written (twin clock) and its text (None: absent)."""

    at: float
    text: str | None


@dataclass(slots=True)
class PodInfo:
    """The fields of a pod the components act on (the object itself stays in the store)."""

    key: PodKey
    node: str | None
    phase: str
    uid: str
    created: str
    requests: dict[str, int]
    app: str | None
    generation: str | None
    deleting: bool
    sched_msg: str | None = None
    containers: tuple[str, ...] = ()  # spec.containers[].name, in order (the kubelet's PodResources lists them)

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def namespace(self) -> str:
        return self.key.namespace


@dataclass(slots=True)
class MigRun:
    """A mig-manager run in progress on one node (mig-parted reconfigure.go `Run`)."""

    value: str
    captured: dict[str, str] = field(default_factory=dict)  # deploy labels when the run started
    wait: clientwait.ClientWait | None = None  # waitForPodsToBeDeleted in progress


@dataclass(slots=True)
class OperatorCache:
    """Everything the components share; see the module docstring for what `lock` guards."""

    namespace: str
    cluster_policy_name: str
    device_plugin_ds_name: str
    lock: threading.Condition = field(default_factory=threading.Condition)
    # objects fed by events
    cluster_policy: dict[str, Any] | None = None
    device_plugin_ds: dict[str, Any] | None = None
    mig_manager_ds: dict[str, Any] | None = None
    configmaps: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_versions: dict[str, list[ConfigVersion]] = field(default_factory=dict)
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    # moves whenever a node comes, goes or changes labels: what selects which node is memoised against it
    node_labels_version: int = 0
    pods: dict[PodKey, PodInfo] = field(default_factory=dict)
    by_node: dict[str | None, dict[PodKey, PodInfo]] = field(default_factory=dict)  # None: not bound
    # what the components did
    dp_pods: dict[str, DaemonPod] = field(default_factory=dict)  # node → its device-plugin pod
    dp_state: dict[str, Advertised] = field(default_factory=dict)  # node → what its plugin advertises
    mm_pods: dict[str, DaemonPod] = field(default_factory=dict)  # node → its mig-manager pod
    mig_manager_log: dict[str, list[str]] = field(default_factory=dict)  # node → the lines of its runs
    allocations: dict[PodKey, list[NodeUnit]] = field(default_factory=dict)
    # the kubelet's device manager checkpoint: IDs fixed at allocation (a device destroyed later keeps its ID here,
    # as the kubelet's checkpoint does)
    devices: dict[PodKey, list[AllocatedDevice]] = field(default_factory=dict)
    # Nodes whose kubelet cannot finish the device-plugin pod's deletion (the container does not die): the pod
    # stays Terminating, which is how mig-manager's client wait times out (drift case mig-manager-wedged).
    stuck_terminating: set[str] = field(default_factory=set)

    def cluster_policy_spec(self, *path: str) -> dict[str, Any]:
        """`spec.<path...>` of the ClusterPolicy, {} where absent or null."""
        out: Any = (self.cluster_policy or {}).get("spec") or {}
        for step in path:
            out = out.get(step) or {}
        return out if isinstance(out, dict) else {}

    def remember_node(self, obj: Mapping[str, Any]) -> NodeInfo:
        meta = obj["metadata"]
        info = NodeInfo(dict(meta.get("labels") or {}), bool((obj.get("spec") or {}).get("unschedulable")))
        old = self.nodes.get(meta["name"])
        if old is None or old.labels != info.labels:
            self.node_labels_version += 1
        self.nodes[meta["name"]] = info
        return info

    def forget_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.node_labels_version += 1

    def remember_pod(self, obj: Mapping[str, Any]) -> PodInfo:
        # reads only what `pod_head` keeps (metadata, spec.nodeName/containers, status.phase and what
        # scheduler.gpu_requests reads): a field read here and not there is a wrong cache
        meta = obj["metadata"]
        key = PodKey(meta.get("namespace", ""), meta["name"])
        old = self.pods.get(key)
        labels = meta.get("labels") or {}
        info = PodInfo(
            key=key,
            node=(obj.get("spec") or {}).get("nodeName") or None,
            phase=(obj.get("status") or {}).get("phase", "Pending"),
            uid=meta.get("uid", ""),
            created=meta.get("creationTimestamp", ""),
            requests=gpu_requests(obj),
            app=labels.get("app"),
            generation=labels.get("pod-template-generation"),
            deleting=bool(meta.get("deletionTimestamp")),
            sched_msg=old.sched_msg if old is not None and old.uid == meta.get("uid") else None,
            containers=tuple(str(c.get("name", "")) for c in (obj.get("spec") or {}).get("containers") or []),
        )
        if old is not None and old.node != info.node:
            self.by_node.get(old.node, {}).pop(key, None)
        self.pods[key] = info
        self.by_node.setdefault(info.node, {})[key] = info
        return info

    def forget_pod(self, key: PodKey) -> PodInfo | None:
        info = self.pods.pop(key, None)
        if info is not None:
            self.by_node.get(info.node, {}).pop(key, None)
        return info

    def pods_on(self, node: str | None) -> list[PodInfo]:
        """Pods bound to `node` (None: not bound), a snapshot taken under the lock the event callback uses."""
        with self.lock:
            return list(self.by_node.get(node, {}).values())

    def advertised(self, node: str) -> Advertised | None:
        """What the node's running device plugin advertises (None without a plugin pod)."""
        return self.dp_state.get(node) if node in self.dp_pods else None
