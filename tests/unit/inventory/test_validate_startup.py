"""`migplan validate DIR` must not import the Git, Kubernetes, NVML or gRPC bindings: their import alone
costs more than validating a large fleet (benchmarks/validate.py times the whole process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

HEAVY = ("pygit2", "kubernetes", "pynvml", "grpc")


def test_validate_of_a_directory_imports_no_heavy_binding() -> None:
    probe = (
        "import sys\n"
        "from reconciler.cli import main\n"
        "try:\n"
        f"    main(['validate', {str(REPO / 'inventory')!r}, '-o', 'json'])\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "else:\n"
        "    code = 0\n"
        f"loaded = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "sys.stderr.write('LOADED=' + ','.join(loaded) + ' CODE=' + str(code) + '\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert "LOADED= CODE=0" in done.stderr, done.stderr[-2000:]


def test_a_valid_plain_inventory_is_read_without_the_reference_readers() -> None:
    """pyyaml and jsonschema are the reference: they word diagnostics. A valid inventory in the plain shape
    (the example) is judged by the fast path alone, so neither is imported (~50 ms of start-up together)."""
    probe = (
        "import sys\n"
        "from reconciler.cli import main\n"
        "try:\n"
        f"    main(['validate', {str(REPO / 'inventory')!r}, '-o', 'json'])\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "loaded = sorted(m for m in ('yaml', 'jsonschema') if m in sys.modules)\n"
        "sys.stderr.write('LOADED=' + ','.join(loaded) + ' CODE=' + str(code) + '\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert "LOADED= CODE=0" in done.stderr, done.stderr[-2000:]
