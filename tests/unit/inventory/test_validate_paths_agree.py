"""`migplan validate` prints byte for byte the same thing whichever way each file was read.

The optimised path (the fast parser and compiled schema, node files of a known shape rebound instead of parsed,
whose own entry the text alone may vouch for) must give exactly the output of the reference path (pyyaml and
jsonschema on every file, no shape memo): the JSON and text documents, every diagnostic's code, message, file and
line, and every solver placement. Checked on benchmarks/validate.py's fleets in both styles, with look-alikes of
the shapes the memo accepts added among them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import load_script

from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.commands.validate import render_json, render_text
from reconciler.logic.inventory import validation
from reconciler.logic.inventory.validation import ParseCache, ValidationResult, validate_inventory

REPO = Path(__file__).resolve().parents[3]
generate = load_script("bench_validate", REPO / "benchmarks" / "validate.py").generate


def _look_alikes(text: str, name: str, style: str) -> dict[str, str]:
    """Copies of node file `text` (named `name`) where the name appears where the shape memo must look twice."""
    flow = style == "compact"
    out: dict[str, str] = {}
    for i in range(3):
        n = f"gpu-tail-{i}"  # a comment after the name, on its line
        out[n] = text.replace(name, n).replace(f"  name: {n}\n", f"  name: {n}  # {n}\n")
        n = f"gpu-mid-{i}"  # a comment line after the content has begun
        out[n] = text.replace(name, n).replace("spec:\n", f"spec:\n# {n}: spare\n")
        n = f"gpu-head-{i}"  # comment lines that open the file
        out[n] = f"# {n}\n#\n# {n} again\n" + text.replace(name, n)
        n = f"gpu-label-{i}"  # the name as a label value: never the name's alone
        host = f"{{host: {n}, rack:" if flow else f"\n    host: {n}\n    rack:"
        out[n] = text.replace(name, n).replace("{rack:" if flow else "\n    rack:", host, 1)
        n = f"gpu-quoted-{i}"  # the name quoted: the same document, another text
        out[n] = text.replace(name, n).replace(f"name: {n}", f'name: "{n}"')
        n = f"gpu-hash-{i}"  # a line starting with '#' inside a quoted value: text, not a comment
        if flow:
            hashed = f'owner: whisper, purpose: "spare\n            # {n}"}}'
            out[n] = text.replace(name, n).replace("owner: whisper}", hashed, 1)
        else:
            hashed = f'owner: whisper\n            purpose: "spare\n              # {n}"\n'
            out[n] = text.replace(name, n).replace("owner: whisper\n", hashed, 1)
    return out


def _outputs(root: Path) -> tuple[bytes, str, ValidationResult]:
    catalog = load_catalog()
    result = validate_inventory(read_inventory_dir(root), catalog=catalog, cache=ParseCache())
    return render_json(result, root="inv", catalog=catalog), render_text(result, root="inv", catalog=catalog), result


@pytest.mark.parametrize("style", ["compact", "block"])
@pytest.mark.parametrize("added", ["clones", "look-alikes", "misnamed"])
def test_optimised_and_reference_paths_print_the_same(
    style: str, added: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "inv"
    generate(root, 40, style)
    base = (root / "nodes" / "gpu-00003.yaml").read_text()
    for i in range(12):  # clean clones: a 40-node fleet repeats no shape of its own (its racks differ)
        (root / "nodes" / f"gpu-clone-{i:02d}.yaml").write_text(base.replace("gpu-00003", f"gpu-clone-{i:02d}"))
    if added == "look-alikes":
        for n, text in _look_alikes(base, "gpu-00003", style).items():
            assert text != base.replace("gpu-00003", n), n  # each look-alike really differs from a clean clone
            (root / "nodes" / f"{n}.yaml").write_text(text)
    if added == "misnamed":  # clean clones' shape, naming another node: MP404 and MP405 for each
        for i in range(3):
            (root / "nodes" / f"gpu-misnamed-{i}.yaml").write_text(base.replace("gpu-00003", "gpu-00001"))
    rebound: list[str] = []
    real = validation._rebind

    def counting(*args: object) -> object:
        rebound.append(str(args[1]))
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(validation, "_rebind", counting)
    optimised = _outputs(root)
    assert len(rebound) >= 12, "the memo must actually be exercised"
    reused = set(rebound)
    monkeypatch.setattr(validation, "FAST_PATH", False)
    monkeypatch.setattr(validation, "_SHAPE_LIMIT", 0)
    rebound.clear()
    reference = _outputs(root)
    assert rebound == []
    assert optimised[0] == reference[0]
    assert optimised[1] == reference[1]
    # What no output shows (the desired state's every SourceRef) is what plan and reconcile word theirs with.
    assert optimised[2] == reference[2]
    if added == "look-alikes":  # the name's value alone (and comments): reused; the name elsewhere: never
        assert {f"nodes/gpu-{k}-{i}.yaml" for k in ("head", "tail", "mid") for i in (1, 2)} <= reused
        assert not {path for path in reused if "-label-" in path or "-hash-" in path}
    valid = added != "misnamed"
    assert (b'"valid": true' in optimised[0]) is valid and (b"MP404" in optimised[0]) is not valid
