"""The node agent asks who writes its node's MIG layout before planning (reconciler.agent.LayoutOwnerPort): another
writer is refused with MP578 and the GPUs untouched; not being able to tell fails the pass, untouched too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.agent import actuate_once
from reconciler.logic.planning.agentplan import (
    DesiredGpu,
    DesiredNode,
    DesiredPartition,
    MigMode,
    MigState,
    ObservedGpu,
    ObservedInstance,
)
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import Placement

DESIRED = DesiredNode("n1", "r", (DesiredGpu(0, True, (DesiredPartition("7g.40gb", Placement(0, 8)),)),))


@dataclass
class Journal:
    events: list[str] = field(default_factory=list)


@dataclass
class Gpus:
    journal: Journal
    instances: list[ObservedInstance] = field(default_factory=list)

    def observe(self) -> tuple[ObservedGpu, ...]:
        return (ObservedGpu(0, "GPU-0", "NVIDIA A100-SXM4-40GB", True, True, True, tuple(self.instances)),)

    def set_mig_mode(self, index: int, *, enabled: bool) -> MigMode:
        raise AssertionError("no mode change in these tests")

    def create_instance(self, index: int, *, profile: str, placement: Placement) -> ObservedInstance:
        self.journal.events.append(f"create {profile}")
        inst = ObservedInstance(len(self.instances) + 1, profile, placement)
        self.instances.append(inst)
        return inst

    def destroy_instance(self, index: int, *, gpu_instance_id: int) -> None:
        self.journal.events.append("destroy")


@dataclass
class NodeState:
    journal: Journal

    def read_desired(self, node: str) -> DesiredNode | None:
        return DESIRED

    def publish_observed(self, node: str, observed: Sequence[ObservedGpu]) -> None:
        pass

    def publish_state(self, node: str, state: MigState, reason: str, *, revision: str) -> None:
        self.journal.events.append(f"state {state}")


@dataclass
class Owner:
    writer: str | None = None
    error: MigplanError | None = None
    asked: int = 0

    def other_writer(self, node: str) -> str | None:
        self.asked += 1
        if self.error is not None:
            raise self.error
        return self.writer


def _pass(owner: Owner) -> tuple[Journal, MigState | None, str]:
    journal = Journal()
    gpus = Gpus(journal)
    outcome = actuate_once(gpus=gpus, node_state=NodeState(journal), node="n1", owner=owner)
    return journal, outcome.state, outcome.reason


def test_another_writer_is_refused_before_anything_is_paused_or_created() -> None:
    owner = Owner("NVIDIA's DRA driver (DynamicMIG)")
    journal, state, reason = _pass(owner)
    assert state is MigState.PENDING and "[MP578]" in reason and "DynamicMIG" in reason
    assert journal.events == ["state pending"]  # nothing created or destroyed
    assert owner.asked == 1


def test_no_other_writer_builds_the_layout() -> None:
    journal, state, _ = _pass(Owner(None))
    assert state is MigState.SUCCESS
    assert "create 7g.40gb" in journal.events


def test_not_knowing_who_writes_is_no_licence_to_write() -> None:
    journal, state, reason = _pass(Owner(error=MigplanError("list resourceslices: HTTP 403", code="MP550")))
    assert state is MigState.FAILED and "[MP550]" in reason and "who writes" in reason
    assert journal.events == ["state failed"]
