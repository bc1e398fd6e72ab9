"""The node agent's planner: from a node's observed GPU instances and its desired partitions with exact
placements, the ordered NVML steps that make them equal.

Pure: values in, values out; no NVML, no clock, no I/O. The agent (reconciler/agent.py) observes through
the NVML adapter, calls `plan_node`, executes the steps, observes again and plans again — an empty plan
then means the node is in sync (the idempotence round trip the tests check for every layout).

Rules, per GPU (a GPU the desired layout does not name is never touched):
- An observed instance whose (profile, placement) is desired stays: it is listed in `unchanged` and no
  step touches it. Matching is on the exact placement, not on the profile count as mig-parted's assert
  does, because a partition at another start is another partition for the people who own it.
- Every other instance is destroyed, every missing one created. Destroys come before creates (they free
  memory slices); creates go largest first, then by start, so an instance is never refused for lack of
  room another create has not yet given back. With disjoint exact placements any order succeeds on real
  hardware; the order is fixed so logs and tests are deterministic.
- An instance that has processes on it is never destroyed: the whole GPU's change is held (no step for
  that GPU at all, so it is never left half-cut) and the hold names the processes.
- MIG mode first: a mode change destroys every instance (it must, on the hardware), so it is held the
  same way when any instance is in use. A GPU whose mode is pending (set but not yet effective) waits for
  the reset: NVML reports `current != pending` until the GPU is reset, and instances cannot be created
  before that.
- A desired placement that the GPU does not offer (NVML's possible placements, which win over the
  catalog) or that overlaps another desired one is an error for that GPU; nothing is applied there.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.catalog import Catalog
from reconciler.logic.inventory import placement as placements
from reconciler.model.inventory import NodeSpec, Placement
from reconciler.model.nodeobservation import ObservedGpu as ObservedGpu
from reconciler.model.nodeobservation import ObservedInstance as ObservedInstance
from reconciler.model.plans import Action


class MigState(enum.StrEnum):
    """Values of the agent's node label `migplan.io/mig.state` (the same words mig-manager uses)."""

    PENDING = "pending"
    SUCCESS = "success"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class MigMode:
    """MIG mode after a set: `current` is in effect, `pending` takes effect at the next GPU reset."""

    current: bool
    pending: bool
    activation_status: int = 0  # what nvmlDeviceSetMigMode returned (0, or an NVML code such as RESET_REQUIRED)


@dataclass(frozen=True, slots=True)
class DesiredPartition:
    profile: str
    placement: Placement


@dataclass(frozen=True, slots=True)
class DesiredGpu:
    index: int
    mig_enabled: bool
    partitions: tuple[DesiredPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class DesiredNode:
    """What the controller publishes for one node (annotation `migplan.io/mig-desired`)."""

    node: str
    revision: str  # str(Revision) of the inventory it came from
    gpus: tuple[DesiredGpu, ...]


# The planner's actions an agent step can take (see Step); the others are not NVML calls.
STEP_ACTIONS = frozenset({Action.CONFIGURE, Action.DELETE, Action.CREATE})


@dataclass(frozen=True, slots=True)
class Step:
    """One NVML call on one GPU, in the planner's words (reconciler.model.plans.Action), so a step and a
    `Change` say the same thing the same way:

    - `Action.CONFIGURE`: set the GPU's MIG mode to `enabled` (nvmlDeviceSetMigMode);
    - `Action.DELETE`: destroy the GPU instance `gpu_instance_id` at `profile@placement`;
    - `Action.CREATE`: create a GPU instance (with its compute instance) at `profile@placement`.

    The other actions are no steps: an instance left alone is in `AgentPlan.unchanged`, a GPU whose
    change is held back is in `AgentPlan.held` (the planner's `Action.UNCHANGED` and `Action.SKIP`).
    `str(step)` is what the agent logs and writes in its reason annotation.
    """

    action: Action
    gpu: int
    profile: str | None = None
    placement: Placement | None = None
    gpu_instance_id: int | None = None
    enabled: bool | None = None

    def __post_init__(self) -> None:
        if self.action not in STEP_ACTIONS:
            raise ValueError(f"an agent step is {', '.join(sorted(STEP_ACTIONS))}, not {self.action}")

    def __str__(self) -> str:
        if self.action is Action.CONFIGURE:
            return f"gpu {self.gpu}: set MIG mode {'enabled' if self.enabled else 'disabled'}"
        where = f"{self.profile}@{self.placement}"
        if self.action is Action.DELETE:
            return f"gpu {self.gpu}: destroy {where} (gi {self.gpu_instance_id})"
        return f"gpu {self.gpu}: create {where}"


@dataclass(frozen=True, slots=True)
class Hold:
    """A GPU whose change is held because it would destroy an instance in use."""

    gpu: int
    instances: tuple[ObservedInstance, ...]

    @property
    def reason(self) -> str:
        parts = [f"{i.profile}@{i.placement} (pids {', '.join(map(str, i.processes))})" for i in self.instances]
        return f"gpu {self.gpu}: change held, in use: {'; '.join(parts)}"


@dataclass(frozen=True, slots=True)
class GpuError:
    gpu: int
    message: str

    def __str__(self) -> str:
        return f"gpu {self.gpu}: {self.message}"


@dataclass(frozen=True, slots=True)
class AgentPlan:
    steps: tuple[Step, ...] = ()
    unchanged: tuple[tuple[int, ObservedInstance], ...] = ()  # (gpu index, instance) left alone
    held: tuple[Hold, ...] = ()
    errors: tuple[GpuError, ...] = ()
    awaiting_reset: tuple[int, ...] = ()  # GPUs whose MIG mode change waits for a GPU reset

    @property
    def is_empty(self) -> bool:
        """Nothing to do and nothing in the way: the node is in sync."""
        return not (self.steps or self.held or self.errors or self.awaiting_reset)

    def steps_for(self, gpu: int) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.gpu == gpu)


def _create_order(p: DesiredPartition) -> tuple[int, int]:
    return (-p.placement.size, p.placement.start)


def _check_desired(desired: DesiredGpu, observed: ObservedGpu) -> str | None:
    taken: list[DesiredPartition] = []
    for p in desired.partitions:
        if observed.possible:
            offered = observed.possible.get(p.profile)
            if offered is None:
                return f"profile {p.profile} is not offered by this GPU ({observed.name})"
            if p.placement not in offered:
                starts = ", ".join(str(o.start) for o in offered)
                return f"placement {p.placement} is not possible for {p.profile} (starts: {starts})"
        for q in taken:
            if p.placement.overlaps(q.placement):
                return f"{p.profile}@{p.placement} overlaps {q.profile}@{q.placement}"
        taken.append(p)
    return None


def _plan_gpu(desired: DesiredGpu, observed: ObservedGpu) -> AgentPlan:
    g = desired.index
    if desired.mig_enabled and not observed.mig_capable:
        return AgentPlan(errors=(GpuError(g, f"{observed.name} is not MIG-capable"),))
    if not observed.mig_capable:
        return AgentPlan()  # MIG disabled is what we want and all this GPU can do

    if not desired.mig_enabled:
        if not observed.mig_current and not observed.mig_pending:
            return AgentPlan()
        if not observed.mig_current:
            # Enabled but not yet effective: cancel the pending enable.
            return AgentPlan(steps=(Step(Action.CONFIGURE, g, enabled=False),))
        busy = tuple(i for i in observed.instances if i.in_use)
        if busy:
            return AgentPlan(held=(Hold(g, busy),))
        if not observed.mig_pending:
            return AgentPlan(awaiting_reset=(g,))  # disable already requested, waits for the reset
        destroys = tuple(
            Step(Action.DELETE, g, i.profile, i.placement, i.gpu_instance_id)
            for i in sorted(observed.instances, key=lambda i: i.placement.start)
        )
        return AgentPlan(steps=(*destroys, Step(Action.CONFIGURE, g, enabled=False)))

    problem = _check_desired(desired, observed)
    if problem is not None:
        return AgentPlan(errors=(GpuError(g, problem),))

    if not observed.mig_current:
        if observed.mig_pending:
            return AgentPlan(awaiting_reset=(g,))
        # Instances are created after the mode takes effect; the executor stops at a mode that stays
        # pending, so the creates are planned now and carried out in the same pass when no reset is needed.
        creates = tuple(
            Step(Action.CREATE, g, p.profile, p.placement) for p in sorted(desired.partitions, key=_create_order)
        )
        return AgentPlan(steps=(Step(Action.CONFIGURE, g, enabled=True), *creates))

    wanted = {(p.profile, p.placement) for p in desired.partitions}
    present = {(i.profile, i.placement) for i in observed.instances}
    keep = tuple((g, i) for i in observed.instances if (i.profile, i.placement) in wanted)
    gone = [i for i in observed.instances if (i.profile, i.placement) not in wanted]
    busy = tuple(i for i in gone if i.in_use)
    if busy:
        return AgentPlan(unchanged=keep, held=(Hold(g, busy),))
    mode: tuple[Step, ...] = ()
    if not observed.mig_pending:
        # A disable is pending: re-enable so the reset does not wipe the layout we are about to build.
        mode = (Step(Action.CONFIGURE, g, enabled=True),)
    destroys = tuple(
        Step(Action.DELETE, g, i.profile, i.placement, i.gpu_instance_id)
        for i in sorted(gone, key=lambda i: i.placement.start)
    )
    creates = tuple(
        Step(Action.CREATE, g, p.profile, p.placement)
        for p in sorted(desired.partitions, key=_create_order)
        if (p.profile, p.placement) not in present
    )
    return AgentPlan(steps=(*mode, *destroys, *creates), unchanged=keep)


def plan_node(desired: Sequence[DesiredGpu], observed: Sequence[ObservedGpu]) -> AgentPlan:
    """The ordered steps that bring `observed` to `desired` (GPUs in index order)."""
    by_index = {o.index: o for o in observed}
    parts: list[AgentPlan] = []
    for d in sorted(desired, key=lambda d: d.index):
        o = by_index.get(d.index)
        if o is None:
            parts.append(AgentPlan(errors=(GpuError(d.index, "no such GPU on this node"),)))
            continue
        parts.append(_plan_gpu(d, o))
    return AgentPlan(
        steps=tuple(s for p in parts for s in p.steps),
        unchanged=tuple(u for p in parts for u in p.unchanged),
        held=tuple(h for p in parts for h in p.held),
        errors=tuple(e for p in parts for e in p.errors),
        awaiting_reset=tuple(r for p in parts for r in p.awaiting_reset),
    )


def desired_from_node_spec(node: NodeSpec, *, revision: str, catalog: Catalog) -> tuple[DesiredNode, tuple[str, ...]]:
    """The layout the controller publishes for a node, with an exact placement for every partition.

    Placements come from validation (`GpuSpec.placements`) where it found them, otherwise from the
    solver with the user's fixed starts. Returns the desired node and the problems found (a GPU
    whose partitions cannot be placed is left out of the result: publishing a guess would be worse).
    """
    gpus: list[DesiredGpu] = []
    problems: list[str] = []
    for g in node.gpus:
        if not g.mig_enabled:
            gpus.append(DesiredGpu(g.index, False))
            continue
        found: tuple[Placement, ...] | None = tuple(g.placements) or None
        if found is None or len(found) != len(g.partitions):
            model = catalog.get(g.model) or catalog.resolve(g.model)
            if model is None:
                problems.append(f"{node.name} gpu {g.index}: unknown model {g.model}")
                continue
            try:
                found = placements.solve(model, [placements.Request(p.profile, p.placement) for p in g.partitions])
            except (KeyError, placements.PlacementUnknown) as exc:
                problems.append(f"{node.name} gpu {g.index}: no placement table for {exc.args[0]} on {model.key}")
                continue
            if found is None:
                problems.append(f"{node.name} gpu {g.index}: the partitions do not fit on a {model.key}")
                continue
        gpus.append(
            DesiredGpu(
                g.index,
                True,
                tuple(DesiredPartition(p.profile, pl) for p, pl in zip(g.partitions, found, strict=True)),
            )
        )
    return DesiredNode(node=node.name, revision=revision, gpus=tuple(gpus)), tuple(problems)
