"""The previous layout of a node's change is what its GPUs hold where the observer reports (issue 26 item 6): mig-parted
compares `GetMigConfig` with the config, not the previous label, so a half-applied or hand-made state is judged on
what is there. Without a usable observation, the config the label names (as before)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.logic.codecs import migparted, observedcodec
from reconciler.logic.observe import observation
from reconciler.logic.planning.disruptionguard import node_disruption, observed_layouts
from reconciler.model.inventory import GpuSpec, NodeSpec, Partition, Placement
from reconciler.model.nodeobservation import NodeObservation, ObservedGpu, ObservedInstance
from reconciler.model.observed import OBSERVED_ANNOTATION, ObservedNode

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
SIZES = {"1g.18gb": 1, "2g.35gb": 2, "3g.71gb": 4, "7g.141gb": 8}


def _gpu(index: int, *profiles: str, mig: bool = True, pending: bool | None = None) -> ObservedGpu:
    start, insts = 0, []
    for p in profiles:
        insts.append(ObservedInstance(gpu_instance_id=start + 1, profile=p, placement=Placement(start, SIZES[p])))
        start += SIZES[p]
    return ObservedGpu(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA H200",
        mig_capable=True,
        mig_current=mig,
        mig_pending=mig if pending is None else pending,
        instances=tuple(insts),
    )


def _node(*gpus: ObservedGpu, label: str = "all-1g", at: datetime = NOW - timedelta(minutes=1)) -> ObservedNode:
    obs = NodeObservation(
        version="v2",
        gpus=gpus,
        observed_at=at,
        observer=observation.CONTROLLER_OBSERVER,
        sources={"nvml": "ok", "podResources": "ok"},
    )
    annotations = {OBSERVED_ANNOTATION: observedcodec.encode(obs)}
    decoded, error = observation.read_observation(annotations)
    assert error is None
    return ObservedNode(name="n", labels={"nvidia.com/mig.config": label}, annotations=annotations, observation=decoded)


def _plan(*gpus: tuple[str, ...]) -> NodeSpec:
    return NodeSpec(
        name="n",
        gpus=tuple(
            GpuSpec(index=i, model="H200-141GB", mig_enabled=True, partitions=tuple(Partition(p) for p in ps))
            for i, ps in enumerate(gpus)
        ),
    )


# The label names a config of seven 1g.18gb on both GPUs; the plan is 3g+2g+1g+1g on both.
PREVIOUS = migparted.parse_strict(
    "version: v1\nmig-configs:\n  all-1g:\n    - devices: all\n      mig-enabled: true\n"
    "      mig-devices: {1g.18gb: 7}\n"
)
PLAN = _plan(("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"), ("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"))


def test_a_half_applied_node_is_judged_on_what_its_gpus_hold() -> None:
    """GPU 0 already holds the plan, GPU 1 still the old cut: only GPU 1 is re-cut (the label says both)."""
    node = _node(_gpu(0, "3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"), _gpu(1, *["1g.18gb"] * 7))
    found = node_disruption(node, PLAN, PREVIOUS, now=NOW)
    assert found is not None
    what, _, old = found
    assert what.gpus == frozenset({1})
    assert old[0] == migparted.GpuLayout(True, (("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)))
    by_label = node_disruption(node, PLAN, PREVIOUS, label_only=True)
    assert by_label is not None and by_label[0].gpus == frozenset({0, 1})


def test_a_node_already_holding_its_plan_loses_nothing_whatever_its_label_says() -> None:
    node = _node(*[_gpu(i, "3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb") for i in (0, 1)])
    found = node_disruption(node, PLAN, PREVIOUS, now=NOW)
    assert found is not None and found[0].gpus == frozenset() and found[1] == frozenset()


def test_an_unusable_observation_falls_back_to_the_label() -> None:
    stale = _node(_gpu(0, "3g.71gb"), _gpu(1), at=NOW - timedelta(hours=3))
    assert observed_layouts(stale, [0, 1], now=NOW) is None
    pending = _node(_gpu(0, "3g.71gb"), _gpu(1, mig=False, pending=True))
    assert observed_layouts(pending, [0, 1], now=NOW) is None  # a MIG mode change is pending: unknown
    missing = _node(_gpu(0, "3g.71gb"))
    assert observed_layouts(missing, [0, 1], now=NOW) is None  # GPU 1 not reported
    found = node_disruption(missing, PLAN, PREVIOUS, now=NOW)
    assert found is not None and found[0].gpus == frozenset({0, 1})  # the label's config, as before
