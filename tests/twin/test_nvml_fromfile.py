"""The NVML twin across processes: a node's GPUs written as a file (snapshot), read back by the pynvml-shaped
module reconciler.twin.nvml.fromfile, which the agent's NVML adapter loads by name (PYNVML_MODULE).

The copy must answer the adapter exactly as the live NvmlTwin does (same layout, UUIDs, holders' processes),
read the node afresh at every nvmlInit, refuse MIG changes (they would never reach the twin), and fail like a
missing libnvidia-ml when its file is absent or not the twin's.
"""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pynvml
import pytest

from reconciler.adapters.nvml import NvmlGpu
from reconciler.catalog import load_catalog
from reconciler.logic.planning.agentplan import ObservedGpu
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import Placement
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.nvml import NvmlTwin
from reconciler.twin.nvml.export import NvmlExports
from reconciler.twin.nvml.snapshot import dump, load


def node_gpus() -> list[TwinGpu]:
    """An H100 node: GPU 0 cut 3g+2g+1g with two holders, GPU 1 MIG off and held whole, GPU 2 MIG on and empty."""
    gm = load_catalog().get("H100-80GB")
    assert gm is not None
    lock = threading.RLock()
    gpus = [
        TwinGpu(node="n1", index=i, model=gm, mig_enabled=i != 1, lock=lock, minor=(2 - i), pci_subsystem_id=0x16C110DE)
        for i in range(3)
    ]
    _, ci = gpus[0].add_partition("3g.40gb", 4)
    ci.holder = "team-a/train-0"
    _, ci = gpus[0].add_partition("2g.20gb", 0)
    ci.holder = "team-b/infer-0"
    gpus[0].add_partition("1g.10gb", 2)
    gpus[1].holder = "team-c/whole-0"
    return gpus


@pytest.fixture
def fromfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, Path]:
    path = tmp_path / "n1.json"
    monkeypatch.setenv("NVML_TWIN_FILE", str(path))
    return importlib.import_module("reconciler.twin.nvml.fromfile"), path


def survey(nvml: object) -> tuple[tuple[ObservedGpu, ...], tuple[str, ...]]:
    with NvmlGpu(nvml=nvml) as gpus:
        return gpus.survey()


def test_the_file_answers_the_adapter_as_the_live_twin_does(fromfile: tuple[ModuleType, Path]) -> None:
    module, path = fromfile
    gpus = node_gpus()
    path.write_bytes(dump("n1", gpus))
    live = survey(NvmlTwin(gpus))
    copied = survey(module)
    assert copied == live
    observed, problems = copied
    assert problems == ()
    assert [len(g.instances) for g in observed] == [3, 0, 0]
    assert {i.profile for i in observed[0].instances} == {"3g.40gb", "2g.20gb", "1g.10gb"}
    assert sum(len(i.processes) for i in observed[0].instances) == 2  # the two holders, as processes


def test_every_nvml_init_reads_the_node_afresh(fromfile: tuple[ModuleType, Path]) -> None:
    module, path = fromfile
    gpus = node_gpus()
    path.write_bytes(dump("n1", gpus))
    before, _ = survey(module)
    gpus[0].add_partition("1g.10gb", 3)
    path.write_bytes(dump("n1", gpus))
    after, _ = survey(module)
    assert len(before[0].instances) == 3 and len(after[0].instances) == 4


def test_a_mig_change_through_the_copy_is_refused_and_changes_nothing(fromfile: tuple[ModuleType, Path]) -> None:
    module, path = fromfile
    gpus = node_gpus()
    data = dump("n1", gpus)
    path.write_bytes(data)
    with NvmlGpu(nvml=module) as nvml, pytest.raises(MigplanError) as err:
        nvml.create_instance(2, profile="1g.10gb", placement=Placement(start=0, size=1))
    assert err.value.code == "NVML_ERROR_NO_PERMISSION"
    assert path.read_bytes() == data


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "No such file"),
        (b"", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[]", "not a migplan-twin-nvml/v1 document"),
        (b'{"format": "migplan-twin-nvml/v1", "node": "", "gpus": []}', "node"),
        (b'{"format": "migplan-twin-nvml/v1", "node": "n1", "gpus": {}}', "gpus"),
    ],
)
def test_a_missing_or_foreign_file_fails_like_a_missing_library(
    fromfile: tuple[ModuleType, Path], content: bytes | None, why: str
) -> None:
    module, path = fromfile
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(pynvml.NVMLError_LibraryNotFound) as err:
        module.nvmlInit()
    assert str(path) in str(err.value) and why in str(err.value)
    with pytest.raises(pynvml.NVMLError_Uninitialized):  # nothing was opened
        module.nvmlDeviceGetCount()


def test_without_the_file_variable_it_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module("reconciler.twin.nvml.fromfile")
    monkeypatch.delenv("NVML_TWIN_FILE", raising=False)
    with pytest.raises(pynvml.NVMLError_LibraryNotFound, match="NVML_TWIN_FILE is not set"):
        module.nvmlInit()


def _doc() -> dict[str, object]:
    doc = json.loads(dump("n1", node_gpus()))
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        (("gpus", 0, "model"), "H999", "not a GPU model"),
        (("gpus", 0, "index"), True, "index"),
        (("gpus", 0, "index"), -1, "index"),
        (("gpus", 0, "index"), 2**40, "index"),
        (("gpus", 0, "migCurrent"), 1, "migCurrent"),
        (("gpus", 0, "holder"), 7, "holder"),
        (("gpus", 0, "gpuInstances", 0, "profileEnum"), 999, "not a profile"),
        (("gpus", 0, "gpuInstances", 0, "computeInstances", 0, "uuidSeed"), None, "uuidSeed"),
        (("gpus", 0, "gpuInstances", 0, "computeInstances"), "x", "computeInstances"),
    ],
)
def test_load_names_what_is_wrong(path: tuple[object, ...], value: object, why: str) -> None:
    doc = _doc()
    target: object = doc
    for key in path[:-1]:
        target = target[key]  # type: ignore[index]
    target[path[-1]] = value  # type: ignore[index]
    with pytest.raises(ValueError, match=why):
        load(json.dumps(doc).encode())


def test_load_round_trips_dump() -> None:
    gpus = node_gpus()
    node, copy = load(dump("n1", gpus))
    assert node == "n1"
    assert dump("n1", copy) == dump("n1", gpus)


def test_exports_rewrite_a_node_only_when_it_changed(tmp_path: Path) -> None:
    gpus = node_gpus()
    twin = SimpleNamespace(fleet=SimpleNamespace(nodes={"n1": SimpleNamespace(gpus=gpus, lock=gpus[0].lock)}))
    exports = NvmlExports(twin, ["n1"], tmp_path)
    assert exports.refresh() == 1
    assert exports.refresh() == 0
    gpus[2].add_partition("7g.80gb", 0)
    assert exports.refresh() == 1
    _, copy = load(exports.path("n1").read_bytes())
    assert [len(g.gpu_instances) for g in copy] == [3, 0, 1]
    assert list(tmp_path.iterdir()) == [exports.path("n1")]  # no temporary file left behind


@pytest.mark.parametrize("node", ["../escape", "/etc/passwd", ".hidden", "a/b", "x" * 300])
def test_a_node_name_never_picks_where_its_file_goes(tmp_path: Path, node: str) -> None:
    exports = NvmlExports(SimpleNamespace(), [], tmp_path / "nvml")
    path = exports.path(node)
    assert path.parent == tmp_path / "nvml" and path.name.startswith("node-") and path.name.endswith(".json")
    assert NvmlExports(SimpleNamespace(), [], tmp_path).path("gpu-h200-01").name == "gpu-h200-01.json"
