"""DRA holders on a node: NVIDIA's DRA driver's device names read back, and the kubelet's `dynamic_resources`
joined to NVML's instances exactly like device-plugin holders (claim kept, unknown devices named)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.logic.codecs import dradevices, observedcodec
from reconciler.logic.observe.observejoin import NVML, POD_RESOURCES, join
from reconciler.model.inventory import Placement
from reconciler.model.nodeobservation import SOURCE_OK, Holder, KubeletAllocation, ObservedGpu, ObservedInstance
from reconciler.model.strict import StrictValueError

AT = datetime(2026, 12, 3, 8, 0, 0, tzinfo=UTC)
OK = {NVML: SOURCE_OK, POD_RESOURCES: SOURCE_OK}
DRIVER = dradevices.DRIVER


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpu-0", dradevices.DraGpu(0)),
        ("gpu-12", dradevices.DraGpu(12)),
        ("gpu-0-mig-3g71gb-9-4", dradevices.DraMig(0, "3g71gb", 9, 4)),
        ("gpu-3-mig-1g18gb-me-19-6", dradevices.DraMig(3, "1g18gb-me", 19, 6)),
        ("gpu-vfio-0", None),  # VFIO passthrough: not a MIG device, not a GPU migplan cuts
        ("gpu-0-mig-3g.71gb-9-4", None),  # a dot never survives the driver's mangling
        ("gpu-0-mig--9-4", None),
        ("gpu-256", None),  # /dev/nvidia0..255
        ("gpu-0-mig-3g71gb-9-8", None),  # no GPU has a 9th memory slice
        ("gpu-٣", None),  # a Unicode digit is not a minor number
        ("gpu-0-mig-" + "a" * 200 + "-9-4", None),
        ("", None),
        ("GPU-0", None),
    ],
)
def test_device_names_parse_as_the_driver_writes_them(name: str, expected: object) -> None:
    assert dradevices.parse(name) == expected


def test_profile_names_are_mangled_like_the_driver_and_names_round_trip() -> None:
    assert dradevices.profile_token("3g.71gb") == "3g71gb"
    assert dradevices.profile_token("1g.18gb+me") == "1g18gb-me"
    assert dradevices.profile_token("1c.3g.71gb") == "1c3g71gb"
    name = dradevices.mig_name(2, "1g.18gb+me", 19, 6)
    assert name == "gpu-2-mig-1g18gb-me-19-6"
    assert dradevices.parse(name) == dradevices.DraMig(2, "1g18gb-me", 19, 6)


def _gpus(minor0: int | None = 4) -> tuple[ObservedGpu, ...]:
    # index 0 is minor 4 on purpose: the driver names by minor number, and a join on the index must fail here
    g0 = ObservedGpu(
        0,
        "GPU-0",
        "NVIDIA H200",
        True,
        True,
        True,
        (
            ObservedInstance(2, "3g.71gb", Placement(4, 4), "MIG-A"),
            ObservedInstance(5, "1g.18gb", Placement(0, 1), "MIG-B"),
        ),
        minor=minor0,
    )
    g1 = ObservedGpu(1, "GPU-1", "NVIDIA H200", True, False, False, minor=0)
    return (g0, g1)


def _claim(pod: str, device: str, *, driver: str = DRIVER, claim: str = "team-a/infer-gpu") -> KubeletAllocation:
    return KubeletAllocation("team-a", pod, "main", driver, (device,), claim=claim, pool="gpu-h200-01")


def test_a_claim_holds_the_instance_its_device_name_points_at_through_the_minor_number() -> None:
    allocs = [
        _claim("infer-0", "gpu-4-mig-3g71gb-9-4"),
        _claim("train-0", "gpu-0", claim="team-a/train-gpu"),  # minor 0 is the GPU at index 1
        _claim("nic-0", "nic-0", driver="sriov.example.com", claim="team-a/nic"),  # not a GPU: ignored
    ]
    obs = join(_gpus(), allocs, sources=OK, observed_at=AT, observer="migplan/test")
    g0, g1 = obs.gpus
    assert g0.instances[0].holders == (Holder("team-a", "infer-0", "main", DRIVER, "team-a/infer-gpu"),)
    assert g0.instances[0].in_use and g0.instances[0].holders[0].through_dra
    assert g0.instances[1].holders == () and g0.holders == ()
    assert g1.holders == (Holder("team-a", "train-0", "main", DRIVER, "team-a/train-gpu"),)
    assert obs.unknown_devices == () and obs.holders_known


def test_device_plugin_and_dra_holders_of_one_node_are_both_counted() -> None:
    allocs = [
        KubeletAllocation("team-b", "emb-0", "main", "nvidia.com/mig-1g.18gb", ("MIG-B",)),
        _claim("infer-0", "gpu-4-mig-3g71gb-9-4"),
    ]
    g0 = join(_gpus(), allocs, sources=OK, observed_at=AT, observer="t").gpus[0]
    assert [h.pod for i in g0.instances for h in i.holders] == ["infer-0", "emb-0"]


@pytest.mark.parametrize(
    "device",
    [
        "gpu-4-mig-3g71gb-9-0",  # no instance starts at 0 with that profile
        "gpu-4-mig-1g18gb-19-4",  # an instance starts at 4, but not of that profile
        "gpu-7-mig-3g71gb-9-4",  # no GPU has minor 7
        "gpu-4-mig-3g.71gb-9-4",  # does not parse
        "gpu-vfio-0",
    ],
)
def test_a_claimed_device_that_is_not_on_this_node_is_unknown_never_free_never_elsewhere(device: str) -> None:
    obs = join(_gpus(), [_claim("infer-0", device)], sources=OK, observed_at=AT, observer="t")
    assert all(not i.holders for g in obs.gpus for i in g.instances) and all(not g.holders for g in obs.gpus)
    assert [(u.holder.claim, u.device_id) for u in obs.unknown_devices] == [
        ("team-a/infer-gpu", f"gpu-h200-01/{device}")
    ]


def test_without_minor_numbers_a_dra_holder_is_unknown_not_joined_by_index() -> None:
    obs = join(
        _gpus(minor0=None), [_claim("infer-0", "gpu-0-mig-3g71gb-9-4")], sources=OK, observed_at=AT, observer="t"
    )
    assert all(not i.holders for i in obs.gpus[0].instances)
    assert len(obs.unknown_devices) == 1


@pytest.mark.parametrize(
    "bad",
    [
        KubeletAllocation("team-a", "p", "main", DRIVER, ("gpu-0",), claim="team-a/\x00", pool="n"),
        KubeletAllocation("team-a", "p", "main", DRIVER, ("gpu-0",), claim="x" * 600, pool="n"),
        KubeletAllocation("team-a", "p", "main", DRIVER, ("gpu-0",), claim="team-a/c", pool=""),
        KubeletAllocation("team-a", "p", "main", DRIVER, ("gpu-0", "gpu-1"), claim="team-a/c", pool="n"),
        KubeletAllocation("team-a", "p", "main", DRIVER, ("",), claim="team-a/c", pool="n"),
    ],
)
def test_a_dra_allocation_the_annotation_cannot_hold_is_skipped_and_said(bad: KubeletAllocation) -> None:
    obs = join(_gpus(), [bad], sources=OK, observed_at=AT, observer="t")
    assert all(not g.holders for g in obs.gpus) and obs.unknown_devices == ()
    assert obs.sources[POD_RESOURCES].startswith("MP939") and not obs.holders_known


def test_dra_holders_and_minor_numbers_survive_the_annotation() -> None:
    obs = join(_gpus(), [_claim("infer-0", "gpu-4-mig-3g71gb-9-4")], sources=OK, observed_at=AT, observer="t")
    text = observedcodec.encode(obs)
    back = observedcodec.decode(text)
    assert back.gpus[0].instances[0].holders == obs.gpus[0].instances[0].holders
    assert [g.minor for g in back.gpus] == [4, 0]


def test_device_plugin_holders_encode_as_before_and_hostile_claims_are_refused() -> None:
    plain = join(
        tuple(replace(g, minor=None) for g in _gpus()),
        [KubeletAllocation("team-b", "emb-0", "main", "nvidia.com/mig-1g.18gb", ("MIG-B",))],
        sources=OK,
        observed_at=AT,
        observer="t",
    )
    text = observedcodec.encode(plain)
    assert '"claim"' not in text and '"minor"' not in text  # older controllers read exactly what they did
    hostile = text.replace('"resource":"nvidia.com/mig-1g.18gb"', '"resource":"nvidia.com/mig-1g.18gb","claim":7')
    with pytest.raises(StrictValueError):
        observedcodec.decode(hostile)
    with pytest.raises(StrictValueError):
        observedcodec.decode(text.replace('"index":1,', '"index":1,"minor":-1,'))


# --- pods that hold through claims (the kube observer keeps them so drain can evict them) -------------------


def _pod_json(spec: dict[str, object], status: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"nodeName": "n", "containers": [{"name": "main"}], **spec},
        "status": status or {"phase": "Running"},
    }


def test_a_pod_with_claims_is_kept_with_its_claims_and_a_pod_without_is_not() -> None:
    direct = _pod_json({"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}]})
    pod = kubeobserve.gpu_pod_from_json(direct)
    assert pod is not None and pod.claims == ("ml/shared-gpu",) and pod.requested() == {}
    templated = _pod_json(
        {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-mig"}]},
        {"phase": "Running", "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}]},
    )
    assert kubeobserve.pod_claims(templated) == ("ml/p-gpu-x7k2q",)
    assert kubeobserve.gpu_pod_from_json(_pod_json({})) is None


@pytest.mark.parametrize(
    "claims",
    [
        "not-a-list",
        [7, None, "x"],
        [{"name": "gpu", "resourceClaimName": 5}],
        [{"name": "gpu", "resourceClaimName": "x" * 300}],
        [{"name": "gpu", "resourceClaimTemplateName": "t"}],  # generated claim not written yet: unknown
    ],
)
def test_hostile_or_unresolved_claims_name_nothing_and_never_raise(claims: object) -> None:
    assert kubeobserve.pod_claims(_pod_json({"resourceClaims": claims})) == ()
