"""The mig-parted ConfigMap is written by whoever holds the cluster: text the C YAML reader cannot even encode is
a MigPartedFormatError (and so an import problem or a planner finding), never a UnicodeEncodeError."""

from __future__ import annotations

import pytest

from reconciler.logic.adoption.adopt import parse_configs
from reconciler.logic.codecs import migparted


def test_a_lone_surrogate_in_the_config_is_a_format_error() -> None:
    text = "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n# \ud800\n"
    with pytest.raises(migparted.MigPartedFormatError, match="not UTF-8 text at character"):
        migparted.parse_strict(text)
    source = parse_configs("ConfigMap gpu-operator/x", text)
    assert source.configs is None and source.error is not None and "not UTF-8" in source.error


@pytest.mark.parametrize(
    "value", ["2026-13-45", "2026-02-30", "!!int x", "!!bool maybe", "!!timestamp 2026-99-99 x", "!!float x"]
)
def test_a_value_pyyaml_cannot_construct_is_a_format_error(value: str) -> None:
    """PyYAML raises ValueError/KeyError/AttributeError, not YAMLError, for these; the planner reads the live
    ConfigMap with parse_strict, so one such value must not crash a cycle."""
    text = (
        f"version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {{x: {value}}}\n"
    )
    with pytest.raises(migparted.MigPartedFormatError, match="a value cannot be read"):
        migparted.parse_strict(text)
