"""The mig-parted ConfigMap is written by whoever holds the cluster: text the C YAML reader cannot even encode is
a MigPartedFormatError (and so an import problem or a planner finding), never a UnicodeEncodeError."""

from __future__ import annotations

import pytest

from reconciler.logic import migparted
from reconciler.logic.adopt import parse_configs


def test_a_lone_surrogate_in_the_config_is_a_format_error() -> None:
    text = "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n# \ud800\n"
    with pytest.raises(migparted.MigPartedFormatError, match="not UTF-8 text at character"):
        migparted.parse_strict(text)
    source = parse_configs("ConfigMap gpu-operator/x", text)
    assert source.configs is None and source.error is not None and "not UTF-8" in source.error
