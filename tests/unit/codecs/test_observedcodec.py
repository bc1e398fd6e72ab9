"""The `migplan.io/mig-observed` codec: round trip, v1 compatibility, size cap and hostile documents."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from reconciler.logic.codecs import observedcodec
from reconciler.model import strict
from reconciler.model.inventory import Placement
from reconciler.model.nodeobservation import (
    SOURCE_OK,
    Holder,
    NodeObservation,
    ObservedGpu,
    ObservedInstance,
    UnknownDevice,
)

AT = datetime(2026, 12, 3, 8, 0, 0, tzinfo=UTC)


def _node(gpus: int = 8, per_gpu: int = 7, *, pids: int = 1) -> NodeObservation:
    out = []
    for g in range(gpus):
        instances = tuple(
            ObservedInstance(
                gpu_instance_id=9 + i,
                profile="1g.18gb",
                placement=Placement(i, 1),
                uuid=f"MIG-{g:02d}{i:02d}aaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                processes=tuple(range(1000 * g + i, 1000 * g + i + pids)),
                holders=(Holder("team-a", f"worker-{g}-{i}", "main", "nvidia.com/mig-1g.18gb"),),
            )
            for i in range(per_gpu)
        )
        out.append(ObservedGpu(g, f"GPU-{g:032d}", "NVIDIA H200", True, True, True, instances))
    return NodeObservation(
        version="v2",
        gpus=tuple(out),
        observed_at=AT,
        observer="migplan/0.1.0",
        sources={"nvml": SOURCE_OK, "podResources": SOURCE_OK},
        unknown_devices=(UnknownDevice(Holder("x", "y", "z", "nvidia.com/gpu"), "GPU-unknown"),),
    )


def test_round_trip_of_a_full_h200_node() -> None:
    obs = _node()
    text = observedcodec.encode(obs)
    back = observedcodec.decode(text)
    assert back == obs
    assert back.holders_known
    assert observedcodec.encode(back) == text  # stable: the observer writes only on change
    assert len(text) < observedcodec.MAX_OBSERVED_BYTES


def test_v1_documents_still_decode_without_holders() -> None:
    v1 = {
        "version": "v1",
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-0",
                "name": "NVIDIA H200",
                "migCapable": True,
                "mig": {"current": True, "pending": True},
                "instances": [{"profile": "7g.141gb", "start": 0, "size": 8, "gpuInstanceId": 0, "uuid": None}],
            }
        ],
    }
    obs = observedcodec.decode(json.dumps(v1))
    assert obs.version == "v1"
    assert obs.gpus[0].instances[0].placement == Placement(0, 8)
    assert not obs.holders_known


def test_oversized_observation_drops_detail_never_the_layout() -> None:
    obs = _node(pids=400)  # thousands of PIDs: far over the cap with them
    text = observedcodec.encode(obs)
    assert len(text) <= observedcodec.MAX_OBSERVED_BYTES
    back = observedcodec.decode(text)
    assert back.truncated and not back.holders_known
    assert [i.placement for g in back.gpus for i in g.instances] == [i.placement for g in obs.gpus for i in g.instances]
    assert all(i.processes == () for g in back.gpus for i in g.instances)


@pytest.mark.parametrize(
    "doc",
    [
        '{"version": "v3", "gpus": []}',
        '{"version": "v2", "gpus": [], "observedAt": "2026-12-03T08:00:00"}',  # no UTC offset
        '{"version": "v2", "gpus": [], "truncated": "no"}',
        '{"version": "v2", "gpus": [{"index": 0, "uuid": "u", "name": "n", "migCapable": true,'
        ' "mig": {"current": true, "pending": true}, "instances": [], "holders": [{"namespace": 1}]}]}',
        '{"version": "v2", "gpus": NaN}',
        "[" * 100_000,
        '{"version": "v2", "gpus": [], "sources": {' + ",".join(f'"s{i}": "ok"' for i in range(20)) + "}}",
        '{"version": "v2", "gpus": [], "pad": "' + "x" * (observedcodec.MAX_OBSERVED_BYTES + 1) + '"}',
    ],
)
def test_hostile_documents_are_refused_with_a_reason(doc: str) -> None:
    with pytest.raises(strict.StrictValueError):
        observedcodec.decode(doc)
