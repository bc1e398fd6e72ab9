"""apply.mode agent, per node: publish each node's layout (exact placements) for its NVML agent as the
`migplan.io/mig-desired` annotation, where the node does not hold it yet. Pure.

Nodes not in the cluster get nothing (MP510 says so). A GPU whose partitions cannot be placed is left out of
the published layout and named in the reason: publishing a guess would be worse.

The disruption guard and the drain, as in gpu-operator mode but with the agent's model (only the instances
that change are destroyed, reconciler/logic/planning/agentdrain.py): a layout whose publication destroys instances
running pods hold is held back and names them (MP519) unless allowDisruption, then the node is drained
(cordon, evictions, the publication held until the pods are gone, drainTimeoutSeconds) and uncordoned once
its agent reports `success` for the published layout's revision. Nodes migplan has cordoned count against
maxUnavailableNodes; a publication that destroys nothing in use makes no node unavailable and is not
counted. Holding the publication (rather than publishing and letting the agent hold the GPU) keeps every
GPU of the node on one layout and names the pods at plan time, in the merge request as in the report; the
agent's own refusal to destroy an instance in use stays the last guard (a pod that arrives between the
controller's observation and the agent's pass).

Two passes over the nodes, in name order: `standing` says what each node owes (migplan's cordon lifted, a
publication, or a published layout the agent has not built yet) and whether it holds a maxUnavailableNodes
slot; then `publication_changes` decides each owed publication (unreadable → processes outside Kubernetes →
the guard → the budget → the drain → the publication).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.catalog import Catalog, load_catalog
from reconciler.logic.codecs import dradevices
from reconciler.logic.drift import drift, thirdparty
from reconciler.logic.observe import draclaims
from reconciler.logic.planning import agentdrain, desiredcodec, drain
from reconciler.logic.planning.agentplan import DesiredNode, desired_from_node_spec
from reconciler.logic.planning.disruptionguard import blocking_pods, converged
from reconciler.logic.planning.rollout import Budget, Hold, after_success, by_node, drain_changes
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import CORDONED_ANNOTATION, ObservedNode, ObservedPod, ObservedState
from reconciler.model.plans import Action, Change, Kind


@dataclass(frozen=True, slots=True)
class Publication:
    """A layout owed to a node's agent: to publish, or published and not built yet."""

    layout: DesiredNode
    note: str | None = None  # what could not be placed (left out of the layout), said in the reason
    # Already published: the agent has not built it yet. It may still need a drain (a pod took a destroyed
    # instance after the publication, or it was published before this controller held publications); the agent
    # holds it meanwhile.
    published: bool = False


@dataclass(frozen=True, slots=True)
class AgentStanding:
    """Where a node stands before any node is decided (pass 1)."""

    node: ObservedNode
    holds_slot: bool = False  # cordoned by migplan (not yet built), or draining: holds a maxUnavailableNodes slot
    lift_cordon: bool = False  # its agent reported success for the published layout: migplan's cordon is lifted
    owed: Publication | None = None


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What every node's decision reads, computed once per plan."""

    desired: DesiredState
    observed: ObservedState
    now: datetime
    pods_by_node: Mapping[str, tuple[ObservedPod, ...]]
    unreadable: frozenset[str]  # nodes with a malformed value (MP530, MP547): nothing is written there
    writers: Mapping[str, str]  # node -> the other component writing its MIG layout (MP570): nothing written, ever
    declared: Mapping[str, str]  # node -> the writer the inventory gives it (layoutWriter): nothing written or held
    # node -> [(DRA device, pod)] from ResourceClaims (reconciler.logic.observe.draclaims): holders the pods' requests
    # cannot show, named even without a node observer
    claimed: Mapping[str, list[tuple[str, str]]] = field(default_factory=dict)

    def pods(self, name: str) -> tuple[ObservedPod, ...]:
        return self.pods_by_node.get(name, ())


@dataclass(frozen=True, slots=True)
class _Holders:
    """The pods in the way of a publication."""

    blockers: tuple[str, ...]  # on the node: evicted by a drain
    # Named by the node observer but no longer listed on the node by the API (a StatefulSet's replacement takes
    # its name elsewhere): waited for until the observer's next pass shows the device freed, never evicted.
    vanished: tuple[str, ...]
    source: str  # where the holders come from, said in the change's reason

    @property
    def named(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.blockers) | set(self.vanished)))


def agent_layout_changes(desired: DesiredState, observed: ObservedState, now: datetime) -> list[Change]:
    """The per-node part of the plan in apply.mode agent, by node in write order (see the module docstring)."""
    inputs = _Inputs(
        desired,
        observed,
        now,
        observed.pods_by_node(),
        drift.unreadable_nodes(observed),
        drift.other_writers(desired, observed),
        drift.declared_writers(desired),
        draclaims.by_node(observed.claims),
    )
    catalog = load_catalog()
    nodes = [node for name in sorted(desired.nodes) if (node := observed.nodes.get(name)) is not None]
    # A layout published before another writer took the node stays on it, and its agent would build it again
    # after every change the other writer makes: withdrawn first, and the node decided no further.
    withdrawn = [c for node in nodes if (c := withdrawal(inputs, node)) is not None]
    gone = {c.subject for c in withdrawn}
    standings = [standing(inputs, node, catalog) for node in nodes if f"node/{node.name}" not in gone]
    out = [*withdrawn, *(after_success(s.node) for s in standings if s.lift_cordon)]  # frees its slot
    budget = Budget(desired.cluster.apply.max_unavailable_nodes, sum(s.holds_slot for s in standings))
    for s in standings:
        if s.owed is not None:
            out.extend(publication_changes(inputs, s.node, s.owed, budget, holds_slot=s.holds_slot))
    return by_node(out)


def withdrawal(inputs: _Inputs, node: ObservedNode) -> Change | None:
    """The removal of the layout migplan published on a node another component now lays out (declared in the
    inventory, or found: DynamicMIG, HAMi's MIG mode), or None when the node holds none or is migplan's."""
    writer = inputs.writers.get(node.name) or inputs.declared.get(node.name)
    if writer is None or desiredcodec.ANNOTATION not in node.annotations:
        return None
    return Change(
        f"node/{node.name}",
        Action.DELETE,
        Kind.AGENT_LAYOUT,
        {desiredcodec.ANNOTATION: "(previous layout)"},
        None,
        f"withdraw the layout published for the node's agent: {writer} writes this node's MIG layout now (MP577)",
        patch={"metadata": {"annotations": {desiredcodec.ANNOTATION: None}}},
        code="MP577",
    )


# --- pass 1: where each node stands ---------------------------------------------------------------


def standing(inputs: _Inputs, node: ObservedNode, catalog: Catalog) -> AgentStanding:
    """What the node owes: nothing, migplan's cordon lifted, or a publication; and whether it holds a slot."""
    desired = inputs.desired
    layout, problems = desired_from_node_spec(desired.nodes[node.name], revision=str(desired.revision), catalog=catalog)
    ours = node.annotations.get(CORDONED_ANNOTATION) == "true"
    if not desiredcodec.needs_publishing(node.annotations.get(desiredcodec.ANNOTATION), layout):
        return _published(node, ours=ours, unreadable=node.name in inputs.unreadable)
    draining = ours or drain.draining_for(node) == agentdrain.layout_key(layout)
    return AgentStanding(
        node,
        holds_slot=draining and node.unschedulable,
        owed=Publication(layout, "; ".join(problems) or None),
    )


def _published(node: ObservedNode, *, ours: bool, unreadable: bool) -> AgentStanding:
    """A node that holds its layout's publication already: built (lift migplan's cordon), or not yet."""
    published = agentdrain.published_layout(node)
    done = published is not None and agentdrain.agent_reported_success(node, published)
    if ours and not unreadable and done:
        return AgentStanding(node, lift_cordon=True)
    owed = Publication(published, published=True) if published is not None and not done else None
    # Cordoned by migplan and the agent has not applied it yet: still unavailable.
    return AgentStanding(node, holds_slot=ours and not unreadable, owed=owed)


# --- pass 2: an owed publication ----------------------------------------------------------------


def publication_changes(
    inputs: _Inputs, node: ObservedNode, owed: Publication, budget: Budget, *, holds_slot: bool
) -> list[Change]:
    """The changes for a node owed a publication. Takes a maxUnavailableNodes slot from `budget` when it starts
    a drain the node does not hold a slot for yet."""
    found = agentdrain.layout_disruption(node, owed.layout)
    if owed.published and not found.measured:
        return []  # only measured holders: the agent reports what holds it (pending) by itself
    held = _publication_hold(node, owed.layout)
    if node.name in inputs.declared:
        return []  # the inventory gives this node's layout to another writer: the agent is given none
    writer = inputs.writers.get(node.name)
    if writer is not None:
        # Another component lays this GPU out (MP570): the agent is never given a layout to write there.
        if owed.published:
            return []
        code = thirdparty.conflict_code(writer)
        return [held(f"held: {writer} writes this node's MIG layout; migplan writes nothing there ({code})", code=code)]
    if node.name in inputs.unreadable:
        # A value migplan cannot read on the node (MP530, a malformed observation MP547): left alone in agent
        # mode too, no layout published, cordoned or lifted on a guess (its findings say why).
        if owed.published:
            return []
        return [held("held: a value migplan reads on the node is malformed (MP530/MP547): nothing is written")]
    holders = _with_claims(_holders(inputs, node, found), inputs, node, owed.layout)
    in_use = f"{found.effect}; {holders.source}" + ("; published, the agent holds it" if owed.published else "")
    allow = inputs.desired.cluster.apply.allow_disruption
    if found.outside:
        return [
            held(
                f"cannot drain: processes outside Kubernetes use what the layout destroys "
                f"({'; '.join(found.outside)}); the agent would hold the GPU ({in_use})",
                blocked_by=holders.named + found.outside,
                code=drain.UNDRAINABLE if allow else "MP519",
            )
        ]
    if holders.named:
        if not allow:
            reason = f"disruption guard: running pods hold partitions this layout destroys ({in_use})"
            return [held(reason, blocked_by=holders.named, code="MP519")]
        if not holds_slot and not budget.take():
            return [held(budget.full_reason)]
        key = agentdrain.layout_key(owed.layout)
        pods = inputs.pods(node.name)
        return drain_changes(
            inputs.desired,
            inputs.observed,
            node,
            key,
            pods,
            holders.blockers,
            in_use,
            now=inputs.now,
            hold=held,
            vanished=holders.vanished,
        )
    if owed.published:
        return []  # nothing in use in the way: the agent builds it on its next pass
    return [_publish(inputs.desired, node, owed)]


def _holders(inputs: _Inputs, node: ObservedNode, found: agentdrain.LayoutDisruption) -> _Holders:
    """The pods in the way of the layout: those the node observer measured, or those inferred from requests."""
    pods = inputs.pods(node.name)
    if found.measured:
        on_node = {p.key for p in pods}
        blockers = tuple(k for k in found.holders if k in on_node)
        return _Holders(blockers, tuple(k for k in found.holders if k not in on_node), found.source)
    resources, source = found.resources, found.source
    desired = inputs.desired
    if resources is None and converged(desired.nodes[node.name], node, desired.cluster.mig_strategy):
        # Nothing says what the GPUs hold, but the node advertises exactly its plan's counts (as in gpu-operator
        # mode): taken as built. Counts can hide other placements; the agent still refuses to destroy an
        # instance in use and holds that GPU.
        resources = frozenset()
        source += "; the node advertises exactly its plan's counts: taken as built"
    return _Holders(blocking_pods(pods, resources), (), source)


def _with_claims(holders: _Holders, inputs: _Inputs, node: ObservedNode, layout: DesiredNode) -> _Holders:
    """The holders, plus the pods a ResourceClaim reserves a device for that building `layout` destroys (a DRA node:
    such a pod requests nothing the inference sees, and without an observer nothing else names it). A device is
    destroyed unless the layout keeps that profile at that start on its GPU; a name that does not parse is taken
    as destroyed (the guard errs on the side of the pod). Only pods the API still lists on the node count."""
    claimed = inputs.claimed.get(node.name)
    if not claimed:
        return holders
    obs = node.observation
    minors = {g.index: g.minor for g in obs.gpus if g.minor is not None} if obs is not None else {}
    index_of = {minor: index for index, minor in minors.items()}
    laid = {g.index: g for g in layout.gpus}
    listed = {p.key for p in inputs.pods(node.name)}
    found: set[str] = set()
    for device, pod in claimed:
        if pod not in listed:
            continue
        parsed = dradevices.parse(device)
        if parsed is None:
            found.add(pod)
            continue
        gpu = laid.get(index_of.get(parsed.minor, parsed.minor))
        if gpu is None:
            continue  # a GPU the layout does not name is never touched
        if isinstance(parsed, dradevices.DraMig):
            kept = {(dradevices.profile_token(p.profile), p.placement.start) for p in gpu.partitions if gpu.mig_enabled}
            if (parsed.profile_token, parsed.start) not in kept:
                found.add(pod)
        elif gpu.mig_enabled:
            found.add(pod)  # a whole GPU the layout cuts into MIG devices
    if not found - set(holders.named):
        return holders
    blockers = tuple(sorted(set(holders.blockers) | found))
    return _Holders(blockers, holders.vanished, f"{holders.source}; and the pods ResourceClaims reserve")


def _publish(desired: DesiredState, node: ObservedNode, owed: Publication) -> Change:
    """The publication of the node's layout (its `migplan.io/mig-desired` annotation)."""
    current = node.annotations.get(desiredcodec.ANNOTATION)
    why = "publish the node's layout for its migplan agent" + (f" ({owed.note})" if owed.note else "")
    if node.annotations.get(CORDONED_ANNOTATION) == "true":
        why += "; drained, uncordoned once the agent reports success"
    text = desiredcodec.encode(owed.layout)
    return Change(
        f"node/{node.name}",
        Action.CREATE if current is None else Action.CONFIGURE,
        Kind.AGENT_LAYOUT,
        None if current is None else {desiredcodec.ANNOTATION: "(previous layout)"},
        {desiredcodec.ANNOTATION: f"{len(owed.layout.gpus)} GPU(s) at {desired.revision}"},
        why,
        patch={"metadata": {"annotations": {desiredcodec.ANNOTATION: text, **drain.end_marks(node)}}},
    )


def _publication_hold(node: ObservedNode, layout: DesiredNode) -> Hold:
    """The publication of `layout` on the node, held back this cycle with the reason the report shows."""
    current = node.annotations.get(desiredcodec.ANNOTATION)

    def held(reason: str, *, blocked_by: tuple[str, ...] = (), code: str = "", pdbs: tuple[str, ...] = ()) -> Change:
        return Change(
            f"node/{node.name}",
            Action.SKIP,
            Kind.AGENT_LAYOUT,
            None if current is None else {desiredcodec.ANNOTATION: "(previous layout)"},
            {desiredcodec.ANNOTATION: f"{len(layout.gpus)} GPU(s) at {layout.revision}"},
            reason,
            blocked_by=blocked_by,
            code=code,
            pdbs=pdbs,
        )

    return held
