"""The controller's side of the node observer: decoding, the join with the plan, findings, the guard."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.logic.codecs import observedcodec
from reconciler.logic.drift import drift
from reconciler.logic.observe import observation
from reconciler.logic.planning import planner
from reconciler.model.drift import FindingSeverity
from reconciler.model.inventory import GpuSpec, NodeSpec, Partition, Placement
from reconciler.model.nodeobservation import Holder, NodeObservation, ObservedGpu, ObservedInstance
from reconciler.model.observed import OBSERVED_ANNOTATION, ContainerResources, ObservedNode, ObservedPod

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def _holder(pod: str, profile: str = "3g.71gb") -> Holder:
    ns, _, name = pod.partition("/")
    return Holder(ns, name, "main", f"nvidia.com/mig-{profile}")


def _inst(profile: str, start: int, size: int, *pods: str) -> ObservedInstance:
    return ObservedInstance(
        gpu_instance_id=start,
        profile=profile,
        placement=Placement(start, size),
        uuid=f"MIG-{profile}-{start}",
        holders=tuple(_holder(p, profile) for p in pods),
    )


def _gpu(index: int, *instances: ObservedInstance, mig: bool = True) -> ObservedGpu:
    return ObservedGpu(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA H200",
        mig_capable=True,
        mig_current=mig,
        mig_pending=False,
        instances=instances,
    )


def _obs(*gpus: ObservedGpu, at: datetime = NOW - timedelta(minutes=1), podresources: str = "ok") -> NodeObservation:
    return NodeObservation(
        version="v2",
        gpus=gpus,
        observed_at=at,
        observer=observation.CONTROLLER_OBSERVER,
        sources={"nvml": "ok", "podResources": podresources},
    )


def _plan_gpu(index: int, *parts: str, starts: tuple[int, ...] = ()) -> GpuSpec:
    partitions = []
    for p in parts:
        profile, _, owner = p.partition(" ")
        partitions.append(Partition(profile=profile, owner=owner or None))
    sizes = {"1g.18gb": 1, "2g.35gb": 2, "3g.71gb": 4, "7g.141gb": 8}
    return GpuSpec(
        index=index,
        model="H200-141GB",
        mig_enabled=True,
        partitions=tuple(partitions),
        placements=tuple(Placement(s, sizes[p.profile]) for s, p in zip(starts, partitions, strict=True)),
    )


def _node(obs: NodeObservation | None, name: str = "gpu-a") -> ObservedNode:
    annotations = {OBSERVED_ANNOTATION: observedcodec.encode(obs)} if obs is not None else {}
    decoded, error = observation.read_observation(annotations)
    return ObservedNode(name=name, annotations=annotations, observation=decoded, observation_error=error)


def _pod(key: str, profile: str = "3g.71gb", app: str | None = None) -> ObservedPod:
    ns, _, name = key.partition("/")
    return ObservedPod(
        namespace=ns,
        name=name,
        node="gpu-a",
        phase="Running",
        containers=(ContainerResources("main", limits={f"nvidia.com/mig-{profile}": 1}),),
        labels={"app": app} if app else {},
    )


# --- decoding --------------------------------------------------------------------------------------


def test_read_observation_absent_valid_and_malformed() -> None:
    assert observation.read_observation({}) == (None, None)
    obs = _obs(_gpu(0, _inst("7g.141gb", 0, 8, "ml/a")))
    decoded, error = observation.read_observation({OBSERVED_ANNOTATION: observedcodec.encode(obs)})
    assert error is None and decoded is not None and decoded.gpus[0].instances[0].holders[0].pod == "a"


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"version": "v9", "gpus": []}',
        '{"version": "v2", "gpus": [{"index": 99}]}',
        '{"version": "v2", "gpus": [], "observedAt": NaN}',
        "[" * 10_000 + "]" * 10_000,
        json.dumps({"version": "v2", "gpus": [], "pad": "x" * (observedcodec.MAX_OBSERVED_BYTES + 1)}),
        '{"version": "v2", "gpus": [], "sources": {"podResources": 7}}',
    ],
)
def test_a_hostile_annotation_is_mp547_and_the_node_is_never_written(text: str) -> None:
    decoded, error = observation.read_observation({OBSERVED_ANNOTATION: text})
    assert decoded is None and error
    node = ObservedNode(name="gpu-a", annotations={OBSERVED_ANNOTATION: text}, observation_error=error)
    (f,) = observation.observer_findings("gpu-a", node, now=NOW)
    assert f.code == "MP547" and f.severity is drift.FINDING_CODES["MP547"][0]
    from reconciler.model.observed import ObservedState

    assert drift.unreadable_nodes(ObservedState(nodes={"gpu-a": node})) == frozenset({"gpu-a"})


# --- the join ---------------------------------------------------------------------------------------


def test_join_matches_same_placement_first_then_same_profile() -> None:
    plan = _plan_gpu(0, "1g.18gb a", "1g.18gb b", "3g.71gb c", starts=(0, 1, 4))
    seen = _gpu(
        0, _inst("1g.18gb", 1, 1, "ml/x"), _inst("1g.18gb", 3, 1), _inst("3g.71gb", 4, 4), _inst("2g.35gb", 6, 2)
    )
    j = observation.join_gpu(plan, seen, 0)
    by_start = {i.placement.start: i for i in j.instances}
    assert by_start[1].owner == "b" and not by_start[1].moved  # exact match first, even though listed first
    assert by_start[3].owner == "a" and by_start[3].moved and by_start[3].planned_start == 0
    assert by_start[4].owner == "c" and not by_start[4].moved
    assert not by_start[6].planned and by_start[6].owner is None
    assert j.missing == ()
    assert by_start[1].holders == ("ml/x",)


def test_placement_finding_names_the_fragmentation_and_the_pods_in_the_way() -> None:
    plan = NodeSpec(name="gpu-a", gpus=(_plan_gpu(0, "1g.18gb", "1g.18gb", starts=(0, 1)),))
    obs = _obs(_gpu(0, _inst("1g.18gb", 0, 1), _inst("1g.18gb", 4, 1, "ml/x")))
    (f,) = observation.layout_findings(observation.join("gpu-a", plan, obs))
    assert f.code == "MP540" and f.gpu == 0 and f.severity is FindingSeverity.WARNING
    assert "no room for a 3g.71gb" in f.message  # slices 4-7 are no longer free as one block
    full = NodeSpec(name="gpu-a", gpus=(_plan_gpu(0, "3g.71gb", "3g.71gb", starts=(0, 4)),))
    swapped = _obs(_gpu(0, _inst("3g.71gb", 4, 4, "ml/x"), _inst("3g.71gb", 0, 4)))
    assert observation.layout_findings(observation.join("gpu-a", full, swapped)) == []  # same places, same cut
    plan3 = NodeSpec(name="gpu-a", gpus=(_plan_gpu(0, "2g.35gb", "1g.18gb", "1g.18gb", starts=(0, 2, 3)),))
    moved = _obs(_gpu(0, _inst("1g.18gb", 0, 1, "ml/x"), _inst("1g.18gb", 1, 1), _inst("2g.35gb", 2, 2)))
    (g,) = observation.layout_findings(observation.join("gpu-a", plan3, moved))
    assert g.severity is FindingSeverity.INFO and "destroys partitions ml/x hold(s)" in g.message  # nothing lost
    assert "1g.18gb@4" in str(f.observed) and "1g.18gb@1" in str(f.desired)


def test_same_placements_or_other_counts_are_not_mp540() -> None:
    plan = NodeSpec(name="gpu-a", gpus=(_plan_gpu(0, "3g.71gb", "3g.71gb", starts=(0, 4)),))
    same = _obs(_gpu(0, _inst("3g.71gb", 0, 4), _inst("3g.71gb", 4, 4)))
    assert observation.layout_findings(observation.join("gpu-a", plan, same)) == []
    other = _obs(_gpu(0, _inst("7g.141gb", 0, 8)))  # a re-cut to come: MP501's business
    assert [f.code for f in observation.layout_findings(observation.join("gpu-a", plan, other))] == []


def test_held_unplanned_partition_is_mp542_only_when_holders_are_measured() -> None:
    plan = NodeSpec(name="gpu-a", gpus=(_plan_gpu(0, "3g.71gb", starts=(0,)),))
    gpu = _gpu(0, _inst("3g.71gb", 0, 4), _inst("1g.18gb", 6, 1, "ml/stray"))
    (f,) = observation.layout_findings(observation.join("gpu-a", plan, _obs(gpu)))
    assert f.code == "MP542" and f.pods == ("ml/stray",)
    blind = _obs(gpu, podresources="kubelet socket missing")
    assert observation.layout_findings(observation.join("gpu-a", plan, blind)) == []
    partial = replace(_obs(gpu), sources={"nvml": "GPU 1: NVML_ERROR_GPU_IS_LOST", "podResources": "ok"})
    assert not observation.join("gpu-a", plan, partial).holders_known  # a GPU unread: holders not complete


def test_foreign_holder_tolerates_the_device_plugins_swap() -> None:
    plan = NodeSpec(name="gpu-a", gpus=(_plan_gpu(0, "3g.71gb vllm", "3g.71gb training", starts=(0, 4)),))
    pods = {p.key: p for p in (_pod("ml/v", app="vllm"), _pod("ml/t", app="training"), _pod("ml/n"))}
    swapped = _obs(_gpu(0, _inst("3g.71gb", 0, 4, "ml/t"), _inst("3g.71gb", 4, 4, "ml/v")))
    assert observation.owner_findings(observation.join("gpu-a", plan, swapped), pods) == []
    grabbed = _obs(_gpu(0, _inst("3g.71gb", 0, 4, "ml/n"), _inst("3g.71gb", 4, 4, "ml/t")))
    (f,) = observation.owner_findings(observation.join("gpu-a", plan, grabbed), pods)
    assert f.code == "MP541" and f.pods == ("ml/n",) and f.desired == "vllm" and f.observed is None
    both = _obs(_gpu(0, _inst("3g.71gb", 0, 4, "ml/t"), _inst("3g.71gb", 4, 4, "ml/t")))
    (g,) = observation.owner_findings(observation.join("gpu-a", plan, both), pods)
    assert g.pods == ("ml/t",) and g.desired == "vllm" and g.observed == "training"  # more than it reserves


def test_observer_findings_silent_version_incomplete_unknown() -> None:
    fresh = _node(_obs(_gpu(0)))
    assert observation.observer_findings("gpu-a", fresh, now=NOW) == []
    old = _node(_obs(_gpu(0), at=NOW - observation.SILENT_AFTER - timedelta(seconds=1)))
    (f,) = observation.observer_findings("gpu-a", old, now=NOW)
    assert f.code == "MP543" and not observation.usable(old, now=NOW)
    assert observation.usable(old, now=NOW, silent_after=timedelta(hours=1))  # the threshold is a setting
    assert observation.usable(_node(_obs(_gpu(0), at=NOW - observation.SILENT_AFTER)), now=NOW)  # at the bound
    for f in observation.observer_findings("gpu-a", old, now=NOW):
        assert f.severity is drift.FINDING_CODES[f.code][0]


def test_an_observation_dated_in_the_future_is_data_not_freshness() -> None:
    # issue 25: a stamp a year ahead (a skewed node clock, a hand-written annotation) kept a dead observer's facts
    # in use for a year; a little skew (within the silence window) is tolerated
    ahead = _node(_obs(_gpu(0), at=NOW + timedelta(days=365)))
    assert not observation.usable(ahead, now=NOW)
    (f,) = observation.observer_findings("gpu-a", ahead, now=NOW)
    assert f.code == "MP543" and "in the future" in f.message and "525600 min" in f.message
    assert observation.usable(_node(_obs(_gpu(0), at=NOW + observation.SILENT_AFTER)), now=NOW)


# --- the guard ----------------------------------------------------------------------------------------


def test_guard_with_observed_holders_reasons_per_gpu() -> None:
    obs = _obs(_gpu(0, _inst("3g.71gb", 0, 4, "ml/a")), _gpu(1, _inst("3g.71gb", 0, 4, "ml/b")))
    node = _node(obs)
    late = _pod("ml/late")  # bound after the observer's last pass: judged by its request
    pods = (_pod("ml/a"), _pod("ml/b"), late)
    lost = frozenset({"nvidia.com/mig-3g.71gb"})
    assert planner.guard_holders(node, pods, lost, frozenset({1}), now=NOW) == ("ml/b", "ml/late")
    assert planner.guard_holders(node, pods, lost, frozenset({0, 1}), now=NOW) == ("ml/a", "ml/b", "ml/late")
    # no observation, a silent one, or unmeasured holders: by requests, every pod of the resource
    assert planner.guard_holders(_node(None), pods, lost, frozenset({1}), now=NOW) == ("ml/a", "ml/b", "ml/late")
    stale = _node(_obs(*obs.gpus, at=NOW - timedelta(hours=2)))
    assert planner.guard_holders(stale, pods, lost, frozenset({1}), now=NOW) == ("ml/a", "ml/b", "ml/late")
    blind = _node(_obs(*obs.gpus, podresources="timeout"))
    assert planner.guard_holders(blind, pods, lost, frozenset({1}), now=NOW) == ("ml/a", "ml/b", "ml/late")
    assert planner.guard_holders(node, pods, lost, None, now=NOW) == ("ml/a", "ml/b", "ml/late")
    # an observer of another version: its holders are added to the requests' verdict, never narrow it
    other = _node(replace(obs, observer="migplan/0.0.1"))
    assert planner.guard_holders(other, pods, lost, frozenset({1}), now=NOW) == ("ml/a", "ml/b", "ml/late")
    whole = _pod("ml/w", "7g.141gb")  # holds another resource: only the observation names it on GPU 1
    seen = _node(replace(obs, observer="migplan/0.0.1", gpus=(obs.gpus[0], _gpu(1, _inst("7g.141gb", 0, 8, "ml/w")))))
    assert planner.guard_holders(seen, (*pods, whole), lost, frozenset({1}), now=NOW) == (
        "ml/a",
        "ml/b",
        "ml/late",
        "ml/w",
    )


def test_codes_emitted_here_have_the_tables_severity() -> None:
    found: list[Any] = []
    plan = NodeSpec(name="gpu-a", gpus=(_plan_gpu(0, "1g.18gb x", "1g.18gb", starts=(0, 1)),))
    obs = _obs(_gpu(0, _inst("1g.18gb", 0, 1, "ml/n"), _inst("1g.18gb", 4, 1)), _gpu(3, _inst("1g.18gb", 0, 1, "ml/q")))
    j = observation.join("gpu-a", plan, obs)
    found += observation.layout_findings(j) + observation.owner_findings(j, {})
    assert {f.code for f in found} == {"MP540", "MP541", "MP542"}
    for f in found:  # MP540 is raised to a warning when the fragmentation blocks a cut (here: a 3g.71gb)
        assert f.severity is (FindingSeverity.WARNING if f.code == "MP540" else drift.FINDING_CODES[f.code][0])


def test_hostile_names_in_an_observation_stay_text_in_every_report_file() -> None:
    import yaml

    from reconciler.logic.reports import reports, slicesvg
    from reconciler.model.inventory import ClusterSpec, DesiredState, MigStrategy
    from reconciler.model.observed import ObservedState

    evil_pod = "ns/a```\n# heading</title><script>alert(1)</script>|x"
    evil_profile = "1g`|<b>\u2028"
    gpu = _gpu(0, _inst("3g.71gb", 0, 4, evil_pod), _inst(evil_profile, 6, 1, evil_pod))
    plan = NodeSpec(name="gpu-a", gpus=(_plan_gpu(0, "3g.71gb vllm", starts=(4,)),))
    desired = DesiredState(cluster=ClusterSpec(name="c", mig_strategy=MigStrategy.MIXED), nodes={"gpu-a": plan})
    observed = ObservedState(nodes={"gpu-a": _node(_obs(gpu))})
    analysis = drift.analyze(desired, observed, now=NOW)
    report = drift.build_report(desired, observed, analysis, planner.plan(desired, observed, now=NOW))
    files = reports.render_reports(report)
    assert yaml.safe_load(files["drift.yaml"]) == reports.report_to_json(report)
    assert "\n# heading" not in files["README.md"].decode()  # the README names no pod; the node page does
    text = files[reports.node_page_name("gpu-a")].decode()
    fences = [ln for ln in text.splitlines() if ln.startswith("```")]
    assert len(fences) == 2 and fences[0] == fences[1] and len(fences[0]) > 3  # no name closes the fence
    assert "\n# heading" not in text.split(fences[0])[0]  # nothing became a heading outside the fence
    from xml.etree import ElementTree

    svg = ElementTree.fromstring(files[slicesvg.gpu_map_name("gpu-a", 0)])
    assert not [e for e in svg.iter() if e.tag.endswith("script")]
    assert "MP542" in {f.code for f in report.findings}  # the hostile profile is a partition the plan lacks


def test_an_unchanged_annotation_is_decoded_once_and_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = observedcodec.decode

    def counting(text: object) -> NodeObservation:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(observedcodec, "decode", counting)
    monkeypatch.setattr(observation, "_memo", type(observation._memo)())
    monkeypatch.setattr(observation, "_MEMO_SIZE", 2)
    texts = [observedcodec.encode(_obs(_gpu(i))) for i in range(3)]
    first = observation.read_observation({OBSERVED_ANNOTATION: texts[0]})
    again = observation.read_observation({OBSERVED_ANNOTATION: str(texts[0])})
    assert first[0] is again[0] and len(calls) == 1
    assert observation.read_observation({OBSERVED_ANNOTATION: texts[1]})[0] != first[0]
    assert observation.read_observation({OBSERVED_ANNOTATION: "{"})[1]  # errors are remembered too
    assert len(observation._memo) == 2  # bounded: the oldest went
    observation.read_observation({OBSERVED_ANNOTATION: texts[0]})
    assert len(calls) == 4  # it was dropped, so decoded again
