"""`migplan import` round trip on the cluster twin (issue 14): import -> validate valid -> dry run plans no
partition created, destroyed or moved -> one real cycle leaves every GPU instance where it was -> InSync with
zero writes on the next cycle. For the example fleet (with an observer's annotation on one node) and for a
randomly cut synthetic fleet. Plus --merge / --force and the exit codes, through real `migplan` processes.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers.twinclock import TwinClock
from kubernetes import client

from reconciler.adapters.kube.agentmode import KubeNodeState
from reconciler.adapters.kube.client import kube_configuration
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.agent import report_once
from reconciler.catalog import load_catalog
from reconciler.commands.reconcile import load_desired
from reconciler.engine import reconcile_once
from reconciler.logic.inventory.placement import Request, solve
from reconciler.model.cycles import EXIT_IN_SYNC
from reconciler.model.plans import Action, Kind
from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.fleet import ClusterSettings, Fleet, GpuSeed, PartitionSeed

INVENTORY = Path(__file__).parents[2] / "inventory"
REPO = Path(__file__).parents[2]


def _migplan(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, env=env, timeout=180
    )


def _instances(twin: ClusterTwin) -> dict[tuple[str, int], Any]:
    """Every GPU's MIG mode and instances (GI id, profile, start), and who holds each: what must not move."""
    out: dict[tuple[str, int], Any] = {}
    for name, node in twin.fleet.nodes.items():
        with node.lock:
            for g in node.gpus:
                devs = sorted((d.gi_id, d.profile, d.start, d.size, d.holder) for d in g.mig_devices())
                out[(name, g.index)] = (g.mig_current, devs)
    return out


CLOCK = TwinClock()  # each cycle one configPropagationSeconds after the last


def _cycle(twin: ClusterTwin, root: Path, *, dry_run: bool) -> Any:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, dry_run=dry_run, now=CLOCK.cycle_now())
    finally:
        cluster.close()


def _round_trip(twin: ClusterTwin, out: Path) -> dict[str, Any]:
    twin.settle()
    before = _instances(twin)
    imported = _migplan("import", "--kubeconfig", str(twin.kubeconfig), "--out", str(out), "-o", "json")
    assert imported.returncode == 0, imported.stdout + imported.stderr
    doc = json.loads(imported.stdout)
    assert doc["valid"] and doc["problems"] == []

    validated = _migplan("validate", str(out))
    assert validated.returncode == 0, validated.stdout + validated.stderr

    dry = _cycle(twin, out, dry_run=True)
    assert dry.plan is not None and not dry.errors
    kinds = {c.kind for c in dry.plan.writes}
    # relabel-only at most: the ConfigMap gets migplan's names, the ClusterPolicy points at it, nodes relabelled
    assert kinds <= {Kind.MIG_CONFIG_MAP, Kind.CLUSTER_POLICY, Kind.NODE_MIG_CONFIG}, kinds
    # nothing held but for the ConfigMap to reach mig-manager (configPropagationSeconds): nothing would be destroyed
    assert all("mig-manager reads its mounted copy" in c.reason for c in dry.plan.skipped), [
        str(c) for c in dry.plan.skipped
    ]
    assert all(not c.blocked_by for c in dry.plan.changes)
    assert _instances(twin) == before

    real = _cycle(twin, out, dry_run=False)
    assert not real.errors, real.errors
    twin.settle()
    relabels = _cycle(twin, out, dry_run=False)  # one propagation delay later: the relabels
    assert not relabels.errors, relabels.errors
    twin.settle()
    assert _instances(twin) == before  # no partition created, destroyed or moved, every holder still holds it
    for name in twin.fleet.nodes:
        assert twin.store.get("nodes", name)["metadata"]["labels"].get("nvidia.com/mig.config.state") == "success"

    twin.reset_counts()
    again = _cycle(twin, out, dry_run=False)
    assert again.converged and again.status.exit_code == EXIT_IN_SYNC, [str(f) for f in again.report.findings]  # type: ignore[union-attr]
    writes = {k: v for k, v in twin.request_counts().items() if k[2] not in ("list", "get", "watch")}
    assert writes == {}
    return dict(doc)


def test_example_fleet_round_trip_with_an_observer_on_one_node(tmp_path: Path) -> None:
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        core: Any = client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))
        with NvmlGpu(nvml=twin.nvml("gpu-h200-01")) as gpus:
            # the whole observer: NVML and the node's kubelet (PodResources), so the controller trusts its holders too
            kubelet = KubeletPodResources(str(twin.pod_resources_socket("gpu-h200-01")), timeout_seconds=5)
            report_once(gpus=gpus, node_state=KubeNodeState(core), node="gpu-h200-01", holders=kubelet)
        out = tmp_path / "adopted"
        doc = _round_trip(twin, out)
    assert sorted(doc["nodes"]) == sorted(p.stem for p in (INVENTORY / "nodes").glob("*.yaml"))
    assert doc["gpus_by_source"] == {"mig-parted": 6, "observed": 2}
    h200 = (out / "nodes" / "gpu-h200-01.yaml").read_text()
    assert "observed layout (annotation migplan.io/mig-observed)" in h200
    # the observer's exact placements (the 3g.71gb at slice 4), in a layout both GPUs share
    layout = h200.split("layout: ", 1)[1].split()[0]
    assert "{profile: 3g.71gb, placement: 4}" in (out / "layouts" / f"{layout}.yaml").read_text()
    assert "# Owners suggested" in h200 and "vllm-llama-70b (pod default/" in h200
    assert "owner:" not in h200.replace("`owner:`", "")  # suggestions only, never applied
    a100 = (out / "nodes" / "gpu-a100-01.yaml").read_text()
    assert "mig-parted config" in a100 and "layout: a100-40gb-" in a100  # two GPUs share a cut: a layout
    assert (out / "cluster.yaml").read_text().count("migStrategy: mixed") == 1


def _random_fleet(seed: int, nodes: int) -> Fleet:
    rng = random.Random(seed)
    catalog = load_catalog()
    models = [catalog.get(k) for k in ("H200-141GB", "H100-80GB", "A100-40GB", "A30-24GB")]
    fleet = Fleet(ClusterSettings(name="random", mig_strategy="mixed"))
    for n in range(nodes):
        model = rng.choice(models)
        assert model is not None
        seeds = []
        for i in range(rng.randint(1, 4)):
            parts: list[str] = []
            if rng.random() < 0.8:
                for _ in range(12):
                    profile = rng.choice([p for p in model.profiles if "+me" not in p])
                    if solve(model, [Request(p) for p in (*parts, profile)]) is not None:
                        parts.append(profile)
            owners = [f"team-{rng.randint(0, 5)}" if rng.random() < 0.4 else None for _ in parts]
            seeds.append(
                GpuSeed(
                    i, model, bool(parts), tuple(PartitionSeed(p, None, o) for p, o in zip(parts, owners, strict=True))
                )
            )
        fleet.add_node(f"rand-{seed}-{n:03d}", seeds)
    return fleet


def test_randomly_cut_synthetic_fleet_round_trip(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(1 << 30)
    with ClusterTwin(_random_fleet(seed, 12)) as twin:
        doc = _round_trip(twin, tmp_path / f"adopted-{seed}")
    assert len(doc["nodes"]) == 12, seed


def test_existing_inventory_is_kept_unless_merge_or_force(tmp_path: Path) -> None:
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        kc = str(twin.kubeconfig)
        out = tmp_path / "inv"
        first = _migplan("import", "--kubeconfig", kc, "--out", str(out), "--node", "gpu-h100-01")
        assert first.returncode == 0, first.stderr
        assert sorted(p.name for p in (out / "nodes").iterdir()) == ["gpu-h100-01.yaml"]
        (out / "nodes" / "gpu-h100-01.yaml").write_text((out / "nodes" / "gpu-h100-01.yaml").read_text() + "# mine\n")

        refused = _migplan("import", "--kubeconfig", kc, "--out", str(out))
        assert refused.returncode == 2 and "MP581" in refused.stderr and "Traceback" not in refused.stderr

        merged = _migplan("import", "--kubeconfig", kc, "--out", str(out), "--merge")
        assert merged.returncode == 0, merged.stdout + merged.stderr
        assert (out / "nodes" / "gpu-h100-01.yaml").read_text().endswith("# mine\n")  # untouched
        assert len(list((out / "nodes").iterdir())) == 4

        forced = _migplan("import", "--kubeconfig", kc, "--out", str(out), "--force", "--node", "gpu-a100-01")
        assert forced.returncode == 0, forced.stderr
        assert sorted(p.name for p in (out / "nodes").iterdir()) == ["gpu-a100-01.yaml"]

        both = _migplan("import", "--kubeconfig", kc, "--out", str(out), "--force", "--merge")
        assert both.returncode == 2 and "Traceback" not in both.stderr


def test_dry_run_would_only_relabel(tmp_path: Path) -> None:
    """The example fleet, imported: the dry run's node changes only set nvidia.com/mig.config to migplan's name."""
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        out = tmp_path / "inv"
        assert _migplan("import", "--kubeconfig", str(twin.kubeconfig), "--out", str(out)).returncode == 0
        dry = _cycle(twin, out, dry_run=True)
        assert dry.plan is not None
        for change in dry.plan.writes:
            if change.kind is Kind.NODE_MIG_CONFIG:
                assert change.action is Action.CONFIGURE
                assert set((change.patch or {}).get("metadata", {}).get("labels", {})) <= {"nvidia.com/mig.config"}


# our own ConfigMap in the shape of the GPU Operator's default-mig-parted-config (tests/fixtures/migparted/accepted)
OPERATOR_STYLE_DEFAULT = REPO / "tests" / "fixtures" / "migparted" / "accepted" / "operator-configmap.yaml"


def test_a_node_on_an_operator_style_default_config(tmp_path: Path) -> None:
    """A cluster run by hand on a default-mig-parted-config shaped like the operator's: the ClusterPolicy points at
    it and a node carries `nvidia.com/mig.config=all-balanced`; the device filter is resolved against the node's GFD
    product."""
    import yaml

    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        api = client.ApiClient(kube_configuration(str(twin.kubeconfig)))
        core: Any = client.CoreV1Api(api)
        custom: Any = client.CustomObjectsApi(api)
        cm = yaml.safe_load(OPERATOR_STYLE_DEFAULT.read_text())
        body = {"metadata": {"name": "default-mig-parted-config"}, "data": cm["data"]}
        core.create_namespaced_config_map("gpu-operator", body)
        custom.patch_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", "cluster-policy",
            {"spec": {"migManager": {"config": {"name": "default-mig-parted-config"}}}},
        )  # fmt: skip
        core.patch_node("gpu-h200-02", {"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}})
        twin.settle()
        labels = core.read_node("gpu-h200-02").metadata.labels
        assert labels["nvidia.com/mig.config.state"] == "success"
        out = tmp_path / "adopted"
        imported = _migplan("import", "--kubeconfig", str(twin.kubeconfig), "--out", str(out), "--node", "gpu-h200-02")
        assert imported.returncode == 0, imported.stdout + imported.stderr
    text = (out / "nodes" / "gpu-h200-02.yaml").read_text()
    assert "mig-parted config 'all-balanced' of ConfigMap gpu-operator/default-mig-parted-config" in text
    layout = text.split("layout: ", 1)[1].split()[0]
    parts = (out / "layouts" / f"{layout}.yaml").read_text()
    assert parts.count("{profile: 1g.18gb}") == 2 and "{profile: 3g.71gb}" in parts and "{profile: 2g.35gb}" in parts
    cluster = (out / "cluster.yaml").read_text()
    assert "migConfigMap: migplan-mig-parted-config" in cluster  # migplan writes its own, never NVIDIA's


def test_a_cluster_broken_under_single_is_imported_as_it_is_and_validate_says_why(tmp_path: Path) -> None:
    """The article's cluster: ClusterPolicy `single` over mixed cuts. The import writes what is there (strategy
    single, the cuts as configured) and exits 1: the written root is invalid for the reason the device plugin
    refuses the node (MP401), which `migplan validate` reports with file and line."""
    with ClusterTwin.from_inventory(INVENTORY, strategy="single", device_plugin_config="old-plugin-config") as twin:
        twin.settle()
        out = tmp_path / "adopted"
        imported = _migplan("import", "--kubeconfig", str(twin.kubeconfig), "--out", str(out))
    assert imported.returncode == 1, imported.stdout + imported.stderr
    assert "INVALID" in imported.stdout and "Traceback" not in imported.stderr
    assert "migStrategy: single" in (out / "cluster.yaml").read_text()
    validated = _migplan("validate", str(out), "-o", "json")
    assert validated.returncode == 1
    codes = {(d["code"], d["file"]) for d in json.loads(validated.stdout)["errors"]}
    assert ("MP401", "nodes/gpu-h200-01.yaml") in codes


def test_merge_into_the_teams_inventory_reuses_its_layouts(tmp_path: Path) -> None:
    """A node the team's inventory lacks is added by --merge, referring to the team's own layout when its cut is one."""
    import shutil

    root = tmp_path / "team"
    shutil.copytree(INVENTORY, root)
    (root / "nodes" / "gpu-h200-02.yaml").unlink()
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        merged = _migplan("import", "--kubeconfig", str(twin.kubeconfig), "--out", str(root), "--merge")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "kept 3 node file(s)" in merged.stdout
    added = (root / "nodes" / "gpu-h200-02.yaml").read_text()
    assert added.count("layout: h200-balanced") == 2
    assert {p: p.read_bytes() for p in before} == before  # nothing the team wrote was touched
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.yaml") if p not in before) == [
        "nodes/gpu-h200-02.yaml"
    ]
    assert _migplan("validate", str(root)).returncode == 0


def test_from_mig_parted_through_the_command(tmp_path: Path) -> None:
    """A team's hand-written mig-parted file (here one shaped like mig-parted's systemd default) becomes layouts/."""
    src = REPO / "tests" / "fixtures" / "migparted" / "accepted" / "systemd-config.yaml"
    out = tmp_path / "inv"
    made = _migplan(
        "import", "--from-mig-parted", str(src), "--config", "all-balanced", "--out", str(out), "-o", "json"
    )
    assert made.returncode == 0, made.stdout + made.stderr
    written = json.loads(made.stdout)["written"]
    assert "layouts/all-balanced-h200-141gb.yaml" in written and all(p.startswith("layouts/") for p in written)
    again = _migplan("import", "--from-mig-parted", str(src), "--out", str(out))
    assert again.returncode == 2 and "MP581" in again.stderr  # never overwritten without --force / --merge
    merged = _migplan("import", "--from-mig-parted", str(src), "--config", "all-balanced", "--out", str(out), "--merge")
    assert merged.returncode == 0 and "kept" in merged.stdout
