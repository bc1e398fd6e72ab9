"""`migplan import` writes only inside --out: a `layouts/` or `nodes/` there that is a symbolic link (committed in a
cloned repository, say) is refused with MP589 before anything is written, with and without --force."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli

MIG_PARTED = """version: v1
mig-configs:
  balanced:
  - devices: all
    mig-enabled: true
    mig-devices: {1g.18gb: 7}
"""


@pytest.mark.parametrize("force", [False, True])
def test_a_linked_layouts_directory_is_refused_and_nothing_is_written_outside(tmp_path: Path, force: bool) -> None:
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (outside / "balanced.yaml").write_text("theirs\n")
    (out / "layouts").symlink_to(outside)
    source = tmp_path / "mp.yaml"
    source.write_text(MIG_PARTED)
    args = ["import", "--from-mig-parted", str(source), "--model", "H200-141GB", "--out", str(out)]
    result = CliRunner().invoke(cli, [*args, *(["--force"] if force else [])], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "MP589" in result.output and "is a symbolic link" in result.output
    assert [p.name for p in outside.iterdir()] == ["balanced.yaml"]
    assert (outside / "balanced.yaml").read_text() == "theirs\n"
    # Without the link, the same command writes inside --out.
    (out / "layouts").unlink()
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0 and (out / "layouts" / "balanced.yaml").is_file(), result.output
