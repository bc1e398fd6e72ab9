"""Which old daemon pods the DaemonSet controller replaces now: a DaemonSet's `RollingUpdate` with `maxSurge: 0`.

From kubernetes/kubernetes `pkg/controller/daemon/update.go` `rollingUpdate` (the `maxSurge == 0` branch) and
`pkg/controller/daemon/util/daemonset_util.go` `UnavailableCount`:

* `maxUnavailable` is `spec.updateStrategy.rollingUpdate.maxUnavailable` scaled against the number of nodes that
  should run the pod, a percentage rounded *up* (`GetScaledValueFromIntOrPercent(..., roundUp=true)`); the API
  server defaults it to 1 (apps/v1 `SetDefaults_DaemonSet`), and the GPU Operator's `applyUpdateStrategyConfig`
  (gpu-operator `controllers/object_controls.go`) writes `spec.daemonsets.rollingUpdate.maxUnavailable` there
  (Helm default "1");
* a node with no daemon pod, or whose new pod is not available yet, counts as unavailable;
* an old pod that is not available itself (crash-looping, not Ready) is replaced at once, whatever the budget;
* of the old available pods, at most `maxUnavailable - unavailable` are deleted; the controller's `manage` then
  creates the new pod on that node. Go walks its node map in random order; the twin takes nodes by name.
* `type: OnDelete` replaces nothing: a new pod comes only when the old one is deleted by someone else.

Pure: values in, values out; components/daemonsets.py feeds it from the cache and deletes what it returns.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_MAX_UNAVAILABLE", "NodePods", "max_unavailable", "on_delete", "to_replace"]

DEFAULT_MAX_UNAVAILABLE = 1  # apps/v1 SetDefaults_DaemonSet
_PERCENT = re.compile(r"^([0-9]{1,4})%$")


@dataclass(frozen=True, slots=True)
class NodePods:
    """One node the DaemonSet selects: whether its pod is of the current template, and available."""

    node: str
    has_pod: bool
    current: bool  # the pod's pod-template-generation is the DaemonSet's (meaningless without a pod)
    available: bool  # Ready (no minReadySeconds on the operator's operands)


def _rolling(ds: Mapping[str, Any]) -> Mapping[str, Any]:
    strategy = (ds.get("spec") or {}).get("updateStrategy")
    return strategy if isinstance(strategy, Mapping) else {}


def on_delete(ds: Mapping[str, Any]) -> bool:
    """`spec.updateStrategy.type: OnDelete`: the controller never replaces an old pod itself."""
    return _rolling(ds).get("type") == "OnDelete"


def max_unavailable(ds: Mapping[str, Any], desired: int) -> int:
    """UnavailableCount: the DaemonSet's maxUnavailable for `desired` nodes (a percentage rounded up).

    [assumption] a value the API server would reject (negative, not an int or `N%`, a bool) counts as the
    default 1: the twin's store does not validate DaemonSets, and a real cluster never holds such a value."""
    rolling = _rolling(ds).get("rollingUpdate")
    value = rolling.get("maxUnavailable") if isinstance(rolling, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        if value.isdigit() and len(value) <= 9:
            return int(value)
        m = _PERCENT.match(value)
        if m:
            return math.ceil(int(m.group(1)) * max(desired, 0) / 100)
    return DEFAULT_MAX_UNAVAILABLE


def to_replace(nodes: Iterable[NodePods], budget: int) -> list[str]:
    """The nodes whose old pod the controller deletes now (rollingUpdate, maxSurge 0), in the order deleted."""
    unavailable = 0
    broken: list[str] = []
    candidates: list[str] = []
    for n in sorted(nodes, key=lambda x: x.node):
        if not n.has_pod:
            unavailable += 1  # manage() creates the pod; until it is available it counts against the budget
        elif n.current:
            if not n.available:
                unavailable += 1
        elif not n.available:
            broken.append(n.node)  # an old pod that serves nothing: replacing it costs no availability
        else:
            candidates.append(n.node)
    room = max(budget - unavailable, 0)
    return broken + candidates[:room]
