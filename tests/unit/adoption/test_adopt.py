"""reconciler.logic.adoption.adopt (issue 14): sources per GPU, an operator-style default config with its device
filters, hostile values from the cluster, and --from-mig-parted over configs in NVIDIA's shapes (our own, under
tests/fixtures/migparted/accepted/). Every written root is validated."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.catalog import load_catalog
from reconciler.logic.adoption.adopt import ClusterFacts, ConfigSource, NodeFacts, import_cluster, parse_configs
from reconciler.logic.adoption.adoptfiles import AdoptError, layouts_from_mig_parted, render_inventory
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.planning.agentplan import ObservedGpu, ObservedInstance
from reconciler.model.inventory import Placement
from reconciler.model.observed import ContainerResources, ObservedNode, ObservedPod

ACCEPTED = Path(__file__).parents[2] / "fixtures" / "migparted" / "accepted"
CATALOG = load_catalog()
CLUSTER = ClusterFacts("c1", "mixed", "gpu-operator", "cluster-policy", "nvidia-device-plugin-daemonset", "migplan-cm")


def _default_config() -> ConfigSource:
    cm = yaml.safe_load((ACCEPTED / "operator-configmap.yaml").read_text())
    return parse_configs("ConfigMap gpu-operator/default-mig-parted-config", cm["data"]["config.yaml"])


def _node(name: str, labels: dict[str, str], **kw: object) -> NodeFacts:
    applied = {"nvidia.com/mig.config.state": "success"} if "nvidia.com/mig.config" in labels else {}
    return NodeFacts(ObservedNode(name=name, labels={"nvidia.com/gpu.present": "true", **applied, **labels}, **kw))  # type: ignore[arg-type]


def _validate(files: dict[str, str]) -> list[tuple[str, str, int | None]]:
    result = validate_inventory({p: t.encode() for p, t in files.items()})
    return [(d.code, d.file, d.line) for d in result.diagnostics]


def test_default_config_device_filters_resolve_against_the_gfd_product() -> None:
    nodes = [
        _node("nvl", {"nvidia.com/gpu.product": "NVIDIA-H200-NVL", "nvidia.com/gpu.count": "4",
                      "nvidia.com/mig.config": "all-balanced"}),
        _node("a100", {"nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB", "nvidia.com/gpu.count": "2",
                       "nvidia.com/mig.config": "all-1g.10gb"}),
        _node("a100-80", {"nvidia.com/gpu.product": "NVIDIA-A100-80GB-PCIe", "nvidia.com/gpu.count": "1",
                          "nvidia.com/mig.config": "all-1g.10gb"}),
        _node("off", {"nvidia.com/gpu.product": "NVIDIA-H800", "nvidia.com/gpu.count": "2",
                      "nvidia.com/mig.config": "all-disabled"}),
    ]  # fmt: skip
    imported = import_cluster(nodes, _default_config(), CATALOG)
    assert imported.problems == ()
    by = {n.name: n for n in imported.nodes}
    assert [len(by[n].gpus) for n in ("nvl", "a100", "a100-80", "off")] == [4, 2, 1, 2]
    nvl = by["nvl"].gpus[0]
    assert nvl.model == "H200-141GB" and sorted(p for p, _ in nvl.partitions) == [
        "1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"]  # fmt: skip
    # the same config name, two filter groups: 4 x 1g.10gb on the A100 40GB, 7 on the 80GB
    assert [p for p, _ in by["a100"].gpus[0].partitions] == ["1g.10gb"] * 4
    assert [p for p, _ in by["a100-80"].gpus[0].partitions] == ["1g.10gb"] * 7
    assert not any(g.mig_enabled for g in by["off"].gpus)
    files = render_inventory(imported, CLUSTER)
    assert _validate(files) == []
    assert "layout: h200-141gb-2x1g18gb-1x2g35gb-1x3g71gb" in files["nodes/nvl.yaml"]
    assert "default-mig-parted-config" in files["nodes/nvl.yaml"]


def test_best_source_per_gpu_observed_then_config_then_resources() -> None:
    observed = (
        ObservedGpu(0, "GPU-0", "NVIDIA H200", True, True, True,
                    (ObservedInstance(1, "3g.71gb", Placement(4, 4)), ObservedInstance(2, "2g.35gb", Placement(0, 2)))),
    )  # fmt: skip
    pod = ObservedPod("ml", "vllm-0", "mix", "Running", (ContainerResources("c", {"nvidia.com/mig-3g.71gb": 1}),),
                      labels={"app": "vllm"})  # fmt: skip
    node = NodeFacts(
        ObservedNode(
            name="mix",
            labels={"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "3",
                    "nvidia.com/mig.config": "custom", "nvidia.com/mig.config.state": "success"},
            allocatable={"nvidia.com/mig-1g.18gb": 7, "nvidia.com/gpu": 0},
        ),
        pods=(pod,),
        observed=observed,
    )  # fmt: skip
    source = parse_configs("ConfigMap x/y", "version: v1\nmig-configs:\n  custom:\n    - devices: [1]\n"
                           "      mig-enabled: true\n      mig-devices: {'4g.71gb': 1}\n")  # fmt: skip
    imported = import_cluster([node], source, CATALOG)
    [n] = imported.nodes
    assert [g.source for g in n.gpus] == ["observed", "mig-parted", "resources"]
    assert n.gpus[0].partitions == (("2g.35gb", 0), ("3g.71gb", 4))
    assert n.gpus[1].partitions == (("4g.71gb", None),)
    assert [p for p, _ in n.gpus[2].partitions] == ["1g.18gb"] * 7
    text = render_inventory(imported, CLUSTER)["nodes/mix.yaml"]
    assert "3g.71gb: vllm (pod ml/vllm-0)" in text and "counts only" in text
    assert _validate(render_inventory(imported, CLUSTER)) == []


def test_hostile_values_from_the_cluster_never_reach_a_path_or_break_the_yaml() -> None:
    nodes = [
        _node("../etc", {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "1"}),
        _node("nolabels", {}, capacity={"nvidia.com/gpu": 2}),
        _node("weird", {"nvidia.com/gpu.product": 'X"\n- evil: [yes', "nvidia.com/gpu.count": "1",
                        "nvidia.com/mig.config": "nope\n# x"}),
        NodeFacts(ObservedNode(name="bad-ann", labels={"nvidia.com/gpu.product": "NVIDIA-A30",
                                                       "nvidia.com/gpu.count": "1"}),
                  observed_error="annotation migplan.io/mig-observed is malformed: x"),
    ]  # fmt: skip
    source = ConfigSource("ConfigMap x/y", None, "ConfigMap x/y not found")
    imported = import_cluster(nodes, source, CATALOG)
    codes = {(p.code, p.node) for p in imported.problems}
    assert ("MP582", None) in codes and ("MP582", "nolabels") in codes
    assert ("MP583", "weird") in codes and ("MP584", "weird") in codes and ("MP588", "bad-ann") in codes
    files = render_inventory(imported, CLUSTER)
    assert sorted(files) == ["cluster.yaml", "nodes/bad-ann.yaml", "nodes/weird.yaml"]
    doc = yaml.safe_load(files["nodes/weird.yaml"])
    assert doc["spec"]["gpus"][0]["model"] == 'X"\n- evil: [yes'  # one quoted scalar, not new YAML
    found = _validate(files)
    assert ("MP301", "nodes/weird.yaml", 9) in found or any(c == "MP301" for c, _, _ in found)
    assert all(c == "MP301" for c, _, _ in found), found


def test_from_mig_parted_turns_nvidia_files_into_layouts_that_validate() -> None:
    cm = yaml.safe_load((ACCEPTED / "operator-configmap.yaml").read_text())
    files = layouts_from_mig_parted(cm["data"]["config.yaml"], CATALOG, config="all-balanced")
    assert "layouts/all-balanced-rtx-pro-6000-96gb.yaml" in files and "layouts/all-balanced-b300-288gb.yaml" in files
    # one per device group and model: H200 SXM and NVL are one model, the H100/A100 80GB group is two
    assert "layouts/all-balanced-h100-80gb.yaml" in files and "layouts/all-balanced-a100-80gb.yaml" in files
    assert len(files) == 9
    root = {"cluster.yaml": "apiVersion: migplan/v1\nkind: Cluster\nspec: {migStrategy: mixed}\n", **files}
    assert [c for c, _, _ in _validate(root) if c != "MP312"] == []
    default = (ACCEPTED / "systemd-config.yaml").read_text()
    assert layouts_from_mig_parted(default, CATALOG, config="all-1g.10gb")
    with pytest.raises(AdoptError) as no_model:
        layouts_from_mig_parted(cm["data"]["config.yaml"], CATALOG, config="all-3g.71gb")
    assert no_model.value.code == "MP587" and "--model" in str(no_model.value)
    one = layouts_from_mig_parted(cm["data"]["config.yaml"], CATALOG, config="all-3g.71gb", model="NVIDIA-H200")
    assert list(one) == ["layouts/all-3g-71gb.yaml"] and "model: H200-141GB" in one["layouts/all-3g-71gb.yaml"]
    with pytest.raises(AdoptError) as wrong:
        layouts_from_mig_parted(cm["data"]["config.yaml"], CATALOG, config="all-3g.71gb", model="A30-24GB")
    assert wrong.value.code == "MP587" and "not offered" in str(wrong.value)
    for bad in ("version: [\n", "\x00", "version: v2\nmig-configs: {a: []}\n"):
        with pytest.raises(AdoptError) as err:
            layouts_from_mig_parted(bad, CATALOG)
        assert err.value.code == "MP586"


def test_every_import_code_used_is_in_the_table_and_in_the_allotted_range() -> None:
    import re

    from reconciler.logic.adoption import adopt

    here = Path(adopt.__file__)
    sources = [here, here.with_name("adoptfiles.py"), here.with_name("draimport.py")]
    sources.append(here.parents[2] / "commands" / "adopt.py")
    used = {c for src in sources for c in re.findall(r"\b(MP5\d\d|MP9[56]\d)\b", src.read_text())}
    assert used == set(adopt.IMPORT_CODES)
    # MP580-MP589; MP958-MP962 for the ResourceSlices of NVIDIA's DRA driver (issue 30)
    assert all(re.fullmatch(r"MP58\d|MP95[89]|MP96[0-2]", c) for c in adopt.IMPORT_CODES)


def test_a_config_not_applied_yet_is_not_taken_for_the_cut() -> None:
    """`nvidia.com/mig.config` names what mig-manager is asked to apply; only state=success says the GPUs have it."""
    for state in ("pending", "failed", "rebooting", None):
        labels = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "1",
                  "nvidia.com/mig.config": "all-balanced"}  # fmt: skip
        if state:
            labels["nvidia.com/mig.config.state"] = state
        facts = NodeFacts(ObservedNode(name="n", labels=labels, allocatable={"nvidia.com/mig-7g.141gb": 1}))
        imported = import_cluster([facts], _default_config(), CATALOG)
        [node] = imported.nodes
        assert [g.source for g in node.gpus] == ["resources"], state
        assert node.gpus[0].partitions == (("7g.141gb", None),)
        assert any(p.code == "MP584" and "not applied" in p.message for p in imported.problems)


def test_single_strategy_gpu_count_is_mig_devices() -> None:
    """Under `single` GFD's gpu.count counts MIG devices: the GPU count comes from the config's cut or the profile."""
    labels = {"nvidia.com/gpu.product": "NVIDIA-H200-MIG-1g.18gb", "nvidia.com/gpu.count": "14",
              "nvidia.com/mig.config": "all-1g.18gb", "nvidia.com/mig.config.state": "success"}  # fmt: skip
    by_config = import_cluster([NodeFacts(ObservedNode("s", labels))], _default_config(), CATALOG)
    [node] = by_config.nodes
    assert [(g.source, len(g.partitions)) for g in node.gpus] == [("mig-parted", 7), ("mig-parted", 7)]
    no_label = {k: v for k, v in labels.items() if not k.startswith("nvidia.com/mig.config")}
    facts = NodeFacts(ObservedNode("s", no_label, allocatable={"nvidia.com/gpu": 14}))
    [guess] = import_cluster([facts], _default_config(), CATALOG).nodes
    assert [(g.source, len(g.partitions)) for g in guess.gpus] == [("resources", 7), ("resources", 7)]
    files = render_inventory(import_cluster([facts], _default_config(), CATALOG), CLUSTER)
    assert "counts only" in files["nodes/s.yaml"] and _validate(files) == []


def test_a_gb200_that_names_its_profiles_the_early_way_is_adopted_in_its_own_names() -> None:
    """Issue 26 item 5: an early GB200 advertises nvidia.com/mig-1g.24gb; the adopted plan keeps the node's names
    (the catalog's 1g.23gb would be a name this node's driver does not know), and it validates."""
    labels = {"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/gpu.count": "1"}
    advertised = {"nvidia.com/mig-1g.24gb": 2, "nvidia.com/mig-1g.24gb.me": 1, "nvidia.com/mig-3g.95gb": 1}
    facts = NodeFacts(ObservedNode(name="gb", labels=labels, allocatable=advertised))
    imported = import_cluster([facts], _default_config(), CATALOG)
    [node] = imported.nodes
    assert sorted(p for p, _ in node.gpus[0].partitions) == ["1g.24gb", "1g.24gb", "1g.24gb+me", "3g.95gb"]
    assert not [p for p in imported.problems if p.code == "MP585"]
    single = {"nvidia.com/gpu.product": "NVIDIA-GB200-MIG-1g.24gb", "nvidia.com/gpu.count": "7"}
    [one] = import_cluster(
        [NodeFacts(ObservedNode("s", single, allocatable={"nvidia.com/gpu": 7}))], _default_config(), CATALOG
    ).nodes
    assert [p for p, _ in one.gpus[0].partitions] == ["1g.24gb"] * 7
    files = render_inventory(imported, CLUSTER)
    # MP312 (warning): GB200 placements are unpublished, checked on slice counts only
    assert [d for d in _validate(files) if d[0] != "MP312"] == []
