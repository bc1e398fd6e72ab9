"""Fuzz: the node observation — the kubelet's PodResources answer, the join, and the annotation read back.

- The join (observejoin.join) with hostile kubelet allocations (names and device IDs with control characters,
  unicode, 300 characters, replicas `::n`, IDs NVML does not know, resources of other vendors) over a real
  NVML layout: what the observer would publish always decodes (observedcodec.decode(encode(obs))), stays
  under the annotation cap, never holds a holder the kubelet did not name, and reports skipped allocations.
- The codec (observedcodec.decode) with a published observation mutated as a tree (mutations.py: values of
  any type, NaN, huge integers, keys deleted or added) or as text (cut, doubled, nested 100k deep): an
  observation or a StrictValueError, nothing else; through the adapter (kubeagentmode.decode_observation)
  a MigplanError MP911; and a decoded one goes through migplan import without a crash.
- The PodResources client (adapters/podresources.py) against the twin kubelet's `answer` hook: garbage,
  truncated and hostile protobuf, a message over the size limit, 10^5 containers: allocations or a MigplanError
  with an observer code (MP930-MP934), within the timeout.
Derandomized for CI.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import mutations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.adapters.kube import agentmode as kubeagentmode
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.catalog import load_catalog
from reconciler.kubeletapi.podresources.v1 import api_pb2
from reconciler.logic.adoption.adopt import ConfigSource, NodeFacts, import_cluster
from reconciler.logic.codecs import observedcodec
from reconciler.logic.observe.observejoin import NVML, POD_RESOURCES, join
from reconciler.model import strict
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import Placement
from reconciler.model.nodeobservation import SOURCE_OK, KubeletAllocation, ObservedGpu, ObservedInstance
from reconciler.model.observed import ObservedNode
from reconciler.twin.kubelet import PodResourcesServer

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
JOIN_CASES = 250
DECODE_CASES = 500
PROTOBUF_CASES = 50
CATALOG = load_catalog()


def _uuid(prefix: str, n: int) -> str:
    return f"{prefix}-{n:08x}-1111-2222-3333-{n:012x}"


def _gpus() -> tuple[ObservedGpu, ...]:
    """An H200 node as NVML reports it: one GPU cut 3g+2g+1g+1g, one with a 1c.3g (two compute instances), one
    MIG-disabled GPU."""
    cut = (("3g.71gb", 4, 4), ("2g.35gb", 2, 2), ("1g.18gb", 0, 1), ("1g.18gb", 1, 1))
    g0 = ObservedGpu(
        0,
        _uuid("GPU", 0),
        "NVIDIA H200",
        True,
        True,
        False,
        tuple(ObservedInstance(k + 1, p, Placement(s, z), _uuid("MIG", k)) for k, (p, s, z) in enumerate(cut)),
    )
    split = ObservedInstance(
        1, "3g.71gb", Placement(0, 4), _uuid("MIG", 10), compute_uuids=(_uuid("MIG", 10), _uuid("MIG", 11))
    )
    g1 = ObservedGpu(1, _uuid("GPU", 1), "NVIDIA H200", True, True, False, (split,))
    g2 = ObservedGpu(2, _uuid("GPU", 2), "NVIDIA H200", True, False, False)
    return (g0, g1, g2)


GPUS = _gpus()
KNOWN_IDS = [_uuid("MIG", k) for k in (0, 1, 2, 3, 10, 11)] + [_uuid("GPU", k) for k in range(3)]
NAMES = st.one_of(
    st.sampled_from(["team-a", "vllm-0", "main", "kube-system"]),
    mutations.STRINGS,
    st.text(max_size=20),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x9F), max_size=6),
    st.just("n" * 300),
)
DEVICE_IDS = st.one_of(
    st.sampled_from(KNOWN_IDS),
    st.builds(lambda u, r: f"{u}::{r}", st.sampled_from(KNOWN_IDS), st.integers(-1, 10**6)),
    st.builds(
        lambda u, s: u + s, st.sampled_from(KNOWN_IDS), st.sampled_from(["\n", "\x00", "::", " ", "\u202e", "é"])
    ),
    mutations.STRINGS,
    st.text(max_size=40),
    st.just("x" * 300),
)
RESOURCES = st.one_of(
    st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-3g.71gb", "nvidia.com/mig-1g.18gb", "example.com/nic"]),
    st.builds(lambda s: "nvidia.com/" + s, st.text(max_size=300)),
    mutations.STRINGS,
)
ALLOCATIONS = st.lists(
    st.builds(KubeletAllocation, NAMES, NAMES, NAMES, RESOURCES, st.lists(DEVICE_IDS, max_size=4).map(tuple)),
    max_size=30,
)
SOURCES = st.fixed_dictionaries(
    {
        NVML: st.one_of(st.just(SOURCE_OK), mutations.STRINGS, st.text(max_size=600)),
        POD_RESOURCES: st.one_of(st.just(SOURCE_OK), mutations.STRINGS, st.just("MP931: x\n" * 100)),
    }
)

_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _published(obs: Any) -> Any:
    """What the controller reads back from what the observer would write: it must always decode."""
    text = observedcodec.encode(obs)
    assert len(text) <= observedcodec.MAX_OBSERVED_BYTES
    return observedcodec.decode(text)


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=JOIN_CASES)
@given(allocations=ALLOCATIONS, sources=SOURCES, observer=st.one_of(st.just("migplan/0.1.0"), mutations.STRINGS))
def test_the_join_of_hostile_kubelet_answers_always_publishes_a_readable_observation(
    allocations: list[KubeletAllocation], sources: dict[str, str], observer: str
) -> None:
    obs = join(GPUS, allocations, sources=sources, observed_at=AT, observer=observer)
    back = _published(obs)
    assert [(g.index, len(g.instances)) for g in back.gpus] == [(g.index, len(g.instances)) for g in GPUS]
    named = {(a.namespace, a.pod, a.container, a.resource) for a in allocations}
    held = [h for g in back.gpus for h in (*g.holders, *(x for i in g.instances for x in i.holders))]
    held += [u.holder for u in back.unknown_devices]
    assert all((h.namespace, h.pod, h.container, h.resource) in named for h in held)
    assert all(not any(ord(c) < 0x20 for c in (h.namespace + h.pod + h.container + h.resource)) for h in held)
    assert all("\n" not in v and len(v) <= 512 for v in back.sources.values())
    if not back.truncated:
        assert back.gpus == tuple(
            type(g)(g.index, g.uuid, g.name, g.mig_capable, g.mig_current, g.mig_pending, g.instances, {}, g.holders)
            for g in obs.gpus
        )


BASE_DOC = json.loads(
    observedcodec.encode(
        join(
            GPUS,
            [KubeletAllocation("team-a", "vllm-0", "main", "nvidia.com/mig-3g.71gb", (KNOWN_IDS[0],))],
            sources={NVML: SOURCE_OK, POD_RESOURCES: SOURCE_OK},
            observed_at=AT,
            observer="migplan/0.1.0",
        )
    )
)
TEXT_EDITS = st.sampled_from(["cut", "double", "deep", "bigint", "nan", "bom", "v1", "huge"])


@st.composite
def hostile_annotations(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 3)) > 0:
        doc = draw(mutations.mutated(BASE_DOC))
        try:
            return json.dumps(doc, ensure_ascii=draw(st.booleans()))
        except (ValueError, RecursionError):
            return "{}"
    text = json.dumps(BASE_DOC)
    edit = draw(TEXT_EDITS)
    if edit == "cut":
        return text[: draw(st.integers(0, len(text)))]
    if edit == "double":
        return text + text
    if edit == "deep":
        return '{"version":"v2","gpus":' + "[" * 100_000 + "]" * 100_000 + "}"
    if edit == "bigint":
        return text.replace('"index":0', '"index":' + "9" * 5000, 1)
    if edit == "nan":
        return text.replace('"start":4', '"start":NaN', 1)
    if edit == "bom":
        return "\ufeff" + text
    if edit == "v1":
        return json.dumps({"gpus": BASE_DOC["gpus"]})
    return text.replace('"observer":"migplan/0.1.0"', '"observer":"' + "x" * 70_000 + '"', 1)


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=DECODE_CASES)
@given(text=hostile_annotations())
def test_a_hostile_annotation_decodes_or_is_refused_with_a_reason(text: str) -> None:
    try:
        obs = observedcodec.decode(text)
    except strict.StrictValueError as exc:
        assert str(exc) and "\n" not in str(exc)[:200]
        with pytest.raises(MigplanError) as caught:
            kubeagentmode.decode_observation(text)
        assert caught.value.code == "MP911"
        return
    assert obs.version in observedcodec.VERSIONS
    obs.holders_known  # noqa: B018  (a property the controller reads)
    # Re-encoding what was read gives a readable annotation too (the observer's publish rule compares them).
    observedcodec.publish_due(text, obs)
    # migplan import takes it as the node's observed layout: a node file or a problem with a code, no crash.
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H200"}
    facts = NodeFacts(ObservedNode("n1", labels), (), obs.gpus)
    imported = import_cluster([facts], ConfigSource("cm", None, "none"), CATALOG)
    assert all(p.code.startswith("MP58") for p in imported.problems), imported.problems


# ------------------------------------------------------------------------------------- the kubelet's answer


@pytest.fixture(scope="module")
def kubelet() -> Iterator[PodResourcesServer]:
    d = Path(tempfile.mkdtemp(prefix="mp-fz-"))  # a unix socket path must stay under ~100 bytes
    server = PodResourcesServer(d / "k.sock", lambda: []).start()
    try:
        yield server
    finally:
        server.stop()
        d.rmdir()


def _message(pods: list[tuple[str, str, list[tuple[str, str, list[str]]]]]) -> bytes:
    return api_pb2.ListPodResourcesResponse(
        pod_resources=[
            api_pb2.PodResources(
                name=name,
                namespace=ns,
                containers=[
                    api_pb2.ContainerResources(
                        name=c, devices=[api_pb2.ContainerDevices(resource_name=r, device_ids=ids)]
                    )
                    for c, r, ids in containers
                ],
            )
            for name, ns, containers in pods
        ]
    ).SerializeToString()


TEXTS = st.one_of(mutations.STRINGS, st.text(max_size=12))
PODS = st.lists(
    st.tuples(TEXTS, TEXTS, st.lists(st.tuples(TEXTS, TEXTS, st.lists(DEVICE_IDS, max_size=3)), max_size=3)),
    max_size=5,
)


@st.composite
def hostile_answers(draw: st.DrawFn) -> bytes:
    good = _message(draw(PODS))
    edit = draw(st.sampled_from(["none", "none", "cut", "flip", "garbage", "bad-utf8", "append"]))
    if edit == "cut" and good:
        return good[: draw(st.integers(0, len(good) - 1))]
    if edit == "flip" and good:
        i = draw(st.integers(0, len(good) - 1))
        return good[:i] + bytes([good[i] ^ draw(st.integers(1, 255))]) + good[i + 1 :]
    if edit == "garbage":
        return draw(st.binary(max_size=64))
    if edit == "bad-utf8":
        # pod_resources { name: "\xff\xfe" }: a string field that is not UTF-8
        return b"\x0a\x04\x0a\x02\xff\xfe"
    if edit == "append":
        return good + draw(st.binary(max_size=16))
    return good


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=PROTOBUF_CASES)
@given(answer=hostile_answers())
def test_a_hostile_kubelet_answer_is_allocations_or_an_observer_error(
    kubelet: PodResourcesServer, answer: bytes
) -> None:
    kubelet.answer = answer
    client = KubeletPodResources(str(kubelet.socket_path), timeout_seconds=5.0)
    start = time.monotonic()
    try:
        allocations = client.list_allocations()
    except MigplanError as exc:
        assert exc.code in ("MP932", "MP934"), (exc.code, exc.message)
        return
    finally:
        assert time.monotonic() - start < 6
    obs = join(GPUS, allocations, sources={NVML: SOURCE_OK, POD_RESOURCES: SOURCE_OK}, observed_at=AT, observer="m")
    _published(obs)


def test_a_kubelet_answer_of_a_hundred_thousand_containers_one_over_the_limit_and_a_late_one(
    kubelet: PodResourcesServer,
) -> None:
    pods = [
        (f"p{k}", f"ns-{k % 50}", [("c", "nvidia.com/mig-1g.18gb", [KNOWN_IDS[k % 9] + f"::{k}"])])
        for k in range(100_000)
    ]
    kubelet.answer = _message(pods)
    start = time.monotonic()
    allocations = KubeletPodResources(str(kubelet.socket_path)).list_allocations()
    assert len(allocations) == 100_000
    obs = join(GPUS, allocations, sources={NVML: SOURCE_OK, POD_RESOURCES: SOURCE_OK}, observed_at=AT, observer="m")
    back = _published(obs)
    assert time.monotonic() - start < 30
    # Each device keeps the codec's bound of holders (the first in sorted order) and the observation says so.
    assert back.truncated and all(0 < len(i.holders) <= 64 for g in back.gpus[:2] for i in g.instances)
    small = KubeletPodResources(str(kubelet.socket_path), max_message_bytes=64 * 1024)
    with pytest.raises(MigplanError) as caught:
        small.list_allocations()
    assert caught.value.code == "MP933"
    kubelet.answer, kubelet.delay_seconds = b"", 3.0
    try:
        with pytest.raises(MigplanError) as late:
            KubeletPodResources(str(kubelet.socket_path), timeout_seconds=0.5).list_allocations()
        assert late.value.code == "MP931"
    finally:
        kubelet.delay_seconds = 0.0
