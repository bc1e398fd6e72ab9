"""gpu-feature-discovery on a node: relabels the node from its GPUs whenever the node is reconciled (GFD
relabels periodically), unless its deploy label is paused by mig-manager.

The labels themselves are the pure reconciler/twin/operator/gfd.py `gfd_labels`; GFD gets the same env and config
file as the device plugin (stack-facts §1.6), so its strategy is the ClusterPolicy's, else the config file's.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.twin.fleet import TwinNode
from reconciler.twin.operator.cache import OperatorCache
from reconciler.twin.operator.components.deviceplugin import DevicePlugin
from reconciler.twin.operator.deviceplugin import STRATEGIES
from reconciler.twin.operator.gfd import diff_labels, gfd_labels
from reconciler.twin.operator.names import GFD_DEPLOY_LABEL, PAUSED
from reconciler.twin.operator.storeapi import StoreApi

__all__ = ["FeatureDiscovery"]


class FeatureDiscovery:
    """GFD's labels on every GPU node."""

    def __init__(self, api: StoreApi, cache: OperatorCache, plugin: DevicePlugin) -> None:
        self.api = api
        self.cache = cache
        self.plugin = plugin

    def strategy(self, pod_labels: Mapping[str, str]) -> str:
        """GFD gets the same env and config file as the device plugin (§1.6)."""
        strategy = self.cache.cluster_policy_spec("mig").get("strategy") or ""
        if strategy:
            return str(strategy)
        dp_cfg = self.cache.cluster_policy_spec("devicePlugin", "config")
        if dp_cfg.get("name"):
            flags = self.plugin.config_flags(
                str(dp_cfg["name"]), {"DEFAULT_CONFIG": str(dp_cfg.get("default") or "")}, pod_labels
            )
            if flags.get("migStrategy"):
                return str(flags["migStrategy"])
        return "none"

    def relabel(self, name: str, tw: TwinNode, labels: dict[str, str]) -> None:
        if labels.get(GFD_DEPLOY_LABEL) == PAUSED:
            return
        strategy = self.strategy(labels)
        if strategy not in STRATEGIES:
            return  # GFD exits at startup too; old labels stay
        patch = diff_labels(labels, gfd_labels(tw.gpus, strategy))
        if patch:
            self.api.patch_labels(name, patch)
