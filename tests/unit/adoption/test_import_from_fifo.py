"""`migplan import --from-mig-parted` given a FIFO or a device: MP586 at once, never a read that blocks forever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_is_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "config.yaml"
    if kind == "fifo":
        os.mkfifo(source)  # nobody writes: open() and read() would block forever
    else:
        source = Path("/dev/zero")
    p = subprocess.run(
        [sys.executable, "-m", "reconciler", "import", "--from-mig-parted", str(source), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode == 2, p.stderr
    assert "MP586" in p.stderr and "not a regular file" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()
