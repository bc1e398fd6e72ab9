"""A manifest may carry any YAML tag on any value; what the tag cannot construct stays text, never a traceback."""

from __future__ import annotations

import pytest

from reconciler.logic.workloads.manifests import read_manifests


@pytest.mark.parametrize(
    "value",
    ["!!timestamp not-a-time", "!!timestamp 2026-99-99 x", "!!timestamp 2026-13-45", "!!int 0x", "!!float x",
     "!!bool maybe", "!!int 1e400"],
)  # fmt: skip
def test_a_tag_that_does_not_fit_its_value_keeps_the_text(value: str) -> None:
    data = f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {value}\n".encode()
    manifests, diags = read_manifests(data, file="f.yaml")
    assert diags == [] and len(manifests) == 1
    assert manifests[0].body["metadata"]["name"] == value.split(" ", 1)[1].strip("'")


@pytest.mark.parametrize("value", ["!!binary '!!!'", "!!null x", "!!omap x", "!!set x", "!!str [a]", "!!map x"])
def test_other_odd_tags_give_a_manifest_or_a_diagnostic(value: str) -> None:
    data = f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {value}\n".encode()
    manifests, diags = read_manifests(data, file="f.yaml")
    assert len(manifests) + len(diags) == 1
