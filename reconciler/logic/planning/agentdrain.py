"""apply.mode agent: what publishing a node's new layout destroys, who holds it, and what the agent reported.

Pure. The controller's side of the drain in agent mode (the planner, reconciler/logic/planning/agentchanges.py, does
the rest
with reconciler/logic/planning/drain.py, as in gpu-operator mode). The disruption model is the agent's own
(reconciler/logic/planning/agentplan.py, `plan_node`): on a GPU whose MIG mode stays, only the instances whose
(profile, placement) is not desired are destroyed; a MIG mode change destroys every instance of that GPU
(and, enabling MIG, takes the whole GPU from its holder). Instances the new layout keeps are never touched,
so the pods holding them are never evicted.

Who holds a destroyed instance, best source first:
1. the node observer's v2 observation (`migplan.io/mig-observed`, reconciler/logic/codecs/observedcodec.py) with the
   kubelet's PodResources answer (`holders_known`): the pods and containers the kubelet allocated each MIG
   device to, and the PIDs NVML sees on it. A PID no pod accounts for is a process outside Kubernetes that no
   eviction removes;
2. otherwise inference, as gpu-operator mode does it (disruptionguard.py `blocking_pods`): the destroyed
   instances are known from a v1 observation or a v2 one without holders (its instances), else from the
   layout published before (`migplan.io/mig-desired`, what the agent was told to build), and every running
   pod on the node requesting one of their profiles is taken as a holder; with neither, every pod holding a
   GPU device of the node is. The reason says which source it used.

`read_observation` is the one place the controller reads the observed annotation for this purpose (kept
small so it can be unified with the controller's general reading of observations).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.logic.observe import observation
from reconciler.logic.planning import desiredcodec
from reconciler.logic.planning.agentplan import DesiredGpu, DesiredNode, MigState, plan_node
from reconciler.model import strict
from reconciler.model.nodeobservation import NodeObservation, ObservedGpu, ObservedInstance
from reconciler.model.observed import GPU_RESOURCE, OBSERVED_ANNOTATION, ObservedNode

# The agent's keys on its Node (reconciler/adapters/kube/agentmode.py writes them under the same names).
STATE_LABEL = "migplan.io/mig.state"
STATE_REVISION_ANNOTATION = "migplan.io/mig.state.revision"


def read_observation(node: ObservedNode) -> tuple[NodeObservation | None, str]:
    """The node observer's last observation of the node, or None with why there is none to use."""
    # One decoder for the controller (reconciler.logic.observe.observation, memoised per annotation value).
    obs, error = observation.read_observation(node.annotations)
    if error is not None:
        return None, f"observation unreadable ({OBSERVED_ANNOTATION}: {error})"
    if obs is None:
        return None, f"no observation ({OBSERVED_ANNOTATION} absent: no node observer)"
    return obs, ""


def agent_reported_success(node: ObservedNode, layout: DesiredNode) -> bool:
    """The node's agent says `success` for the published `layout`, not for the one before it.

    The state label and its revision annotation (`migplan.io/mig.state.revision`) must name the layout's
    revision; and since two layouts can share a revision (`reconcile --once` from a directory has no commit),
    the agent's own observation, which it publishes before its state, must show that layout built
    (reconciler/logic/planning/agentplan.py: nothing left to do). An unreadable observation is not a success."""
    if node.labels.get(STATE_LABEL) != MigState.SUCCESS.value:
        return False
    if node.annotations.get(STATE_REVISION_ANNOTATION) != layout.revision:
        return False
    if OBSERVED_ANNOTATION not in node.annotations:
        return True  # an agent too old to publish observations: its state is all there is
    obs, _ = read_observation(node)
    return obs is not None and plan_node(layout.gpus, obs.gpus).is_empty


def published_layout(node: ObservedNode) -> DesiredNode | None:
    """The layout the node's annotation holds now (None when absent or unreadable)."""
    text = node.annotations.get(desiredcodec.ANNOTATION)
    if text is None:
        return None
    try:
        return desiredcodec.decode(node.name, text)
    except strict.StrictValueError:
        return None


def layout_key(layout: DesiredNode) -> str:
    """A name for a layout (its GPUs, not its revision) the drain marks record as what it drains for: a commit
    that leaves the node's layout alone must not restart its drain, one that changes it must."""
    text = desiredcodec.encode(DesiredNode(node=layout.node, revision="", gpus=layout.gpus))
    return "layout-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def mig_resource(profile: str) -> str:
    """The extended resource a MIG device of `profile` is advertised as under the mixed strategy."""
    return "nvidia.com/mig-" + profile.replace("+", ".")


@dataclass(frozen=True, slots=True)
class LayoutDisruption:
    """What the agent destroys on a node to build a new layout, and who holds it.

    `measured`: holders come from the observation (`holders`, `outside`); otherwise `resources` are the
    extended resources of the destroyed instances for the planner's inference (None: unknown, assume all)."""

    measured: bool
    effect: str  # what is destroyed, in words
    source: str  # where the holders come from, said in the change's reason
    holders: tuple[str, ...] = ()  # pods (namespace/name) holding a destroyed instance
    outside: tuple[str, ...] = ()  # "pids … on gpu …": instances in use by processes no pod accounts for
    resources: frozenset[str] | None = frozenset()


_NOTHING = "nothing in use is destroyed"


def _gone(desired: DesiredGpu, gpu: ObservedGpu) -> tuple[tuple[ObservedInstance, ...], bool]:
    """The instances of `gpu` the agent destroys for `desired`, and whether the whole GPU changes MIG mode."""
    if not gpu.mig_capable:
        return (), False
    flip = gpu.mig_current != desired.mig_enabled
    if flip:
        return gpu.instances, True
    if not desired.mig_enabled:
        return (), False
    wanted = {(p.profile, p.placement) for p in desired.partitions}
    return tuple(i for i in gpu.instances if (i.profile, i.placement) not in wanted), False


def _describe(parts: Iterable[str]) -> str:
    text = "; ".join(parts)
    return text or _NOTHING


def layout_disruption(node: ObservedNode, layout: DesiredNode) -> LayoutDisruption:
    """What building `layout` destroys on the node and who holds it (see the module docstring)."""
    obs, why = read_observation(node)
    if obs is not None:
        by_index = {g.index: g for g in obs.gpus}
        holders: set[str] = set()
        outside: list[str] = []
        resources: set[str] = set()
        words: list[str] = []
        for d in sorted(layout.gpus, key=lambda d: d.index):
            g = by_index.get(d.index)
            if g is None:
                continue  # the agent reports the missing GPU itself (failed); nothing it could destroy
            gone, flip = _gone(d, g)
            busy = [i for i in gone if i.in_use]
            if flip:
                words.append(f"gpu {d.index}: MIG mode change destroys every instance")
                if not g.mig_current and g.holders:
                    holders |= {h.pod_key for h in g.holders}
                    resources.add(GPU_RESOURCE)
            elif gone:
                words.append(f"gpu {d.index}: destroys {', '.join(f'{i.profile}@{i.placement}' for i in gone)}")
            for i in gone:
                resources.add(mig_resource(i.profile))
            for i in busy:
                holders |= {h.pod_key for h in i.holders}
                if i.processes and not i.holders and obs.holders_known:
                    pids = ", ".join(map(str, i.processes))
                    outside.append(f"pids {pids} on gpu {d.index} {i.profile}@{i.placement} (no pod holds it)")
        effect = _describe(words)
        if obs.holders_known:
            return LayoutDisruption(
                True, effect, "holders observed by the node observer", tuple(sorted(holders)), tuple(outside)
            )
        reason = "a v1 observation" if obs.version == "v1" else "an observation without the kubelet's holders"
        return LayoutDisruption(
            False,
            effect,
            f"holders inferred from the pods' requests ({reason}: "
            f"{obs.sources.get('podResources', 'no holders') if obs.version != 'v1' else 'no holders'})",
            resources=frozenset(resources),
        )
    before = published_layout(node)
    if before is None:
        return LayoutDisruption(
            False,
            "unknown previous layout: every GPU of the node",
            f"holders inferred from the pods' requests ({why}, no layout published before)",
            resources=None,
        )
    return _from_previous(before, layout, why)


def _from_previous(before: DesiredNode, layout: DesiredNode, why: str) -> LayoutDisruption:
    """Inference from the layout published before (what the agent was told to build)."""
    old = {g.index: g for g in before.gpus}
    resources: set[str] = set()
    words: list[str] = []
    for d in sorted(layout.gpus, key=lambda d: d.index):
        o = old.get(d.index)
        if o is None:
            return LayoutDisruption(
                False,
                f"unknown previous layout of gpu {d.index}: every GPU of the node",
                f"holders inferred from the pods' requests ({why})",
                resources=None,
            )
        if o.mig_enabled != d.mig_enabled:
            words.append(f"gpu {d.index}: MIG mode change destroys every instance")
            resources |= {mig_resource(p.profile) for p in o.partitions} or {GPU_RESOURCE}
            continue
        keep = {(p.profile, p.placement) for p in d.partitions}
        gone = [p for p in o.partitions if (p.profile, p.placement) not in keep]
        if gone:
            words.append(f"gpu {d.index}: destroys {', '.join(f'{p.profile}@{p.placement}' for p in gone)}")
            resources |= {mig_resource(p.profile) for p in gone}
    return LayoutDisruption(
        False,
        _describe(words),
        f"holders inferred from the pods' requests ({why}; previous layout from {desiredcodec.ANNOTATION})",
        resources=frozenset(resources),
    )
