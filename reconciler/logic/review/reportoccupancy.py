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

On a node NVIDIA's DRA driver publishes devices for, the report records `dra` (reconciler.logic.drift.drarecord): the
regime, the GPUs' minor numbers, the published device names and the claims allocated them. They come back as
ObservedState.dra, .claims and .reported_minors, so the plan names a re-cut's devices and claims as it does live
(reconciler.logic.review.dradevices). A record that cannot be read at all leaves the node out of that table with
MP754; a device name, claim or minor that cannot be read is skipped with MP754, and a list the controller capped is
MP755: the plan never reads a damaged or partial record as "no claim is disrupted" without saying so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.logic.codecs import dradevices
from reconciler.logic.observe.occupancy import resource_of
from reconciler.model.dra import ClaimedDevice, DraDevice, NodeDra, ObservedClaim, Regime
from reconciler.model.drift import DRA_CLAIM_ITEMS_CAP, DRA_CLAIMS_CAP, DRA_DEVICES_CAP
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


def observed_from_report(report: Mapping[str, Any], dra: ReportDra | None = None) -> ObservedState:
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
    dra = read_dra(report) if dra is None else dra  # `dra`: read_dra(report) already taken by the caller
    return ObservedState(
        nodes={},
        pods=pods,
        cluster_policy=_mig_manager(report),
        node_pods=_reboot_ends(report, nodes),
        dra=dra.published,
        claims=dra.claims,
        reported_minors=dra.minors,
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


DRA_DRIVER = "gpu.nvidia.com"
MAX_DRA_NODES = 20_000  # past any cluster migplan plans: a report listing more is not read further
_WRITER_MAX = 200
# The counter set a node gets back when the report says another writer lays it out (DynamicMIG, a GPUCluster's or a
# DaemonSet's gate): draregime.regime then reads it as DynamicMIG, and the plan names no static device there.
_NOT_STATIC = "(the drift report: another writer lays this node out)"


@dataclass(frozen=True, slots=True)
class ReportDra:
    """The DRA records of a report as observed values, and what could not be read: (code, node, message)."""

    published: dict[str, NodeDra] = field(default_factory=dict)
    claims: tuple[ObservedClaim, ...] = ()
    minors: dict[str, dict[int, int]] = field(default_factory=dict)
    problems: tuple[tuple[str, str, str], ...] = ()


def read_dra(report: Mapping[str, Any]) -> ReportDra:
    """Every node's `dra` record, strictly: see the module docstring."""
    published: dict[str, NodeDra] = {}
    all_minors: dict[str, dict[int, int]] = {}
    problems: list[tuple[str, str, str]] = []
    claims: list[ObservedClaim] = []
    nodes = report.get("nodes")
    for node in (nodes if isinstance(nodes, list) else [])[:MAX_DRA_NODES]:
        if not isinstance(node, dict) or "dra" not in node:
            continue
        name = node.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in published:
            continue
        read = _node_dra(name, node["dra"], problems)
        if read is None:
            continue
        published[name], minors, node_claims = read
        if minors:
            all_minors[name] = minors
        claims += node_claims
    return ReportDra(published, tuple(claims), all_minors, tuple(problems))


def _node_dra(
    node: str, raw: Any, problems: list[tuple[str, str, str]]
) -> tuple[NodeDra, dict[int, int], list[ObservedClaim]] | None:
    """One node's record; None (MP754) when its regime, writer or devices cannot be read."""
    unreadable = ("MP754", node, "the report's DRA record cannot be read: its devices and claims are not shown")
    regime = raw.get("regime") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(regime, str) or regime not in {r.value for r in Regime}:
        problems.append(unreadable)
        return None
    writer, devices = raw.get("writer"), raw.get("devices")
    if not (writer is None or (isinstance(writer, str) and 0 < len(writer) <= _WRITER_MAX)):
        problems.append(unreadable)
        return None
    if not isinstance(devices, list):
        problems.append(unreadable)
        return None
    skipped = 0
    kept: dict[str, DraDevice] = {}
    for d in devices[:DRA_DEVICES_CAP]:
        parsed = dradevices.parse(d) if isinstance(d, str) else None
        if parsed is None:
            skipped += 1
            continue
        kept[d] = DraDevice(name=d, kind="gpu" if isinstance(parsed, dradevices.DraGpu) else "mig")
    skipped += max(len(devices) - DRA_DEVICES_CAP, 0)
    if not devices:  # the controller records only nodes the driver publishes devices for: none is not its record
        problems.append(unreadable)
        return None
    other = regime != Regime.DRA_STATIC.value or writer is not None  # static only when the record says so
    published = NodeDra(node, tuple(kept.values()), (_NOT_STATIC,) if other else ())
    minors = _minors(raw.get("minors"))
    if minors is None:
        problems.append(("MP754", node, "the report's GPU minor numbers cannot be read: the GPU index is taken"))
        minors = {}
    node_claims, bad_claims = _claims(node, raw.get("claims"))
    if skipped:
        problems.append(("MP754", node, f"{skipped} device name(s) of the report cannot be read: skipped"))
    if bad_claims:
        problems.append(
            ("MP754", node, f"{bad_claims} claim(s) of the report cannot be read: the claims shown may be partial")
        )
    more = [raw.get(k) for k in ("devicesMore", "claimsMore")]
    if any(m is not None and (not isinstance(m, int) or isinstance(m, bool) or m != 0) for m in more):
        problems.append(
            (
                "MP755",
                node,
                "the controller recorded only part of the DRA devices or claims: the list is partial",
            )
        )
    return published, minors, node_claims


def _minors(raw: Any) -> dict[int, int] | None:
    """index -> minor; None when any entry cannot be read (a wrong minor would name the wrong device) or the list is
    missing (the controller always writes one, empty where no observer measured a minor)."""
    if not isinstance(raw, list) or len(raw) > 64:
        return None
    out: dict[int, int] = {}
    for m in raw:
        index = m.get("index") if isinstance(m, dict) else None
        minor = m.get("minor") if isinstance(m, dict) else None
        if not (_small_int(index, 63) and _small_int(minor, 1 << 20)) or index in out:
            return None
        assert isinstance(index, int) and isinstance(minor, int)
        out[index] = minor
    return out


def _small_int(value: Any, top: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top


def _claims(node: str, raw: Any) -> tuple[list[ObservedClaim], int]:
    """The node's claims, and how many could not be read (a missing list counts as one: the controller always writes
    one, and a missing one must not read as "no claim")."""
    if not isinstance(raw, list):
        return [], 1
    out: list[ObservedClaim] = []
    bad = max(len(raw) - DRA_CLAIMS_CAP, 0)
    for c in raw[:DRA_CLAIMS_CAP]:
        claim = _claim(node, c)
        if claim is None:
            bad += 1
        else:
            out.append(claim)
    return out, bad


def _claim(node: str, raw: Any) -> ObservedClaim | None:
    if not isinstance(raw, dict):
        return None
    key, devices, pods = raw.get("claim"), raw.get("devices"), raw.get("pods", [])
    if not _pod_key(key) or not isinstance(devices, list) or not isinstance(pods, list):
        return None
    if not devices or len(devices) > DRA_CLAIM_ITEMS_CAP or len(pods) > DRA_CLAIM_ITEMS_CAP:
        return None
    if not all(isinstance(d, str) and dradevices.parse(d) is not None for d in devices) or not all(
        _pod_key(p) for p in pods
    ):
        return None
    namespace, _, name = str(key).partition("/")
    return ObservedClaim(
        namespace,
        name,
        tuple(ClaimedDevice(DRA_DRIVER, node, d) for d in sorted(set(devices))),
        tuple(sorted(set(pods))),
    )


def _pod_key(value: Any) -> bool:
    """`namespace/name` with both parts Kubernetes names."""
    if not isinstance(value, str):
        return False
    namespace, _, name = value.partition("/")
    return bool(_NAME.fullmatch(namespace) and _NAME.fullmatch(name))
