"""The fast path (yaml-rs + compiled schema + item-line scan) and the reference path (pyyaml +
jsonschema) must agree: same DesiredState, same diagnostics, on the example inventory, on every
corpus case, on a generated fleet, and on the YAML 1.1 / 1.2 corner cases the byte screen guards."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers import load_script
from helpers.corpus import CASES, build_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.logic.inventory import validation, yamldocs
from reconciler.logic.inventory.validation import ValidationResult, validate_inventory

REPO = Path(__file__).resolve().parents[3]


def _bench() -> Any:
    return load_script("bench_validate", REPO / "benchmarks" / "validate.py")


def both(files: Mapping[str, bytes], monkeypatch: pytest.MonkeyPatch) -> tuple[ValidationResult, ValidationResult]:
    monkeypatch.setattr(validation, "FAST_PATH", True)
    fast = validate_inventory(files)
    monkeypatch.setattr(validation, "FAST_PATH", False)
    reference = validate_inventory(files)
    monkeypatch.setattr(validation, "FAST_PATH", True)
    return fast, reference


@pytest.fixture
def count_reference(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    calls: list[str] = []
    real = yamldocs.load_yaml

    def counting(data: bytes, *, file: str) -> Any:
        calls.append(file)
        return real(data, file=file)

    monkeypatch.setattr(yamldocs, "load_yaml", counting)
    yield calls


def test_example_inventory_agrees_and_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, count_reference: list[str]
) -> None:
    files = read_inventory_dir(resources.inventory_dir())
    monkeypatch.setattr(validation, "FAST_PATH", True)
    fast = validate_inventory(files)
    # Every file of the example is plain (comments aside): none needs the reference loader.
    assert count_reference == []
    monkeypatch.setattr(validation, "FAST_PATH", False)
    reference = validate_inventory(files)
    assert fast == reference and fast.valid


@pytest.mark.parametrize("name", CASES)
def test_corpus_case_agrees(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_case(name, tmp_path / "inv")
    fast, reference = both(read_inventory_dir(tmp_path / "inv"), monkeypatch)
    assert fast.diagnostics == reference.diagnostics
    assert fast.desired == reference.desired


def test_generated_fleet_agrees_without_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count_reference: list[str]
) -> None:
    _bench().generate(tmp_path / "inv", 30)
    files = read_inventory_dir(tmp_path / "inv")
    monkeypatch.setattr(validation, "FAST_PATH", True)
    fast = validate_inventory(files)
    assert count_reference == [], "plain files must not need the reference loader"
    monkeypatch.setattr(validation, "FAST_PATH", False)
    reference = validate_inventory(files)
    assert fast == reference and fast.valid


NODE = """\
# yaml-language-server: $schema=../../schemas/node.schema.json
apiVersion: migplan/v1
kind: Node
metadata:
  name: n1
  labels: {rack: r1}
spec:
  gpus:
    - index: 0
      model: H100-80GB
      mig:
        enabled: true
        partitions:
          - {profile: 3g.40gb, placement: 4, owner: team-a, purpose: serving}
          - {profile: 2g.20gb, owner: team-b}
    - index: 1
      model: H100-80GB
      layout: halves
"""
LAYOUT = (
    b"apiVersion: migplan/v1\nkind: Layout\nmetadata: {name: halves}\nspec:\n  mig:\n    enabled: true\n"
    b"    partitions:\n      - {profile: 3g.40gb}\n      - {profile: 3g.40gb}\n"
)
# (old, new) edits of NODE where YAML 1.1 (pyyaml) and 1.2 (yaml-rs) read the bytes differently,
# or where the fast path must step aside; the verdicts of both paths must still be identical.
EDITS = [
    ("index: 1", "index: 017"),
    ("index: 1", "index: +017"),
    ("index: 1", "index: 0o17"),
    ("index: 1", "index: 0x1"),
    ("index: 1", "index: 1.0"),
    ("index: 1", "index: 1e0"),
    ("index: 1", "index: 1_0"),
    ("index: 1", "index: .0"),
    ("placement: 4", "placement: 0:4"),
    ("enabled: true", "enabled: yes"),
    ("enabled: true", "enabled: on"),
    ("enabled: true", "enabled: 'true'"),
    ("owner: team-a", "owner: no"),
    ("owner: team-a", "owner: 'no'"),
    ("purpose: serving", "purpose: 1:20"),
    ("purpose: serving", "purpose: 2024-01-01"),
    ("purpose: serving", "purpose: =="),
    ("{rack: r1}", "{on: r1}"),
    ("{rack: r1}", "{rack: y}"),
    ("{rack: r1}", "{true: r1}"),
    ("{rack: r1}", "{1: r1}"),
    ("{rack: r1}", "{null: r1}"),
    ("  name: n1\n", "  name: n1\n  name: n1\n"),
    ("  labels: {rack: r1}\n", "  labels:\n    name: n2\n"),
    ("    - index: 1\n", "    -\n      index: 1\n"),
    ("    - index: 1\n", "    - # gpu two\n      index: 1\n"),
    ("          - {profile: 2g.20gb, owner: team-b}\n", "          - profile: 2g.20gb\n            owner: team-b\n"),
    ("purpose: serving}", "purpose: serving,\n             owner: x}"),
    ("purpose: serving", "purpose: serving # trailing: comment & more"),
    ("purpose: serving", 'purpose: "serving # not a comment"'),
    ("layout: halves", "layout: quarters"),
    ("layout: halves", "layout: halves\n      mig: {enabled: false}"),
    ("kind: Node", "kind: Node\n---\nkind: Node"),
    # issue 10: forms refused with MP116 by the reference must never be accepted by the fast path
    ("index: 1", "index: +1"),
    ("placement: 4", "placement: +4"),
    ("placement: 4", "placement: -00"),
    ("placement: 4", "placement: -0x4"),
    ("placement: 4", "placement: 0b100"),
    ("owner: team-a", "owner: 1e3"),
    ("owner: team-a", "owner: 09"),
    ("purpose: serving", "purpose: 1_000"),
    ("owner: team-a", 'owner: "team-a\\n"'),
    ("{rack: r1}", '{rack: "r1\\n"}'),
]


@pytest.mark.parametrize(("old", "new"), EDITS)
def test_yaml_dialect_corner_cases_agree(old: str, new: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = NODE.replace(old, new, 1)
    assert text != NODE
    files = {
        "cluster.yaml": b"apiVersion: migplan/v1\nkind: Cluster\nspec: {migStrategy: mixed}\n",
        "nodes/n1.yaml": text.encode(),
        "layouts/halves.yaml": LAYOUT,
    }
    fast, reference = both(files, monkeypatch)
    assert fast.diagnostics == reference.diagnostics
    assert fast.desired == reference.desired


def test_unedited_corner_case_base_is_valid_and_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    assert yamldocs.fast_parse(NODE.encode()) is not None
    files = {
        "cluster.yaml": b"apiVersion: migplan/v1\nkind: Cluster\nspec: {migStrategy: mixed}\n",
        "nodes/n1.yaml": NODE.encode(),
        "layouts/halves.yaml": LAYOUT,
    }
    fast, reference = both(files, monkeypatch)
    assert fast == reference and fast.valid


def test_copy_of_example_with_layout_error_points_at_layout_key(tmp_path: Path) -> None:
    # A fast-path file only knows its item lines; a cross-file diagnostic must still name the
    # exact line of `layout:`.
    dest = tmp_path / "inv"
    shutil.copytree(resources.inventory_dir(), dest)
    (dest / "layouts" / "a100-balanced.yaml").unlink()
    result = validate_inventory(read_inventory_dir(dest))
    got = sorted((d.code, d.file, d.line) for d in result.errors)
    assert got == [("MP407", "nodes/gpu-a100-01.yaml", 12), ("MP407", "nodes/gpu-a100-01.yaml", 15)]


# Random edits of the example inventory's files, biased towards the bytes and words where YAML 1.1
# and 1.2 differ or where the line scan could slip: the two paths must never disagree, and neither
# may raise.
_EXAMPLE = {p: b for p, b in read_inventory_dir(resources.inventory_dir()).items() if p.endswith(".yaml")}
_PIECES = [
    "\r",
    "\x07",
    "\x85",
    "\u2028",
    "# note: ",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "~",
    "null",
    "true",
    "017",
    "0o7",
    "0x1",
    "1e3",
    "4.0",
    ".5",
    "1:20",
    "1_0",
    "+1",
    "-",
    "- ",
    ":",
    ": ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "#",
    " #",
    '"',
    "'",
    "&a",
    "*a",
    "<<",
    "!",
    "|",
    ">",
    "\t",
    "\n",
    "\n  ",
    "\n    - ",
    "  ",
    "---\n",
    "...",
    "é",
    "\x00",
    "\r\n",
    "\ufeff",
    "index: 1",
    "name: x",
    "placement: 4",
    "profile: 1g.18gb",
    "owner: ",
    "layout: h200-balanced",
    "enabled: false",
    "9" * 25,
]


@st.composite
def edited_inventories(draw: st.DrawFn) -> dict[str, bytes]:
    files = dict(_EXAMPLE)
    path = draw(st.sampled_from(sorted(files)))
    data = files[path]
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        cut = draw(st.integers(0, 6))
        piece = draw(st.sampled_from(_PIECES)).encode()
        data = data[:at] + piece + data[at + cut :]
    files[path] = data
    return files


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=edited_inventories())
def test_random_edits_agree(files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    fast, reference = both(files, monkeypatch)
    assert fast.diagnostics == reference.diagnostics
    assert fast.desired == reference.desired


# Files the fast parser declines (a flow list `[...]`, quoted values) are read by the reference loader; the
# compiled schema then vouches for the valid ones instead of jsonschema, which costs ~50x more a file.
_FLOW_GPU = (
    "    - {{index: {i}, model: H200-141GB, mig: {{enabled: true, partitions: "
    "[{{profile: 3g.71gb, owner: {owner}}}, {{profile: 2g.35gb}}, {{profile: 1g.18gb}}, {{profile: 1g.18gb}}]}}}}\n"
)
_FLOW_BAD = {
    "unknown key in a flow list": ("{profile: 2g.35gb}", "{profile: 2g.35gb, colour: red}"),
    "placement as a string": ("{profile: 2g.35gb}", '{profile: 2g.35gb, placement: "0"}'),
    "owner with an upper case": ("owner: team", "owner: Team"),
    "no profile": ("{profile: 2g.35gb}", "{placement: 0}"),
    "placement as a float": ("{profile: 2g.35gb}", "{profile: 2g.35gb, placement: 2.0}"),
    "index as a float": ("{index: 1,", "{index: 1.0,"),
}


def _flow_fleet(nodes: int, edit: tuple[str, str] | None = None) -> dict[str, bytes]:
    cluster = b"apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: f}\nspec:\n  migStrategy: mixed\n"
    files = {"cluster.yaml": cluster}
    for k in range(nodes):
        gpus = "".join(_FLOW_GPU.format(i=i, owner=f"team-{k}") for i in range(2))
        text = f'apiVersion: migplan/v1\nkind: Node\nmetadata: {{name: "n{k}"}}\nspec:\n  gpus:\n{gpus}'
        if edit is not None and k == 1:
            text = text.replace(edit[0], edit[1], 1)
        files[f"nodes/n{k}.yaml"] = text.encode()
    return files


def test_flow_lists_agree_and_skip_jsonschema_when_valid(
    monkeypatch: pytest.MonkeyPatch, count_reference: list[str]
) -> None:
    from reconciler.logic.inventory import schemas

    checked: list[str] = []
    real = schemas.check_document

    def counting(doc: Any, *, kind: str, file: str) -> Any:
        checked.append(file)
        return real(doc, kind=kind, file=file)

    monkeypatch.setattr(schemas, "check_document", counting)
    files = _flow_fleet(6)
    fast, reference = both(files, monkeypatch)
    assert fast == reference and fast.valid
    assert len(count_reference) >= 12, "the flow-list files go through the reference loader"
    # jsonschema ran only for the reference run: the fast run's valid files were vouched for by the compiled schema.
    assert len(checked) == 7


@pytest.mark.parametrize("case", sorted(_FLOW_BAD))
def test_flow_list_errors_are_the_references(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, reference = both(_flow_fleet(3, _FLOW_BAD[case]), monkeypatch)
    assert not fast.valid
    assert fast.diagnostics == reference.diagnostics
    assert {d.file for d in fast.errors} == {"nodes/n1.yaml"}


@pytest.mark.parametrize(
    ("value", "accepted"),
    [({"a": "x"}, True), ({"a": "y"}, False), ({"b": True}, True), ({"b": 1}, False), ({"b": "true"}, False)],
)
def test_the_fast_schema_keeps_const_without_detailed_exceptions(value: dict[str, Any], accepted: bool) -> None:
    """schemas._compile rewrites `const` as a one-value `enum` (fastjsonschema cannot generate `const` without
    detailed exceptions): same values accepted, with an `enum` beside it both must hold, True is not 1."""
    import fastjsonschema

    from reconciler.logic.inventory import schemas

    check = schemas._compile(
        fastjsonschema,
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {"a": {"const": "x", "enum": ["x", "y"]}, "b": {"const": True}},
        },
    )
    try:
        check(value)
    except fastjsonschema.JsonSchemaException:
        assert not accepted
    else:
        assert accepted
