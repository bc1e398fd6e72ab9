"""The observer under bad input: every failure is a reason in `sources` (or unknown devices), never a crash,
and what could be read is still published; nothing is published on a guess.

Kubelet side, through the real PodResources client: socket missing, not a socket, a socket that accepts and
never answers (timeout), a server without the API, garbage bytes, an answer over the size limit. NVML side,
through the real NVML adapter: one GPU failing, NVML not opening at all. Size: an observation over the
annotation cap is published without its detail and says so.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pynvml
import pytest

from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.kubeletapi.podresources.v1 import api_pb2
from reconciler.logic.codecs import observedcodec
from reconciler.model.errors import MigplanError
from reconciler.model.nodeobservation import SOURCE_OK, NodeObservation
from reconciler.observer import publish_pass
from reconciler.resources import inventory_dir
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.kubelet import PodResourcesServer

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


class MemorySink:
    def __init__(self) -> None:
        self.published: list[NodeObservation] = []

    def publish_observed(self, node: str, observed: NodeObservation) -> None:
        self.published.append(observed)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(inventory_dir()) as twin:
        twin.settle()
        yield twin


def short_dir() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="mp-bad-"))


def run_pass(twin: ClusterTwin, node: str, holders: Any, nvml: Any = None) -> NodeObservation:
    sink = MemorySink()
    obs = publish_pass(
        open_gpus=lambda: NvmlGpu(nvml=nvml if nvml is not None else twin.nvml(node)),
        holders=holders,
        node_state=sink,
        node=node,
        clock=lambda: AT,
    )
    assert sink.published == [obs]
    observedcodec.decode(observedcodec.encode(obs))  # whatever is published decodes
    return obs


def assert_layout_kept(twin: ClusterTwin, node: str, obs: NodeObservation) -> None:
    assert obs.sources["nvml"] == SOURCE_OK
    assert [(g.index, len(g.instances)) for g in obs.gpus] == [(g.index, len(g.gpu_instances)) for g in twin.gpus(node)]
    assert all(not i.holders for g in obs.gpus for i in g.instances)  # no holder is ever guessed
    assert not obs.holders_known


def test_missing_socket(cluster: ClusterTwin, tmp_path: Path) -> None:
    obs = run_pass(cluster, "gpu-h200-01", KubeletPodResources(str(tmp_path / "none.sock")))
    assert obs.sources["podResources"].startswith("MP930: pod-resources socket ")
    assert "does not exist" in obs.sources["podResources"]
    assert_layout_kept(cluster, "gpu-h200-01", obs)
    # processes NVML sees stay: the layout and PIDs are NVML's, only the holders are unknown
    assert any(i.processes for g in obs.gpus for i in g.instances)


def test_a_file_that_is_not_a_socket(cluster: ClusterTwin, tmp_path: Path) -> None:
    path = tmp_path / "kubelet.sock"
    path.write_text("not a socket")
    obs = run_pass(cluster, "gpu-h200-01", KubeletPodResources(str(path)))
    assert obs.sources["podResources"] == f"MP930: pod-resources socket {path} is not a socket"


def test_a_socket_that_never_answers_times_out(cluster: ClusterTwin) -> None:
    d = short_dir()
    path = d / "silent.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                held.append(conn)  # never read, never answer
            except TimeoutError:
                continue
            except OSError:
                return

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        start = time.monotonic()
        obs = run_pass(cluster, "gpu-h100-01", KubeletPodResources(str(path), timeout_seconds=1.0))
        elapsed = time.monotonic() - start
    finally:
        stop.set()
        listener.close()
        for c in held:
            c.close()
        t.join(2)
        os.unlink(path)
        d.rmdir()
    assert obs.sources["podResources"] == f"MP931: pod-resources socket {path} did not answer within 1 s"
    assert elapsed < 5, elapsed  # one timeout, no retries
    assert_layout_kept(cluster, "gpu-h100-01", obs)


def test_a_socket_nobody_listens_on(cluster: ClusterTwin) -> None:
    d = short_dir()
    path = d / "dead.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the file stays, nobody listens: connection refused
    try:
        obs = run_pass(cluster, "gpu-h100-01", KubeletPodResources(str(path), timeout_seconds=2.0))
    finally:
        os.unlink(path)
        d.rmdir()
    reason = obs.sources["podResources"]
    assert reason.startswith("MP931: pod-resources socket ") and ("unreachable" in reason or "did not answer" in reason)


@pytest.fixture
def kubelet() -> Iterator[PodResourcesServer]:
    d = short_dir()
    server = PodResourcesServer(d / "k.sock", lambda: []).start()
    try:
        yield server
    finally:
        server.stop()
        d.rmdir()


def test_garbage_from_the_kubelet(cluster: ClusterTwin, kubelet: PodResourcesServer) -> None:
    kubelet.answer = b"\xff\xff\xff\xff garbage, not protobuf \x00\x01"
    obs = run_pass(cluster, "gpu-h200-02", KubeletPodResources(str(kubelet.socket_path)))
    assert obs.sources["podResources"].startswith("MP932: pod-resources socket "), obs.sources
    assert "not a PodResources v1 message" in obs.sources["podResources"]
    assert_layout_kept(cluster, "gpu-h200-02", obs)


def test_an_answer_over_the_size_limit(cluster: ClusterTwin, kubelet: PodResourcesServer) -> None:
    pods = [
        api_pb2.PodResources(name=f"p{i}", namespace="ns", containers=[api_pb2.ContainerResources(name="c" * 1000)])
        for i in range(3000)
    ]
    kubelet.answer = api_pb2.ListPodResourcesResponse(pod_resources=pods).SerializeToString()
    assert len(kubelet.answer) > 1024 * 1024
    obs = run_pass(cluster, "gpu-h200-02", KubeletPodResources(str(kubelet.socket_path), max_message_bytes=1024 * 1024))
    assert obs.sources["podResources"].startswith("MP933: "), obs.sources
    assert "larger than 1048576 bytes" in obs.sources["podResources"]


def test_a_kubelet_without_the_api(cluster: ClusterTwin) -> None:
    from concurrent import futures

    import grpc

    d = short_dir()
    path = d / "other.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_insecure_port(f"unix://{path}")
    server.start()
    try:
        obs = run_pass(cluster, "gpu-h200-02", KubeletPodResources(str(path)))
    finally:
        server.stop(None)
        if path.exists():
            os.unlink(path)
        d.rmdir()
    assert obs.sources["podResources"].startswith("MP934: pod-resources socket "), obs.sources
    assert "UNIMPLEMENTED" in obs.sources["podResources"]


class FailingGpu:
    """The NVML twin with one GPU whose MIG mode NVML refuses to tell (NVML_ERROR_UNKNOWN)."""

    def __init__(self, inner: Any, bad_index: int) -> None:
        self._inner, self._bad = inner, bad_index

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def nvmlDeviceGetMigMode(self, handle: Any) -> Any:  # pynvml's name
        if self._inner.nvmlDeviceGetIndex(handle) == self._bad:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        return self._inner.nvmlDeviceGetMigMode(handle)


def test_one_gpu_failing_in_nvml_leaves_it_out_and_says_why(cluster: ClusterTwin) -> None:
    node = "gpu-h200-01"
    holders = KubeletPodResources(str(cluster.pod_resources_socket(node)))
    obs = run_pass(cluster, node, holders, nvml=FailingGpu(cluster.nvml(node), 1))
    assert [g.index for g in obs.gpus] == [0]  # GPU 1 is not published with a guessed layout
    assert obs.sources["nvml"].startswith("MP936: 1 GPU(s) not read: gpu 1: MIG mode")
    assert obs.sources["podResources"] == SOURCE_OK
    assert any(i.holders for i in obs.gpus[0].instances)  # GPU 0's holders are still measured
    # the pods on GPU 1 are not called unknown devices: NVML did not answer for GPU 1
    assert obs.unknown_devices == ()


def test_nvml_that_does_not_open_publishes_the_reason_and_no_gpu(cluster: ClusterTwin) -> None:
    def broken() -> NvmlGpu:
        class NoDriver:
            NVMLError = pynvml.NVMLError

            def nvmlInit(self) -> None:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

        return NvmlGpu(nvml=NoDriver())

    sink = MemorySink()
    node = "gpu-h200-01"
    obs = publish_pass(
        open_gpus=broken,
        holders=KubeletPodResources(str(cluster.pod_resources_socket(node))),
        node_state=sink,
        node=node,
        clock=lambda: AT,
    )
    assert obs.gpus == () and obs.sources["nvml"].startswith("MP935: nvmlInit")
    assert obs.unknown_devices == ()  # the kubelet's devices are not "unknown" when NVML said nothing
    assert obs.sources["podResources"] == SOURCE_OK


def test_a_node_that_cannot_be_written_is_mp937() -> None:
    class Refusing:
        def publish_observed(self, node: str, observed: NodeObservation) -> None:
            raise MigplanError("patch node n1: HTTP 403 Forbidden", code="MP550")

    with pytest.raises(MigplanError) as err:
        publish_pass(
            open_gpus=lambda: NvmlGpu(nvml=_NoGpus()),
            holders=None,
            node_state=Refusing(),
            node="n1",
            clock=lambda: AT,
        )
    assert err.value.code == "MP937" and "HTTP 403" in err.value.message


class _NoGpus:
    NVMLError = pynvml.NVMLError

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 0


def test_an_observation_over_the_cap_is_published_without_detail(
    cluster: ClusterTwin, kubelet: PodResourcesServer
) -> None:
    long = "x" * 250
    pods = [
        api_pb2.PodResources(
            name=f"{long[:240]}-{i:03d}",
            namespace=long,
            containers=[
                api_pb2.ContainerResources(
                    name=long,
                    devices=[api_pb2.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[f"GPU-gone-{i}"])],
                )
            ],
        )
        for i in range(256)
    ]
    kubelet.answer = api_pb2.ListPodResourcesResponse(pod_resources=pods).SerializeToString()
    obs = run_pass(cluster, "gpu-h200-01", KubeletPodResources(str(kubelet.socket_path)))
    assert len(obs.unknown_devices) == 256 and not obs.truncated
    text = observedcodec.encode(obs)
    back = observedcodec.decode(text)
    assert len(text) <= observedcodec.MAX_OBSERVED_BYTES
    assert back.truncated and back.unknown_devices == () and not back.holders_known
    assert [len(g.instances) for g in back.gpus] == [len(g.instances) for g in obs.gpus]  # the layout stays
