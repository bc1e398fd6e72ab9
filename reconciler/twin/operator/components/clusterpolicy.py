"""The GPU Operator's own controller: ClusterPolicy → the device-plugin DaemonSet, the ClusterPolicy status, and
the default `nvidia.com/mig.config` label of a MIG-capable node.

From NVIDIA/gpu-operator@a22dbf67: `controllers/object_controls.go` `DaemonSet()` (render whole, compare the
`nvidia.com/last-applied-hash`, replace whole: reconciler/twin/operator/dsupdate.py), `controllers/
nodelabeling_controller.go` with `state_manager.go` `hasMIGConfigLabel` / `hasMIGCapableGPU` (the default label).
"""

from __future__ import annotations

from typing import Any

from reconciler.twin.fleet import TwinNode
from reconciler.twin.operator import dsupdate
from reconciler.twin.operator.cache import OperatorCache
from reconciler.twin.operator.names import MIG_CAPABLE, MIG_CONFIG
from reconciler.twin.operator.rendering import operator_daemonset, operator_mig_manager_daemonset
from reconciler.twin.operator.storeapi import StoreApi

__all__ = ["ClusterPolicyController"]


class ClusterPolicyController:
    """Renders the operand DaemonSet, reports the ClusterPolicy's state, labels new MIG-capable nodes."""

    def __init__(self, api: StoreApi, cache: OperatorCache) -> None:
        self.api = api
        self.cache = cache

    def reconcile(self) -> None:
        """object_controls.go DaemonSet(): render each operand DaemonSet whole from the ClusterPolicy (the device
        plugin: TransformDevicePlugin; mig-manager: TransformMIGManager) and, when its hash differs from the live
        object's nvidia.com/last-applied-hash, replace the live object with it (dsupdate.py): annotations the
        operator does not render are dropped, a changed template rolls the pods (components/daemonsets.py). A
        rendering that fails (applyUpdateStrategyConfig's ParseInt) writes nothing: the step returns its error."""
        cp = self.cache.cluster_policy
        if cp is None:
            return
        ns = self.cache.namespace
        for live in (self.cache.device_plugin_ds, self.cache.mig_manager_ds):
            if live is None:
                continue  # [assumption] the twin does not re-create a deleted operand DaemonSet
            try:
                if live is self.cache.device_plugin_ds:
                    rendered = operator_daemonset(self.cache.device_plugin_ds_name, ns, cp)
                else:
                    rendered = operator_mig_manager_daemonset(ns, cp)
            except ValueError:
                continue
            write = dsupdate.apply_rendered(live, rendered)
            if write is not None:
                self.api.store.update("daemonsets.apps", write, ns)

    def write_status(self) -> None:
        """ClusterPolicy status.state (CRD enum ignored|ready|notReady): `notReady` while an operand DaemonSet has
        unavailable pods (e.g. the device plugin crash-looping under `single`) [assumption: the twin models only
        the device plugin and mig-manager operands]. Reads the DaemonSet statuses just written to the cache."""
        cp = self.cache.cluster_policy
        if cp is None:
            return
        unavailable = 0
        for ds in (self.cache.device_plugin_ds, self.cache.mig_manager_ds):
            if ds is None:
                continue
            st: dict[str, Any] = ds.get("status") or {}
            unavailable += int(st.get("numberUnavailable") or 0)
        state = "ready" if unavailable == 0 else "notReady"
        ns = self.cache.namespace
        have = cp.get("status") or {}
        if have.get("state") == state and have.get("namespace") == ns:
            return
        self.api.store.patch(
            "clusterpolicies.nvidia.com",
            self.cache.cluster_policy_name,
            {"status": {"state": state, "namespace": ns}},
            subresource="status",
        )

    def default_mig_config(self, name: str, tw: TwinNode, labels: dict[str, str]) -> bool:
        """gpu-operator controllers/nodelabeling_controller.go: a MIG-capable node (state_manager.go
        hasMIGCapableGPU: label nvidia.com/mig.capable=true) whose nvidia.com/mig.config is absent OR empty
        (hasMIGConfigLabel) gets spec.migManager.config.default when that is all-disabled. The default comes
        from spec.migManager.config: without a config object there is no default (the CRD default sits on
        config.default only). True when it wrote the label."""
        mm = self.cache.cluster_policy_spec("migManager")
        if self.cache.cluster_policy is None or mm.get("enabled", True) is False or not tw.gpus:
            return False
        if labels.get(MIG_CAPABLE) != "true":
            return False
        config = mm.get("config")
        if not isinstance(config, dict) or config.get("default", "all-disabled") != "all-disabled":
            return False
        self.api.patch_labels(name, {MIG_CONFIG: "all-disabled"})
        return True
