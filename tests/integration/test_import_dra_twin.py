"""`migplan import` of a DRA cluster on the twin (issue 30 item 4): the ResourceSlices of NVIDIA's DRA driver twin
are the source. Static MIG round-trips (import, validate clean, a dry run that re-cuts nothing and finds no DRA
drift); a DynamicMIG node is written with `layoutWriter: dra-dynamic-mig` and no partitions; hostile slices leave
their node out with a finding naming the device, and the other nodes are still written.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.logic.planning import desiredcodec
from reconciler.model.plans import Action, Kind
from reconciler.resources import inventory_dir
from reconciler.twin.cluster import ClusterTwin

REPO = Path(__file__).parents[2]
H200 = "gpu-h200-01"
SLICES = "resourceslices.resource.k8s.io"
DRA_FINDINGS = {"MP570", "MP571", "MP572", "MP573", "MP574"}


def _migplan(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, env=env, timeout=180
    )


def _instances(twin: ClusterTwin) -> dict[tuple[str, int], Any]:
    out: dict[tuple[str, int], Any] = {}
    for name in twin.fleet.nodes:
        for g in twin.gpus(name):
            out[(name, g.index)] = sorted((gi.profile.name, gi.start) for gi in g.gpu_instances.values())
    return out


def _import(twin: ClusterTwin, out: Path) -> tuple[int, dict[str, Any]]:
    done = _migplan("import", "--kubeconfig", str(twin.kubeconfig), "--out", str(out), "-o", "json")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.returncode, json.loads(done.stdout)


def _dry_run(twin: ClusterTwin, root: Path) -> CycleResult:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, dry_run=True)
    finally:
        cluster.close()


@pytest.fixture
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(inventory_dir(), tls=False) as tw:
        tw.settle()
        yield tw


def _node_file(out: Path, name: str) -> dict[str, Any]:
    doc = yaml.safe_load((out / "nodes" / f"{name}.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def test_static_mig_slices_round_trip_import_validate_and_a_dry_run_that_re_cuts_nothing(
    twin: ClusterTwin, tmp_path: Path
) -> None:
    for name in twin.fleet.nodes:
        twin.dra_driver(name).start_plugin()
    before = _instances(twin)
    out = tmp_path / "adopted"
    code, doc = _import(twin, out)
    assert code == 0 and doc["valid"] and doc["problems"] == [], doc
    gpus = sum(len(twin.gpus(n)) for n in twin.fleet.nodes)
    assert doc["gpus_by_source"] == {"dra-slices": gpus}  # every GPU from the slices, none from mig-parted or counts
    node = _node_file(out, "gpu-h100-01")
    gpu0 = node["spec"]["gpus"][0]
    published = sorted((gi.profile.name, gi.start) for gi in twin.gpus("gpu-h100-01")[0].gpu_instances.values())
    assert sorted((p["profile"], p["placement"]) for p in gpu0["mig"]["partitions"]) == published  # placements too
    assert "layoutWriter" not in node["spec"]

    validated = _migplan("validate", str(out))
    assert validated.returncode == 0, validated.stdout + validated.stderr

    dry = _dry_run(twin, out)
    assert dry.plan is not None and not dry.errors
    kinds = {c.kind for c in dry.plan.writes}
    # relabels at most; a DRA-static node's layout is published for migplan's node agent instead (issue 30): the
    # layout NVML shows already, which the agent finds built (nothing re-cut); and the DeviceClasses of the plan's
    # profiles are created (new objects, nothing re-cut: issue 30 item 2)
    allowed = {Kind.MIG_CONFIG_MAP, Kind.CLUSTER_POLICY, Kind.NODE_MIG_CONFIG, Kind.AGENT_LAYOUT, Kind.DEVICE_CLASS}
    assert kinds <= allowed, kinds
    assert all(c.action is Action.CREATE for c in dry.plan.writes if c.kind is Kind.DEVICE_CLASS)
    for c in dry.plan.writes:
        if c.kind is Kind.AGENT_LAYOUT:
            name = c.subject.removeprefix("node/")
            assert c.patch is not None
            layout = desiredcodec.decode(name, c.patch["metadata"]["annotations"][desiredcodec.ANNOTATION])
            for g in layout.gpus:
                built = sorted((gi.profile.name, gi.start) for gi in twin.gpus(name)[g.index].gpu_instances.values())
                assert sorted((p.profile, p.placement.start) for p in g.partitions) == built, (name, g.index)
    assert all(not c.blocked_by for c in dry.plan.changes)
    assert dry.report is not None
    dra = [(n.name, f.code) for n in dry.report.nodes for f in n.findings if f.code in DRA_FINDINGS]
    assert dra == []  # the plan publishes exactly the devices the slices show, name for name
    assert _instances(twin) == before


def test_a_dynamic_mig_node_is_imported_with_its_writer_and_no_partitions(twin: ClusterTwin, tmp_path: Path) -> None:
    twin.dra_driver(H200, dynamic_mig=True).start_plugin()
    twin.dra_driver("gpu-h100-01").start_plugin()
    out = tmp_path / "adopted"
    code, doc = _import(twin, out)
    assert code == 0 and doc["valid"] and doc["problems"] == [], doc
    node = _node_file(out, H200)
    assert node["spec"]["layoutWriter"] == "dra-dynamic-mig"
    assert [g["mig"] for g in node["spec"]["gpus"]] == [{"enabled": False}] * len(twin.gpus(H200))
    assert "layoutWriter" not in _node_file(out, "gpu-h100-01")["spec"]
    assert _migplan("validate", str(out)).returncode == 0
    before = _instances(twin)
    dry = _dry_run(twin, out)
    assert dry.plan is not None and not dry.errors
    assert not [c for c in dry.plan.writes if c.subject == f"node/{H200}"]  # nothing planned on the driver's node
    assert _instances(twin) == before


def _hostile(node: str, devices: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 99, "resourceSliceCount": 2},
            "devices": devices,
        },
    }


def _mig(name: str, profile: str, parent: str = "PARENT", product: str = "NVIDIA H200") -> dict[str, Any]:
    attrs = {"type": "mig", "profile": profile, "parentUUID": parent, "productName": product}
    return {"name": name, "attributes": {k: {"string": v} for k, v in attrs.items()}}


@pytest.mark.parametrize(
    ("devices", "code", "says"),
    [
        ([_mig("gpu-0-mig-bogus", "1g.18gb")], "MP958", "gpu-0-mig-bogus"),
        ([_mig("gpu-7-mig-1g18gb-19-6", "1g.18gb")], "MP961", "minor 7"),
        ([_mig("gpu-0-mig-1g18gb-19-6", "3g.71gb")], "MP959", "gpu-0-mig-1g18gb-19-6"),
        ([_mig("gpu-0-mig-1g18gb-15-6", "1g.18gb")], "MP959", "GI profile id 15"),
    ],
    ids=["unparsable-name", "gpu-not-listed", "profile-contradicts-name", "wrong-profile-id"],
)
def test_hostile_slices_leave_their_node_out_with_a_finding(
    twin: ClusterTwin, tmp_path: Path, devices: list[dict[str, Any]], code: str, says: str
) -> None:
    for name in twin.fleet.nodes:
        twin.dra_driver(name).start_plugin()
    devices = copy.deepcopy(devices)
    for d in devices:  # on GPU 0's own parent, so only what the case is about is wrong
        if d["attributes"]["parentUUID"]["string"] == "PARENT":
            d["attributes"]["parentUUID"] = {"string": twin.gpus(H200)[0].uuid}
    twin.store.create(SLICES, _hostile(H200, devices, "hostile"))
    out = tmp_path / "adopted"
    rc, doc = _import(twin, out)
    assert rc == 1  # written with problems: the other nodes are there, this one is not
    assert H200 not in doc["nodes"] and not (out / "nodes" / f"{H200}.yaml").exists()
    assert "gpu-h100-01" in doc["nodes"]
    found = [p for p in doc["problems"] if p["node"] == H200]
    assert [p["code"] for p in found] == [code], found
    assert says in found[0]["message"] and "not imported" in found[0]["message"]


def test_a_device_published_twice_leaves_its_node_out(twin: ClusterTwin, tmp_path: Path) -> None:
    twin.dra_driver(H200).start_plugin()
    (published,) = twin.store.list(SLICES, field_selector=f"spec.nodeName={H200}")
    first = published["spec"]["devices"][0]
    twin.store.create(SLICES, _hostile(H200, [first], "again"))  # the API takes it: names are unique per slice only
    out = tmp_path / "adopted"
    rc, doc = _import(twin, out)
    assert rc == 1 and H200 not in doc["nodes"]
    (problem,) = [p for p in doc["problems"] if p["node"] == H200]
    assert problem["code"] == "MP960" and first["name"] in problem["message"]
