"""The observed path end to end: `migplan agent --observe-only` run exactly as `migplan twin` prints it.

The twin prints one agent command line per served node (its kubelet's socket and its NVML file through the
PYNVML_MODULE seam). Run as printed, the agent publishes the node's `migplan.io/mig-observed` annotation with
NVML read (GPUs, MIG devices, the processes of the pods holding them), and the next reconcile's report says that
node's occupancy is observed, while a node whose agent did not run stays inferred.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from reconciler.logic.codecs import observedcodec

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventory"
NODE, OTHER = "gpu-h200-01", "gpu-a100-01"


def migplan_argv() -> list[str]:
    """The `migplan` console script of this interpreter's environment (as a user types it), else the module."""
    script = Path(sys.executable).with_name("migplan")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "reconciler"]


def run_as_printed(line: str) -> subprocess.CompletedProcess[str]:
    """A printed shell line `VAR=value ... migplan agent ...`: its assignments become the environment."""
    words = shlex.split(line)
    env = {k: v for k, v in os.environ.items() if k not in ("PYNVML_MODULE", "NVML_TWIN_FILE")}
    while "=" in words[0]:
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[0] == "migplan", line
    return subprocess.run([*migplan_argv(), *words[1:]], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def report_nodes(kubeconfig: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [
            *migplan_argv(), "reconcile", "--once", "--dry-run", "-o", "json",
            "--kubeconfig", str(kubeconfig), "--inventory", str(INVENTORY),
        ],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = orjson.loads(proc.stdout)
    return {n["name"]: n for n in doc["report"]["nodes"]}


def node_annotation(kubeconfig: Path, node: str) -> str | None:
    from reconciler.adapters.kube import client as kubeclient

    api = kubeclient.core_v1(kubeclient.api_client(kubeclient.kube_configuration(str(kubeconfig))))
    annotations = api.read_node(node).metadata.annotations or {}
    value = annotations.get("migplan.io/mig-observed")
    return str(value) if value is not None else None


def test_agent_as_printed_by_the_twin_observes_the_node(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    twin = subprocess.Popen(
        [*migplan_argv(), "twin", "--inventory", str(INVENTORY), "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert twin.stdout is not None
        printed: dict[str, str] = {}
        for line in twin.stdout:
            if line.startswith("agent "):
                node, command = line[len("agent ") :].split(": ", 1)
                printed[node] = command.strip()
            if len(printed) == 4 or not line:
                break
        assert set(printed) == {"gpu-a100-01", "gpu-h100-01", "gpu-h200-01", "gpu-h200-02"}, printed
        assert "--observe-only" in printed[NODE] and f"--node {NODE}" in printed[NODE]

        before = report_nodes(kubeconfig)
        assert node_annotation(kubeconfig, NODE) is None
        assert {o["source"] for o in before[NODE]["occupancy"]} == {"inferred"}

        agent = run_as_printed(printed[NODE])
        assert agent.returncode == 0, agent.stdout + agent.stderr
        assert "nvml ok" in agent.stdout and "podResources ok" in agent.stdout, agent.stdout + agent.stderr

        encoded = node_annotation(kubeconfig, NODE)
        assert encoded is not None
        obs = observedcodec.decode(encoded)
        assert obs.sources == {"nvml": "ok", "podResources": "ok"}
        assert len(obs.gpus) == 2 and all(g.instances for g in obs.gpus)
        held = [i for g in obs.gpus for i in g.instances if i.holders]
        assert held and all(i.processes for i in held)  # NVML's processes and the kubelet's pods, joined

        after = report_nodes(kubeconfig)
        assert {o["source"] for o in after[NODE]["occupancy"]} == {"observed"}
        assert {o["source"] for o in after[OTHER]["occupancy"]} == {"inferred"}  # its agent did not run
        assert after[NODE]["observer"] != before[NODE]["observer"]
    finally:
        twin.terminate()
        twin.communicate(timeout=30)
