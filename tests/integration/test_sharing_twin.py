"""A node whose device-plugin config shares its MIG devices (time-slicing) is not "changed by hand" (issue 26).

The twin's device plugin advertises replicas from the config file it mounts (reconciler/twin/operator/sharing.py,
from NVIDIA's source); migplan folds the same config into what it expects (reconciler/logic/codecs/dpsharing.py,
from the same source, written apart). Over five cycles with allowDisruption: true, migplan writes no `-reapply`
label and evicts nothing, and its report says the node shares its partitions (MP561). Without the fold the node is
MP501 from the first cycle and, once its plugin has been Ready for PLUGIN_SETTLE, relabelled to its `-reapply`
config, then back, in a loop.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
NODE = "gpu-h200-01"  # the article's mixed node: 2 x (3g.71gb + 2g.35gb + 2 x 1g.18gb)
NS = "gpu-operator"
CP = "clusterpolicies.nvidia.com"
SHARING_CM = "plugin-sharing"
TIME_SLICING_4 = """version: v1
sharing:
  timeSlicing:
    resources:
      - {name: nvidia.com/mig-1g.18gb, replicas: 4}
      - {name: mig-2g.35gb, replicas: 4}
      - {name: nvidia.com/mig-3g.71gb, replicas: 4, rename: ignored-by-the-plugin}
"""
RENAME_BY_DEFAULT = """version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
      - {name: nvidia.com/mig-1g.18gb, replicas: 2}
"""


def _desired(root: Path) -> DesiredState:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


def _inventory(tmp_path: Path) -> Path:
    root = tmp_path / "inventory"
    shutil.copytree(INVENTORY, root)
    cluster = root / "cluster.yaml"
    cluster.write_text(
        cluster.read_text().replace(
            "allowDisruption: false",
            "allowDisruption: true\n    configPropagationSeconds: 0  # the twin projects at once",
        )
    )
    return root


def _share(twin: ClusterTwin, entry: str, text: str) -> None:
    """The ClusterPolicy points the device plugin at a ConfigMap whose entry `entry` (selected on NODE by its label)
    shares devices; the other nodes get the ConfigMap's `default` entry, which shares nothing."""
    twin.store.create(
        "configmaps",
        {"metadata": {"name": SHARING_CM}, "data": {"default": "version: v1\n", entry: text}},
        NS,
    )
    twin.store.patch("nodes", NODE, {"metadata": {"labels": {"nvidia.com/device-plugin.config": entry}}})
    twin.store.patch(
        CP, "cluster-policy", {"spec": {"devicePlugin": {"config": {"name": SHARING_CM, "default": "default"}}}}
    )


def _evictable_workload(twin: ClusterTwin, resource: str) -> None:
    """NODE's bare pods (which a drain leaves alone) give way to two pods of a ReplicaSet, each asking one `resource`
    (a replica of a shared partition): what a drain would evict, had migplan called the node changed by hand."""
    for pod in twin.store.list("pods", "default"):
        if pod["spec"].get("nodeName") == NODE:
            twin.store.delete("pods", pod["metadata"]["name"], "default", grace_period_seconds=0)
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "notebook-5d", "uid": "rs-1", "controller": True}
    for i in range(2):
        container = {"name": "main", "image": "registry.example/nb:1", "resources": {"limits": {resource: "1"}}}
        meta = {"name": f"notebook-{i}", "labels": {"app": "notebook"}, "ownerReferences": [owner]}
        twin.store.create("pods", {"metadata": meta, "spec": {"nodeName": NODE, "containers": [container]}}, "default")
    twin.settle()
    phases = [twin.store.get("pods", f"notebook-{i}", "default")["status"].get("phase") for i in range(2)]
    assert phases == ["Running", "Running"]


def _soak(twin: ClusterTwin, desired: DesiredState, cycles: int) -> list[CycleResult]:
    t0 = datetime.now(UTC)  # the twin stamps pods Ready on the real clock: its plugins are settled minutes on
    out = []
    for i in range(cycles):
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
        try:
            out.append(reconcile_once(desired=desired, cluster=cluster, now=t0 + timedelta(minutes=i)))
        finally:
            cluster.close()
        twin.settle()
    return out


def _labels_written(results: list[CycleResult]) -> list[list[str]]:
    """Per cycle, the nvidia.com/mig.config values migplan wrote on nodes."""
    return [
        [str((c.after or {}).get("nvidia.com/mig.config")) for c in r.applied if c.kind is Kind.NODE_MIG_CONFIG]
        for r in results
    ]


@pytest.mark.parametrize(
    ("entry", "text", "expected", "asked"),
    [
        (
            "ts4",
            TIME_SLICING_4,
            {"nvidia.com/mig-1g.18gb": "16", "nvidia.com/mig-2g.35gb": "8", "nvidia.com/mig-3g.71gb": "8"},
            "nvidia.com/mig-1g.18gb",
        ),
        (
            "rename",
            RENAME_BY_DEFAULT,
            {"nvidia.com/mig-1g.18gb.shared": "8", "nvidia.com/mig-1g.18gb": "0", "nvidia.com/mig-2g.35gb": "2"},
            "nvidia.com/mig-1g.18gb.shared",
        ),
    ],
)
def test_a_node_sharing_its_partitions_is_never_reapplied_nor_drained(
    tmp_path: Path, entry: str, text: str, expected: dict[str, str], asked: str
) -> None:
    desired = _desired(_inventory(tmp_path))
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        converge = _soak(twin, desired, 4)  # adoption: migplan's config names, then the relabels
        assert converge[-1].converged, [str(f) for f in converge[-1].report.findings]  # type: ignore[union-attr]
        _share(twin, entry, text)
        twin.settle()
        allocatable = twin.store.get("nodes", NODE)["status"]["allocatable"]
        assert {k: allocatable.get(k, "0") for k in expected} == expected  # the twin's plugin shares them
        _evictable_workload(twin, asked)
        labels_before = dict(twin.store.get("nodes", NODE)["metadata"]["labels"])

        results = _soak(twin, desired, 5)

        written = _labels_written(results)
        print(f"sharing soak ({entry}): labels written per cycle {[len(w) for w in written]}")
        assert not any("-reapply" in v for w in written for v in w), written
        assert written == [[]] * 5
        evictions = [c for r in results for c in r.applied if c.kind is Kind.EVICT]
        print(f"sharing soak ({entry}): evictions {len(evictions)}")
        assert evictions == []
        node = twin.store.get("nodes", NODE)
        assert node["metadata"]["labels"]["nvidia.com/mig.config"] == labels_before["nvidia.com/mig.config"]
        assert not node["spec"].get("unschedulable")
        for r in results:
            assert r.report is not None and not r.errors
            codes = {f.code for f in r.report.findings if f.node == NODE}
            assert "MP501" not in codes, [str(f) for f in r.report.findings if f.node == NODE]
            (shares,) = [f for f in r.report.findings if f.node == NODE and f.code == "MP561"]
            assert "shares its partitions" in shares.message
        assert results[-1].converged, "\n".join(str(f) for f in results[-1].report.findings if f.severity != "info")  # type: ignore[union-attr]


def test_an_unreadable_sharing_config_is_reported_and_never_reapplied(tmp_path: Path) -> None:
    """A config entry the plugin cannot load: its counts say nothing (MP562); no re-apply, no drain."""
    desired = _desired(_inventory(tmp_path))
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        _soak(twin, desired, 4)
        _share(twin, "broken", "version: v1\nsharing:\n  timeSlicing:\n    resources: []\n")
        twin.settle()
        results = _soak(twin, desired, 3)
        assert _labels_written(results) == [[]] * 3
        assert not [c for r in results for c in r.applied if c.kind is Kind.EVICT]
        codes = {f.code for f in results[-1].report.findings if f.node == NODE}  # type: ignore[union-attr]
        assert "MP562" in codes and "MP501" not in codes


NOTEBOOKS = """apiVersion: apps/v1
kind: Deployment
metadata: {name: nb, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: nb}}
  template:
    metadata: {labels: {app: nb}}
    spec:
      containers:
        - name: main
          image: registry.example/nb:1
          resources: {limits: {nvidia.com/mig-1g.18gb.shared: 1}}
"""


def test_check_workloads_judges_a_shared_name_against_the_plan_folded_through_the_clusters_config(
    tmp_path: Path,
) -> None:
    """`check-workloads --kubeconfig` offers a sharing node's replicas under the advertised name: 6 pods asking
    `nvidia.com/mig-1g.18gb.shared` fit the article node's 4 x 1g.18gb shared 2 ways (8); without the cluster the
    plan alone cannot say, and the error says so."""
    root = _inventory(tmp_path)
    manifest = tmp_path / "nb.yaml"
    manifest.write_text(NOTEBOOKS)
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        _share(twin, "rename", RENAME_BY_DEFAULT)
        twin.settle()
        base = [sys.executable, "-m", "reconciler", "check-workloads", str(manifest), "--inventory", str(root)]
        live = subprocess.run(
            [*base, "--kubeconfig", str(twin.kubeconfig), "-o", "json"], capture_output=True, text=True
        )
        offline = subprocess.run(base, capture_output=True, text=True)
    out = json.loads(live.stdout)
    assert live.returncode == 0, live.stdout + live.stderr
    assert not out["errors"], out
    (summary,) = out["workloads"]
    assert summary["planFits"] == 8
    assert offline.returncode == 1
    assert "MP606" in offline.stdout and "shares 1g.18gb with renameByDefault" in offline.stdout
