"""The observer's join (NVML devices x kubelet allocations) and its publish rule (change or heartbeat)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from reconciler.logic.codecs import observedcodec
from reconciler.logic.observe.observejoin import MAX_HOLDERS, NVML, POD_RESOURCES, device_uuid, join, one_line
from reconciler.model.inventory import Placement
from reconciler.model.nodeobservation import (
    SOURCE_OK,
    Holder,
    KubeletAllocation,
    ObservedGpu,
    ObservedInstance,
)

AT = datetime(2026, 12, 3, 8, 0, 0, tzinfo=UTC)
OK = {NVML: SOURCE_OK, POD_RESOURCES: SOURCE_OK}
MIG_A = "MIG-11111111-2222-3333-4444-555555555555"
MIG_B = "MIG-66666666-7777-8888-9999-000000000000"
GPU0 = "GPU-00000000-0000-0000-0000-000000000000"
GPU1 = "GPU-11111111-1111-1111-1111-111111111111"


def _gpus() -> tuple[ObservedGpu, ...]:
    g0 = ObservedGpu(
        0,
        GPU0,
        "NVIDIA H200",
        True,
        True,
        True,
        (
            ObservedInstance(2, "3g.71gb", Placement(4, 4), MIG_A),
            ObservedInstance(5, "1g.18gb", Placement(0, 1), MIG_B),
        ),
    )
    g1 = ObservedGpu(1, GPU1, "NVIDIA H200", True, False, False)
    return (g0, g1)


def _alloc(pod: str, resource: str, *ids: str, container: str = "main", ns: str = "team-a") -> KubeletAllocation:
    return KubeletAllocation(ns, pod, container, resource, ids)


def test_holders_land_on_the_device_the_kubelet_names_and_whole_gpus_on_the_gpu() -> None:
    allocs = [
        _alloc("infer-0", "nvidia.com/mig-3g.71gb", MIG_A),
        _alloc("train-0", "nvidia.com/gpu", GPU1),
        _alloc("nic-user", "rdma/hca_shared_devices_a", "hca-0"),  # not NVIDIA's: ignored, not unknown
    ]
    obs = join(_gpus(), allocs, sources=OK, observed_at=AT, observer="migplan/test")
    g0, g1 = obs.gpus
    assert g0.instances[0].holders == (Holder("team-a", "infer-0", "main", "nvidia.com/mig-3g.71gb"),)
    assert g0.instances[1].holders == ()
    assert g1.holders == (Holder("team-a", "train-0", "main", "nvidia.com/gpu"),)
    assert obs.unknown_devices == () and not obs.truncated
    assert obs.holders_known
    assert observedcodec.decode(observedcodec.encode(obs)) == obs


def test_replicas_of_a_shared_device_are_all_holders_of_that_device() -> None:
    allocs = [
        _alloc("a", "nvidia.com/gpu", f"{MIG_A}::0"),
        _alloc("b", "nvidia.com/gpu", f"{MIG_A}::3"),
    ]
    obs = join(_gpus(), allocs, sources=OK, observed_at=AT, observer="t")
    assert [h.pod for h in obs.gpus[0].instances[0].holders] == ["a", "b"]
    assert device_uuid(f"{MIG_A}::3") == MIG_A and device_uuid(MIG_A) == MIG_A


def test_a_device_nvml_does_not_know_is_unknown_only_when_nvml_answered_in_full() -> None:
    allocs = [_alloc("ghost", "nvidia.com/mig-1g.18gb", "MIG-deadbeef-0000-0000-0000-000000000000")]
    obs = join(_gpus(), allocs, sources=OK, observed_at=AT, observer="t")
    assert [(u.holder.pod, u.device_id) for u in obs.unknown_devices] == [
        ("ghost", "MIG-deadbeef-0000-0000-0000-000000000000")
    ]
    partial = {NVML: "MP936: gpu 1: MIG mode: NVML_ERROR_UNKNOWN", POD_RESOURCES: SOURCE_OK}
    guarded = join(_gpus()[:1], allocs, sources=partial, observed_at=AT, observer="t")
    assert guarded.unknown_devices == ()  # it may be on the GPU NVML could not read: no guess


def test_hostile_kubelet_values_are_not_published_and_the_source_says_so() -> None:
    allocs = [
        _alloc("x" * 300, "nvidia.com/gpu", MIG_A),
        _alloc("ok", "nvidia.com/gpu", MIG_B),
        _alloc("ctl", "nvidia.com/gpu", "MIG-\n-evil"),
        _alloc("empty", "nvidia.com/gpu", MIG_A, container=""),
    ]
    obs = join(_gpus(), allocs, sources=OK, observed_at=AT, observer="t")
    assert obs.gpus[0].instances[1].holders[0].pod == "ok"
    assert obs.gpus[0].instances[0].holders == ()
    assert obs.sources[POD_RESOURCES].startswith("MP939: 3 allocation(s)")
    assert not obs.holders_known  # the controller must not take these holders as complete
    observedcodec.decode(observedcodec.encode(obs))  # what is published always decodes


def test_bounds_of_the_codec_are_kept_and_say_truncated() -> None:
    allocs = [_alloc(f"p{i:03d}", "nvidia.com/gpu", f"{MIG_A}::{i}") for i in range(MAX_HOLDERS + 5)]
    allocs += [_alloc(f"u{i:03d}", "nvidia.com/gpu", f"MIG-unknown-{i}") for i in range(300)]
    obs = join(_gpus(), allocs, sources=OK, observed_at=AT, observer="t")
    assert len(obs.gpus[0].instances[0].holders) == MAX_HOLDERS and obs.truncated
    assert len(obs.unknown_devices) == 256
    back = observedcodec.decode(observedcodec.encode(obs))
    assert back.truncated and not back.holders_known


def test_reasons_are_one_bounded_line() -> None:
    text = one_line("first\nsecond\t" + "x" * 2000)
    assert "\n" not in text and len(text) == 512 and text.startswith("first second")


def test_publish_when_changed_or_when_the_heartbeat_is_due_and_only_then() -> None:
    obs = join(_gpus(), [_alloc("a", "nvidia.com/gpu", MIG_A)], sources=OK, observed_at=AT, observer="t")
    text = observedcodec.encode(obs)
    assert observedcodec.publish_due(None, obs)
    assert observedcodec.publish_due("{not json", obs)
    later = replace(obs, observed_at=AT + timedelta(seconds=120))
    assert not observedcodec.publish_due(text, later, heartbeat_seconds=300)  # same content, fresh enough
    assert observedcodec.publish_due(text, replace(later, observed_at=AT + timedelta(seconds=300)))
    assert observedcodec.publish_due(text, replace(obs, observed_at=AT - timedelta(seconds=5)))  # clock went back
    moved = join(
        _gpus(), [_alloc("b", "nvidia.com/gpu", MIG_A)], sources=OK, observed_at=later.observed_at, observer="t"
    )
    assert observedcodec.publish_due(text, moved)  # a holder changed: at once
    v1 = '{"version":"v1","gpus":[]}'
    assert observedcodec.publish_due(v1, later)  # an older agent's document is replaced
