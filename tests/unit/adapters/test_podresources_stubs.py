"""The committed PodResources v1 stubs are exactly what the pinned generator makes from the vendored proto."""

from __future__ import annotations

import shutil
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[3]
PROTO = Path("reconciler/kubeletapi/podresources/v1/api.proto")
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")


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

    service = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"
    assert {m.name for m in service.methods} == {"List", "GetAllocatableResources", "Get"}
