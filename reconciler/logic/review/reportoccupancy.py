"""The pods a committed drift report says hold GPU devices, as the observed pods `migplan plan` needs.

Pure. CI has no cluster credentials, but the controller commits a drift report on the reports branch
whose `occupancy` names, per node and profile, the pods holding partitions (`holders`: pod, count, and
the inventory owner it was matched to). `observed_from_report` turns those holders back into bound,
running pods that request the same resource, each labelled `app: <owner>` when the report matched an
owner, so reconciler/logic/revdiff.disruptions — the apply mode's real disruption model — assigns them
to partitions exactly as it does for a live cluster. The report is as old as its commit: the plan says
so, with its revision.

The report is untrusted data (anyone who can push the reports branch wrote it): a holder whose pod is
not `namespace/name`, a count that is not a small positive int or a profile that is not a plain name
is skipped; the result is bounded (MAX_HOLDERS).

Where mig-manager reboots a node whose mode step fails (WITH_REBOOT) or stops its kubelet (a host driver), the report
says so (`migManager`) and counts, per node, the pods a reboot ends (`rebootEnds`: a count and the first names); they
come back as a ClusterPolicy carrying only those two facts and as ObservedState.node_pods, read as strictly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconciler.logic.observe.occupancy import resource_of
from reconciler.model.observed import (
    GPU_RESOURCE,
    REBOOT_NAMES_CAP,
    ClusterPolicyState,
    ContainerResources,
    NodePods,
    ObservedPod,
    ObservedState,
)

MAX_HOLDERS = 200_000
MAX_PODS_ON_NODE = 1_000_000  # far past any kubelet's maxPods: a larger count is not believed
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_PROFILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,62}")


def observed_from_report(report: Mapping[str, Any]) -> ObservedState:
    """Bound running pods per node from the report's occupancy holders (one pod may hold several
    profiles on a node: its requests are merged)."""
    requests: dict[tuple[str, str, str], dict[str, int]] = {}
    owners: dict[tuple[str, str, str], str] = {}
    nodes = report.get("nodes")
    for node in nodes if isinstance(nodes, list) else ():
        if not isinstance(node, dict) or not isinstance(node.get("name"), str) or not _NAME.fullmatch(node["name"]):
            continue
        occupancy = node.get("occupancy")
        for occ in occupancy if isinstance(occupancy, list) else ():
            if not isinstance(occ, dict):
                continue
            profile, holders = occ.get("profile"), occ.get("holders")
            if not isinstance(profile, str) or not _PROFILE.fullmatch(profile) or not isinstance(holders, list):
                continue
            resource = GPU_RESOURCE if profile == "gpu" else resource_of(profile)
            for h in holders:
                if len(requests) >= MAX_HOLDERS or not isinstance(h, dict):
                    continue
                pod, count, owner = h.get("pod"), h.get("count"), h.get("owner")
                if not isinstance(pod, str) or not isinstance(count, int) or isinstance(count, bool):
                    continue
                namespace, _, name = pod.partition("/")
                if not (_NAME.fullmatch(namespace) and _NAME.fullmatch(name)) or not 0 < count <= 64:
                    continue
                key = (node["name"], namespace, name)
                requests.setdefault(key, {})[resource] = requests.get(key, {}).get(resource, 0) + count
                if isinstance(owner, str) and owner:
                    owners[key] = owner
    pods = tuple(
        ObservedPod(
            namespace=ns,
            name=name,
            node=node_name,
            phase="Running",
            containers=(ContainerResources(name="main", limits=res),),
            labels={"app": owners[(node_name, ns, name)]} if (node_name, ns, name) in owners else {},
        )
        for (node_name, ns, name), res in sorted(requests.items())
    )
    return ObservedState(
        nodes={}, pods=pods, cluster_policy=_mig_manager(report), node_pods=_reboot_ends(report, nodes)
    )


def _mig_manager(report: Mapping[str, Any]) -> ClusterPolicyState | None:
    """The two ClusterPolicy facts the report carries (`migManager`), as the ClusterPolicy they were read from:
    WITH_REBOOT in spec.migManager.env, and a host driver (spec.driver.enabled false). Anything but booleans: None."""
    raw = report.get("migManager")
    if not isinstance(raw, dict):
        return None
    reboot, host = raw.get("withReboot"), raw.get("shutdownHostGpuClients")
    if not isinstance(reboot, bool) or not isinstance(host, bool):
        return None
    return ClusterPolicyState(
        name="(the drift report's migManager)",
        mig_strategy=None,
        mig_manager_config_name=None,
        device_plugin_config_name=None,
        mig_manager_env={"WITH_REBOOT": "true"} if reboot else {},
        driver_enabled=not host,
    )


def _reboot_ends(report: Mapping[str, Any], nodes: Any) -> dict[str, NodePods]:
    """node -> the pods a reboot ends, from each node's `rebootEnds` (count, and names kept only when they are
    `namespace/name`, at most REBOOT_NAMES_CAP)."""
    out: dict[str, NodePods] = {}
    if not isinstance(report.get("migManager"), dict):
        return out
    for node in nodes if isinstance(nodes, list) else ():
        if not isinstance(node, dict) or not isinstance(node.get("name"), str) or not _NAME.fullmatch(node["name"]):
            continue
        raw = node.get("rebootEnds")
        count = raw.get("pods") if isinstance(raw, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_PODS_ON_NODE:
            continue
        names = raw.get("names") if isinstance(raw, dict) else None
        kept: set[str] = set()
        for text in (names if isinstance(names, list) else ())[:REBOOT_NAMES_CAP]:
            namespace, _, name = text.partition("/") if isinstance(text, str) else ("", "", "")
            if _NAME.fullmatch(namespace) and _NAME.fullmatch(name):
                kept.add(text)
        out[node["name"]] = NodePods(count=count, names=tuple(sorted(kept))[:count])
    return out
