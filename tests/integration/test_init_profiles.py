"""Your own inventory in five minutes: `migplan profiles [MODEL]` shows the catalog, `migplan init` writes a starter
root that validates where you stand, from flags or from a cluster (the twin), and refuses what it must not write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.resources import inventory_dir
from reconciler.twin.cluster import ClusterTwin


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_profiles_of_one_model_by_any_of_its_names() -> None:
    code, out, _ = _run("profiles", "H200-141GB")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("H200-141GB (") and "placements derived from H100-80GB" in lines[0]
    row = next(line.split() for line in lines if line.split()[:1] == ["3g.71gb"])
    # compute 3, memory slices 4, at most 2 on one GPU, starting at memory slice 0 or 4, its mixed resource
    assert row[-5:] == ["3", "4", "2", "0,4", "nvidia.com/mig-3g.71gb"]
    assert _run("profiles", "nvidia-h200")[1] == out  # the name the stack uses resolves to the same model


def test_profiles_json_is_the_catalog_itself() -> None:
    code, out, _ = _run("profiles", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    catalog = load_catalog()
    assert [m["model"] for m in doc] == list(catalog.keys)
    for m in doc:
        model = catalog.get(m["model"])
        assert model is not None
        assert {p["profile"]: p["maxInstances"] for p in m["profiles"]} == {
            name: p.max_instances for name, p in model.profiles.items()
        }


def test_profiles_of_an_unknown_model_lists_the_known_ones() -> None:
    code, out, err = _run("profiles", "H2OO-141GB")
    assert code == 2 and out == ""
    assert "error MP301" in err and "did you mean H200-141GB" in err and "A100-80GB" in err


def test_init_from_flags_validates_where_you_stand(tmp_path: Path) -> None:
    root = tmp_path / "gpu-inventory"
    code, out, err = _run("init", str(root), "--node", "gpu-01:H100-80GB:2", "--node", "gpu-02:nvidia-h200")
    assert code == 0, out + err
    assert "2 node file(s) (10 GPU(s))" in out and ": valid" in out
    assert sorted(p.name for p in (root / "nodes").iterdir()) == ["gpu-01.yaml", "gpu-02.yaml"]
    assert (root / "nodes" / "gpu-02.yaml").read_text().count("model: H200-141GB") == 8  # default count, catalog key
    assert (root / "cluster.yaml").read_text().splitlines()[
        0
    ] == "# yaml-language-server: $schema=schemas/cluster.schema.json"
    for name in ("cluster", "node", "layout"):
        assert json.loads((root / "schemas" / f"{name}.schema.json").read_text())["$schema"]
    cwd = Path.cwd()
    os.chdir(root / "nodes")
    try:
        code, out, err = _run("validate")  # the standing root: the one just written
    finally:
        os.chdir(cwd)
    assert code == 0 and out.rstrip().endswith("2 node(s), 10 GPU(s), 0 partition(s); 0 error(s), 0 warning(s)")


@pytest.mark.parametrize(
    ("node", "why"),
    [
        ("../escape:H100-80GB", "not a Kubernetes node name"),
        ("Gpu-01:H100-80GB", "not a Kubernetes node name"),
        ("gpu-01:Z100", "unknown GPU model"),
        ("gpu-01:H100-80GB:0", "1 to 16"),
        ("gpu-01:H100-80GB:17", "1 to 16"),
        ("gpu-01:H100-80GB:-1", "1 to 16"),
        ("gpu-01", "NAME:MODEL[:COUNT]"),
    ],
)
def test_init_refuses_bad_input_and_writes_nothing(tmp_path: Path, node: str, why: str) -> None:
    code, _out, err = _run("init", str(tmp_path / "inv"), "--node", node)
    assert code == 2 and why in err
    assert not (tmp_path / "inv").exists() and not (tmp_path / "escape.yaml").exists()


def test_init_leaves_an_inventory_alone_without_force(tmp_path: Path) -> None:
    root = tmp_path / "inv"
    assert _run("init", str(root), "--node", "a:H100-80GB:1")[0] == 0
    (root / "cluster.yaml").write_text("# mine\n")
    code, _out, err = _run("init", str(root), "--node", "b:H100-80GB:1")
    assert code == 2 and "MP581" in err and (root / "cluster.yaml").read_text() == "# mine\n"
    assert not (root / "nodes" / "b.yaml").exists()
    assert _run("init", str(root), "--node", "b:H100-80GB:1", "--force")[0] == 0


def test_init_from_a_cluster_writes_what_the_nodes_have(tmp_path: Path) -> None:
    root = tmp_path / "from-cluster"
    with ClusterTwin.from_inventory(inventory_dir()) as twin:
        twin.settle()
        code, out, err = _run("init", str(root), "--kubeconfig", str(twin.kubeconfig))
    assert code == 0, out + err
    written = sorted(p.stem for p in (root / "nodes").iterdir())
    assert written == sorted(p.stem for p in (inventory_dir() / "nodes").iterdir())
    assert (root / "schemas" / "node.schema.json").is_file()
    assert _run("validate", str(root))[0] == 0


def test_demo_runs_on_your_own_inventory(tmp_path: Path) -> None:
    root = tmp_path / "own"
    assert _run("init", str(root), "--node", "gpu-01:H100-80GB:2")[0] == 0
    node = root / "nodes" / "gpu-01.yaml"
    node.write_text(
        node.read_text().replace(
            "      mig: {enabled: false}\n",
            "      mig: {enabled: true, partitions: [{profile: 3g.40gb}, {profile: 4g.40gb}]}\n",
            1,
        )
    )
    code, out, err = _run("demo", "--inventory", str(root), "--workdir", str(tmp_path / "w"), "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"]["expected"] is True, doc["verdict"]
    assert [c["case"] for c in doc["verdict"]["injected"]] == [
        "wrong-strategy:single",
        "stale-device-plugin-config",
        "undocumented-node",
    ]
    writes = doc["verdict"]["writes"]
    # The twin started as migplan would have left your inventory: the writes repair the injected drift alone
    # (the strategy, the stale device-plugin config), no node is relabelled, nothing of the example appears.
    assert any(w.startswith("configure clusterpolicy/cluster-policy") for w in writes), writes
    assert not any(w.startswith("configure node/") for w in writes), writes
    assert not any("gpu-h200" in w for w in writes)
    assert doc["cycles"][0]["cycle"]["plan"], doc["cycles"][0]


def test_demo_refuses_an_invalid_inventory_before_it_starts(tmp_path: Path) -> None:
    root = tmp_path / "own"
    assert _run("init", str(root), "--node", "gpu-01:H100-80GB:1")[0] == 0
    node = root / "nodes" / "gpu-01.yaml"
    node.write_text(node.read_text().replace("model: H100-80GB", "model: H100-80GBX"))
    code, _out, err = _run("demo", "--inventory", str(root), "--workdir", str(tmp_path / "w"))
    assert code == 2 and "nodes/gpu-01.yaml:" in err and "is invalid" in err
    assert not (tmp_path / "w" / "inventory-repo").exists()
