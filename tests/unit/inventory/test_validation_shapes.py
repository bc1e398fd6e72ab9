"""Node files that differ only by the node's name are read once (reconciler.logic.inventory.validation, `_shape_of`).

The memo may only ever skip work: over the example inventory plus clones and hostile look-alikes, validating with
it gives exactly what validating without it gives (every diagnostic with its file and line, the desired state),
and it does skip parses where the guards allow it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.logic.inventory import validation
from reconciler.logic.inventory.validation import ParseCache, validate_inventory

INVENTORY = Path(__file__).resolve().parents[3] / "inventory"
BASE = "gpu-h200-01"


_FLOW = f"""# yaml-language-server: $schema=../../schemas/node.schema.json
apiVersion: migplan/v1
kind: Node
metadata: {{name: {BASE}, labels: {{rack: r1}}}}
spec:
  gpus:
    - {{index: 0, model: H200-141GB, mig: {{enabled: true, partitions: [{{profile: 3g.71gb, owner: vllm}}, \
{{profile: 2g.35gb}}, {{profile: 1g.18gb}}, {{profile: 1g.18gb}}]}}}}
    - {{index: 1, model: H200-141GB, mig: {{enabled: true, partitions: [{{profile: 1g.18gb, placement: 0}}]}}}}
""".replace("\\\n", "")


def _text() -> str:
    return (INVENTORY / "nodes" / f"{BASE}.yaml").read_text()


def _variants() -> dict[str, str]:
    text = _text()
    out: dict[str, str] = {}
    for i in range(12):  # clean clones: one shape
        out[f"nodes/gpu-clone-{i:02d}.yaml"] = text.replace(BASE, f"gpu-clone-{i:02d}")
    # The name repeated in a comment: still the name's shape.
    for i in range(3):
        name = f"gpu-commented-{i}"
        out[f"nodes/{name}.yaml"] = f"# {name}: the article's node\n" + text.replace(BASE, name)
    # The stem in a label value too: not the name's alone, never reused.
    for i in range(3):
        name = f"gpu-labelled-{i}"
        out[f"nodes/{name}.yaml"] = text.replace(BASE, name).replace("labels: {rack:", f"labels: {{host: {name}, rack:")
    # The name repeated where only the probe can tell it is a comment: after the name on its line, or on a comment
    # line after the content has begun. Reused (the probe agrees), but not on sight.
    for i in range(2):
        name = f"gpu-tailnote-{i}"
        out[f"nodes/{name}.yaml"] = text.replace(BASE, name).replace(f"name: {name}", f"name: {name}  # {name}")
        name = f"gpu-midnote-{i}"
        out[f"nodes/{name}.yaml"] = text.replace(BASE, name).replace("spec:\n", f"spec:\n# {name}: spare\n")
    # Look-alikes of the lines the text check accepts: a `name:` label on its own line, and a line that starts
    # with '#' inside a quoted value (text, not a comment). Never reused: each keeps its own name in its value.
    for i in range(3):
        name = f"gpu-labelname-{i}"
        out[f"nodes/{name}.yaml"] = text.replace(BASE, name).replace(
            "  labels: {rack: r12, zone: par1-b}", f"  labels:\n    name: {name}\n    rack: r12"
        )
        name = f"gpu-hashnote-{i}"
        out[f"nodes/{name}.yaml"] = text.replace(BASE, name).replace(
            "purpose: free for ad-hoc notebooks}", f'purpose: "free\n            # {name}"}}', 1
        )
    # Stems YAML reads as something else than that string, or that are no plain scalar at all.
    out["nodes/yes.yaml"] = text.replace(BASE, "yes")
    out["nodes/no.yaml"] = text.replace(BASE, "no")
    out["nodes/123.yaml"] = text.replace(BASE, "123")
    out["nodes/0x1f.yaml"] = text.replace(BASE, "0x1f")
    out["nodes/gpu.dotted.yaml"] = text.replace(BASE, "gpu.dotted")
    # A file named after one node, naming another (MP404), in a clean clone's shape.
    out["nodes/gpu-misnamed.yaml"] = text.replace(BASE, "gpu-clone-00")
    # The name quoted, or escaped so that the stem is not in the text.
    out["nodes/gpu-quoted-1.yaml"] = text.replace(f"name: {BASE}", 'name: "gpu-quoted-1"')
    out["nodes/gpu-quoted-2.yaml"] = text.replace(f"name: {BASE}", 'name: "gpu-quoted-2"')
    out["nodes/gpu-escaped.yaml"] = text.replace(f"name: {BASE}", 'name: "gpu\\x2descaped"')
    # An invalid cut in one shape: every clone keeps its own diagnostics.
    bad = text.replace("profile: 3g.71gb", "profile: 3g.70gb", 1)
    for i in range(3):
        out[f"nodes/gpu-bad-{i}.yaml"] = bad.replace(BASE, f"gpu-bad-{i}")
    # Flow lists (`partitions: [...]`), which the fast parser declines: the reference loader reads the file and
    # the shape's probe alike. The stem also in a label of the flow mapping: never reused.
    for i in range(3):
        out[f"nodes/gpu-flow-{i}.yaml"] = _FLOW.replace(BASE, f"gpu-flow-{i}")
    for i in range(2):
        name = f"gpu-flowlabel-{i}"
        out[f"nodes/{name}.yaml"] = _FLOW.replace(BASE, name).replace("labels: {", f"labels: {{host: {name}, ")
    # A NUL byte (the memo's hole) and a CRLF file.
    out["nodes/gpu-nul.yaml"] = text.replace(BASE, "gpu-nul") + "\0"
    out["nodes/gpu-crlf.yaml"] = text.replace(BASE, "gpu-crlf").replace("\n", "\r\n")
    return out


def _files() -> dict[str, bytes]:
    files = dict(read_inventory_dir(INVENTORY))
    files.update({k: v.encode() for k, v in _variants().items()})
    return files


def test_the_memo_changes_nothing_but_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files()
    reused: list[str] = []
    real = validation._rebind

    def counting(e: object, path: str, *args: object) -> object:
        reused.append(path)
        return real(e, path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(validation, "_rebind", counting)
    with_memo = validate_inventory(files, cache=ParseCache())
    monkeypatch.setattr(validation, "_SHAPE_LIMIT", 0)
    hits = list(reused)
    without = validate_inventory(files, cache=ParseCache())
    assert reused == hits  # nothing reused without the memo
    assert with_memo.diagnostics == without.diagnostics
    assert with_memo.desired == without.desired
    # The clones after the first (the example's own file is one of them), the commented ones after the first, the
    # second quoted one: and only those (a file with a diagnostic is never a shape).
    want = {f"nodes/gpu-clone-{i:02d}.yaml" for i in range(1, 12)} | {f"nodes/{BASE}.yaml"}
    want |= {f"nodes/gpu-commented-{i}.yaml" for i in range(1, 3)} | {"nodes/gpu-quoted-2.yaml"}
    want |= {"nodes/gpu-tailnote-1.yaml", "nodes/gpu-midnote-1.yaml", "nodes/gpu-flow-1.yaml", "nodes/gpu-flow-2.yaml"}
    assert set(hits) == want
    codes = {(d.code, d.file) for d in without.diagnostics}
    assert ("MP404", "nodes/gpu-misnamed.yaml") in codes
    assert {f for c, f in codes if f and f.startswith("nodes/gpu-bad-")} == {
        f"nodes/gpu-bad-{i}.yaml" for i in range(3)
    }


def test_every_reused_entry_names_its_own_file_and_node() -> None:
    files = {k: v for k, v in _files().items() if "gpu-bad" not in k and "misnamed" not in k}
    files = {k: v for k, v in files.items() if not any(s in k for s in ("yes", "no.", "123", "0x1f", "nul"))}
    result = validate_inventory(files, cache=ParseCache())
    assert result.desired is not None, [str(d) for d in result.errors]
    for name, node in result.desired.nodes.items():
        path = f"nodes/{name}.yaml"
        assert node.source is not None and node.source.file == path
        for gpu in node.gpus:
            assert gpu.source is not None and gpu.source.file == path
            # Partitions from a shared layout point at the layout's file.
            want = path if gpu.layout is None else f"layouts/{gpu.layout}.yaml"
            assert all(p.source is not None and p.source.file == want for p in gpu.partitions)
    labelled = result.desired.nodes["gpu-labelled-1"]
    assert labelled.labels["host"] == "gpu-labelled-1"
    assert result.desired.nodes["gpu-flowlabel-1"].labels["host"] == "gpu-flowlabel-1"
    for i in range(3):
        assert result.desired.nodes[f"gpu-labelname-{i}"].labels["name"] == f"gpu-labelname-{i}"
        purposes = {p.purpose for g in result.desired.nodes[f"gpu-hashnote-{i}"].gpus for p in g.partitions}
        assert f"free # gpu-hashnote-{i}" in purposes


@pytest.mark.parametrize(
    ("name", "on_sight"),
    [
        ("gpu-clone-01", True),  # the name's line alone
        ("gpu-commented-1", True),  # and a comment line that opens the file
        ("gpu-tailnote-1", False),  # a comment after the name: the probe's to judge
        ("gpu-midnote-1", False),  # a comment line after content has begun: the probe's to judge
        ("gpu-labelname-1", False),  # a `name:` line that is not metadata.name
        ("gpu-hashnote-1", False),  # a line starting with '#' inside a quoted value
    ],
)
def test_which_shapes_the_text_alone_vouches_for(name: str, on_sight: bool) -> None:
    """The text check (no second parse) accepts only the name's own line and the opening comment lines."""
    data = _variants()[f"nodes/{name}.yaml"].encode()
    shape = validation._shape_of(f"nodes/{name}.yaml", data)
    assert shape is not None
    name_line = 1 + data.split(b"\n").index(f"  name: {name}".encode()) if on_sight else 8
    assert validation._only_name_and_leading_comments(shape.template, name_line) is on_sight


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("nodes/yes.yaml", "a YAML keyword"),
        ("nodes/123.yaml", "a number"),
        ("nodes/gpu.dotted.yaml", "a dot"),
        ("nodes/sub/gpu-a.yaml", "a nested path"),
        ("nodes/gpu-a.yml", "another suffix"),
    ],
)
def test_stems_that_are_not_plain_strings_have_no_shape(path: str, reason: str) -> None:
    assert validation._shape_of(path, _text().encode()) is None, reason


def test_the_rebind_builders_know_every_field() -> None:
    """_rebind sets SourceRef's, Partition's and GpuSpec's slots one by one (see validation._ref): a field added to
    one of them, or a __post_init__, must change those builders too, or rebound nodes would silently differ."""
    from dataclasses import fields

    from reconciler.model.inventory import GpuSpec, Partition, Placement, SourceRef

    assert tuple(f.name for f in fields(SourceRef)) == validation._REF_FIELDS
    assert tuple(f.name for f in fields(Partition)) == validation._PARTITION_FIELDS
    assert tuple(f.name for f in fields(GpuSpec)) == validation._GPU_FIELDS
    for cls in (SourceRef, Partition, GpuSpec):
        assert not hasattr(cls, "__post_init__") and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert validation._ref("nodes/a.yaml", 7) == SourceRef("nodes/a.yaml", 7)
    written = ("3g.71gb", 4, "vllm", "chat", SourceRef("nodes/a.yaml", 9))
    assert validation._partition(*written) == Partition(*written)
    values = (3, "H200-141GB", True, (Partition("1g.18gb"),), "sevens", (Placement(0, 1),), SourceRef("n.yaml", 2))
    assert validation._gpu(*values) == GpuSpec(*values)
