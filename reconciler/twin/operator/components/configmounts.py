"""The kubelet's ConfigMap volumes: what a pod sees of a ConfigMap, which lags the API object.

A ConfigMap volume is refreshed on the pod's periodic sync (syncFrequency, 1m by default) from the kubelet's
ConfigMap manager cache (Watch, or a TTL cache of 1m), so mig-manager's mounted config.yaml lags the API object by
up to "sync period + cache propagation delay" (kubernetes.io, "Mounted ConfigMaps are updated automatically";
kubernetes pkg/kubelet/configmap/configmap_manager.go). The twin keeps the recent versions of each ConfigMap's
`config.yaml` with the time they were written and projects the newest version at least `delay_seconds` old.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.twin.operator.cache import ConfigVersion, OperatorCache

__all__ = ["ConfigMapMounts"]

_KEEP = 16  # older versions are long projected


class ConfigMapMounts:
    """ConfigMap versions in the shared cache, and the text a pod has mounted now."""

    def __init__(self, cache: OperatorCache, clock: Callable[[], float], delay_seconds: float) -> None:
        self.cache = cache
        self.clock = clock
        self.delay_seconds = delay_seconds

    def loaded(self, name: str, text: str | None) -> None:
        """A ConfigMap present when the twin starts: already projected into every pod."""
        self.cache.config_versions[name] = [ConfigVersion(float("-inf"), text)]

    def written(self, name: str, text: str | None) -> None:
        """A ConfigMap event (text None: deleted, or no config.yaml): a new version when the text changed."""
        versions = self.cache.config_versions.setdefault(name, [])
        if not versions or versions[-1].text != text:
            versions.append(ConfigVersion(self.clock(), text))
            del versions[:-_KEEP]

    def projected(self, name: str) -> None:
        """Drift injection: the ConfigMap's current content counts as projected into every pod already."""
        with self.cache.lock:
            versions = self.cache.config_versions.get(name)
            if versions:
                versions[:] = [ConfigVersion(float("-inf"), versions[-1].text)]

    def mounted_text(self, name: str, *, since: float = float("-inf")) -> str | None:
        """config.yaml as the kubelet has projected ConfigMap `name`: the newest version written at least
        delay_seconds ago (the oldest one known if none is that old yet; None when the ConfigMap or its key is
        missing in that version). A pod whose container started at `since` mounted the version current then:
        the kubelet fills a new pod's volume from the API object before it starts the container."""
        with self.cache.lock:
            versions = list(self.cache.config_versions.get(name, ()))
        if not versions:
            return None
        cutoff = max(self.clock() - self.delay_seconds, since)
        seen = [v.text for v in versions if v.at <= cutoff]
        return seen[-1] if seen else versions[0].text
