"""Drift detection: every way the cluster differs from the plan, as Findings with stable codes.

Pure: desired state, observed state and (optionally) the current time in; findings, occupancy and
the drift report out. No I/O, no clock of its own. Codes are stable, declared in reconciler.model.codes
(FINDING_CODES is this family's view; docs/reference/codes.md documents them); never reuse a code for another meaning.

Node status is derived from the findings on that node: Missing (MP510) and Undocumented (MP511)
win, then Error if any finding is an error, then Drifted if any finding is a warning or a change is
held back, else InSync (info findings such as a saturated profile do not make a node drift).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import yaml

from reconciler.catalog import load_catalog
from reconciler.logic.codecs import dpsharing, migparted
from reconciler.logic.drift import draclasses, drarecord, draregime, drastatic, fieldfight, nodestate, thirdparty
from reconciler.logic.drift.nodestate import Geometry
from reconciler.logic.observe import (
    claimoccupancy,
    draclaims,
    hosteffects,
    observation,
    occupancy,
    owners,
    podrules,
    profilecheck,
)
from reconciler.logic.observe.occupancy import NodeOccupancy, expected_resources, profile_label, resource_of
from reconciler.model import yamlbudget
from reconciler.model.codes import IN_PROGRESS_CODES, Family, Trait, family, with_trait
from reconciler.model.dra import NodeDra, Regime
from reconciler.model.drift import (
    DriftReport,
    Finding,
    FindingSeverity,
    GpuSliceMap,
    MigManagerHost,
    NodeReport,
    NodeStatus,
    SlicePartition,
    finding,
)
from reconciler.model.inventory import ApplyMode, DesiredState, GpuSpec, MigStrategy, NodeSpec
from reconciler.model.observed import (
    CLIENT_WAIT_FAILED,
    CLIENT_WAIT_SELECTORS,
    CORDONED_ANNOTATION,
    GPU_CLIENT_DEPLOY_LABELS,
    GPU_COUNT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    LAYOUT_REFUSALS,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    PAUSED_FOR_MIG_CHANGE,
    REQUESTED_AT_ANNOTATION,
    ClusterPolicyState,
    ContainerResources,
    MigConfigState,
    NodePods,
    ObservedNode,
    ObservedPod,
    ObservedState,
    is_gpu_resource,
    is_mig_resource,
)
from reconciler.model.plans import Action, Kind, Plan
from reconciler.model.strict import StrictValueError, parse_timestamp

ERROR, WARNING, INFO = FindingSeverity.ERROR, FindingSeverity.WARNING, FindingSeverity.INFO

# code -> (severity, what it means): the finding family of the one registry (reconciler.model.codes).
FINDING_CODES: Mapping[str, tuple[FindingSeverity, str]] = {
    c.code: (FindingSeverity(c.severity.value), c.meaning) for c in family(Family.FINDING)
}

STUCK_AFTER = timedelta(minutes=15)
_POD_KEY = operator.attrgetter("key")  # a pod's namespace/name, the order of every per-pod check
# Findings about mig-manager's machinery, meaningless when the node agent applies layouts.
_GPU_OPERATOR_ONLY = with_trait(Trait.GPU_OPERATOR)
# What a finding means to the node's status and to the report, asked of the registry (never a code string here).
_MISSING, _UNDOCUMENTED = with_trait(Trait.MISSING_NODE), with_trait(Trait.UNDOCUMENTED_NODE)
_HELD, _DRAINING, _DRAIN_GOES_ON = with_trait(Trait.HELD), with_trait(Trait.DRAINING), with_trait(Trait.DRAIN_GOES_ON)
_PENDING_SAID_BY_NODE = with_trait(Trait.PENDING_SAID_BY_NODE)
_REBOOT = with_trait(Trait.REBOOT)


@dataclass(frozen=True, slots=True)
class Analysis:
    findings: tuple[Finding, ...]  # sorted
    occupancy: Mapping[str, NodeOccupancy]  # per node (desired nodes present + undocumented GPU nodes)
    rendered: migparted.MigPartedConfig
    # The nodes whose observer's report is used (decoded, not silent), set against their plan.
    joins: Mapping[str, observation.NodeJoin] = field(default_factory=dict)
    # The state of each GPU node's observer, for the report and the metrics: reporting | silent |
    # malformed | absent.
    observers: Mapping[str, str] = field(default_factory=dict)
    # profilecheck.unoffered of every inventory node the cluster has (None: its GPUs offer its plan's profiles),
    # so the plan does not compute it again for every node it relabels (issue 29, adoptcpu).
    unoffered: Mapping[str, str | None] = field(default_factory=dict)


def analyze(
    desired: DesiredState,
    observed: ObservedState,
    *,
    now: datetime | None = None,
    rendered: migparted.MigPartedConfig | None = None,
    stuck_after: timedelta = STUCK_AFTER,
    silent_after: timedelta = observation.SILENT_AFTER,
) -> Analysis:
    """All findings and the occupancy of every node, from desired and observed state.

    Where a node's observer reports (observation.usable), its layout and holders are preferred to the
    inference; `silent_after` is how old its report may be before the observer counts as silent (MP543).
    The findings are those of CHECKS, run in that order over one DriftContext."""
    rendered = rendered or migparted.render(desired)
    pods_by_node = observed.pods_by_node()
    joins = observation.joins(desired.nodes, observed.nodes, now=now, silent_after=silent_after)
    pods_by_key = {p.key: p for p in observed.pods}
    ready = nodestate.readiness(desired, observed, now=now)
    sorted_pods = tuple(sorted(observed.pods, key=_POD_KEY))
    ctx = DriftContext(
        desired=desired,
        observed=observed,
        now=now,
        rendered=rendered,
        stuck_after=stuck_after,
        silent_after=silent_after,
        pods_by_node=pods_by_node,
        pods_by_key=pods_by_key,
        sorted_pods=sorted_pods,
        joins=joins,
        ready=ready,
        occupancy=_occupancy(desired, observed, joins, pods_by_node, pods_by_key, ready),
    )
    out = [f for check in CHECKS for f in check(ctx)]
    if desired.cluster.apply.mode is ApplyMode.AGENT or drastatic.gpu_cluster(observed) is not None:
        # mig-manager, its ConfigMap and its node labels are not used in agent mode, nor under a GPUCluster.
        out = [f for f in out if f.code not in _GPU_OPERATOR_ONLY]
    else:
        # Nor on a DRA-static node, laid out by migplan's node agent whatever apply.mode says.
        static = drastatic.static_nodes(desired, observed)
        out = [f for f in out if not (f.code in _GPU_OPERATOR_ONLY and f.node in static)]
    return Analysis(
        findings=tuple(sorted(out, key=Finding.sort_key)),
        occupancy=ctx.occupancy,
        rendered=rendered,
        joins=joins,
        observers=_observers(ctx),
        unoffered=ctx.unoffered,
    )


@dataclass(frozen=True, slots=True)
class DriftContext:
    """What every check reads: desired and observed state, and the joins computed once for all of them."""

    desired: DesiredState
    observed: ObservedState
    now: datetime | None
    rendered: migparted.MigPartedConfig
    stuck_after: timedelta
    silent_after: timedelta
    pods_by_node: Mapping[str, tuple[ObservedPod, ...]]
    pods_by_key: Mapping[str, ObservedPod]
    sorted_pods: tuple[ObservedPod, ...]  # observed.pods by key (namespace/name): sorted once for every check
    joins: Mapping[str, observation.NodeJoin]  # the nodes whose observer's report is used
    ready: nodestate.Readiness
    occupancy: Mapping[str, NodeOccupancy]  # per node (desired nodes present + undocumented GPU nodes)
    # Filled by _check_profiles_offered: node -> profilecheck.unoffered (Analysis.unoffered).
    unoffered: dict[str, str | None] = field(default_factory=dict)

    def elsewhere(self, name: str) -> bool:
        """Another component writes the node's MIG layout (declared, or NVIDIA's DRA driver with DynamicMIG):
        mig-manager's labels and the device-plugin counts say nothing about it."""
        gpu_cluster = draregime.cluster_dynamic_mig(self.observed.gpu_clusters)
        return (
            self.desired.layout_writer(name) != "migplan"
            or draregime.other_writer(
                self.observed.dra.get(name), gpu_cluster, draregime.driver_dynamic_mig(self.observed.dra_drivers, name)
            )
            is not None
            or self.third_party(name) is not None
        )

    def third_party(self, name: str) -> thirdparty.ThirdPartyWriter | None:
        """A third-party partitioner (HAMi's MIG mode) found laying out the node's GPUs, from the Node's annotations."""
        node = self.observed.nodes.get(name)
        return thirdparty.node_writer(node.annotations) if node is not None else None

    def dra_node(self, name: str) -> bool:
        """NVIDIA's DRA driver allocates the node's GPUs (or another writer lays them out): a DRA node advertises no
        nvidia.com/mig-* counts, its published devices are compared instead (_check_dra)."""
        return self.elsewhere(name) or draregime.regime(self.observed.dra.get(name)) is not Regime.DEVICE_PLUGIN

    def planned_nodes(self) -> Iterator[tuple[str, NodeSpec, ObservedNode]]:
        """(name, plan, observed node) of every inventory node the cluster has, by name."""
        for name in sorted(self.desired.nodes):
            node = self.observed.nodes.get(name)
            if node is not None:
                yield name, self.desired.nodes[name], node


def _occupancy(
    desired: DesiredState,
    observed: ObservedState,
    joins: Mapping[str, observation.NodeJoin],
    pods_by_node: Mapping[str, tuple[ObservedPod, ...]],
    pods_by_key: Mapping[str, ObservedPod],
    ready: nodestate.Readiness,
) -> dict[str, NodeOccupancy]:
    """Each node's occupancy (inventory nodes the cluster has, then undocumented GPU nodes): measured where its
    observer reports holders, inferred from the pods elsewhere (an undocumented node's totals: what it advertises)."""
    strategy = desired.cluster.mig_strategy
    planned = [name for name in sorted(desired.nodes) if name in observed.nodes]
    undocumented = [
        name for name in sorted(observed.nodes) if name not in desired.nodes and observed.nodes[name].is_gpu_node
    ]
    occ: dict[str, NodeOccupancy] = {}
    claimed = draclaims.by_node(observed.claims) if observed.claims else {}
    for name in (*planned, *undocumented):
        plan = desired.nodes.get(name)
        joined = joins.get(name)
        if joined is not None and joined.holders_known:
            occ[name] = occupancy.observed_occupancy(
                node=name, plan=plan, strategy=strategy, joined=joined, pods=pods_by_key
            )
        else:
            shared = ready.sharing.get(name)
            occ[name] = occupancy.node_occupancy(
                node=name,
                plan=plan,
                strategy=strategy,
                pods=pods_by_node.get(name, ()),
                observed=None if plan is not None else observed.nodes[name],
                sharing=shared if isinstance(shared, dpsharing.Sharing) else None,
            )
            if plan is not None and name in claimed:
                # No observer: the pods holding its GPUs through ResourceClaims, from the claims alone.
                obs = observed.nodes[name].observation
                minors = {g.index: g.minor for g in obs.gpus if g.minor is not None} if obs is not None else {}
                occ[name] = claimoccupancy.with_claims(occ[name], plan, strategy, claimed[name], minors)
    return occ


def _observers(ctx: DriftContext) -> dict[str, str]:
    """The state of each GPU node's observer (and of every inventory node's)."""
    observers: dict[str, str] = {}
    for name in sorted(ctx.observed.nodes):
        node = ctx.observed.nodes[name]
        if name not in ctx.desired.nodes and not node.is_gpu_node:
            continue
        observers[name] = _observer_state(node, name in ctx.joins)
    return observers


# --- the checks, in CHECKS order: each takes the one DriftContext and returns findings ---------------------------


def _check_cluster_policy(ctx: DriftContext) -> Iterable[Finding]:
    if drastatic.gpu_cluster(ctx.observed) is not None:
        return ()  # a GPUCluster runs the GPU stack: no ClusterPolicy is expected there, none is written
    return _cluster_policy_findings(ctx.desired, ctx.observed)


def _check_config_map(ctx: DriftContext) -> Iterable[Finding]:
    if drastatic.gpu_cluster(ctx.observed) is not None:
        return ()  # no mig-manager under a GPUCluster: no mig-parted ConfigMap either
    return _config_map_findings(ctx.desired, ctx.observed, ctx.rendered)


def _check_malformed(ctx: DriftContext) -> Iterable[Finding]:
    return _malformed_findings(ctx.desired, ctx.observed, ctx.sorted_pods)


def _check_missing_nodes(ctx: DriftContext) -> Iterable[Finding]:
    for name in sorted(ctx.desired.nodes):
        if name not in ctx.observed.nodes:
            yield finding("MP510", f"node {name} is in the inventory but not in the cluster", node=name)


def _check_observed_layouts(ctx: DriftContext) -> Iterable[Finding]:
    """The observer's measured layout and holders, against the plan (MP540-MP542)."""
    for name, _plan, _node in ctx.planned_nodes():
        joined = ctx.joins.get(name)
        if joined is not None:
            yield from observation.layout_findings(joined)
            yield from observation.owner_findings(joined, ctx.pods_by_key)


def _check_advertised(ctx: DriftContext) -> Iterable[Finding]:
    strategy = ctx.desired.cluster.mig_strategy
    for name, plan, node in ctx.planned_nodes():
        if ctx.dra_node(name):
            continue  # no device-plugin counts on a DRA node: _check_dra compares its published devices
        # mig-manager says the node's current config is applied, yet the counts differ while the strategy
        # is settled and the plugin Ready: the GPUs were changed behind mig-manager's back (or a GPU fell
        # off the bus). The planner re-applies exactly these nodes (one classification: nodestate).
        behind_its_back = (
            node.mig_config == ctx.rendered.node_configs[name]
            and node.mig_config_state == MigConfigState.SUCCESS
            and nodestate.classify(node, expected_resources(plan, strategy), ctx.ready) is Geometry.CHANGED_BY_HAND
        )
        shared = ctx.ready.sharing.get(name)
        if not any(m.field.startswith("status.") for m in node.malformed) and not isinstance(
            shared, dpsharing.Unbelievable
        ):
            # With a quantity unread, any count comparison would be a guess (MP530 says why); with the sharing config
            # unread, so would it (MP562 says why).
            want = ctx.ready.advertised(name, expected_resources(plan, strategy))
            yield from _advertised_findings(name, plan, want, node.advertised_resources, behind_its_back)


def _check_sharing(ctx: DriftContext) -> Iterable[Finding]:
    """A node whose device-plugin config shares its MIG devices (MP561-MP563, MP566)."""
    strategy = ctx.desired.cluster.mig_strategy
    for name, plan, _node in ctx.planned_nodes():
        shared = ctx.ready.sharing.get(name)
        yield from _sharing_findings(name, plan, strategy, shared)
        if isinstance(shared, dpsharing.Sharing) and shared.fail_requests_greater_than_one:
            yield from _shared_request_findings(name, shared, ctx.pods_by_node.get(name, ()))


def _check_profiles_offered(ctx: DriftContext) -> Iterable[Finding]:
    """A node whose plan names profiles its GPUs do not offer is never labelled for that config (MP564)."""
    catalog = load_catalog()
    for name, plan, node in ctx.planned_nodes():
        unoffered = ctx.unoffered[name] = profilecheck.unoffered(plan, node.labels, catalog)
        if unoffered is not None:
            yield finding(
                "MP564",
                f"{name}: its plan names MIG profiles its GPUs do not offer: {unoffered}; migplan does not "
                "label it for that config",
                node=name,
            )


def _check_mig_manager_rollout(ctx: DriftContext) -> Iterable[Finding]:
    """A node whose mig-manager pod still reads another ConfigMap than migplan's (the mig-manager DaemonSet's rolling
    update has not reached it since spec.migManager.config.name changed): its label waits (MP567)."""
    if ctx.desired.cluster.apply.mode is ApplyMode.AGENT:
        return
    want = ctx.desired.cluster.gpu_operator.mig_config_map
    for name, _plan, _node in ctx.planned_nodes():
        source = ctx.observed.mig_manager_sources.get(name)
        if source is None or source == want:
            continue
        reads = f"ConfigMap {source}" if source else "configs generated from the hardware"
        yield finding(
            "MP567",
            f"{name}: its mig-manager pod still reads {reads}, not {want}; migplan changes its label once the "
            "mig-manager DaemonSet's rolling update has given it a new pod",
            node=name,
        )


def _check_gpu_counts(ctx: DriftContext) -> Iterable[Finding]:
    for name, plan, node in ctx.planned_nodes():
        yield from _gpu_count_findings(name, plan, node.labels)


def _check_mig_manager(ctx: DriftContext) -> Iterable[Finding]:
    for name, _plan, node in ctx.planned_nodes():
        if ctx.elsewhere(name):
            continue  # mig-manager does not lay out a node another component writes: migplan never relabels it
        yield from _mig_manager_findings(
            name,
            ctx.rendered.node_configs[name],
            node.labels,
            node.annotations,
            ctx.now,
            ctx.stuck_after,
            ctx.observed.mig_manager_errors.get(name),
            namespace=ctx.desired.cluster.gpu_operator.namespace,
        )


def _check_dra(ctx: DriftContext) -> Iterable[Finding]:
    """NVIDIA's DRA driver and other layout writers (MP570-MP574): claims and GPUClusters migplan cannot read,
    claims on nodes the cluster does not list, and each DRA node against its plan (reconciler.logic.drift.draregime)."""
    observed = ctx.observed
    yield from (finding("MP571", f"ignored: {problem}") for problem in observed.claim_problems)
    yield from (
        finding("MP571", f"{c.problem}: DynamicMIG taken as on (nothing written on the GPU nodes)")
        for c in observed.gpu_clusters
        if c.problem is not None and not c.ignored
    )
    yield from (
        finding(
            "MP579",
            f"DaemonSet {d.key} of NVIDIA's DRA driver: {d.problem}: DynamicMIG taken as on, nothing written on "
            f"the {len(d.nodes)} node(s) it runs on",
        )
        for d in observed.dra_drivers
        if d.problem is not None
    )
    for claim, pool in draclaims.unknown_pools(observed.claims, observed.nodes):
        yield finding(
            "MP571",
            f"ResourceClaim {claim} is allocated a device on {pool}, a node the cluster does not list",
            node=pool,
        )
    gpu_cluster = draregime.cluster_dynamic_mig(observed.gpu_clusters)
    for name, plan, _node in ctx.planned_nodes():
        if ctx.desired.layout_writer(name) == "migplan" and ctx.dra_node(name):
            third = ctx.third_party(name)
            if third is not None:
                yield from _third_party_findings(name, plan, third)
                continue
            published = observed.dra.get(name) or NodeDra(name)
            driver = draregime.driver_dynamic_mig(observed.dra_drivers, name)
            yield from _dra_findings(name, plan, published, ctx.joins.get(name), gpu_cluster, driver)


def _third_party_findings(name: str, plan: NodeSpec, third: thirdparty.ThirdPartyWriter) -> list[Finding]:
    """A node a third-party partitioner lays out while the inventory plans it for migplan: both writers named."""
    where = plan.source.file if plan.source is not None else f"nodes/{name}.yaml"
    out = [finding("MP576", f"{name}: {third.problem}: taken as HAMi's MIG mode", node=name)] if third.problem else []
    out.append(
        finding(
            "MP575",
            f"{third.writer} writes the MIG layout of {name}, and the inventory ({where}) plans one for migplan: "
            "two writers for one GPU, so migplan writes nothing on this node (give the node to HAMi with "
            "spec.layoutWriter: external, or set its operatingmode away from mig)",
            node=name,
        )
    )
    return out


def _check_overcommitted(ctx: DriftContext) -> Iterable[Finding]:
    for name, _plan, _node in ctx.planned_nodes():
        for o in ctx.occupancy[name].entries:
            if o.source == "inferred" and o.used > o.total:
                yield finding(
                    "MP520",
                    f"pods hold {o.used} {o.profile} on {name} but its plan has {o.total}",
                    node=name,
                    profile=o.profile,
                    desired=o.total,
                    observed=o.used,
                    pods=tuple(h.pod for h in o.holders),
                )


def _check_cordoned(ctx: DriftContext) -> Iterable[Finding]:
    for name, _plan, node in ctx.planned_nodes():
        if node.annotations.get(CORDONED_ANNOTATION) == "true":
            yield finding("MP521", f"{name} is cordoned by migplan until its reconfiguration succeeds", node=name)


def _check_undocumented(ctx: DriftContext) -> Iterable[Finding]:
    for name in sorted(ctx.observed.nodes):
        node = ctx.observed.nodes[name]
        if name in ctx.desired.nodes or not node.is_gpu_node:
            continue
        yield finding(
            "MP511",
            f"GPU node {name} is not in the inventory: add nodes/{name}.yaml",
            node=name,
            observed={k: v for k, v in sorted(node.advertised_resources.items()) if is_gpu_resource(k)},
        )


def _check_device_plugin_missing(ctx: DriftContext) -> Iterable[Finding]:
    if ctx.observed.device_plugin is None and drastatic.gpu_cluster(ctx.observed) is None:
        ops = ctx.desired.cluster.gpu_operator
        yield finding(
            "MP518",
            f"DaemonSet {ops.namespace}/{ops.device_plugin_daemonset} not found: check "
            "gpuOperator.devicePluginDaemonSet in cluster.yaml",
        )


def _check_device_plugin(ctx: DriftContext) -> Iterable[Finding]:
    return _device_plugin_findings(ctx.observed)


def _check_pending_gpu(ctx: DriftContext) -> Iterable[Finding]:
    return _pending_gpu_findings(ctx.desired, ctx.observed)


def _check_invalid_requests(ctx: DriftContext) -> Iterable[Finding]:
    return _invalid_request_findings(ctx.observed, ctx.sorted_pods)


def _check_saturation(ctx: DriftContext) -> Iterable[Finding]:
    return _saturation_findings(ctx.desired, ctx.observed, ctx.occupancy)


def _check_observers(ctx: DriftContext) -> Iterable[Finding]:
    for name in sorted(ctx.observed.nodes):
        node = ctx.observed.nodes[name]
        if name not in ctx.desired.nodes and not node.is_gpu_node:
            continue
        yield from observation.observer_findings(name, node, now=ctx.now, silent_after=ctx.silent_after)


def _check_workloads(ctx: DriftContext) -> Iterable[Finding]:
    strategy = ctx.desired.cluster.mig_strategy
    for pod in ctx.sorted_pods:
        if pod.active:
            for issue in owners.workload_issues(pod, ctx.desired.nodes, strategy):
                if issue.code in _PENDING_SAID_BY_NODE and pod.phase == "Pending":
                    continue  # MP506 says it, with the node's count
                target = pod.node or pod.node_selector.get(owners.HOSTNAME_LABEL)
                yield finding(issue.code, issue.message, node=target, pods=(pod.key,))


Check = Callable[[DriftContext], Iterable[Finding]]


# Every drift check, in the order analyze runs them (the report sorts the findings; the order is the reading order
# of this module). A new check is one function above and one entry here.
def _check_device_classes(ctx: DriftContext) -> Iterable[Finding]:
    """The DeviceClasses migplan keeps on DRA nodes, against classes it did not create (MP596, MP597)."""
    return draclasses.findings(ctx.desired, ctx.observed)


CHECKS: tuple[Check, ...] = (
    _check_cluster_policy,
    _check_config_map,
    _check_malformed,
    _check_missing_nodes,
    _check_observed_layouts,
    _check_sharing,
    _check_profiles_offered,
    _check_mig_manager_rollout,
    _check_advertised,
    _check_dra,
    _check_gpu_counts,
    _check_mig_manager,
    _check_overcommitted,
    _check_cordoned,
    _check_undocumented,
    _check_device_plugin_missing,
    _check_device_plugin,
    _check_pending_gpu,
    _check_invalid_requests,
    _check_saturation,
    _check_observers,
    _check_workloads,
    _check_device_classes,
)


def _observer_state(node: ObservedNode, used: bool) -> str:
    if node.observation_error is not None:
        return "malformed"
    if node.observation is None:
        return "absent"
    return "reporting" if used else "silent"


def _malformed_findings(
    desired: DesiredState, observed: ObservedState, sorted_pods: tuple[ObservedPod, ...] | None = None
) -> Iterable[Finding]:
    """MP530 per unreadable value, on the node it was read from (its pods' quantities included). `sorted_pods`:
    observed.pods by key, when the caller has them sorted already."""
    for name in sorted(observed.nodes):
        node = observed.nodes[name]
        if name not in desired.nodes and not node.is_gpu_node and not node.malformed:
            continue
        for m in node.malformed:
            yield finding(
                "MP530",
                f"{name}: {m.field} is malformed ({m.reason}); migplan does not write to the node until it is fixed",
                node=name,
                observed=m.value,
            )
    for pod in sorted(observed.pods, key=_POD_KEY) if sorted_pods is None else sorted_pods:
        for m in pod.malformed:
            yield finding(
                "MP530",
                f"pod {pod.key}: {m.field} is malformed ({m.reason}); counted as holding a device",
                node=pod.node,
                observed=m.value,
                pods=(pod.key,),
            )


def declared_writers(desired: DesiredState) -> Mapping[str, str]:
    """node -> the other component the inventory says writes its MIG layout (spec.layoutWriter): nothing is
    planned or written there, and nothing is held either (the inventory agrees with itself: validate's MP320)."""
    return {name: w for name in desired.nodes if (w := desired.layout_writer(name)) != "migplan"}


def other_writers(desired: DesiredState, observed: ObservedState) -> Mapping[str, str]:
    """node -> the other component found writing the MIG layout of a node the inventory gives migplan (NVIDIA's
    DRA driver in DynamicMIG, reconciler.logic.drift.draregime; HAMi's MIG mode, reconciler.logic.drift.thirdparty):
    the conflict MP570 / MP575 reports; never written."""
    declared = declared_writers(desired)
    gpu_cluster = draregime.cluster_dynamic_mig(observed.gpu_clusters)
    out: dict[str, str] = {}
    for name in desired.nodes:
        if name in declared:
            continue
        node = observed.nodes.get(name)
        third = thirdparty.node_writer(node.annotations) if node is not None else None
        driver = draregime.driver_dynamic_mig(observed.dra_drivers, name)
        writer = (
            third.writer if third is not None else draregime.other_writer(observed.dra.get(name), gpu_cluster, driver)
        )
        if writer is not None:
            out[name] = writer
    return out


def _dra_findings(
    name: str,
    plan: NodeSpec,
    published: NodeDra,
    joined: observation.NodeJoin | None,
    gpu_cluster: str | None,
    driver: str | None = None,
) -> list[Finding]:
    """A DRA node against its plan (reconciler.logic.drift.draregime): another writer, unreadable slices, and the
    plan against the published devices name for name where the layout is static."""
    out = [finding("MP571", f"{name}: {problem}", node=name) for problem in published.problems]
    writer = draregime.other_writer(published, gpu_cluster, driver)
    if writer is not None:
        where = plan.source.file if plan.source is not None else f"nodes/{name}.yaml"
        out.append(
            finding(
                "MP570",
                f"{writer} writes the MIG layout of {name}, and the inventory ({where}) plans one for migplan: "
                "two writers for one GPU, so migplan writes nothing on this node (declare the node's GPUs to the "
                "DRA driver, or turn DynamicMIG off on it)",
                node=name,
            )
        )
        return out
    for index in draregime.unpublished_gpus(plan):
        out.append(
            finding(
                "MP574",
                f"GPU {index} of {name} has MIG enabled and no partition: NVIDIA's DRA driver publishes nothing for "
                "it (a MIG-enabled GPU is not published whole)",
                node=name,
                gpu=index,
            )
        )
    obs = joined.observation if joined is not None else None
    minors = {g.index: g.minor for g in obs.gpus if g.minor is not None} if obs is not None else {}
    planned = draregime.planned_devices(plan, minors)
    found, bad = draregime.published_devices(published)
    out.extend(
        finding("MP571", f"{name}: device {d} does not parse as NVIDIA's DRA driver names devices", node=name)
        for d in bad
    )
    inferred = sorted({i for i, _ in planned.values() if i not in minors})
    guess = f" (minor numbers of GPU(s) {', '.join(map(str, inferred))} inferred from their index)" if inferred else ""
    for key in sorted(set(planned) - set(found)):
        index, what = planned[key]
        out.append(
            finding(
                "MP572",
                f"{name}: planned {what} on GPU {index} is not published by NVIDIA's DRA driver "
                f"(no device gpu-{key[0]}-mig-{key[1]}-*-{key[2]}){guess}",
                node=name,
                gpu=index,
            )
        )
    for key in sorted(set(found) - set(planned)):
        out.append(
            finding(
                "MP573",
                f"{name}: the DRA driver publishes {found[key]}, which the plan does not have{guess}",
                node=name,
            )
        )
    return out


def unreadable_nodes(observed: ObservedState) -> frozenset[str]:
    """Nodes with a malformed value of their own or on a pod bound to them: never written this cycle."""
    out = {name for name, n in observed.nodes.items() if n.malformed or n.observation_error is not None}
    out.update(p.node for p in observed.pods if p.malformed and p.node is not None)
    return frozenset(out)


# --- cluster-wide ---------------------------------------------------------------------------------


def _cluster_policy_findings(desired: DesiredState, observed: ObservedState) -> Iterable[Finding]:
    ops = desired.cluster.gpu_operator
    cp = observed.cluster_policy
    if cp is None:
        yield finding("MP517", f"ClusterPolicy {ops.cluster_policy} not found: is the GPU Operator installed?")
        return
    want = desired.cluster.mig_strategy.value
    yield from _fight_findings(desired, observed, cp)
    if cp.mig_strategy != want:
        yield finding(
            "MP502",
            f"ClusterPolicy {cp.name} has spec.mig.strategy={cp.mig_strategy or '(unset)'}, the inventory says {want}",
            desired=want,
            observed=cp.mig_strategy,
        )
    if cp.mig_manager_config_name != ops.mig_config_map:
        yield finding(
            "MP515",
            f"ClusterPolicy {cp.name} spec.migManager.config.name is {cp.mig_manager_config_name or '(unset)'}, "
            f"not {ops.mig_config_map}: mig-manager would not see migplan's configs",
            desired=ops.mig_config_map,
            observed=cp.mig_manager_config_name,
        )
    override = cp.device_plugin_env.get("MIG_STRATEGY")
    if override is not None and override != want:
        yield finding(
            "MP565",
            f"ClusterPolicy {cp.name} spec.devicePlugin.env sets MIG_STRATEGY={override[:40]}, which overrides "
            f"spec.mig.strategy for the device plugin (the inventory says {want}): remove that env entry",
            desired=want,
            observed=override[:40],
        )
    conflict = device_plugin_config_conflict(desired, observed)
    if conflict is not None:
        yield finding(
            "MP503",
            f"ClusterPolicy {cp.name} spec.devicePlugin.config names {cp.device_plugin_config_name}: {conflict}; "
            "remove it (the strategy is set by spec.mig.strategy)",
            desired=None,
            observed=cp.device_plugin_config_name,
        )


def _fight_findings(desired: DesiredState, observed: ObservedState, cp: ClusterPolicyState) -> Iterable[Finding]:
    """MP590: the fields another manager put back after migplan set them once (the planner leaves them alone)."""
    ops = desired.cluster.gpu_operator
    want = desired.cluster.mig_strategy.value
    candidates: list[tuple[str, str | None, str | None]] = []
    if cp.mig_strategy != want:
        candidates.append((fieldfight.STRATEGY, want, cp.mig_strategy))
    if cp.mig_manager_config_name != ops.mig_config_map and desired.cluster.apply.mode is not ApplyMode.AGENT:
        candidates.append((fieldfight.MIG_MANAGER_CONFIG, ops.mig_config_map, cp.mig_manager_config_name))
    if device_plugin_config_conflict(desired, observed) is not None:
        candidates.append((fieldfight.DEVICE_PLUGIN_CONFIG, None, cp.device_plugin_config_name))
    for field_path, want_value, live in candidates:
        found = fieldfight.fight(cp, field_path, want_value, live)
        if found is not None:
            yield finding("MP590", found.message(cp.name), desired=found.desired, observed=found.observed)


def device_plugin_config_conflict(desired: DesiredState, observed: ObservedState) -> str | None:
    """Why spec.devicePlugin.config contradicts the inventory's strategy, or None if it does not.

    stack-facts §1.6: a config that sets flags.migStrategy per node fights spec.mig.strategy (the
    env var wins only while the ClusterPolicy sets it, so the config is a trap the moment it is
    unset or the two disagree). A config whose entries all agree with the strategy, or set none, is
    harmless; a config migplan cannot read is treated as a conflict (it cannot be proven harmless).
    """
    cp = observed.cluster_policy
    if cp is None or not cp.device_plugin_config_name:
        return None
    cm = observed.device_plugin_config_map
    if cm is None:
        return f"ConfigMap {cp.device_plugin_config_name} does not exist"
    want = desired.cluster.mig_strategy.value
    for key in sorted(cm.data):
        if (too_much := yamlbudget.problem(cm.data[key])) is not None:
            return f"its entry {key[:60]!r} cannot be read: {too_much}"
        try:
            doc = yaml.load(cm.data[key], Loader=yaml.CSafeLoader)
        except (yaml.YAMLError, ValueError, TypeError, AttributeError, KeyError):
            # a YAML error, or a value its implicit tag does not fit (an impossible date such as 2026-13-45)
            return f"its entry {key[:60]!r} cannot be parsed"
        flags = doc.get("flags") if isinstance(doc, dict) else None
        strategy = flags.get("migStrategy") if isinstance(flags, dict) else None
        if strategy is not None and strategy != want:
            return f"its entry {key!r} sets flags.migStrategy={strategy}"
    return None


def _config_map_findings(
    desired: DesiredState, observed: ObservedState, rendered: migparted.MigPartedConfig
) -> Iterable[Finding]:
    ops = desired.cluster.gpu_operator
    cm = observed.mig_config_map
    if cm is None:
        yield finding("MP516", f"ConfigMap {ops.namespace}/{ops.mig_config_map} does not exist yet")
    elif cm.data.get(migparted.CONFIG_KEY) != migparted.config_map_text(
        rendered,
        observed_text=cm.data.get(migparted.CONFIG_KEY),
        referenced={n.mig_config for n in observed.nodes.values() if n.mig_config},
        foreign_text=observed.foreign_mig_config_text,
    ):
        yield finding("MP516", f"ConfigMap {ops.namespace}/{ops.mig_config_map} differs from the rendered inventory")


def _device_plugin_findings(observed: ObservedState) -> Iterable[Finding]:
    ds = observed.device_plugin
    if ds is None:
        return
    for pod in sorted(ds.pods, key=lambda p: p.name):
        if pod.ready:
            continue
        line = pod.log_line or ""
        if any(r in line for r in LAYOUT_REFUSALS):
            yield finding(
                "MP504",
                f"device plugin on {pod.node} refuses the node's layout under the current strategy: {line.strip()}",
                node=pod.node,
                observed=line.strip(),
            )
        else:
            why = f": {line.strip()}" if line else ""
            if not pod.log_read:
                why = " (its log was not read: too many device-plugin pods are not ready to read every log each cycle)"
            yield finding(
                "MP505",
                f"device-plugin pod {ds.namespace}/{pod.name} is not ready{why}",
                node=pod.node,
                observed=line.strip() or None,
            )


def _pending_gpu_findings(desired: DesiredState, observed: ObservedState) -> Iterable[Finding]:
    """Pods asking for whole GPUs where the plan advertises none (the article's nvidia.com/gpu: 0)."""
    strategy = desired.cluster.mig_strategy
    if strategy is not MigStrategy.MIXED:
        return
    gpu_somewhere = any(expected_resources(p, strategy).get(GPU_RESOURCE, 0) > 0 for p in desired.nodes.values())
    gpu_somewhere = gpu_somewhere or any(
        n.advertised(GPU_RESOURCE) > 0 for name, n in observed.nodes.items() if name not in desired.nodes
    )
    per_node: dict[str | None, list[str]] = {}
    for pod in observed.pods:
        if pod.phase != "Pending" or pod.requested().get(GPU_RESOURCE, 0) <= 0:
            continue
        target = pod.node or pod.node_selector.get("kubernetes.io/hostname")
        if target is not None and target in desired.nodes:
            if expected_resources(desired.nodes[target], strategy).get(GPU_RESOURCE, 0) == 0:
                per_node.setdefault(target, []).append(pod.key)
        elif target is None and not gpu_somewhere:
            per_node.setdefault(None, []).append(pod.key)
    for node, pods in sorted(per_node.items(), key=lambda kv: kv[0] or ""):
        where = (
            f"node {node} advertises nvidia.com/gpu: 0 (all its GPUs use MIG)"
            if node
            else ("no node of the plan advertises whole GPUs")
        )
        yield finding(
            "MP506",
            f"{len(pods)} pending pod(s) ask for nvidia.com/gpu but {where}: ask for a nvidia.com/mig-<profile>",
            node=node,
            desired=0,
            pods=tuple(sorted(pods)),
        )


def _invalid_request_findings(
    observed: ObservedState, sorted_pods: tuple[ObservedPod, ...] | None = None
) -> Iterable[Finding]:
    """The article's rules on every running GPU pod, judged by the same function as manifests before merge
    (reconciler.logic.observe.podrules): MP560 for more than one device of a MIG profile in a container, MP512 for
    the rest. `sorted_pods`: observed.pods by key, when the caller has them sorted already."""
    # The rules read the containers alone, and a fleet's pods share a few container tuples (one object per distinct
    # value: kubeobserve.Shared): judged once per tuple, by identity (the tuple is kept in the memo with its verdict,
    # so its id cannot be reused while the memo lives); pods that share nothing are judged one by one, as before.
    verdicts: dict[int, tuple[tuple[ContainerResources, ...], list[str], list[str]]] = {}
    for pod in sorted(observed.pods, key=_POD_KEY) if sorted_pods is None else sorted_pods:
        if not pod.active:
            continue
        verdict = verdicts.get(id(pod.containers))
        if verdict is None or verdict[0] is not pod.containers:
            verdict = verdicts[id(pod.containers)] = (pod.containers, *_container_messages(pod.containers))
        _, several, others = verdict
        if several:
            yield finding("MP560", f"pod {pod.key}: " + "; ".join(several), node=pod.node, pods=(pod.key,))
        if others:
            yield finding("MP512", f"pod {pod.key}: " + "; ".join(others), node=pod.node, pods=(pod.key,))


def _container_messages(containers: tuple[ContainerResources, ...]) -> tuple[list[str], list[str]]:
    """The messages of the rules' problems with a pod's containers: (more than one device of a MIG profile, the
    rest), each in the rules' order."""
    problems = [p for c in containers for p in podrules.container_problems(c)]
    several = [p.message for p in problems if p.kind is podrules.ProblemKind.COUNT_ABOVE_ONE]
    others = [p.message for p in problems if p.kind is not podrules.ProblemKind.COUNT_ABOVE_ONE]
    return several, others


def _saturation_findings(
    desired: DesiredState, observed: ObservedState, occ: Mapping[str, NodeOccupancy]
) -> Iterable[Finding]:
    totals: dict[str, list[int]] = {}
    for node_occ in occ.values():
        for o in node_occ.entries:
            if o.profile == "gpu":
                continue
            t = totals.setdefault(o.profile, [0, 0])
            t[0] += o.total
            t[1] += o.used
    # resource -> the plan's profile spelling, built once (not a scan of every node per pending pod)
    spelling = {
        resource_of(p.profile): p.profile for plan in desired.nodes.values() for g in plan.gpus for p in g.partitions
    }
    waiting: dict[str, list[str]] = {}
    for pod in observed.pods:
        if pod.phase == "Pending" and pod.node is None:
            for res, n in pod.requested().items():
                if n > 0 and is_mig_resource(res):
                    waiting.setdefault(spelling.get(res) or profile_label(res), []).append(pod.key)
    for profile in sorted(totals):
        total, used = totals[profile]
        if total > 0 and used >= total:
            pods = tuple(sorted(waiting.get(profile, ())))
            msg = f"no free {profile} partition left in the cluster ({used} of {total} used)"
            if pods:
                msg += f"; {len(pods)} pending pod(s) wait for one"
            yield finding(
                "MP513",
                msg,
                severity=WARNING if pods else INFO,
                profile=profile,
                desired=total,
                observed=used,
                pods=pods,
            )


# --- per node -------------------------------------------------------------------------------------


def _sharing_findings(
    name: str, plan: NodeSpec, strategy: MigStrategy, shared: dpsharing.NodeSharing
) -> Iterable[Finding]:
    """MP561: the node's device-plugin config shares its devices (the counts expected are the shared ones); MP562: that
    config cannot be read, so its counts say nothing and its layout is never re-applied on them; MP563: the plugin
    refuses the sharing on this node (MPS on MIG devices) and advertises nothing."""
    if isinstance(shared, dpsharing.Unbelievable):
        yield finding(
            "MP562",
            f"{name}: the device-plugin config that applies to it cannot be read ({shared.reason}): what it advertises "
            "is not compared with its plan and its layout is not re-applied on its counts",
            node=name,
            observed=shared.entry,
        )
    elif isinstance(shared, dpsharing.Sharing):
        has_mig = any(g.mig_enabled and g.partitions for g in plan.gpus)
        refused = dpsharing.refusal(shared, strategy.value, has_mig)
        if refused is not None:
            yield finding(
                "MP563",
                f"{name}: its device-plugin config shares devices with MPS, which the device plugin refuses here "
                f"('{refused}'): it advertises nothing; use timeSlicing or another config for this node",
                node=name,
                observed=shared.entry,
            )
        else:
            yield finding(
                "MP561",
                f"{name} shares its partitions: {shared.describe()}; its counts are compared with the shared ones",
                node=name,
                observed=shared.entry,
            )


def _shared_request_findings(name: str, shared: dpsharing.Sharing, pods: tuple[ObservedPod, ...]) -> Iterable[Finding]:
    """MP566: a container asking more than one replica of a shared resource where the config fails such requests
    (k8s-device-plugin internal/rm/rm.go `ValidateRequest`; MPS by default, time-slicing when the config says so): the
    plugin refuses its allocation, so the pod never starts there."""
    names = {shared.advertised_name(r) for r in shared.replicas}
    for pod in sorted(pods, key=lambda p: p.key):
        if not pod.active:
            continue
        for c in pod.containers:
            for res, n in sorted(c.effective.items()):
                if res in names and n > 1:
                    yield finding(
                        "MP566",
                        f"pod {pod.key} container {c.name} asks {n} x {res} on {name}, whose device-plugin config "
                        "fails requests of more than one shared device (failRequestsGreaterThanOne): 'maximum "
                        "request size for shared resources is 1'; ask 1 per container",
                        node=name,
                        pods=(pod.key,),
                    )


def _advertised_findings(
    name: str, plan: NodeSpec, want: Mapping[str, int], advertised: Mapping[str, int], behind_its_back: bool = False
) -> Iterable[Finding]:
    hint = (
        " although mig-manager reports its config applied: the GPUs were changed by hand or a GPU is missing "
        "(check nvidia-smi mig -lgi on the node; re-applying needs a new nvidia.com/mig.config value)"
        if behind_its_back
        else ""
    )
    have = {k: v for k, v in advertised.items() if is_gpu_resource(k)}
    for res in sorted(set(want) | set(have)):
        w, h = want.get(res, 0), have.get(res, 0)
        if w != h:
            profile = profile_label(res, plan)
            yield finding(
                "MP501",
                f"{name} advertises {h} x {res}, its plan gives {w}{hint}",
                node=name,
                profile=profile,
                desired=w,
                observed=h,
            )


def _gpu_count_findings(name: str, plan: NodeSpec, labels: Mapping[str, str]) -> Iterable[Finding]:
    """MP531: GFD counts more physical GPUs on the node than its file lists.

    `nvidia.com/gpu.count` is the number of physical GPUs, MIG-enabled ones included, except under the `single`
    strategy on a MIG node, where GFD relabels the node with the MIG device count and a `<product>-MIG-<profile>`
    product (k8s-device-plugin internal/lm mig-strategy.go; stack-facts §2): then the count says nothing about
    GPUs and is not compared. An unreadable count is MP530's (the kube adapter checks it), not compared here."""
    count = labels.get(GPU_COUNT_LABEL)
    if count is None or not (count.isascii() and count.isdigit() and len(count) < 6):
        return
    if "-MIG-" in labels.get(GPU_PRODUCT_LABEL, ""):
        return
    listed = len({g.index for g in plan.gpus})
    if listed < int(count):
        yield finding(
            "MP531",
            f"{name} has {int(count)} GPUs ({GPU_COUNT_LABEL}) but its inventory lists {listed}: the others are "
            f"not planned and keep whatever cut they have; add GPUs {listed}..{int(count) - 1} to nodes/{name}.yaml "
            "(mig: {enabled: false} for a GPU without MIG)",
            node=name,
            desired=listed,
            observed=int(count),
        )


def _mig_manager_findings(
    name: str,
    config: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    now: datetime | None,
    stuck_after: timedelta,
    reason: str | None = None,
    *,
    namespace: str = "gpu-operator",
) -> Iterable[Finding]:
    label = labels.get(MIG_CONFIG_LABEL)
    state = labels.get(MIG_CONFIG_STATE_LABEL)
    wedged = _wedged_finding(name, labels, reason, namespace)
    if label != config:
        yield finding(
            "MP514",
            f"{name} has nvidia.com/mig.config={label or '(unset)'}, its plan renders to {config}",
            node=name,
            desired=config,
            observed=label,
        )
    if state == MigConfigState.FAILED:
        why = f": {reason}" if reason else ": see the nvidia-mig-manager pod log (often GPUs still in use)"
        yield finding(
            "MP507",
            f"mig-manager failed to apply {label} on {name} (nvidia.com/mig.config.state=failed){why}; "
            "migplan retries once no pod holds a GPU on the node (drain it), at most every 10 minutes",
            node=name,
            desired=config,
            observed=reason or state,
        )
    elif wedged is not None:
        yield wedged
    elif state in (MigConfigState.PENDING, MigConfigState.REBOOTING):
        since = _parse_time(annotations.get(REQUESTED_AT_ANNOTATION))
        if state == MigConfigState.PENDING and now is not None and since is not None and now - since > stuck_after:
            minutes = int((now - since).total_seconds() // 60)
            yield finding(
                "MP508",
                f"{name} has been pending for {minutes} min (more than {int(stuck_after.total_seconds() // 60)}): "
                "check the nvidia-mig-manager pod on it",
                node=name,
                observed=state,
            )
        else:
            msg = f"mig-manager is applying {label} on {name} (state {state})"
            yield finding("MP509", msg, node=name, observed=state)


def _wedged_finding(name: str, labels: Mapping[str, str], reason: str | None, namespace: str) -> Finding | None:
    """MP522: mig-manager's wait for the GPU clients gave up and left the node `pending` with them paused.

    mig-parted pkg/mig/reconfigure/reconfigure.go `Run` returns `failed to wait for pods to be deleted: ...`
    without `setState`, and main.go then waits for another label value; the GPU Operator honours a paused
    `nvidia.com/gpu.deploy.*` value (gpu-operator state_manager.go addGPUStateLabels). A restarted mig-manager
    runs the label's config again and its `setState` turns every paused label back to `true`. migplan only
    reports it: the pod that would not leave is outside what it knows, and restarting mig-manager while that pod
    stays only wedges the node again 5 minutes later, after another apply attempt."""
    if labels.get(MIG_CONFIG_STATE_LABEL) != MigConfigState.PENDING or not reason or CLIENT_WAIT_FAILED not in reason:
        return None
    paused = sorted(k for k in GPU_CLIENT_DEPLOY_LABELS if labels.get(k) == PAUSED_FOR_MIG_CHANGE)
    if not paused:
        return None
    which = next((sel for words, sel in CLIENT_WAIT_SELECTORS.items() if f"{words} did not shutdown" in reason), None)
    if which is not None:
        check = f"kubectl -n {namespace} get pods -l {which} --field-selector spec.nodeName={name}"
    else:  # third-party clients: DaemonSet pods whose nodeSelector names nvidia.com/gpu.deploy.client
        check = (
            f"kubectl get pods -A --field-selector spec.nodeName={name} (DaemonSet pods selecting gpu.deploy.client)"
        )
    restart = f"kubectl -n {namespace} delete pod -l app=nvidia-mig-manager --field-selector spec.nodeName={name}"
    return finding(
        "MP522",
        f"mig-manager gave up on {name} ({reason}) and left it pending with {', '.join(paused)}="
        f"{PAUSED_FOR_MIG_CHANGE}; it acts again only on a new nvidia.com/mig.config value or when restarted. "
        f"Way out: make sure that pod has left the node ({check}), then restart the node's mig-manager ({restart}): "
        "it runs the label's config again and sets the paused labels back to true",
        node=name,
        observed=reason,
    )


def _parse_time(text: str | None) -> datetime | None:
    """The requested-at annotation; None when absent or malformed (then MP530 reports it)."""
    if not text:
        return None
    try:
        return parse_timestamp(text)
    except StrictValueError:
        return None


# --- the report -----------------------------------------------------------------------------------


# Informational findings that still mean "not there yet" (work in progress is not in sync). MP540: the node has the
# planned partitions at other places (mig-parted applies counts and never moves one): the plan is not what runs,
# so the node is not InSync, whatever the severity (a warning only when the places block a cut).
NOT_THERE_YET = frozenset({"MP540"})


def node_status(findings: Iterable[Finding]) -> NodeStatus:
    fs = list(findings)
    codes = {f.code for f in fs}
    if codes & _MISSING:
        return NodeStatus.MISSING
    if codes & _UNDOCUMENTED:
        return NodeStatus.UNDOCUMENTED
    if any(f.severity is ERROR for f in fs):
        return NodeStatus.ERROR
    if any(f.severity is WARNING for f in fs) or codes & IN_PROGRESS_CODES or codes & NOT_THERE_YET:
        return NodeStatus.DRIFTED
    return NodeStatus.IN_SYNC


def blocked_findings(plan: Plan) -> tuple[Finding, ...]:
    """The disruption guard's and the drain's verdicts as findings, so the report names the pods (and the
    PodDisruptionBudgets) that block a change, and the pods the drain evicts."""
    out = []
    evicted: dict[str, list[str]] = {}
    for c in plan.changes:
        if c.kind is Kind.EVICT and c.writes:
            evicted.setdefault(str((c.before or {}).get("spec.nodeName", "")), []).append(c.subject.split("/", 1)[1])
    for c in plan.changes:
        if c.kind is Kind.RESTART_DRA_PLUGIN and c.action is Action.SKIP and c.code:
            # the DRA kubelet plugin of a DRA-static node: stale slices, no plugin pod, an unreadable record
            out.append(finding(c.code, f"{c.subject}: {c.reason}", node=c.subject.split("/", 1)[1]))
            continue
        if not (c.action is Action.SKIP and c.blocked_by):
            continue
        node = c.subject.split("/", 1)[1] if c.subject.startswith("node/") else None
        code = c.code or "MP519"
        if code in _REBOOT:  # a possible reboot: the reason names how many pods end, not only GPU holders
            message = f"{c.subject} not reconfigured: {c.reason}; move them or set apply.allowDisruption"
        elif code in _HELD:
            message = (
                f"{c.subject} not reconfigured: running pods hold partitions it would destroy "
                f"({', '.join(c.blocked_by)}); move them or set apply.allowDisruption"
            )
        else:
            message = f"{c.subject}: {c.reason}"
        if code in _DRAIN_GOES_ON:  # still draining: the evictions of this cycle are reported as MP536 too
            out.append(finding(code, message, node=node, pods=c.blocked_by, observed=list(c.pdbs) or None))
            code, message = "MP536", f"{c.subject}: draining, waiting for {', '.join(c.blocked_by)} to go"
        pods = c.blocked_by
        if code in _DRAINING and node in evicted:
            message += f"; evicted this cycle: {', '.join(sorted(evicted[node]))}"
        out.append(finding(code, message, node=node, pods=pods, observed=list(c.pdbs) or None))
    return tuple(out)


def refused_eviction_findings(refusals: Iterable[tuple[str, str, str]]) -> tuple[Finding, ...]:
    """Evictions the API server refused this cycle, (node, pod, its message), as MP537 findings."""
    return tuple(
        finding(
            "MP537",
            f"eviction of {pod} refused: {message}; retried next cycle, never forced",
            node=node or None,
            pods=(pod,),
        )
        for node, pod, message in refusals
    )


def build_report(
    desired: DesiredState,
    observed: ObservedState,
    analysis: Analysis,
    plan: Plan | None = None,
    refused_evictions: Iterable[tuple[str, str, str]] = (),
) -> DriftReport:
    """Group findings per node, attach occupancy and slice maps: the value reports.py renders.
    `refused_evictions`: (node, pod, API message) of the evictions the API server refused this cycle."""
    findings = list(analysis.findings)
    if plan is not None:
        findings.extend(blocked_findings(plan))
    findings.extend(refused_eviction_findings(refused_evictions))
    per_node: dict[str, list[Finding]] = {}
    cluster: list[Finding] = []
    for f in findings:
        if f.node is not None and (f.node in desired.nodes or f.node in observed.nodes):
            per_node.setdefault(f.node, []).append(f)
        else:
            cluster.append(f)
    names = sorted(set(desired.nodes) | set(analysis.occupancy) | {n for n in per_node if n in observed.nodes})
    host = hosteffects.mig_manager_host(observed, desired.cluster.apply.mode)
    dra_cluster = draregime.cluster_dynamic_mig(observed.gpu_clusters) if observed.dra else None
    dra_claims = drarecord.claims_by_pool(observed.claims) if observed.dra else {}
    nodes = []
    for name in names:
        fs = tuple(sorted(per_node.get(name, ()), key=Finding.sort_key))
        occ = analysis.occupancy.get(name)
        ends = _reboot_ends(name, desired, observed, host)
        nodes.append(
            NodeReport(
                name=name,
                status=node_status(fs),
                findings=fs,
                occupancy=occ.entries if occ else (),
                mig_config=analysis.rendered.node_configs.get(name),
                observer=analysis.observers.get(name),
                reboot_ends=ends.count if ends is not None else None,
                reboot_names=ends.names if ends is not None else (),
                dra=drarecord.node_record(name, observed, dra_cluster, dra_claims) if observed.dra else None,
            )
        )
    maps = {
        n: slice_maps(desired.nodes[n], analysis.occupancy.get(n), analysis.joins.get(n)) for n in sorted(desired.nodes)
    }
    # Owner accounting: who each holder belongs to (matched as occupancy matches owners), and the pods of
    # observed nodes holding another owner's partition beyond the device plugin's free choice.
    pods_by_key = {p.key: p for p in observed.pods}
    all_owners = {p.owner for plan in desired.nodes.values() for g in plan.gpus for p in g.partitions if p.owner}
    holder_owners = {
        pod: observation.holder_owner(pod, all_owners, pods_by_key)
        for gpus in maps.values()
        for g in gpus
        for part in g.partitions
        if part.holder
        for pod in part.holder.split(", ")
    }
    foreign = [
        (i.owner or "", i.profile, pod)
        for j in analysis.joins.values()
        for i, pod, _ in observation.foreign_holders(j, pods_by_key)
    ]
    return DriftReport(
        cluster=desired.cluster.name,
        revision=desired.revision,
        strategy=desired.cluster.mig_strategy.value,
        nodes=tuple(nodes),
        cluster_findings=tuple(sorted(cluster, key=Finding.sort_key)),
        slice_maps=maps,
        owners=owners.accounts(maps, holder_owners, foreign),
        mig_manager=host,
    )


def _reboot_ends(
    name: str, desired: DesiredState, observed: ObservedState, host: MigManagerHost | None
) -> NodePods | None:
    """Under WITH_REBOOT, the pods a reboot of an inventory node ends (None otherwise: not reported)."""
    if host is None or not host.with_reboot or name not in desired.nodes:
        return None
    return observed.node_pods.get(name, NodePods())


def slice_maps(
    plan: NodeSpec,
    occ: NodeOccupancy | None,
    joined: observation.NodeJoin | None = None,
) -> tuple[GpuSliceMap, ...]:
    """Per GPU of the plan: its cut and who holds each partition. With the node's observation (`joined`),
    the cut is the GPU's real one (placements from NVML, each partition set against the plan: planned,
    moved, unplanned, missing) and the holders are the kubelet's when measured; otherwise the planned cut
    with the holders occupancy inferred. Each map says which (layout_source, holders_source).
    Without an observation, remembered by the identity of (plan, occ) (_NODE_MAPS)."""
    if joined is None:
        hit = _NODE_MAPS.get(id(plan))
        if hit is not None and hit[0] is plan and hit[1] is occ:
            return hit[2]
        out = _slice_maps(plan, occ, None)
        if len(_NODE_MAPS) >= _NODE_MAPS_LIMIT:
            _NODE_MAPS.clear()
        _NODE_MAPS[id(plan)] = (plan, occ, out)
        return out
    return _slice_maps(plan, occ, joined)


# A node's slice maps from its plan and inferred occupancy: the same objects every in-sync cycle of the
# controller (its NodeSpec is kept; occupancy.node_occupancy remembers its result by its inputs' identity), so
# remembered by their identity, one entry per NodeSpec (the last computed); each entry keeps both alive so an id
# is not reused while remembered. Bounded (NodeSpecs of older revisions): cleared when full.
_NODE_MAPS: dict[int, tuple[NodeSpec, NodeOccupancy | None, tuple[GpuSliceMap, ...]]] = {}
_NODE_MAPS_LIMIT = 1 << 14


def _slice_maps(
    plan: NodeSpec,
    occ: NodeOccupancy | None,
    joined: observation.NodeJoin | None,
) -> tuple[GpuSliceMap, ...]:
    catalog = load_catalog()
    held = {gpu for gpu, _ in occ.assignment} if occ and occ.assignment else ()
    out = []
    for g in sorted(plan.gpus, key=lambda g: g.index):
        model = catalog.get(g.model)
        slices = model.memory_slices if model else 8
        seen = joined.gpu(g.index) if joined is not None else None
        if joined is not None and seen is not None and seen.observed is not None:
            out.append(_observed_map(g, slices, seen, occ, joined.holders_known))
            continue
        # A GPU no pod holds has the same map every cycle: remembered (_free_gpu_slice_map).
        out.append(_gpu_slice_map(g, occ) if g.index in held else _free_gpu_slice_map(g))
    return tuple(out)


def _observed_map(
    g: GpuSpec, slices: int, seen: observation.GpuJoin, occ: NodeOccupancy | None, holders_known: bool
) -> GpuSliceMap:
    assert seen.observed is not None
    parts: list[SlicePartition] = []
    if seen.observed.mig_current:
        for i in seen.instances:
            if holders_known:
                holder = ", ".join(i.holders) or None
            else:  # the layout is observed, the holders are not: occupancy's guess, at the matched partition
                holder = occ.assignment.get((g.index, i.position)) if occ and i.position is not None else None
            state = "unplanned" if not i.planned else ("moved" if i.moved else "planned")
            parts.append(
                SlicePartition(
                    profile=i.profile,
                    start=i.placement.start,
                    size=i.placement.size,
                    owner=i.owner,
                    holder=holder,
                    state=state,
                    planned_start=i.planned_start if i.moved else None,
                )
            )
    starts = [p.start for p in g.placements] if len(g.placements) == len(g.partitions) else []
    for k in seen.missing:
        p = g.partitions[k]
        parts.append(
            SlicePartition(
                profile=p.profile,
                start=None,
                size=g.placements[k].size if starts else 1,
                owner=p.owner,
                holder=None,
                state="missing",
                planned_start=starts[k] if starts else p.placement,
            )
        )
    return GpuSliceMap(
        index=g.index,
        model=g.model,
        mig_enabled=seen.observed.mig_current,
        memory_slices=slices,
        partitions=tuple(parts),
        layout_source="observed",
        holders_source="observed" if holders_known else "inferred",
    )


# A GPU no pod holds has the same slice map every cycle (one per GpuSpec of the controller's
# DesiredState): remembered by the GpuSpec's identity, which the entry keeps alive so its id is not
# reused while remembered. Bounded; cleared when full. GpuSliceMap is frozen, so sharing it is safe.
_FREE_MAPS: dict[int, tuple[GpuSpec, GpuSliceMap]] = {}
_FREE_MAPS_LIMIT = 1 << 17


def _free_gpu_slice_map(g: GpuSpec) -> GpuSliceMap:
    hit = _FREE_MAPS.get(id(g))
    if hit is not None and hit[0] is g:
        return hit[1]
    out = _gpu_slice_map(g, None)
    if len(_FREE_MAPS) >= _FREE_MAPS_LIMIT:
        _FREE_MAPS.clear()
    _FREE_MAPS[id(g)] = (g, out)
    return out


def _gpu_slice_map(g: GpuSpec, occ: NodeOccupancy | None) -> GpuSliceMap:
    model = load_catalog().get(g.model)
    slices = model.memory_slices if model else 8
    parts = []
    for i, p in enumerate(g.partitions if g.mig_enabled else ()):
        placement = g.placements[i] if i < len(g.placements) else None
        if placement:
            size = placement.size
        else:  # (the catalog is asked only here: a placed partition has its size, 140,000 times at 5,000 nodes)
            prof = model.profiles.get(p.profile) if model else None
            size = prof.memory_slices if prof else 1
        holder = occ.assignment.get((g.index, i)) if occ else None
        parts.append(
            SlicePartition(
                profile=p.profile,
                start=placement.start if placement else p.placement,
                size=size,
                owner=p.owner,
                holder=holder,
            )
        )
    return GpuSliceMap(
        index=g.index,
        model=g.model,
        mig_enabled=g.mig_enabled,
        memory_slices=slices,
        partitions=tuple(parts),
    )
