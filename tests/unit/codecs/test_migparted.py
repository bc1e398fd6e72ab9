"""mig-parted v1 rendering: parses configs shaped like NVIDIA's, round-trips through a strict reader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic.codecs import migparted
from reconciler.model.inventory import ClusterSpec, DesiredState, GpuSpec, MigStrategy, NodeSpec, Partition

# Our own configs in the shapes NVIDIA ships (README.md there): ConfigMap-wrapped, device filters, `all-*`.
ACCEPTED = Path(__file__).parents[2] / "fixtures" / "migparted" / "accepted"


def _accepted_texts() -> list[tuple[str, str]]:
    out = []
    for p in sorted(ACCEPTED.glob("*.yaml")):
        doc = yaml.safe_load(p.read_text())
        text = doc["data"]["config.yaml"] if doc.get("kind") == "ConfigMap" else p.read_text()
        out.append((p.name, text))
    assert len(out) == 4
    return out


def gpu(index: int, *profiles: str, mig: bool = True, layout: str | None = None) -> GpuSpec:
    return GpuSpec(
        index=index,
        model="H200-141GB",
        mig_enabled=mig,
        partitions=tuple(Partition(profile=p) for p in profiles),
        layout=layout,
    )


def desired(nodes: dict[str, tuple[GpuSpec, ...]]) -> DesiredState:
    return DesiredState(
        cluster=ClusterSpec(name="t", mig_strategy=MigStrategy.MIXED),
        nodes={n: NodeSpec(name=n, gpus=g) for n, g in nodes.items()},
    )


BALANCED = ("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb")


@pytest.mark.parametrize("name,text", _accepted_texts(), ids=lambda x: x if x.endswith(".yaml") else "")
def test_strict_reader_accepts_nvidias_shapes(name: str, text: str) -> None:
    configs = migparted.parse_strict(text)
    assert configs
    assert any(e.mig_enabled is False for entries in configs.values() for e in entries)


@pytest.mark.parametrize(
    "text,message",
    [
        ("mig-configs: {a: [{devices: all, mig-enabled: false}]}", "missing 'version'"),
        ("version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}", "unknown version"),
        ("version: v1\nother: 1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}", "unexpected field: other"),
        ("version: v1\nmig-configs: {a: [{devices: some, mig-enabled: false}]}", "devices"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true}]}", "mig-devices"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, mig-devices: {1g.18gb: 1}}]}", "false"),
        ("version: v1\nmig-configs: {a: [{devices: [0], mig-enabled: true, mig-devices: {bogus: 1}}]}", "profile"),
        ("version: v1\nmig-configs: {a: [{devices: [0], mig-enabled: true, mig-devices: {1g.18gb: -1}}]}", "count"),
        ("version: v1\nmig-configs: {a: [{devices: [0], mig-enabled: true, placement: 4}]}", "placement"),
        ("version: v1\nmig-configs: {a: []}", "at least one entry"),
    ],
)
def test_strict_reader_rejects(text: str, message: str) -> None:
    with pytest.raises(migparted.MigPartedFormatError, match=message):
        migparted.parse_strict(text)


def test_one_config_per_distinct_layout_and_devices_per_gpu() -> None:
    d = desired(
        {
            "a": (gpu(0, *BALANCED, layout="h200-balanced"), gpu(1, *BALANCED, layout="h200-balanced")),
            "b": (gpu(0, *BALANCED, layout="h200-balanced"), gpu(1, *BALANCED, layout="h200-balanced")),
            "c": (gpu(0, *BALANCED), gpu(1, mig=False)),
        }
    )
    r = migparted.render(d)
    assert r.node_configs["a"] == r.node_configs["b"] != r.node_configs["c"]
    assert r.node_configs["a"].startswith("migplan-2x-h200-balanced-")
    configs = migparted.parse_strict(r.text)
    assert set(configs) == {"all-disabled", r.node_configs["a"], r.node_configs["c"]}
    entries = configs[r.node_configs["c"]]
    assert [e.devices for e in entries] == [(0,), (1,)]
    assert entries[0].mig_enabled and dict(entries[0].mig_devices) == {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    assert entries[1].mig_enabled is False and not entries[1].mig_devices
    assert '"1g.18gb": 2' in r.text  # quoted profile keys, like NVIDIA's files


def test_config_names_are_label_values() -> None:
    long_name = "x" * 80
    d = desired({"a": (gpu(0, "1g.18gb", layout=long_name),)})
    name = migparted.render(d).node_configs["a"]
    assert len(name) <= 63
    assert name[0].isalnum() and name[-1].isalnum()


def test_render_is_deterministic() -> None:
    nodes = {f"n{i}": (gpu(0, *BALANCED), gpu(1, "7g.141gb")) for i in range(5)}
    assert migparted.render(desired(nodes)).text == migparted.render(desired(dict(reversed(nodes.items())))).text


_profiles = st.sampled_from(["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", "1g.18gb+me"])
_gpus = st.lists(st.tuples(st.booleans(), st.lists(_profiles, max_size=7)), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _gpus, min_size=1))
def test_round_trip(raw: dict[str, list[tuple[bool, list[str]]]]) -> None:
    d = desired({n: tuple(gpu(i, *ps, mig=m) for i, (m, ps) in enumerate(g)) for n, g in raw.items()})
    r = migparted.render(d)
    configs = migparted.parse_strict(r.text)
    for node, plan in d.nodes.items():
        entries = configs[r.node_configs[node]]
        layouts = migparted.layouts_of(entries, [g.index for g in plan.gpus])
        assert layouts == dict(migparted.node_layout(plan))


def test_configs_nodes_still_carry_are_kept_until_relabelled() -> None:
    r = migparted.render(desired({"a": (gpu(0, *BALANCED),)}))
    previous = (
        'version: v1\nmig-configs:\n  theirs:\n    - device-filter: "0x233510DE"\n      devices: all\n'
        '      mig-enabled: true\n      mig-devices: {"1g.18gb": 7}\n  unused:\n    - devices: all\n'
        "      mig-enabled: false\n"
    )
    text = migparted.config_map_text(r, observed_text=previous, referenced={"theirs", r.node_configs["a"]})
    configs = migparted.parse_strict(text)
    assert set(configs) == {"all-disabled", r.node_configs["a"], "theirs"}  # "unused" is dropped
    (entry,) = configs["theirs"]
    assert entry.device_filter == ("0x233510DE",) and dict(entry.mig_devices) == {"1g.18gb": 7}
    assert migparted.config_map_text(r, observed_text=previous, referenced={r.node_configs["a"]}) == r.text
    assert migparted.config_map_text(r, observed_text="not: [valid", referenced={"theirs"}) == r.text


def test_render_remembers_only_the_same_desired_state() -> None:
    """The controller renders its kept DesiredState every cycle: the same object gives the same result; another
    DesiredState (the next Git revision) is rendered afresh, never served the last one's configs."""
    one = desired({"a": (gpu(0, *BALANCED),)})
    first = migparted.render(one)
    assert migparted.render(one) is first
    other = desired({"a": (gpu(0, "7g.141gb"),), "b": (gpu(0, *BALANCED),)})
    second = migparted.render(other)
    assert second == migparted._render(other) and second.node_configs.keys() == {"a", "b"}
    assert second.node_configs["a"] != first.node_configs["a"]
    assert migparted.render(one) == first  # back to the first: rendered again, the same value
