"""Selectable fields the registries compute rather than read at one path, and the field labels they rename.

Pure. Each entry names its kubernetes/kubernetes source:
- pkg/registry/core/event/strategy.go `ToSelectableFields`: `source` is source.component, or the
  reportingComponent (internal ReportingController) when the component is empty;
- pkg/registry/core/pod/strategy.go `ToSelectableFields`: `status.podIP` is the first of status.podIPs;
  `status.podIPs` is accepted by the v1 field label conversion but is not in the selectable set, so it always
  reads as "";
- pkg/apis/core/v1/conversion.go: `spec.host` is an old client's name for a pod's `spec.nodeName`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Getter = Callable[[Mapping[str, Any]], Any]


def _event_source(obj: Mapping[str, Any]) -> Any:
    source = obj.get("source")
    component = source.get("component") if isinstance(source, Mapping) else None
    return component or obj.get("reportingComponent") or ""


def _pod_ip(obj: Mapping[str, Any]) -> Any:
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return ""
    ips = status.get("podIPs")
    if isinstance(ips, list) and ips and isinstance(ips[0], Mapping):
        return ips[0].get("ip") or ""
    return status.get("podIP") or ""


def _nothing(obj: Mapping[str, Any]) -> Any:
    return ""


EVENT_GETTERS: Mapping[str, Getter] = {"source": _event_source}
POD_GETTERS: Mapping[str, Getter] = {"status.podIP": _pod_ip, "status.podIPs": _nothing}
POD_ALIASES: Mapping[str, str] = {"spec.host": "spec.nodeName"}
