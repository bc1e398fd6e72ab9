"""The node agent (`migplan agent`, for `apply.mode: agent`): a reporter and an actuator over two ports.

Orchestration only; no library imports. `GpuPort` is the node's GPUs (reconciler.adapters.nvml.NvmlGpu,
or the NVML twin behind it in tests); `NodeStatePort` is what the agent reads from and writes to the
Kubernetes API about its own node (reconciler.adapters.kube.agentmode.KubeNodeState).

- `report_once`: observe the GPUs, join the kubelet's allocations (reconciler.observer) and publish the
  node's observation (annotation `migplan.io/mig-observed`, v2: layout, holders, sources).
- `actuate_once`: read the desired layout the controller published (`migplan.io/mig-desired`), plan with
  the pure planner (reconciler.logic.planning.agentplan), carry out the steps, observe and plan again, and publish
  a terminal state — label `migplan.io/mig.state` = success | pending | failed and the reason in the
  annotation `migplan.io/mig.state.reason` — from a `finally`, so no exit path leaves it unset once
  the agent has started changing the GPUs (mig-parted's `setState(failed)` before every error return).

`pending` as a final state means "nothing is wrong with migplan, something outside must happen": a
change held because instances are in use (the processes are named), or a MIG mode change waiting for a
GPU reset. `failed` means the hardware refused (the NVML error is quoted) or the desired layout is
impossible on this GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from reconciler.logic.drift import thirdparty
from reconciler.logic.planning.agentplan import (
    AgentPlan,
    DesiredNode,
    MigMode,
    MigState,
    ObservedGpu,
    ObservedInstance,
    Step,
    plan_node,
)
from reconciler.model.errors import MigplanError, Waiting
from reconciler.model.inventory import Placement
from reconciler.model.nodeobservation import SOURCE_OK, NodeObservation
from reconciler.model.plans import Action
from reconciler.observer import HoldersPort, observation

log = logging.getLogger("migplan.agent")


class GpuPort(Protocol):
    """The node's GPUs, in domain words (no NVML handles)."""

    def observe(self) -> tuple[ObservedGpu, ...]: ...

    def set_mig_mode(self, index: int, *, enabled: bool) -> MigMode: ...

    def create_instance(self, index: int, *, profile: str, placement: Placement) -> ObservedInstance: ...

    def destroy_instance(self, index: int, *, gpu_instance_id: int) -> None: ...


class NodeStatePort(Protocol):
    """The agent's own Node object: desired layout in, observed state and terminal state out."""

    def read_desired(self, node: str) -> DesiredNode | None: ...

    def publish_observed(self, node: str, observed: NodeObservation) -> None: ...

    def publish_state(self, node: str, state: MigState, reason: str, *, revision: str) -> None: ...


class GpuClientsPort(Protocol):
    """The GPU Operator's GPU clients on the node (device plugin, GFD, DCGM): mig-manager's pause and restart
    around a re-cut (reconfigure.go shutdownKubernetesGPUClients / waitForPodsToBeDeleted /
    restartKubernetesGPUClients), so the device plugin starts again and advertises the new partitions."""

    def pause(self, node: str) -> None: ...

    def wait_gone(self, node: str) -> str | None: ...

    def restore(self, node: str) -> bool: ...


class LayoutOwnerPort(Protocol):
    """Who else writes the node's MIG layout (NVIDIA's DRA driver in DynamicMIG, HAMi's MIG mode), or None; read
    by the agent itself on every pass (reconciler.adapters.kube.layoutowner.KubeLayoutOwner)."""

    def other_writer(self, node: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class AgentOutcome:
    state: MigState | None  # None: nothing published (no desired layout for this node)
    reason: str
    revision: str = ""
    plan: AgentPlan = field(default_factory=AgentPlan)  # what was planned before acting
    executed: tuple[Step, ...] = ()


def _now() -> datetime:
    return datetime.now(UTC)


def report_once(
    *,
    gpus: GpuPort,
    node_state: NodeStatePort,
    node: str,
    holders: HoldersPort | None = None,
    clock: Callable[[], datetime] = _now,
) -> tuple[ObservedGpu, ...]:
    """Observe every GPU (an NVML error raises: the actuator never plans on a partial read), join the
    kubelet's allocations and publish the observation; returns the GPUs for the planner."""
    observed = gpus.observe()
    node_state.publish_observed(node, observation(observed, nvml_state=SOURCE_OK, holders=holders, now=clock()))
    return observed


@dataclass
class _Run:
    executed: list[Step] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)  # gpu -> NVML refusal
    waiting: dict[int, str] = field(default_factory=dict)  # gpu -> something outside must happen


def _execute(plan: AgentPlan, gpus: GpuPort, run: _Run, may_write: Callable[[], bool]) -> None:
    for index in sorted({s.gpu for s in plan.steps}):
        for step in plan.steps_for(index):
            if not may_write():
                run.waiting[index] = "stopped before the next step: no longer allowed to write"
                return
            try:
                if step.action is Action.CONFIGURE:
                    mode = gpus.set_mig_mode(index, enabled=bool(step.enabled))
                    run.executed.append(step)
                    if mode.current != step.enabled:
                        # Pending until the GPU is reset: creating instances now would fail.
                        run.waiting[index] = "MIG mode change is pending a GPU reset"
                        break
                elif step.action is Action.DELETE:
                    assert step.gpu_instance_id is not None
                    gpus.destroy_instance(index, gpu_instance_id=step.gpu_instance_id)
                    run.executed.append(step)
                elif step.action is Action.CREATE:
                    assert step.profile is not None and step.placement is not None
                    gpus.create_instance(index, profile=step.profile, placement=step.placement)
                    run.executed.append(step)
                log.info("agent step done", extra={"gpu": index, "step": str(step)})
            except Waiting as exc:
                # e.g. a process started on the instance between observe and destroy (NVML IN_USE).
                run.waiting[index] = f"{step}: {exc.message}"
                break
            except MigplanError as exc:
                run.failed[index] = f"{step}: {exc.message} [{exc.code}]"
                log.warning("agent step failed", extra={"gpu": index, "step": str(step), "code": exc.code})
                break


def _verdict(final: AgentPlan | None, run: _Run, observe_error: str | None) -> tuple[MigState, str]:
    failed = [f"gpu {g}: {m}" if not m.startswith("gpu ") else m for g, m in sorted(run.failed.items())]
    if observe_error:
        failed.append(f"observe after apply failed: {observe_error}")
    if final is not None:
        failed.extend(str(e) for e in final.errors)
    if failed:
        return MigState.FAILED, "; ".join(failed)
    assert final is not None
    waiting = [h.reason for h in final.held]
    waiting += [f"gpu {g}: MIG mode change is pending a GPU reset" for g in final.awaiting_reset]
    waiting += [m for g, m in sorted(run.waiting.items()) if g not in final.awaiting_reset]
    if waiting:
        return MigState.PENDING, "; ".join(waiting)
    if final.steps:
        return MigState.FAILED, "not converged after apply: " + "; ".join(map(str, final.steps))
    return MigState.SUCCESS, f"in sync ({len(run.executed)} step(s) applied)"


def _restore(clients: GpuClientsPort, node: str, state: MigState, reason: str) -> tuple[MigState, str]:
    """restartKubernetesGPUClients before the state is published; a failure to do it fails the pass (the next
    pass restores from the record it left)."""
    try:
        clients.restore(node)
    except MigplanError as exc:
        log.warning("agent could not restart the GPU clients", extra={"node": node, "code": exc.code})
        return MigState.FAILED, f"{reason}; GPU clients not restarted: {exc.message} [MP914]"
    return state, reason


def _refusal(owner: LayoutOwnerPort | None, node: str) -> tuple[MigState, str] | None:
    """Why the agent writes nothing on the node this pass (another writer, or none could be ruled out), or None."""
    if owner is None:
        return None
    try:
        writer = owner.other_writer(node)
    except MigplanError as exc:
        # Not knowing who writes the layout is no licence to write it.
        return MigState.FAILED, f"cannot tell who writes this node's MIG layout: {exc.message} [{exc.code}]"
    if writer is None:
        return None
    return (
        MigState.PENDING,
        f"refused: {writer} writes this node's MIG layout; the agent writes nothing there [{thirdparty.AGENT_REFUSED}]",
    )


def actuate_once(
    *,
    gpus: GpuPort,
    node_state: NodeStatePort,
    node: str,
    may_write: Callable[[], bool] = lambda: True,
    holders: HoldersPort | None = None,
    clients: GpuClientsPort | None = None,
    owner: LayoutOwnerPort | None = None,
) -> AgentOutcome:
    """One agent pass: observe, plan against the published desired layout, apply, publish the outcome.

    With `clients`, a pass that changes the GPUs first takes the node's GPU clients off it and waits for their
    pods to go, and brings them back before publishing its state, whatever happened (mig-manager's dance): the
    new device-plugin pod advertises the new partitions. A pause left over by a pass that died is undone first.

    With `owner`, a node whose layout another component writes is refused before anything is planned (MP578): a
    layout the controller published before the node changed hands is never built there."""
    if clients is not None:
        clients.restore(node)
    try:
        desired = node_state.read_desired(node)
    except MigplanError as exc:
        # A desired layout we cannot read is a failure to publish, not a reason to stay silent.
        reason = f"desired layout unreadable: {exc.message} [{exc.code}]"
        node_state.publish_state(node, MigState.FAILED, reason, revision="")
        report_once(gpus=gpus, node_state=node_state, node=node, holders=holders)
        return AgentOutcome(MigState.FAILED, reason)
    observed = report_once(gpus=gpus, node_state=node_state, node=node, holders=holders)
    if desired is None:
        return AgentOutcome(None, "no desired layout published for this node")
    refusal = _refusal(owner, node)
    if refusal is not None:
        state, reason = refusal
        node_state.publish_state(node, state, reason, revision=desired.revision)
        return AgentOutcome(state, reason, desired.revision)
    plan = plan_node(desired.gpus, observed)
    if plan.is_empty:
        reason = "in sync (0 step(s) applied)"
        node_state.publish_state(node, MigState.SUCCESS, reason, revision=desired.revision)
        return AgentOutcome(MigState.SUCCESS, reason, desired.revision, plan)

    run = _Run()
    final: AgentPlan | None = None
    observe_error: str | None = None
    state, reason = MigState.FAILED, "interrupted"
    paused = False
    try:
        if plan.steps:
            node_state.publish_state(
                node, MigState.PENDING, f"applying {len(plan.steps)} step(s)", revision=desired.revision
            )
            blocked = None
            if clients is not None and may_write():
                paused = True
                clients.pause(node)
                blocked = clients.wait_gone(node)
            if blocked is None:
                _execute(plan, gpus, run, may_write)
            else:
                run.waiting[min(s.gpu for s in plan.steps)] = blocked
        try:
            after = report_once(gpus=gpus, node_state=node_state, node=node, holders=holders)
            final = plan_node(desired.gpus, after)
        except MigplanError as exc:
            observe_error = exc.message
        state, reason = _verdict(final, run, observe_error)
    except Exception as exc:  # the terminal state must still be published, then the error goes up
        state, reason = MigState.FAILED, f"agent error: {exc}"
        raise
    finally:
        if paused and clients is not None:
            state, reason = _restore(clients, node, state, reason)
        node_state.publish_state(node, state, reason, revision=desired.revision)
        log.info("agent pass", extra={"node": node, "state": str(state), "reason": reason})
    return AgentOutcome(state, reason, desired.revision, plan, tuple(run.executed))
