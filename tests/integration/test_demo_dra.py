"""`migplan demo --dra` (issue 30 item 5): a re-cut on a DRA-static node from the merge to converged slices, and a
pod written for the device plugin placed through the DeviceClass migplan rendered, on the new partition. Run as a
person runs it (a subprocess of the CLI), the JSON summary read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "demo", "--dra", *args], capture_output=True, text=True, timeout=300
    )


def test_dra_demo_converges_with_the_pod_on_the_new_partition(tmp_path: Path) -> None:
    proc = _demo("--workdir", str(tmp_path / "work"), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["converged"] is True
    steps = {s["step"]: s for s in doc["steps"]}
    (before,) = [s["published"] for t, s in steps.items() if t.startswith("a DRA-static node")]
    merged = steps["controller cycle on the merge: layout for the node agent, classes of the plan"]["writes"]
    assert "create deviceclass/migplan-mig-4g.71gb" in merged
    restart = steps["controller cycle: NVIDIA's DRA kubelet plugin restarted"]["writes"]
    assert restart and all("node/gpu-h200-dra-01" in w for w in restart)
    after = steps["the slices republish the plan, name for name"]["published"]
    placed = steps["the scheduler places the pod through the rendered DeviceClass"]
    assert placed["phase"] == "Running" and placed["deviceClass"] == "migplan-mig-4g.71gb"
    assert placed["device"] in after and placed["device"] not in before and "-mig-4g71gb-" in placed["device"]
    last = steps["next controller cycle"]
    assert last["writes"] == ["none"] and last["status"] == "InSync"
    assert not [s for s in doc["steps"] if s["step"].startswith("NOT AS EXPECTED")]


def test_dra_demo_text_says_each_step_and_the_outcome(tmp_path: Path) -> None:
    proc = _demo("--workdir", str(tmp_path / "work"))
    assert proc.returncode == 0, proc.stderr
    assert "* node agent re-cuts GPU 1 through NVML" in proc.stdout
    assert proc.stdout.rstrip().endswith("outcome: converged: the pod runs on the new partition")


def test_dra_demo_refuses_the_options_of_the_other_demo() -> None:
    proc = _demo("--drift", "undocumented-node")
    assert proc.returncode == 2 and "--dra runs its own scenario" in proc.stderr and not proc.stdout
