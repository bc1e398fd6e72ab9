"""The YAML cost check (reconciler.model.yamlbudget): aliases measured before anything is loaded."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic.codecs import migparted
from reconciler.logic.drift import drift
from reconciler.model import yamlbudget
from reconciler.model.inventory import ClusterSpec, DesiredState, MigStrategy
from reconciler.model.observed import ClusterPolicyState, ConfigMapState, ObservedState


def laughs(levels: int, width: int = 10) -> str:
    out = "l0: &l0 [" + ", ".join(["x"] * width) + "]\n"
    for i in range(1, levels + 1):
        out += f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]\n"
    return out


def test_ordinary_anchors_are_fine() -> None:
    text = "base: &b {devices: all, mig-enabled: true}\nother: *b\nlist: [*b, *b, *b]\n"
    assert yamlbudget.problem(text) is None
    assert yamlbudget.problem(laughs(3)) is None  # 11,111 nodes once expanded: under the budget


@pytest.mark.parametrize("levels", [5, 9, 30])
def test_exponential_aliases_are_refused_by_their_expanded_size(levels: int) -> None:
    got = yamlbudget.problem(laughs(levels))
    assert got is not None and "expand to more than" in got


def test_the_budget_counts_expanded_nodes_not_bytes() -> None:
    # 1 mapping + 4 keys + 11 + 111 + 1,111 + 11,111 = 12,349 nodes once expanded
    assert yamlbudget.problem(laughs(3), max_nodes=12_349) is None
    assert yamlbudget.problem(laughs(3), max_nodes=12_348) is not None


def test_nesting_is_capped_and_unparseable_text_left_to_the_loader() -> None:
    assert yamlbudget.problem("[" * 100 + "]" * 100) == "nested deeper than 64 levels"
    assert yamlbudget.problem("a: [unclosed") is None  # the caller's loader says what is wrong


def test_a_mig_parted_value_in_a_message_is_cut() -> None:
    with pytest.raises(migparted.MigPartedFormatError) as err:
        migparted.parse_strict("version: " + "v" * 100_000 + "\nmig-configs: {}\n")
    assert len(str(err.value)) < 120


@pytest.mark.parametrize(
    "entry",
    [
        "flags: {migStrategy: mixed}\nsince: 2026-13-45\n",  # an impossible date: PyYAML raises ValueError
        laughs(9) + "flags: {migStrategy: *l9}\n",  # rendered into the finding, it never ended
    ],
)
def test_a_hostile_device_plugin_config_entry_is_a_reason_not_a_crash(entry: str) -> None:
    # issue 25: an impossible date in a device-plugin config entry was an internal error (MP899)
    desired = DesiredState(cluster=ClusterSpec(name="c", mig_strategy=MigStrategy.MIXED), nodes={})
    observed = ObservedState(
        nodes={},
        cluster_policy=ClusterPolicyState("cluster-policy", "mixed", None, "dp-config"),
        device_plugin_config_map=ConfigMapState("gpu-operator", "dp-config", {"a100": entry}),
    )
    reason = drift.device_plugin_config_conflict(desired, observed)
    assert reason is not None and reason.startswith("its entry 'a100' cannot be")
    assert len(reason) < 200


def _expanded(value: object) -> int:
    """Nodes of a loaded YAML value with every alias expanded (mapping keys count, as the event stream has them)."""
    if isinstance(value, dict):
        return 1 + sum(1 + _expanded(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_expanded(v) for v in value)
    return 1


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    widths=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4),
    scalars=st.integers(min_value=1, max_value=5),
    budget=st.integers(min_value=1, max_value=3000),
)
def test_the_count_is_the_expanded_size_property(widths: list[int], scalars: int, budget: int) -> None:
    # Any chain of anchors and aliases: refused exactly when its expanded size passes the budget.
    text = "l0: &l0 [" + ", ".join(["x"] * scalars) + "]\n"
    for i, w in enumerate(widths, start=1):
        text += f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}", "y"] * w) + "]\n"
    size = _expanded(yaml.safe_load(text))
    got = yamlbudget.problem(text, max_nodes=budget)
    assert (got is None) == (size <= budget), (size, budget, got)
