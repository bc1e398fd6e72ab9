"""The node observer on a DRA node, through the real adapters: the NVML adapter over the NVML twin (a GPU whose
minor number is not its index) and the PodResources client over the twin kubelet's gRPC socket, which lists a
container's DRA claims in `dynamic_resources`. A partition held through a claim is published as held, with the
claim; a claim on a device this node does not have is an unknown device, never a free partition."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.catalog import load_catalog
from reconciler.logic.codecs import observedcodec
from reconciler.model.nodeobservation import SOURCE_OK, Holder, NodeObservation
from reconciler.observer import publish_pass
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.kubelet import ClaimListing, PodResourcesServer
from reconciler.twin.nvml import NvmlTwin

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
NODE = "gpu-h200-dra"


class MemorySink:
    def __init__(self) -> None:
        self.published: list[NodeObservation] = []

    def publish_observed(self, node: str, observed: NodeObservation) -> None:
        self.published.append(observed)


@pytest.fixture
def node() -> Iterator[tuple[list[TwinGpu], list[ClaimListing], PodResourcesServer]]:
    model = load_catalog().resolve("H200-141GB")
    assert model is not None
    # index 0 has minor 1 and index 1 minor 0: a join by index would put the holder on the wrong GPU
    gpus = [TwinGpu(node=NODE, index=i, model=model, mig_enabled=True, minor=1 - i) for i in range(2)]
    gpus[0].add_partition("3g.71gb", 4)
    gpus[0].add_partition("1g.18gb", 0)
    gpus[1].add_partition("3g.71gb", 4)
    claims: list[ClaimListing] = []
    d = Path(tempfile.mkdtemp(prefix="mp-dra-"))
    server = PodResourcesServer(d / "k.sock", lambda: [], claims=lambda: claims).start()
    try:
        yield gpus, claims, server
    finally:
        server.stop()
        d.rmdir()


def observe(gpus: list[TwinGpu], server: PodResourcesServer) -> NodeObservation:
    sink = MemorySink()
    obs = publish_pass(
        open_gpus=lambda: NvmlGpu(nvml=NvmlTwin(gpus)),
        holders=KubeletPodResources(str(server.socket_path)),
        node_state=sink,
        node=NODE,
        clock=lambda: AT,
    )
    assert sink.published == [obs]
    return observedcodec.decode(observedcodec.encode(obs))  # what the controller reads back


def test_a_partition_held_through_a_claim_is_published_as_held_on_the_gpu_of_that_minor_number(
    node: tuple[list[TwinGpu], list[ClaimListing], PodResourcesServer],
) -> None:
    gpus, claims, server = node
    claims.append(
        ("team-a", "infer-0", "main", "team-a", "infer-0-gpu", [("gpu.nvidia.com", NODE, "gpu-0-mig-3g71gb-9-4")])
    )
    obs = observe(gpus, server)
    assert obs.sources["podResources"] == SOURCE_OK and obs.holders_known
    assert [g.minor for g in obs.gpus] == [1, 0]
    held = {(g.index, i.placement.start): i.holders for g in obs.gpus for i in g.instances if i.holders}
    assert held == {(1, 4): (Holder("team-a", "infer-0", "main", "gpu.nvidia.com", "team-a/infer-0-gpu"),)}
    assert obs.unknown_devices == ()


def test_a_claim_on_a_device_the_node_does_not_have_is_unknown(
    node: tuple[list[TwinGpu], list[ClaimListing], PodResourcesServer],
) -> None:
    gpus, claims, server = node
    claims.append(("team-a", "infer-0", "main", "team-a", "c", [("gpu.nvidia.com", NODE, "gpu-1-mig-3g71gb-9-0")]))
    claims.append(("team-a", "nic-0", "main", "team-a", "nic", [("sriov.example.com", NODE, "vf-0")]))
    obs = observe(gpus, server)
    assert all(not i.holders for g in obs.gpus for i in g.instances)
    assert [(u.holder.pod, u.device_id) for u in obs.unknown_devices] == [("infer-0", f"{NODE}/gpu-1-mig-3g71gb-9-0")]
