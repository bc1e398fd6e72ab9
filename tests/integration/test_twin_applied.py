"""A twin built from an inventory starts as if migplan had already applied it: the first cycle against it has
nothing to write (the demo on your own inventory then repairs only the drift it injected). Without the seed the
same cycle relabels nodes the twin had named its own way: the seed is what makes the difference."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.cli import cli
from reconciler.resources import inventory_dir
from reconciler.twin.cluster import AppliedSeed, ClusterTwin
from reconciler.twinseed import applied_seed


def _own_inventory(tmp_path: Path) -> Path:
    """The example with its nodes renamed: an inventory the twin has never seen, whose config names it cannot guess."""
    root = tmp_path / "own"
    shutil.copytree(inventory_dir(), root)
    for node in sorted((root / "nodes").iterdir()):
        renamed = node.name.replace("gpu-", "dgx-")
        node.with_name(renamed).write_text(node.read_text().replace("name: gpu-", "name: dgx-"))
        node.unlink()
    (root / "cluster.yaml").write_text((root / "cluster.yaml").read_text().replace("par1-prod", "lab"))
    return root


def _once(root: Path, twin: ClusterTwin) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(
        cli, ["reconcile", "--once", "--inventory", str(root), "--kubeconfig", str(twin.kubeconfig), "-o", "json"]
    )
    return result.exit_code, json.loads(result.stdout)


def _writes(doc: dict[str, object]) -> list[object]:
    applied = doc.get("applied")
    assert isinstance(applied, list)
    return applied


def test_a_seeded_twin_starts_in_sync(tmp_path: Path) -> None:
    root = _own_inventory(tmp_path)
    seed = applied_seed(read_inventory_dir(root), now=datetime.now(UTC))
    assert seed is not None and set(seed.node_configs) == {p.stem for p in (root / "nodes").iterdir()}
    with ClusterTwin.from_inventory(root, applied=AppliedSeed(*seed)) as twin:
        twin.settle()
        code, doc = _once(root, twin)
    assert _writes(doc) == [] and code == 0, doc


def test_without_the_seed_the_first_cycle_relabels(tmp_path: Path) -> None:
    root = _own_inventory(tmp_path)
    with ClusterTwin.from_inventory(root) as twin:
        twin.settle()
        code, doc = _once(root, twin)
    assert code == 1 and _writes(doc), doc  # the control: the seed above is what removed these writes


def test_agent_mode_and_invalid_inventories_get_no_seed(tmp_path: Path) -> None:
    root = _own_inventory(tmp_path)
    files = dict(read_inventory_dir(root))
    agent = files["cluster.yaml"].replace(b"mode: gpu-operator", b"mode: agent")
    assert agent != files["cluster.yaml"]
    assert applied_seed({**files, "cluster.yaml": agent}, now=datetime.now(UTC)) is None
    assert applied_seed({**files, "cluster.yaml": b"kind: Nonsense\n"}, now=datetime.now(UTC)) is None
