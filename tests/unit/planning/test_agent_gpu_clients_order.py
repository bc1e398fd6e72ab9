"""The agent's pause/restart of the GPU clients, in order, with in-memory ports (mig-manager's dance,
reconfigure.go Run: pause → wait → change the GPUs → restart the clients → final state)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

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
from reconciler.model.errors import MigplanError, Transient
from reconciler.model.inventory import Placement


@dataclass
class Journal:
    events: list[str] = field(default_factory=list)


@dataclass
class Gpus:
    journal: Journal
    instances: list[ObservedInstance] = field(default_factory=list)
    fail_create: bool = False

    def observe(self) -> tuple[ObservedGpu, ...]:
        return (ObservedGpu(0, "GPU-0", "NVIDIA A100-SXM4-40GB", True, True, True, tuple(self.instances)),)

    def set_mig_mode(self, index: int, *, enabled: bool) -> MigMode:
        raise AssertionError("no mode change in these tests")

    def create_instance(self, index: int, *, profile: str, placement: Placement) -> ObservedInstance:
        self.journal.events.append(f"create {profile}")
        if self.fail_create:
            raise MigplanError("NVML_ERROR_INSUFFICIENT_RESOURCES", code="MP900")
        inst = ObservedInstance(len(self.instances) + 1, profile, placement)
        self.instances.append(inst)
        return inst

    def destroy_instance(self, index: int, *, gpu_instance_id: int) -> None:
        self.journal.events.append("destroy")


@dataclass
class NodeState:
    journal: Journal
    desired: DesiredNode | None

    def read_desired(self, node: str) -> DesiredNode | None:
        return self.desired

    def publish_observed(self, node: str, observed: Sequence[ObservedGpu]) -> None:
        pass

    def publish_state(self, node: str, state: MigState, reason: str, *, revision: str) -> None:
        self.journal.events.append(f"state {state}")


@dataclass
class Clients:
    journal: Journal
    blocked: str | None = None
    restore_fails: bool = False
    paused: bool = False

    def pause(self, node: str) -> None:
        self.paused = True
        self.journal.events.append("pause")

    def wait_gone(self, node: str) -> str | None:
        self.journal.events.append("wait")
        return self.blocked

    def restore(self, node: str) -> bool:
        self.journal.events.append("restore")
        if self.restore_fails and self.paused:
            raise Transient("patch node n1: HTTP 503")
        was, self.paused = self.paused, False
        return was


DESIRED = DesiredNode("n1", "r", (DesiredGpu(0, True, (DesiredPartition("7g.40gb", Placement(0, 8)),)),))


def run(clients: Clients, gpus: Gpus, desired: DesiredNode | None = DESIRED) -> tuple[MigState | None, str]:
    outcome = actuate_once(gpus=gpus, node_state=NodeState(gpus.journal, desired), node="n1", clients=clients)
    return outcome.state, outcome.reason


def test_pause_wait_change_restore_then_the_final_state() -> None:
    j = Journal()
    state, _ = run(Clients(j), Gpus(j))
    assert state is MigState.SUCCESS
    assert j.events == ["restore", "state pending", "pause", "wait", "create 7g.40gb", "restore", "state success"]


def test_nothing_to_change_pauses_nothing() -> None:
    j = Journal()
    gpus = Gpus(j, [ObservedInstance(1, "7g.40gb", Placement(0, 8))])
    state, _ = run(Clients(j), gpus)
    assert state is MigState.SUCCESS and j.events == ["restore", "state success"]


def test_clients_that_do_not_leave_change_nothing_and_are_restored() -> None:
    j = Journal()
    state, reason = run(Clients(j, blocked="GPU client pods still on the node [MP912]"), Gpus(j))
    assert state is MigState.PENDING and "MP912" in reason
    assert j.events == ["restore", "state pending", "pause", "wait", "restore", "state pending"]


def test_a_failed_change_still_restores_the_clients_before_its_state() -> None:
    j = Journal()
    state, _ = run(Clients(j), Gpus(j, fail_create=True))
    assert state is MigState.FAILED
    assert j.events[-2:] == ["restore", "state failed"]


def test_clients_that_cannot_be_restored_fail_the_pass_with_the_reason() -> None:
    j = Journal()
    state, reason = run(Clients(j, restore_fails=True), Gpus(j))
    assert state is MigState.FAILED and "MP914" in reason and "503" in reason


def test_an_error_mid_pass_still_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    j = Journal()
    gpus = Gpus(j)

    def boom(index: int, *, profile: str, placement: Placement) -> ObservedInstance:
        raise RuntimeError("driver crashed")

    monkeypatch.setattr(gpus, "create_instance", boom)
    with pytest.raises(RuntimeError):
        run(Clients(j), gpus)
    assert j.events[-2:] == ["restore", "state failed"]
