"""validate_inventory, the example inventory, the cache, the file-system reader and `migplan validate`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler import resources
from reconciler.adapters.fsinventory import InventoryReadError, read_inventory_dir
from reconciler.cli import cli
from reconciler.logic.inventory.validation import ParseCache, classify, solver_choices, validate_inventory
from reconciler.logic.inventory.yamldocs import MAX_FILE_BYTES
from reconciler.model.inventory import MigStrategy, Placement
from reconciler.model.revisions import Revision

EXAMPLE = resources.inventory_dir()


@pytest.fixture
def example(tmp_path: Path) -> Path:
    dest = tmp_path / "inv"
    shutil.copytree(EXAMPLE, dest)
    return dest


def test_example_inventory_is_valid_and_complete() -> None:
    result = validate_inventory(read_inventory_dir(EXAMPLE))
    assert result.valid, [str(d) for d in result.diagnostics]
    assert result.diagnostics == ()
    desired = result.desired
    assert desired is not None
    assert desired.cluster.name == "par1-prod" and desired.cluster.mig_strategy is MigStrategy.MIXED
    article = desired.nodes["gpu-h200-01"]
    assert [g.model for g in article.gpus] == ["H200-141GB", "H200-141GB"]
    profiles = sorted(p.profile for g in article.gpus for p in g.partitions)
    assert profiles == ["1g.18gb"] * 4 + ["2g.35gb"] * 2 + ["3g.71gb"] * 2
    for g in article.gpus:
        by_profile = {p.profile: pl for p, pl in zip(g.partitions, g.placements, strict=True)}
        assert by_profile["3g.71gb"] == Placement(4, 4)  # the only feasible spot for this cut
    # GPU 1 leaves every placement to the solver; the layout GPUs too.
    chosen = solver_choices(desired)
    assert any(c.node == "gpu-h200-01" and c.gpu == 1 and c.profile == "3g.71gb" for c in chosen)
    assert any(c.layout == "h200-balanced" for c in chosen)
    # The GFD product string resolves to the catalog key; a layout GPU carries the layout's partitions.
    h200_02 = desired.nodes["gpu-h200-02"].gpus[0]
    assert h200_02.model == "H200-141GB" and h200_02.layout == "h200-balanced" and len(h200_02.partitions) == 4
    assert any(not g.mig_enabled for g in desired.nodes["gpu-h100-01"].gpus)
    assert desired.nodes["gpu-a100-01"].gpus[1].layout == "a100-balanced"


def test_example_inventory_files_have_schema_modelines() -> None:
    for path in sorted(EXAMPLE.rglob("*.yaml")):
        first = path.read_text("utf-8").splitlines()[0]
        kind = "cluster" if path.name == "cluster.yaml" else path.parent.name.rstrip("s")
        assert first.startswith("# yaml-language-server: $schema="), path
        target = (path.parent / first.split("=", 1)[1]).resolve()
        assert target == (resources.schemas_dir() / f"{kind}.schema.json").resolve(), path


def test_all_errors_of_all_files_in_one_run(example: Path) -> None:
    node = example / "nodes" / "gpu-h100-01.yaml"
    node.write_text(node.read_text().replace("placement: 4, owner: eval", "placement: 2, owner: eval"))
    (example / "nodes" / "gpu-a100-01.yaml").write_text("- not a mapping\n")
    cluster = example / "cluster.yaml"
    cluster.write_text(cluster.read_text().replace("migStrategy: mixed", "migStrategy: single"))
    result = validate_inventory(read_inventory_dir(example))
    codes = {d.code for d in result.errors}
    assert {"MP306", "MP113", "MP401"} <= codes
    assert result.desired is None
    files = [d.file or "" for d in result.diagnostics]
    assert files == sorted(files)


def test_one_node_change_costs_one_parse(example: Path) -> None:
    cache = ParseCache()
    first = validate_inventory(read_inventory_dir(example), cache=cache)
    n_files = cache.parses
    assert first.valid and n_files == 7
    again = validate_inventory(read_inventory_dir(example), cache=cache)
    assert cache.parses == n_files and again == first
    node = example / "nodes" / "gpu-h100-01.yaml"
    node.write_text(node.read_text().replace("owner: eval", "owner: evaluation"))
    changed = validate_inventory(read_inventory_dir(example), cache=cache)
    assert cache.parses == n_files + 1
    assert changed.desired is not None
    assert changed.desired.nodes["gpu-h100-01"].gpus[0].partitions[1].owner == "evaluation"
    # Cross-file rules still see the new state: a strategy change re-checks every node from the cache.
    cluster = example / "cluster.yaml"
    cluster.write_text(cluster.read_text().replace("migStrategy: mixed", "migStrategy: single"))
    single = validate_inventory(read_inventory_dir(example), cache=cache)
    assert cache.parses == n_files + 2
    assert {d.code for d in single.errors} == {"MP401", "MP402"}


def test_blob_ids_key_the_cache() -> None:
    files = dict(read_inventory_dir(EXAMPLE))
    blob_ids = {p: f"{i:040x}" for i, p in enumerate(sorted(files))}
    cache = ParseCache()
    rev = Revision("main", "a" * 40)
    r1 = validate_inventory(files, cache=cache, blob_ids=blob_ids, revision=rev)
    assert r1.desired is not None and r1.desired.revision == rev
    parses = cache.parses
    validate_inventory(files, cache=cache, blob_ids=blob_ids, revision=rev)
    assert cache.parses == parses
    blob_ids["nodes/gpu-h100-01.yaml"] = "f" * 40
    validate_inventory(files, cache=cache, blob_ids=blob_ids, revision=rev)
    assert cache.parses == parses + 1


@pytest.mark.parametrize(
    ("path", "kind", "code"),
    [
        ("cluster.yaml", "Cluster", None),
        ("nodes/gpu-1.yaml", "Node", None),
        ("layouts/x.yaml", "Layout", None),
        ("README.md", None, None),
        ("nodes/.gitkeep", None, None),
        ("values.yaml", None, "MP410"),
        ("nodes/gpu-1.yml", None, "MP410"),
        ("nodes/../etc/passwd.yaml", None, "MP411"),
        ("/etc/passwd.yaml", None, "MP411"),
        ("nodes//x.yaml", None, "MP411"),
        ("nodes\\x.yaml", None, "MP411"),
        ("nodes/rack/x.yaml", None, "MP411"),
    ],
)
def test_classify_paths(path: str, kind: str | None, code: str | None) -> None:
    got_kind, problem = classify(path)
    assert got_kind == kind
    assert (problem.code if problem else None) == code


def test_path_like_keys_never_pass() -> None:
    files = dict(read_inventory_dir(EXAMPLE))
    files["nodes/../../etc/x.yaml"] = files["nodes/gpu-h100-01.yaml"]
    result = validate_inventory(files)
    assert not result.valid and "MP411" in {d.code for d in result.errors}


def test_reader_never_follows_symlinks_and_bounds_reads(example: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.yaml"
    outside.write_text("password: hunter2\n")
    os.symlink(outside, example / "nodes" / "leak.yaml")
    (example / "nodes" / "big.yaml").write_bytes(b"#" * (MAX_FILE_BYTES * 3))
    files = read_inventory_dir(example)
    assert "nodes/leak.yaml" not in files  # never read...
    assert len(files["nodes/big.yaml"]) == MAX_FILE_BYTES + 1
    result = validate_inventory(files)
    # ...but never silently dropped either (issue 10: what cannot be read is an error, MP420)
    assert [(d.code, d.file) for d in result.errors] == [("MP101", "nodes/big.yaml"), ("MP420", "nodes/leak.yaml")]


@pytest.mark.parametrize("stat_size", [0, 10, 2_500_000, 5_000_000])
@pytest.mark.parametrize("real_size", [0, 11, 2_500_000])
def test_the_bounded_read_trusts_no_size_it_was_told(stat_size: int, real_size: int, tmp_path: Path) -> None:
    """The reader sizes its first read from fstat; a file that grew or shrank since is still read whole up to
    the bound (here 2,000,001 bytes), never beyond it."""
    from reconciler.adapters.fsinventory import _read_bounded

    path = tmp_path / "f.yaml"
    path.write_bytes(bytes(range(256)) * (real_size // 256) + b"x" * (real_size % 256))
    fd = os.open(path, os.O_RDONLY)
    try:
        got = _read_bounded(fd, 2_000_001, stat_size)
    finally:
        os.close(fd)
    assert got == path.read_bytes()[:2_000_001]


def test_reader_rejects_missing_root(tmp_path: Path) -> None:
    with pytest.raises(InventoryReadError):
        read_inventory_dir(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InventoryReadError):
        read_inventory_dir(tmp_path / "file")


def test_cli_example_is_the_embedded_inventory_by_name() -> None:
    out = CliRunner().invoke(cli, ["validate", "--example"])
    assert out.exit_code == 0, out.output
    assert "valid: 4 node(s), 8 GPU(s), 26 partition(s); 0 error(s), 0 warning(s)" in out.output
    assert "nodes/gpu-h200-01.yaml:26: 3g.71gb placed at 4 (gpu-h200-01/1)" in out.output
    assert "H200-141GB placements are derived from H100-80GB" in out.output


def test_cli_json_valid() -> None:
    out = CliRunner().invoke(cli, ["validate", "-o", "json", str(EXAMPLE)])
    assert out.exit_code == 0
    doc = json.loads(out.output)
    assert doc["valid"] is True and doc["errors"] == [] and doc["warnings"] == []
    assert {"node": "gpu-h200-01", "gpu": 1, "profile": "3g.71gb", "start": 4, "size": 4}.items() <= next(
        p for p in doc["placements"] if p["node"] == "gpu-h200-01" and p["gpu"] == 1 and p["profile"] == "3g.71gb"
    ).items()
    assert doc["notes"][0]["placement_source"] == "derived:H100-80GB"


def test_cli_invalid_text_and_json(example: Path) -> None:
    node = example / "nodes" / "gpu-h100-01.yaml"
    text = node.read_text()
    node.write_text(text.replace("profile: 3g.40gb, placement: 4", "profile: 3g.40gb, placement: 2"))
    line = next(i for i, ln in enumerate(node.read_text().splitlines(), 1) if "placement: 2" in ln)
    out = CliRunner().invoke(cli, ["validate", str(example)])
    assert out.exit_code == 1
    assert f"nodes/gpu-h100-01.yaml:{line}: error MP306: " in out.output
    assert "INVALID" in out.output.splitlines()[-1]
    out = CliRunner().invoke(cli, ["validate", "-o", "json", str(example)])
    assert out.exit_code == 1
    doc = json.loads(out.output)
    assert doc["valid"] is False
    assert doc["errors"][0]["code"] == "MP306"
    assert doc["errors"][0]["file"] == "nodes/gpu-h100-01.yaml" and doc["errors"][0]["line"] == line
    assert set(doc["errors"][0]) >= {"code", "message", "file", "line"}


def test_cli_warnings_keep_exit_zero(example: Path) -> None:
    (example / "values.yaml").write_text("replicas: 3\n")
    out = CliRunner().invoke(cli, ["validate", str(example)])
    assert out.exit_code == 0
    assert "values.yaml: warning MP410:" in out.output


def test_cli_missing_root_is_exit_2(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["validate", str(tmp_path / "missing")])
    assert out.exit_code == 2
    out = CliRunner().invoke(cli, ["validate", "-o", "yaml"])
    assert out.exit_code == 2


def test_cluster_defaults_and_verify_settings() -> None:
    from reconciler.model.inventory import ApplyMode, ClusterSpec, VerifyMode

    minimal = {"cluster.yaml": b"apiVersion: migplan/v1\nkind: Cluster\nspec: {migStrategy: single}\n"}
    r = validate_inventory(minimal)
    assert r.valid and r.desired is not None
    c = r.desired.cluster
    assert c == ClusterSpec(name="default", mig_strategy=MigStrategy.SINGLE, source=c.source)
    assert c.source is not None and (c.source.file, c.source.line) == ("cluster.yaml", 3)
    full = {
        "cluster.yaml": b"apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: par2}\nspec:\n"
        b"  migStrategy: mixed\n  apply: {mode: agent, maxUnavailableNodes: 3, allowDisruption: true}\n"
        b"  verify:\n    mode: head\n    allowedSigners: ['ops@example.org ssh-ed25519 AAAAC3Nza']\n"
        b"    gpgPublicKeys: []\n"
    }
    r = validate_inventory(full)
    assert r.valid and r.desired is not None
    c = r.desired.cluster
    assert (c.name, c.apply.mode, c.apply.max_unavailable_nodes, c.apply.allow_disruption) == (
        "par2",
        ApplyMode.AGENT,
        3,
        True,
    )
    assert c.verify.mode is VerifyMode.HEAD
    assert c.verify.allowed_signers == ("ops@example.org ssh-ed25519 AAAAC3Nza",)
    bad = {"cluster.yaml": full["cluster.yaml"].replace(b"mode: head", b"mode: tail")}
    assert [d.code for d in validate_inventory(bad).errors] == ["MP204"]
