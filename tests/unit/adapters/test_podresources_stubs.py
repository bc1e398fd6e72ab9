"""The PodResources v1 stubs: exactly what the pinned generator makes from our proto, on the kubelet's wire contract.

The proto is our own (reconciler/kubeletapi/podresources/v1/README.md); what must not drift is the wire
contract it shares with the kubelet's published API: package, service, methods, and every field's name, number
and type. WIRE below states those facts (Kubernetes, staging/src/k8s.io/kubelet/pkg/apis/podresources/v1), and
a kubelet answer carrying the fields we left out (CPU ids, memory, NUMA topology) must still decode.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from google.protobuf.descriptor import FieldDescriptor
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[3]
PROTO = Path("reconciler/kubeletapi/podresources/v1/api.proto")
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")

_STR, _MSG = FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_MESSAGE
# message -> {field name: (number, type, repeated)}, as the kubelet's v1 API numbers them
WIRE: dict[str, dict[str, tuple[int, int, bool]]] = {
    "ListPodResourcesRequest": {},
    "ListPodResourcesResponse": {"pod_resources": (1, _MSG, True)},
    "AllocatableResourcesRequest": {},
    "AllocatableResourcesResponse": {"devices": (1, _MSG, True)},
    "GetPodResourcesRequest": {"pod_name": (1, _STR, False), "pod_namespace": (2, _STR, False)},
    "GetPodResourcesResponse": {"pod_resources": (1, _MSG, False)},
    "PodResources": {"name": (1, _STR, False), "namespace": (2, _STR, False), "containers": (3, _MSG, True)},
    "ContainerResources": {
        "name": (1, _STR, False),
        "devices": (2, _MSG, True),
        "dynamic_resources": (5, _MSG, True),
    },
    "ContainerDevices": {"resource_name": (1, _STR, False), "device_ids": (2, _STR, True)},
    "DynamicResource": {
        "claim_name": (2, _STR, False),
        "claim_namespace": (3, _STR, False),
        "claim_resources": (4, _MSG, True),
    },
    "ClaimResource": {
        "cdi_devices": (1, _MSG, True),
        "driver_name": (2, _STR, False),
        "pool_name": (3, _STR, False),
        "device_name": (4, _STR, False),
    },
    "CDIDevice": {"name": (1, _STR, False)},
}


def test_regenerating_the_stubs_gives_the_committed_files(tmp_path: Path) -> None:
    (tmp_path / PROTO.parent).mkdir(parents=True)
    shutil.copyfile(ROOT / PROTO, tmp_path / PROTO)
    args = ["protoc", f"-I{tmp_path}", f"--python_out={tmp_path}", f"--pyi_out={tmp_path}"]
    args += [f"--grpc_python_out={tmp_path}", str(tmp_path / PROTO)]
    assert protoc.main(args) == 0
    for name in GENERATED:
        fresh = (tmp_path / PROTO.parent / name).read_text()
        committed = (ROOT / PROTO.parent / name).read_text()
        assert fresh == committed, f"{name} differs from what {PROTO} generates: regenerate (README.md beside it)"


def test_the_service_is_the_kubelets() -> None:
    from reconciler.kubeletapi.podresources.v1 import api_pb2

    assert api_pb2.DESCRIPTOR.package == "v1"
    service = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"
    methods = {m.name: (m.input_type.name, m.output_type.name) for m in service.methods}
    assert methods == {
        "List": ("ListPodResourcesRequest", "ListPodResourcesResponse"),
        "GetAllocatableResources": ("AllocatableResourcesRequest", "AllocatableResourcesResponse"),
        "Get": ("GetPodResourcesRequest", "GetPodResourcesResponse"),
    }


def test_every_field_keeps_the_kubelets_name_number_and_type() -> None:
    from reconciler.kubeletapi.podresources.v1 import api_pb2

    messages = api_pb2.DESCRIPTOR.message_types_by_name
    assert set(messages) == set(WIRE)
    for message, fields in WIRE.items():
        got = {f.name: (f.number, f.type, f.is_repeated) for f in messages[message].fields}
        assert got == fields, message


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes | str | int) -> bytes:
    """One protobuf field: a varint for ints, length-delimited for bytes and text."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def test_a_full_kubelet_answer_decodes_and_the_fields_left_out_are_skipped() -> None:
    """The kubelet also sends CPU ids (3), memory (4) and NUMA topology (3 of ContainerDevices), which our proto
    leaves out: they must be skipped, never shift or spoil the fields migplan reads."""
    from reconciler.kubeletapi.podresources.v1 import api_pb2

    numa = _field(1, _field(1, 1))  # TopologyInfo{nodes: [NUMANode{ID: 1}]}
    devices = _field(1, "nvidia.com/mig-3g.71gb") + _field(2, "MIG-0a1b") + _field(3, numa)
    claim = _field(1, _field(1, "nvidia.com/gpu=mig-0")) + _field(2, "gpu.nvidia.com") + _field(3, "node-a")
    claim += _field(4, "gpu-0-mig-3g")
    dynamic = _field(2, "train-gpu") + _field(3, "team-a") + _field(4, claim)
    memory = _field(1, "memory") + _field(2, 1 << 33)
    container = _field(1, "trainer") + _field(2, devices) + _field(3, _varint(2) + _varint(3))
    container += _field(4, memory) + _field(5, dynamic)
    pod = _field(1, "train-0") + _field(2, "team-a") + _field(3, container)
    answer = api_pb2.ListPodResourcesResponse.FromString(_field(1, pod))

    (got,) = answer.pod_resources
    assert (got.name, got.namespace) == ("train-0", "team-a")
    (c,) = got.containers
    assert c.name == "trainer"
    assert [(d.resource_name, list(d.device_ids)) for d in c.devices] == [("nvidia.com/mig-3g.71gb", ["MIG-0a1b"])]
    (d,) = c.dynamic_resources
    assert (d.claim_name, d.claim_namespace) == ("train-gpu", "team-a")
    (r,) = d.claim_resources
    assert (r.driver_name, r.pool_name, r.device_name) == ("gpu.nvidia.com", "node-a", "gpu-0-mig-3g")
    assert [x.name for x in r.cdi_devices] == ["nvidia.com/gpu=mig-0"]
