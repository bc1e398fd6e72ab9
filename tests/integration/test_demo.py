"""`migplan demo` runs the whole main job on the embedded default and leaves a report in Git."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _codes(cycle: dict) -> set[str]:
    report = cycle["cycle"]["report"]
    codes = {f["code"] for f in report["clusterFindings"]}
    for node in report["nodes"]:
        codes |= {f["code"] for f in node["findings"]}
    return codes


def test_demo_repairs_what_it_may_and_commits_the_report(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo", "--workdir", str(work), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    cycles = doc["cycles"]
    assert len(cycles) >= 2

    first, last = cycles[0], cycles[-1]
    # The injected drift is seen: wrong strategy, stale device-plugin config, an undocumented node.
    assert {"MP502", "MP503"} <= _codes(first)
    assert first["cycle"]["applied"], "the first cycle must repair what migplan owns"
    # ...and repaired: the strategy findings are gone, the re-cut H100 is back in sync, only what a
    # person must fix remains (the undocumented node, the pod asking for nvidia.com/gpu).
    assert not {"MP502", "MP503"} & _codes(last)
    statuses = {n["name"]: n["status"] for n in last["cycle"]["report"]["nodes"]}
    assert statuses["gpu-h100-01"] == "InSync"
    assert statuses["gpu-h200-02"] == "InSync"
    assert statuses["gpu-undocumented-01"] == "Undocumented"
    assert last["cycle"]["applied"] == []

    # The report is in Git, on its own branch, once per distinct content, naming the revision.
    repo = Path(doc["repository"])
    head = _git(repo, "rev-parse", "main").strip()
    readme = _git(repo, "show", "migplan-reports:reports/README.md")
    assert "MIG drift report" in readme and head in readme
    drift = _git(repo, "show", "migplan-reports:reports/drift.yaml")
    assert "gpu-undocumented-01" in drift
    log = _git(repo, "log", "--format=%s", "migplan-reports").splitlines()
    committed = [c for c in cycles if c["report"]["status"] == "committed"]
    assert len(log) == len(committed) >= 1
    assert all(head in line for line in log)
    # The inventory branch is untouched by the controller's commits.
    assert _git(repo, "rev-list", "--count", "main").strip() == "1"
