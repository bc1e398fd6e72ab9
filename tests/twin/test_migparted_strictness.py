"""One corpus of mig-parted configs NVIDIA's parser refuses, run through the twin's parser (which must print
mig-parted's exact error) and migplan's strict reader (which must refuse every one of them).

The corpus is tests/fixtures/migparted/invalid.yaml; our configs in the shapes NVIDIA ships
(tests/fixtures/migparted/accepted/) must pass both. The all-balanced config the twin generates is checked
against mig-parted's builder formula.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.catalog import load_catalog
from reconciler.logic.codecs import migparted as reader
from reconciler.twin.gpus import TwinGpu
from reconciler.twin.operator import migparted as twin_parted

FIXTURES = Path(__file__).parents[1] / "fixtures"
CORPUS: dict[str, Any] = yaml.safe_load((FIXTURES / "migparted" / "invalid.yaml").read_text())
CASES = CORPUS["cases"]


def _accepted_texts() -> list[tuple[str, str]]:
    out = []
    for p in sorted((FIXTURES / "migparted" / "accepted").glob("*.yaml")):
        doc = yaml.safe_load(p.read_text())
        out.append((p.name, doc["data"]["config.yaml"] if doc.get("kind") == "ConfigMap" else p.read_text()))
    return out


def test_corpus_has_a_case_for_every_family_of_refusal() -> None:
    names = {c["name"] for c in CASES}
    assert len(names) == len(CASES) >= 40
    for family in ("version", "devices", "mig-enabled", "device-filter", "mig-devices", "count", "profile"):
        assert any(family in n for n in names), family


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_twin_refuses_with_mig_parteds_wording(case: dict[str, str]) -> None:
    with pytest.raises(twin_parted.MigPartedError) as err:
        twin_parted.parse(case["config"])
    assert str(err.value) == CORPUS["prefix"] + case["error"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_migplan_reader_refuses_what_mig_parted_refuses(case: dict[str, str]) -> None:
    with pytest.raises(reader.MigPartedFormatError):
        reader.parse_strict(case["config"])


@pytest.mark.parametrize("name,text", _accepted_texts(), ids=[n for n, _ in _accepted_texts()])
def test_both_accept_nvidias_shapes(name: str, text: str) -> None:
    theirs = twin_parted.parse(text)
    ours = reader.parse_strict(text)
    assert set(theirs) == set(ours)
    for config, entries in theirs.items():
        assert [dict(e.mig_devices) for e in entries] == [dict(e.mig_devices) for e in ours[config]], config


def test_yaml_syntax_errors_are_wrapped_like_sigs_k8s_yaml() -> None:
    with pytest.raises(twin_parted.MigPartedError) as err:
        twin_parted.parse("version: v1\nmig-configs: [\n")
    assert str(err.value).startswith(
        "error parsing config file: unmarshal error: error converting YAML to JSON: yaml: line "
    )
    with pytest.raises(reader.MigPartedFormatError):
        reader.parse_strict("version: v1\nmig-configs: [\n")


def test_empty_file_parses_to_no_configs_and_fails_on_selection() -> None:
    # sigs.k8s.io/yaml turns an empty document into JSON null: no error until the config is selected.
    assert twin_parted.parse("") == {}
    with pytest.raises(twin_parted.MigPartedError) as err:
        twin_parted.select(twin_parted.parse(""), "all-balanced")
    assert str(err.value) == "error selecting MIG config: selected mig-config not present: all-balanced"


def test_go_yaml_v2_booleans_and_integral_counts_are_accepted() -> None:
    # go-yaml v2 resolves y/n as booleans (PyYAML does not), and JSON has one number type: 2.0 is 2.
    configs = twin_parted.parse(
        "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: y, mig-devices: {1g.18gb: 2.0}}]}"
    )
    (entry,) = configs["a"]
    assert entry.mig_enabled is True and dict(entry.mig_devices) == {"1g.18gb": 2}


def _gpus(*models: str) -> list[TwinGpu]:
    cat = load_catalog()
    out = []
    for i, m in enumerate(models):
        model = cat.get(m)
        assert model is not None, m
        out.append(TwinGpu(node="n", index=i, model=model))
    return out


def test_all_balanced_follows_mig_parteds_builder_formula() -> None:
    # pkg/mig/builder/balanced.go: 7 slices -> 2x1g + 1x2g + 1x3g, each G's base profile with the most instances.
    (entry,) = twin_parted.generated_configs(_gpus("H200-141GB", "H200-141GB"))["all-balanced"]
    assert dict(entry.mig_devices) == {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    assert entry.device_filter == () and entry.devices is None


def test_all_balanced_per_device_type_with_filters_on_mixed_nodes() -> None:
    # 4 slices (A30) -> 2x1g + 1x2g; more than one device type: one entry per type, with its device filter.
    configs = twin_parted.generated_configs(_gpus("A30-24GB", "H100-80GB"))
    by_filter = {e.device_filter: dict(e.mig_devices) for e in configs["all-balanced"]}
    assert by_filter == {
        ("0x20B710DE",): {"1g.6gb": 2, "2g.12gb": 1},
        ("0x233010DE",): {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    }
    assert [e.device_filter for e in configs["all-1g.10gb"]] == [("0x233010DE",)]
    assert dict(configs["all-1g.6gb.me"][0].mig_devices) == {"1g.6gb+me": 1}


def test_zero_count_profile_never_asserts_as_applied() -> None:
    # pkg/types/mig_config.go MigConfig.Equals compares lengths: a listed profile with count 0 never matches.
    gpus = _gpus("H200-141GB")
    gpus[0].set_mig_mode(True)
    gpus[0].add_partition("7g.141gb")
    exact = twin_parted.parse(
        "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {7g.141gb: 1}}]}"
    )
    padded = twin_parted.parse(
        "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {7g.141gb: 1, 1g.18gb: 0}}]}"
    )
    assert twin_parted.assert_applied(exact["a"], gpus)
    assert not twin_parted.assert_applied(padded["a"], gpus)


def test_mig_manager_parses_each_mounted_text_once_and_never_serves_a_stale_parse() -> None:
    """Every node's mig-manager reads the same projected file: the twin keeps the last text's parse (a pure
    function of the text), read-only; a different or broken text is parsed (and refused) afresh every time."""
    from reconciler.twin.cluster import ClusterTwin

    (_, first), (_, second) = _accepted_texts()[:2]
    assert first != second
    broken = CASES[0]
    twin = ClusterTwin.synthetic(1).start()
    try:
        manager = twin.operator.mig_manager
        parsed = manager._parse(first)
        assert manager._parse(first) is parsed  # the same text: the kept parse
        assert dict(parsed) == twin_parted.parse(first)
        with pytest.raises(TypeError):
            parsed["x"] = ()  # type: ignore[index]
        for _ in range(2):  # a refused text is refused every time, with mig-parted's words
            with pytest.raises(twin_parted.MigPartedError, match=broken["error"][:30]):
                manager._parse(broken["config"])
        assert dict(manager._parse(second)) == twin_parted.parse(second)
        assert dict(manager._parse(first)) == twin_parted.parse(first)
    finally:
        twin.stop()
