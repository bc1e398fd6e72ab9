"""`migplan validate` ends its process without the interpreter's teardown (reconciler/commands/quickexit.py):
what it prints and its exit status must be exactly those of a normal exit, however large the output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_script

from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.commands.validate import render_json
from reconciler.logic.inventory.validation import validate_inventory

REPO = Path(__file__).resolve().parents[3]
generate = load_script("bench_validate", REPO / "benchmarks" / "validate.py").generate

# Buffered standard streams, as a user's shell gives them: PYTHONUNBUFFERED (set in some CI images) would write
# every line at once and hide a missing flush.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _migplan(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args], capture_output=True, timeout=120, check=False, cwd=REPO, env=ENV
    )


def _normal_exit(*args: str) -> subprocess.CompletedProcess[bytes]:
    """The same command through main(argv), which never takes the quick exit."""
    code = f"from reconciler.cli import main\nmain({list(args)!r})\n"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=120, check=False, cwd=REPO, env=ENV
    )


@pytest.mark.parametrize("style", ["compact", "block"])
def test_a_large_json_document_arrives_whole(style: str, tmp_path: Path) -> None:
    root = tmp_path / "inv"
    generate(root, 300, style)
    quick = _migplan("validate", str(root), "-o", "json")
    assert quick.returncode == 0, quick.stderr
    catalog = load_catalog()
    expected = render_json(
        validate_inventory(read_inventory_dir(root), catalog=catalog), root=str(root), catalog=catalog
    )
    assert len(expected) > 1_000_000  # more than any pipe buffer: the flush before the exit is what delivers it
    assert quick.stdout == expected
    assert quick.stdout == _normal_exit("validate", str(root), "-o", "json").stdout


@pytest.mark.parametrize("output", ["text", "json", "github"])
def test_an_invalid_inventory_exits_1_with_the_same_output(output: str, tmp_path: Path) -> None:
    root = tmp_path / "inv"
    generate(root, 3, "block")
    node = root / "nodes" / "gpu-00001.yaml"
    node.write_text(node.read_text().replace("profile: 3g.71gb", "profile: 3g.70gb"))
    quick = _migplan("validate", str(root), "-o", output)
    normal = _normal_exit("validate", str(root), "-o", output)
    assert quick.returncode == normal.returncode == 1
    assert quick.stdout == normal.stdout and b"MP3" in quick.stdout
    assert quick.stderr == normal.stderr


def test_usage_and_io_errors_keep_exit_2(tmp_path: Path) -> None:
    missing = _migplan("validate", str(tmp_path / "missing"))
    assert missing.returncode == 2 and b"cannot read inventory root" in missing.stderr
    usage = _migplan("validate", "-o", "yaml")
    assert usage.returncode == 2 and b"Invalid value" in usage.stderr


@pytest.mark.parametrize(("code", "status", "stderr"), [("None", 0, b""), ("3", 3, b""), ("'bye'", 1, b"bye\n")])
def test_exit_now_gives_the_status_sys_exit_would(code: str, status: int, stderr: bytes) -> None:
    program = (
        "import sys\nfrom reconciler.commands import quickexit\n"
        "sys.stdout.write('buffered, not yet flushed')\n"
        f"quickexit.exit_now({code})\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60, check=False, env=ENV)
    assert done.returncode == status
    assert done.stdout == b"buffered, not yet flushed"
    assert done.stderr == stderr
