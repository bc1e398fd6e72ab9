"""The node observer's report against the plan: real placements, real holders, and what differs.

Pure. The node observer (`migplan agent`, every apply mode) publishes on its Node what NVML and the
kubelet's PodResources API say (reconciler.model.nodeobservation, codec reconciler.logic.codecs.observedcodec).
This module joins that observation with the node's plan, GPU by GPU:

- each observed GPU instance is matched to a planned partition of the same profile, at the same
  placement first, then at any placement (the driver chose another one: `gpu-operator` mode, where
  mig-parted's v1 format has no placements); what is left over on either side is "unplanned" (the GPU
  has it, the plan does not) or "missing" (the plan has it, the GPU does not);
- the owner a partition has is the one the plan names for the planned partition it was matched to;
- its holders are the pods the kubelet allocated its MIG device to, as the observer joined them.

An observation is *used* only when it can be trusted: decoded, and (v2) not older than the silent
threshold. Its holders are used only when they are measured (`NodeObservation.holders_known`: v2, the
kubelet answered, nothing truncated). Elsewhere the controller falls back to its inference (occupancy.py)
and says so: every value built here carries `observed`, every fallback `inferred`.

Findings MP540-MP547 (codes and meanings in reconciler.logic.drift.drift.FINDING_CODES) are built here; drift.py
adds them to the cycle's analysis.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler import __version__
from reconciler.catalog import load_catalog
from reconciler.logic.codecs import observedcodec
from reconciler.logic.observe.occupancy import pod_identities
from reconciler.model.drift import Finding, FindingSeverity, finding
from reconciler.model.inventory import GpuSpec, NodeSpec, Placement
from reconciler.model.nodeobservation import SOURCE_OK, Holder, NodeObservation, ObservedGpu
from reconciler.model.observed import OBSERVED_ANNOTATION, ObservedNode, ObservedPod
from reconciler.model.strict import StrictValueError, short

OBSERVED = "observed"
INFERRED = "inferred"
MIXED = "mixed"

# Freshness (the observer's side is in observedcodec): an observation older than this many heartbeats is
# an observer that stopped reporting (MP543), and its facts are no longer used.
HEARTBEAT = timedelta(seconds=observedcodec.HEARTBEAT_SECONDS)
SILENT_AFTER = HEARTBEAT * observedcodec.SILENT_AFTER_HEARTBEATS
CONTROLLER_OBSERVER = f"migplan/{__version__}"  # what an observer of the same version writes


# Decoding a full 8-GPU observation takes about a millisecond or more, and an unchanged node publishes the same
# text for a heartbeat (5 minutes) while the controller lists it every cycle: the decoded value is memoised by a
# digest of the text (the text itself is not kept), at most _MEMO_SIZE entries, oldest dropped first. Decoding is
# a pure function of the text, so the memo changes nothing but the time.
_MEMO_SIZE = 8192
_memo: OrderedDict[bytes, tuple[NodeObservation | None, str | None]] = OrderedDict()


def read_observation(annotations: Mapping[str, str]) -> tuple[NodeObservation | None, str | None]:
    """The node's observation from its annotations: (observation, None), (None, reason) when the
    annotation is malformed (MP547: the node is left alone), (None, None) when there is none."""
    text = annotations.get(OBSERVED_ANNOTATION)
    if text is None:
        return None, None
    key = hashlib.blake2b(str(text).encode("utf-8", "surrogatepass"), digest_size=20).digest() + (
        b"s" if isinstance(text, str) else b"x"
    )
    hit = _memo.get(key)
    if hit is not None:
        _memo.move_to_end(key)
        return hit
    try:
        found: tuple[NodeObservation | None, str | None] = (observedcodec.decode(text), None)
    except StrictValueError as exc:
        found = (None, str(exc))
    _memo[key] = found
    if len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)
    return found


def usable(node: ObservedNode | None, *, now: datetime | None, silent_after: timedelta = SILENT_AFTER) -> bool:
    """Whether the node's observed layout is used: decoded, and not silent (v1 has no time: used)."""
    if node is None or node.observation is None:
        return False
    return not silent(node.observation, now=now, silent_after=silent_after)


def silent(obs: NodeObservation, *, now: datetime | None, silent_after: timedelta = SILENT_AFTER) -> bool:
    """Not reported for longer than `silent_after`, or dated further than that in the future: a clock that
    far ahead (a skewed node, a hand-written annotation) is data, not freshness; trusted, it would keep a
    dead observer's facts in use for as long as its stamp stays ahead (issue 25)."""
    if now is None or obs.observed_at is None:
        return False
    return abs(now - obs.observed_at) > silent_after


# --- the join -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinedInstance:
    """One observed GPU instance, set against the plan."""

    gpu: int
    profile: str
    placement: Placement
    holders: tuple[str, ...]  # namespace/name of the pods holding its MIG device, sorted, unique
    position: int | None = None  # the planned partition it is matched to (index in GpuSpec.partitions)
    owner: str | None = None  # that partition's owner
    planned_start: int | None = None  # that partition's planned placement start, when the plan has one

    @property
    def planned(self) -> bool:
        return self.position is not None

    @property
    def moved(self) -> bool:
        return self.planned_start is not None and self.planned_start != self.placement.start


@dataclass(frozen=True, slots=True)
class GpuJoin:
    index: int
    plan: GpuSpec | None  # None: the GPU is not in the plan
    observed: ObservedGpu | None  # None: the observer did not report this GPU
    instances: tuple[JoinedInstance, ...] = ()  # by placement
    missing: tuple[int, ...] = ()  # planned partition positions the GPU does not have
    whole_holders: tuple[str, ...] = ()  # pods holding the whole GPU (nvidia.com/gpu, MIG disabled)

    def holder_at(self, position: int) -> JoinedInstance | None:
        for i in self.instances:
            if i.position == position:
                return i
        return None


@dataclass(frozen=True, slots=True)
class NodeJoin:
    node: str
    observation: NodeObservation
    gpus: tuple[GpuJoin, ...]
    holders_known: bool  # the holders are measured (else only the layout is used)

    def gpu(self, index: int) -> GpuJoin | None:
        for g in self.gpus:
            if g.index == index:
                return g
        return None

    def holders_on(self, gpus: Iterable[int]) -> tuple[str, ...]:
        """Pods holding any partition (or the whole GPU) of these GPUs, sorted."""
        wanted = frozenset(gpus)
        out: set[str] = set()
        for g in self.gpus:
            if g.index in wanted:
                out.update(g.whole_holders)
                for i in g.instances:
                    out.update(i.holders)
        return tuple(sorted(out))


def _pods(holders: Iterable[Holder]) -> tuple[str, ...]:
    return tuple(sorted({h.pod_key for h in holders}))


def join_gpu(plan: GpuSpec | None, gpu: ObservedGpu | None, index: int) -> GpuJoin:
    planned = list(plan.partitions) if plan is not None and plan.mig_enabled else []
    starts = [p.start for p in plan.placements] if plan is not None and len(plan.placements) == len(planned) else []
    observed = sorted(gpu.instances, key=lambda i: (i.placement.start, i.profile)) if gpu is not None else []
    matched: dict[int, int] = {}  # observed instance k -> planned position
    free = set(range(len(planned)))
    # Same profile at the same placement first, then same profile anywhere (the driver's choice).
    for exact in (True, False):
        for k, inst in enumerate(observed):
            if k in matched:
                continue
            for pos in sorted(free):
                if planned[pos].profile != inst.profile:
                    continue
                if exact and (not starts or starts[pos] != inst.placement.start):
                    continue
                matched[k] = pos
                free.discard(pos)
                break
    instances = tuple(
        JoinedInstance(
            gpu=index,
            profile=inst.profile,
            placement=inst.placement,
            holders=_pods(inst.holders),
            position=matched.get(k),
            owner=planned[matched[k]].owner if k in matched else None,
            planned_start=starts[matched[k]] if k in matched and starts else None,
        )
        for k, inst in enumerate(observed)
    )
    return GpuJoin(
        index=index,
        plan=plan,
        observed=gpu,
        instances=instances,
        missing=tuple(sorted(free)),
        whole_holders=_pods(gpu.holders) if gpu is not None else (),
    )


def join(node: str, plan: NodeSpec | None, obs: NodeObservation) -> NodeJoin:
    """The observation of one node set against its plan (None: an undocumented node)."""
    planned = {g.index: g for g in plan.gpus} if plan is not None else {}
    seen = {g.index: g for g in obs.gpus}
    gpus = tuple(join_gpu(planned.get(i), seen.get(i), i) for i in sorted(set(planned) | set(seen)))
    # Holders are used as the node's occupancy only when every GPU was read too: with NVML failing on one GPU,
    # the kubelet's devices on it cannot be placed, and counting the rest would undercount the node.
    complete = obs.holders_known and obs.sources.get("nvml") == SOURCE_OK
    return NodeJoin(node=node, observation=obs, gpus=gpus, holders_known=complete)


def joins(
    plans: Mapping[str, NodeSpec],
    nodes: Mapping[str, ObservedNode],
    *,
    now: datetime | None,
    silent_after: timedelta = SILENT_AFTER,
) -> dict[str, NodeJoin]:
    """The join of every node whose observation is used (see `usable`)."""
    out: dict[str, NodeJoin] = {}
    for name in sorted(nodes):
        node = nodes[name]
        if node.observation is not None and usable(node, now=now, silent_after=silent_after):
            out[name] = join(name, plans.get(name), node.observation)
    return out


# --- findings -------------------------------------------------------------------------------------


W = FindingSeverity.WARNING


def observer_findings(
    name: str,
    node: ObservedNode,
    *,
    now: datetime | None,
    silent_after: timedelta = SILENT_AFTER,
    controller: str = CONTROLLER_OBSERVER,
) -> list[Finding]:
    """MP543-MP547: the observer's own health on one node (malformed, silent, other version, incomplete,
    devices NVML does not know)."""
    if node.observation_error is not None:
        return [
            finding(
                "MP547",
                f"{name}: annotation {OBSERVED_ANNOTATION} is malformed ({node.observation_error}); its layout "
                "and holders are inferred and migplan does not write to the node until the observer rewrites it "
                "(check the migplan agent pod on the node, or remove the annotation)",
                node=name,
            )
        ]
    obs = node.observation
    if obs is None:
        return []
    out: list[Finding] = []
    age = int((now - obs.observed_at).total_seconds()) if now is not None and obs.observed_at is not None else 0
    if silent(obs, now=now, silent_after=silent_after) and obs.observed_at is not None and age < 0:
        out.append(
            finding(
                "MP543",
                f"{name}: the observer's last report is dated {-age // 60} min in the future (its clock, or the "
                "annotation, is wrong): its facts are not used; check the node's clock and the migplan agent pod",
                node=name,
                observed=obs.observed_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
        )
    elif silent(obs, now=now, silent_after=silent_after) and obs.observed_at is not None:
        out.append(
            finding(
                "MP543",
                f"{name}: the observer has not reported for {age // 60} min (more than "
                f"{int(silent_after.total_seconds() // 60)}): its facts are not used; check the migplan agent pod "
                f"on it (kubectl -n migplan get pods -l app.kubernetes.io/component=agent "
                f"--field-selector spec.nodeName={name}, then its log)",
                node=name,
                observed=obs.observed_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
        )
    if obs.version == "v1" or obs.observer != controller:
        seen = short(obs.observer) if obs.observer else f"format {obs.version}"
        who = (
            "the observer writes format v1 (an agent older than observation: no holders, they are inferred)"
            if obs.version == "v1"
            else f"the observer is {seen}"
        )
        out.append(
            finding(
                "MP544",
                f"{name}: {who}, the controller is {controller}; roll the agent DaemonSet to the controller's image",
                node=name,
                desired=controller,
                observed=seen,
            )
        )
    if obs.version != "v1":
        bad = {k: v for k, v in sorted(obs.sources.items()) if v != SOURCE_OK}
        for source in ("nvml", "podResources"):
            if source not in obs.sources:
                bad[source] = "not reported"
        reasons = [f"{k}: {short(v)}" for k, v in sorted(bad.items())]
        if obs.truncated:
            reasons.append("the observation was truncated to fit the annotation's size cap")
        if reasons:
            out.append(
                finding(
                    "MP545",
                    f"{name}: the observation is incomplete ({'; '.join(reasons)}); holders are inferred there "
                    "(check the pod-resources socket mount and NVML on the node)",
                    node=name,
                    observed="; ".join(reasons),
                )
            )
    if obs.unknown_devices:
        pods = tuple(sorted({u.holder.pod_key for u in obs.unknown_devices}))
        ids = ", ".join(sorted({short(u.device_id) for u in obs.unknown_devices})[:5])
        out.append(
            finding(
                "MP546",
                f"{name}: the kubelet allocated {len(obs.unknown_devices)} device(s) NVML does not list ({ids}): "
                "a stale device-plugin allocation or a GPU that fell off the bus; restart the device plugin on the "
                "node, then check nvidia-smi",
                node=name,
                observed=len(obs.unknown_devices),
                pods=pods,
            )
        )
    return out


def _fits(model: str, instances: Iterable[Placement]) -> frozenset[str]:
    """The catalog profiles one more instance of which fits next to `instances` (by the catalog's starts)."""
    spec = load_catalog().get(model)
    if spec is None:
        return frozenset()
    taken = tuple(instances)
    out = set()
    for name, prof in spec.profiles.items():
        rule = prof.placements
        if rule is None:
            continue
        if any(not any(Placement(s, rule.size).overlaps(t) for t in taken) for s in rule.starts):
            out.add(name)
    return frozenset(out)


def _catalog_slices(model: str) -> dict[str, int]:
    spec = load_catalog().get(model)
    return {n: p.memory_slices for n, p in spec.profiles.items()} if spec is not None else {}


def _where(profile: str, start: int | None) -> str:
    return f"{profile}@{start}" if start is not None else profile


def layout_findings(j: NodeJoin) -> list[Finding]:
    """MP540 (real placements differ from the plan's) and MP542 (a pod holds a partition the plan lacks)."""
    out: list[Finding] = []
    for g in j.gpus:
        if g.plan is None or g.observed is None:
            if g.plan is None and g.observed is not None:
                held = tuple(sorted({p for i in g.instances for p in i.holders} | set(g.whole_holders)))
                if held and j.holders_known:
                    out.append(
                        finding(
                            "MP542",
                            f"pods hold devices of GPU {g.index} of {j.node}, which the plan does not have: add the "
                            "GPU to the inventory",
                            node=j.node,
                            gpu=g.index,
                            pods=held,
                        )
                    )
            continue
        plan = g.plan
        if plan.mig_enabled and g.observed.mig_current:
            # Same partitions, other places: mig-parted (counts only) calls that applied and never moves
            # them. A GPU whose counts differ is being (or will be) re-cut: MP501 says that.
            same_cut = not g.missing and all(i.planned for i in g.instances)
            if same_cut and any(i.moved for i in g.instances):
                out.append(_placement_finding(j.node, g))
        if j.holders_known:
            for i in g.instances:
                if i.holders and not i.planned:
                    out.append(
                        finding(
                            "MP542",
                            f"{', '.join(i.holders)} hold(s) {_where(i.profile, i.placement.start)} on GPU {g.index} "
                            f"of {j.node}, a partition its plan does not have: the next apply destroys it; move the "
                            "pod to a planned partition or add the partition to the inventory",
                            node=j.node,
                            gpu=g.index,
                            profile=i.profile,
                            observed=str(i.placement),
                            pods=i.holders,
                        )
                    )
            if plan.mig_enabled and g.whole_holders and not g.observed.mig_current:
                out.append(
                    finding(
                        "MP542",
                        f"{', '.join(g.whole_holders)} hold(s) the whole GPU {g.index} of {j.node}, which its plan "
                        "cuts into MIG partitions: the MIG mode change waits for it",
                        node=j.node,
                        gpu=g.index,
                        pods=g.whole_holders,
                    )
                )
    return out


def _placement_finding(node: str, g: GpuJoin) -> Finding:
    assert g.plan is not None and g.observed is not None
    plan = g.plan
    starts = [p.start for p in plan.placements] if len(plan.placements) == len(plan.partitions) else []
    have = ", ".join(_where(i.profile, i.placement.start) for i in g.instances) or "nothing"
    want = (
        ", ".join(
            _where(p.profile, starts[k] if starts else None)
            for k, p in sorted(enumerate(plan.partitions), key=lambda kp: starts[kp[0]] if starts else kp[0])
        )
        or "nothing"
    )
    msg = (
        f"GPU {g.index} of {node} has {have}; the plan places {want} (mig-parted, under apply.mode gpu-operator, "
        "never moves a partition: apply.mode agent places them as planned)"
    )
    severity = FindingSeverity.INFO  # the same partitions elsewhere: nothing lost until it blocks a cut
    # Fragmentation: the profiles one more instance of which would fit the plan's cut but not the real one.
    sizes = _catalog_slices(plan.model)
    real = [i.placement for i in g.instances]
    planned = [p for p in plan.placements] if starts else []
    if starts:
        lost = sorted(_fits(plan.model, planned) - _fits(plan.model, real), key=lambda p: (-sizes.get(p, 0), p))
        if lost:
            msg += f"; the real placements leave no room for a {lost[0]} that the planned cut would fit"
            severity = W
        blocked = sorted(
            {
                pod
                for k, p in enumerate(plan.placements)
                for i in g.instances
                if i.position != k and i.placement.overlaps(p)
                for pod in i.holders
            }
        )
        if blocked:
            msg += f"; cutting it as planned destroys partitions {', '.join(blocked)} hold(s)"
    return finding(
        "MP540",
        msg,
        severity=severity,
        node=node,
        gpu=g.index,
        desired=want,
        observed=have,
    )


# --- owners ---------------------------------------------------------------------------------------


def holder_owner(pod_key: str, owners: Iterable[str], pods: Mapping[str, ObservedPod]) -> str | None:
    """The inventory owner a holder pod belongs to, matched as occupancy matches owners (pod_identities);
    a pod the cluster listing does not have is matched by namespace and name alone."""
    pod = pods.get(pod_key)
    if pod is not None:
        ids = pod_identities(pod)
    else:
        ns, _, name = pod_key.partition("/")
        ids = frozenset({ns, name, pod_key})
    # The first owner by name that is one of the pod's identities: the least of those both name (a set of a few
    # identities against every owner of the inventory, for each of 140,000 holders at 5,000 nodes).
    found = ids.intersection(owners)
    return min(found) if found else None


def foreign_holders(j: NodeJoin, pods: Mapping[str, ObservedPod]) -> list[tuple[JoinedInstance, str, str | None]]:
    """(instance, pod, the pod's own owner) for each pod holding a partition the plan reserves for another
    owner, beyond what the device plugin's free choice explains.

    The device plugin hands out any free device of a profile (it knows no owners: NVIDIA/k8s-device-plugin
    internal/rm/allocate.go `greedyAlloc` picks among every available device of the resource, ranked only by
    per-GPU replica counts for its distributed/packed/spread policies), so two owners' pods may
    swap partitions of one profile on a node: that is not a misuse, each still holds no more than the plan
    reserves for it there. A pod counts as foreign only when its owner (or, for a pod of no inventory
    owner, anyone) holds more partitions of that profile on the node than the plan reserves for it."""
    if not j.holders_known:
        return []
    out: list[tuple[JoinedInstance, str, str | None]] = []
    instances = [i for g in j.gpus for i in g.instances]
    # every owner the node's plan names (a pod of an owner reserving only other profiles is still its pod)
    named = {p.owner for g in j.gpus if g.plan is not None for p in g.plan.partitions if p.owner}
    for profile in sorted({i.profile for i in instances}):
        mine = [i for i in instances if i.profile == profile]
        owners = named | {i.owner for i in mine if i.owner}
        reserved: dict[str | None, int] = {}
        for g in j.gpus:
            if g.plan is not None and g.plan.mig_enabled:
                for p in g.plan.partitions:
                    if p.profile == profile:
                        reserved[p.owner] = reserved.get(p.owner, 0) + 1
        owners |= {o for o in reserved if o}
        held_by: dict[str | None, int] = {}
        pod_owner: dict[str, str | None] = {}
        for i in mine:
            for pod in i.holders:
                pod_owner[pod] = holder_owner(pod, owners, pods)
                held_by[pod_owner[pod]] = held_by.get(pod_owner[pod], 0) + 1
        for i in mine:
            if i.owner is None:
                continue
            for pod in i.holders:
                own = pod_owner[pod]
                if own == i.owner:
                    continue
                allowance = reserved.get(own, 0) if own is not None else 0
                if held_by.get(own, 0) > allowance:
                    out.append((i, pod, own))
    return out


def owner_findings(j: NodeJoin, pods: Mapping[str, ObservedPod]) -> list[Finding]:
    """MP541: a partition held by a pod of another owner than the plan names."""
    out = []
    for i, pod, own in foreign_holders(j, pods):
        who = f"a pod of {own}" if own else "a pod of no inventory owner"
        out.append(
            finding(
                "MP541",
                f"{pod} ({who}) holds {_where(i.profile, i.placement.start)} on GPU {i.gpu} of {j.node}, reserved "
                f"for {i.owner}, whose pods may find none free: give {own or 'the pod an owner and'} its own "
                f"{i.profile} partitions in the inventory, or move the pod",
                node=j.node,
                gpu=i.gpu,
                profile=i.profile,
                desired=i.owner,
                observed=own,
                pods=(pod,),
            )
        )
    return out
