"""Fleets from inventories (cuts as planned, pods holding owned partitions, a matching mig-parted config) and
synthetic fleets; drift case parsing. No server involved."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.twin.fleet import DRIFT_KINDS, Fleet, parse_drift, render_mig_config
from reconciler.twin.operator import migparted

REPO = Path(__file__).resolve().parents[2]


def test_example_inventory_is_cut_as_planned() -> None:
    fleet = Fleet.from_inventory(REPO / "inventory")
    assert fleet.settings.mig_strategy == "mixed"
    h200 = fleet.nodes["gpu-h200-01"]
    for gpu in h200.gpus:
        assert gpu.mig_current
        assert gpu.geometry() == {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}
        # The only arrangement that fits: the 3g at memory slice 4.
        (three_g,) = [gi for gi in gpu.gpu_instances.values() if gi.profile.name == "3g.71gb"]
        assert three_g.start == 4
    # Written placements are honoured exactly (gpu 0: 2g at 0, 1g at 2).
    starts = sorted((gi.profile.name, gi.start) for gi in h200.gpus[0].gpu_instances.values())
    assert ("2g.35gb", 0) in starts and ("1g.18gb", 2) in starts


def test_owned_partitions_get_a_holding_pod() -> None:
    fleet = Fleet.from_inventory(REPO / "inventory")
    owners = {p.owner for p in fleet.pods if p.node == "gpu-h200-01"}
    assert {"vllm-llama-70b", "embeddings", "reranker", "whisper", "guardrails"} <= owners
    # a partition with no owner has no pod
    assert len([p for p in fleet.pods if p.node == "gpu-h200-01"]) == 7
    assert all(p.resource.startswith("nvidia.com/mig-") for p in fleet.pods)
    fleet.attach_holders()
    held = [ci.holder for g in fleet.nodes["gpu-h200-01"].gpus for _, ci in g.iter_cis() if ci.holder]
    assert len(held) == 7


def test_mig_parted_config_matches_the_current_layout() -> None:
    fleet = Fleet.from_inventory(REPO / "inventory")
    doc = fleet.mig_parted_config()
    configs = migparted.parse(yaml.safe_dump(doc))
    for name, node in fleet.nodes.items():
        entries = migparted.select(configs, fleet.node_config[name])
        assert migparted.assert_applied(entries, node.gpus), name


def test_render_groups_identical_gpus() -> None:
    fleet = Fleet.from_inventory(REPO / "inventory")
    entries = render_mig_config(fleet.nodes["gpu-h200-02"].gpus)
    assert entries == [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}}
    ]


def test_strategy_override_and_bad_strategy(tmp_path: Path) -> None:
    assert Fleet.from_inventory(REPO / "inventory", strategy="single").settings.mig_strategy == "single"
    (tmp_path / "nodes").mkdir()
    (tmp_path / "cluster.yaml").write_text("spec: {migStrategy: sometimes}\n")
    with pytest.raises(ValueError, match="unknown MIG strategy"):
        Fleet.from_inventory(tmp_path)


def test_synthetic_fleet_shape() -> None:
    fleet = Fleet.synthetic(50, owned_fraction=0.25)
    assert len(fleet.nodes) == 50
    assert sum(len(n.gpus) for n in fleet.nodes.values()) == 400
    geoms = {tuple(sorted(g.geometry().items())) for n in fleet.nodes.values() for g in n.gpus}
    assert len(geoms) >= 4  # mixed layouts, MIG disabled included
    assert fleet.pods and all(p.resource.startswith("nvidia.com/mig-") for p in fleet.pods)


def test_recut_and_restore() -> None:
    fleet = Fleet.from_inventory(REPO / "inventory")
    before = fleet.nodes["gpu-h200-02"].gpus[1].geometry()
    fleet.recut("gpu-h200-02", 1)
    assert fleet.nodes["gpu-h200-02"].gpus[1].geometry() != before
    fleet.restore("gpu-h200-02")
    assert fleet.nodes["gpu-h200-02"].gpus[1].geometry() == before


@pytest.mark.parametrize(
    ("text", "kind", "arg", "extra"),
    [
        ("gpu-recut:n1", "gpu-recut", "n1", None),
        ("gpu-recut:n1:3", "gpu-recut", "n1", "3"),
        ("wrong-strategy", "wrong-strategy", None, None),
        ("wrong-strategy:none", "wrong-strategy", "none", None),
        ("undocumented-node", "undocumented-node", None, None),
    ],
)
def test_parse_drift(text: str, kind: str, arg: str | None, extra: str | None) -> None:
    d = parse_drift(text)
    assert (d.kind, d.arg, d.extra) == (kind, arg, extra)
    assert str(d) == text


@pytest.mark.parametrize("bad", ["melted", "gpu-recut", "node-missing:", "wrong-strategy:sometimes"])
def test_parse_drift_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_drift(bad)


def test_drift_kinds_are_stable() -> None:
    assert set(DRIFT_KINDS) >= {
        "gpu-recut",
        "node-missing",
        "undocumented-node",
        "wrong-strategy",
        "stale-device-plugin-config",
        "mig-config-failed",
        "pod-wants-gpu",
    }
