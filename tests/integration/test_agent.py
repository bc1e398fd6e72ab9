"""The node agent against the NVML twin (through the real NVML adapter) and the API server twin.

- every GPU layout of the example inventory: apply from an empty GPU and from every other layout of the
  same model, observe, plan again -> empty (idempotence), instances that stay keep their GPU-instance id;
- a hypothesis sample of valid layouts per catalog model with known placements;
- instances in use are never destroyed: the change is held, the processes named, state pending;
- MIG mode changes with NVML's pending/reset semantics; a terminal state on every path;
- end to end on a ClusterTwin: desired published by the controller's publisher, the agent's observed
  state and its label/annotations read back by the controller's reader.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers.agentmode import publish
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from reconciler.adapters.kube import agentmode as kubeagentmode
from reconciler.adapters.kube.agentmode import KubeNodeState, read_agent_state
from reconciler.adapters.nvml import NvmlGpu
from reconciler.agent import actuate_once
from reconciler.catalog import GpuModel, load_catalog
from reconciler.commands.reconcile import load_desired
from reconciler.controller.loop import kube_configuration
from reconciler.logic.inventory import placement as placements
from reconciler.logic.planning.agentplan import (
    DesiredGpu,
    DesiredNode,
    DesiredPartition,
    MigState,
    ObservedGpu,
    desired_from_node_spec,
    plan_node,
)
from reconciler.model.inventory import Placement
from reconciler.model.nodeobservation import NodeObservation
from reconciler.resources import inventory_dir
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.nvml import NvmlTwin

CATALOG = load_catalog()


@dataclass
class MemoryNodeState:
    """An in-memory NodeStatePort (the Kubernetes one is exercised end to end below)."""

    desired: DesiredNode | None = None
    observed: tuple[ObservedGpu, ...] = ()
    states: list[tuple[MigState, str]] = field(default_factory=list)

    def read_desired(self, node: str) -> DesiredNode | None:
        return self.desired

    def publish_observed(self, node: str, observed: NodeObservation) -> None:
        self.observed = observed.gpus

    def publish_state(self, node: str, state: MigState, reason: str, *, revision: str) -> None:
        self.states.append((state, reason))


def inventory_layouts() -> list[tuple[str, GpuModel, DesiredGpu]]:
    desired, diags = load_desired(inventory_dir())
    assert desired is not None, [str(d) for d in diags]
    out = []
    for name, node in sorted(desired.nodes.items()):
        layout, problems = desired_from_node_spec(node, revision=str(desired.revision), catalog=CATALOG)
        assert problems == ()
        for g, plan_gpu in zip(layout.gpus, node.gpus, strict=True):
            model = CATALOG.get(plan_gpu.model)
            assert model is not None
            out.append((f"{name}/gpu{g.index}", model, DesiredGpu(0, g.mig_enabled, g.partitions)))
    return out


LAYOUTS = inventory_layouts()


def twin_gpu(model: GpuModel, *, mig: bool = False, resets: bool = True) -> TwinGpu:
    return TwinGpu(node="n1", index=0, model=model, mig_enabled=mig, resets_on_mode_change=resets)


def apply(gpu: TwinGpu, target: DesiredGpu) -> tuple[MigState | None, str, Sequence[ObservedGpu]]:
    state = MemoryNodeState(desired=DesiredNode("n1", "test@sha1:" + "1" * 40, (target,)))
    with NvmlGpu(nvml=NvmlTwin([gpu])) as gpus:
        outcome = actuate_once(gpus=gpus, node_state=state, node="n1")
        again = gpus.observe()
    assert state.states and state.states[-1][0] == outcome.state  # a terminal state was published
    return outcome.state, outcome.reason, again


def layout_of(observed: Sequence[ObservedGpu]) -> list[tuple[str, int, int]]:
    return sorted((i.profile, i.placement.start, i.placement.size) for i in observed[0].instances)


def test_the_inventory_has_layouts_for_every_model_it_uses() -> None:
    assert len(LAYOUTS) >= 6
    assert any(g.mig_enabled for _, _, g in LAYOUTS) and any(not g.mig_enabled for _, _, g in LAYOUTS)


@pytest.mark.parametrize(("where", "model", "target"), LAYOUTS, ids=[w for w, _, _ in LAYOUTS])
def test_round_trip_from_an_empty_gpu(where: str, model: GpuModel, target: DesiredGpu) -> None:
    gpu = twin_gpu(model)  # MIG disabled, nothing on it: the agent enables MIG and cuts it
    state, reason, observed = apply(gpu, target)
    assert state is MigState.SUCCESS, reason
    assert observed[0].mig_current is target.mig_enabled
    assert layout_of(observed) == sorted((p.profile, p.placement.start, p.placement.size) for p in target.partitions)
    assert plan_node([target], observed).is_empty
    # Each instance has a compute instance, so it is a usable MIG device with a UUID.
    assert all(i.uuid and i.uuid.startswith("MIG-") for i in observed[0].instances)
    # A second pass changes nothing and still reports success.
    state2, reason2, observed2 = apply(gpu, target)
    assert state2 is MigState.SUCCESS and "0 step(s)" in reason2
    assert observed2 == observed


@pytest.mark.parametrize(("where", "model", "target"), LAYOUTS, ids=[w for w, _, _ in LAYOUTS])
def test_round_trip_from_every_other_layout_of_the_model(where: str, model: GpuModel, target: DesiredGpu) -> None:
    for other_where, other_model, start in LAYOUTS:
        if other_model.key != model.key or other_where == where:
            continue
        gpu = twin_gpu(model)
        assert apply(gpu, start)[0] is MigState.SUCCESS
        before = {(i.profile, i.placement): i.gpu_instance_id for i in NvmlGpuObserve(gpu)[0].instances}
        state, reason, observed = apply(gpu, target)
        assert state is MigState.SUCCESS, f"{other_where} -> {where}: {reason}"
        assert plan_node([target], observed).is_empty
        after = {(i.profile, i.placement): i.gpu_instance_id for i in observed[0].instances}
        for key in before.keys() & after.keys():  # what stays is not touched: same GPU instance
            assert before[key] == after[key]


def NvmlGpuObserve(gpu: TwinGpu) -> tuple[ObservedGpu, ...]:
    with NvmlGpu(nvml=NvmlTwin([gpu])) as gpus:
        return gpus.observe()


KNOWN = [m for m in CATALOG if m.placements_known]


@st.composite
def layouts(draw: st.DrawFn, model: GpuModel) -> DesiredGpu:
    names = sorted(model.profiles)
    requests = draw(st.lists(st.sampled_from(names), min_size=1, max_size=model.compute_slices))
    found = placements.solve(model, [placements.Request(r) for r in requests])
    while found is None:
        requests = requests[:-1]
        found = placements.solve(model, [placements.Request(r) for r in requests])
    return DesiredGpu(0, True, tuple(DesiredPartition(r, p) for r, p in zip(requests, found, strict=True)))


@pytest.mark.parametrize("model", KNOWN, ids=[m.key for m in KNOWN])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_any_valid_layout_to_any_other(model: GpuModel, data: st.DataObject) -> None:
    first = data.draw(layouts(model))
    second = data.draw(layouts(model))
    gpu = twin_gpu(model, mig=True)
    assert apply(gpu, first)[0] is MigState.SUCCESS
    state, reason, observed = apply(gpu, second)
    assert state is MigState.SUCCESS, reason
    assert plan_node([second], observed).is_empty


def test_pending_mode_change_waits_for_the_reset_then_completes() -> None:
    h200 = CATALOG.get("H200-141GB")
    assert h200 is not None
    target = next(t for w, m, t in LAYOUTS if m.key == "H200-141GB" and t.mig_enabled)
    gpu = twin_gpu(h200, resets=False)  # e.g. a pass-through VM: the mode needs a reset to take effect
    state, reason, observed = apply(gpu, target)
    assert state is MigState.PENDING and "reset" in reason
    assert observed[0].mig_pending and not observed[0].mig_current and not observed[0].instances
    assert gpu.reset()
    state, reason, observed = apply(gpu, target)
    assert state is MigState.SUCCESS, reason
    assert plan_node([target], observed).is_empty
    # and back: disabling MIG destroys the instances first
    off = DesiredGpu(0, False)
    state, reason, observed = apply(gpu, off)
    assert state is MigState.PENDING and "reset" in reason
    assert gpu.reset()
    state, reason, observed = apply(gpu, off)
    assert state is MigState.SUCCESS and not observed[0].mig_current


def test_an_impossible_layout_fails_with_the_reason_and_changes_nothing() -> None:
    h200 = CATALOG.get("H200-141GB")
    assert h200 is not None
    gpu = twin_gpu(h200, mig=True)
    gpu.add_partition("1g.18gb", 0)
    bad = DesiredGpu(0, True, (DesiredPartition("3g.71gb", Placement(2, 4)),))  # 3g starts only at 0 or 4
    state, reason, observed = apply(gpu, bad)
    assert state is MigState.FAILED and "not possible" in reason
    assert layout_of(observed) == [("1g.18gb", 0, 1)]


def test_malformed_desired_annotation_is_a_published_failure() -> None:
    h200 = CATALOG.get("H200-141GB")
    assert h200 is not None

    class Broken(MemoryNodeState):
        def read_desired(self, node: str) -> DesiredNode | None:
            return kubeagentmode.decode_desired(node, '{"version":"v9"}')

    state = Broken()
    with NvmlGpu(nvml=NvmlTwin([twin_gpu(h200)])) as gpus:
        outcome = actuate_once(gpus=gpus, node_state=state, node="n1")
    assert outcome.state is MigState.FAILED and "MP910" in outcome.reason
    assert state.states == [(MigState.FAILED, outcome.reason)]
    assert state.observed  # the real state is still reported


# --- end to end on the cluster twin -----------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(inventory_dir()) as twin:
        twin.settle()
        yield twin


def meta(obj: Any) -> Any:
    return obj.metadata


def core_api(twin: ClusterTwin) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))


def test_in_sync_node_round_trip_through_the_api(cluster: ClusterTwin) -> None:
    desired, _ = load_desired(inventory_dir())
    assert desired is not None
    core = core_api(cluster)
    node = "gpu-h200-01"
    layout, _ = desired_from_node_spec(desired.nodes[node], revision=str(desired.revision), catalog=CATALOG)
    publish(core, layout)
    with NvmlGpu(nvml=cluster.nvml(node)) as gpus:
        outcome = actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=node)
    # The twin starts as the inventory describes it: nothing to change, success.
    assert outcome.state is MigState.SUCCESS, outcome.reason
    assert outcome.executed == ()
    state, _, observed = read_agent_state(core.read_node(node))
    assert state is MigState.SUCCESS and observed is not None
    assert plan_node(layout.gpus, observed).is_empty
    raw = json.loads(meta(core.read_node(node)).annotations[kubeagentmode.OBSERVED])
    held = [i for g in raw["gpus"] for i in g["instances"] if i["processes"]]
    assert held, "the twin's pods should show up as processes on their MIG devices"


def test_change_that_would_destroy_an_instance_in_use_is_held(cluster: ClusterTwin) -> None:
    core = core_api(cluster)
    node = "gpu-h200-01"  # the article's node: its owned partitions are held by running pods
    with NvmlGpu(nvml=cluster.nvml(node)) as gpus:
        before = gpus.observe()
    busy = [(g.index, i) for g in before for i in g.instances if i.in_use]
    assert busy, f"the example inventory puts running pods on {node}"
    gpu_index, victim = busy[0]
    # Desired: the GPU cut into 1g.18gb only -> the busy instance would have to go.
    model = CATALOG.resolve(before[gpu_index].name)
    assert model is not None
    ones = placements.solve(model, [placements.Request("1g.18gb")] * 7)
    assert ones is not None
    layout = DesiredNode(
        node,
        "test@sha1:" + "2" * 40,
        (DesiredGpu(gpu_index, True, tuple(DesiredPartition("1g.18gb", p) for p in ones)),),
    )
    publish(core, layout)
    with NvmlGpu(nvml=cluster.nvml(node)) as gpus:
        outcome = actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=node)
        after = gpus.observe()
    assert outcome.state is MigState.PENDING
    assert "held" in outcome.reason and str(victim.processes[0]) in outcome.reason
    assert outcome.executed == ()
    assert after == before  # nothing destroyed, nothing created on that GPU
    obj = meta(core.read_node(node))
    assert obj.labels[kubeagentmode.STATE] == "pending"
    assert str(victim.processes[0]) in obj.annotations[kubeagentmode.STATE_REASON]
