"""The forked report renderer's cases (report_fork_cases.py), run in a process of their own.

The renderer forks only in a single-threaded process (adapters/git/bulkfork.py `may_fork`): in the suite's process,
threads that earlier tests leave running (servers, watches) would keep every case on the one-process path. Each case
is a real pytest test of that file; this test fails when any of them fails, and says which.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CASES = Path(__file__).with_name("report_fork_cases.py")
REPO = Path(__file__).resolve().parents[2]


def test_the_forked_renderer_cases_pass_in_a_single_threaded_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CASES)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
