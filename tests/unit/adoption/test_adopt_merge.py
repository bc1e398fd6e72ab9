"""`migplan import --merge` reuses a layout already in --out only when it is named as its file: a node file never
refers to a name no layout file carries (an empty name, or one that differs from the file name, MP408)."""

from __future__ import annotations

import pytest
import yaml

from reconciler.catalog import load_catalog
from reconciler.logic.adoption.adopt import GpuCut, Imported, NodeImport
from reconciler.logic.adoption.adoptfiles import render_inventory

CUT = (("3g.71gb", None), ("2g.35gb", None), ("1g.18gb", None), ("1g.18gb", None))
LAYOUT = """apiVersion: migplan/v1
kind: Layout
metadata: {{name: {name}}}
spec:
  model: H200-141GB
  mig:
    enabled: true
    partitions: [{{profile: 3g.71gb}}, {{profile: 2g.35gb}}, {{profile: 1g.18gb}}, {{profile: 1g.18gb}}]
"""


@pytest.mark.parametrize(("name", "reused"), [("mine", True), ("''", False), ("other", False), ("Bad_Name", False)])
def test_an_existing_layout_is_reused_only_under_its_file_name(name: str, reused: bool) -> None:
    node = NodeImport("n1", (GpuCut(0, "H200-141GB", True, CUT, "observed"),), ("observed",))
    existing = {"layouts/mine.yaml": LAYOUT.format(name=name)}
    files = render_inventory(Imported((node,)), None, existing_layouts=existing, catalog=load_catalog())
    gpu = yaml.safe_load(files["nodes/n1.yaml"])["spec"]["gpus"][0]
    if reused:
        assert gpu["layout"] == "mine"
    else:
        assert "layout" not in gpu and len(gpu["mig"]["partitions"]) == 4  # inline: a single GPU has this cut
    assert "layouts/mine.yaml" not in files  # the person's file is never rewritten


@pytest.mark.parametrize("text", ["2026-13-45T99:99:99+25:00", "when: 2026-02-30\n", "a: !!int x\n", "- [\n"])
def test_an_existing_layout_that_pyyaml_cannot_construct_is_ignored(text: str) -> None:
    node = NodeImport("n1", (GpuCut(0, "H200-141GB", True, CUT, "observed"),), ("observed",))
    existing = {"layouts/mine.yaml": text}
    files = render_inventory(Imported((node,)), None, existing_layouts=existing, catalog=load_catalog())
    assert "layout" not in yaml.safe_load(files["nodes/n1.yaml"])["spec"]["gpus"][0]
