"""`migplan twin` as a process: prints the URL once ready, serves kubectl, stops cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventory"
KUBECTL = REPO / ".venv" / "bin" / "kubectl"


def start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "twin",
            "--inventory",
            str(INVENTORY),
            "--kubeconfig-out",
            str(kubeconfig),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return proc, kubeconfig


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_until_interrupted(tmp_path: Path, sig: signal.Signals) -> None:
    proc, kubeconfig = start(tmp_path, "--strategy", "single", "--drift", "undocumented-node")
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("cluster twin ready: https://127.0.0.1:"), first + (
            proc.stderr.read() if proc.stderr else ""
        )
        assert kubeconfig.is_file()
        out = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "node/gpu-h200-01" in out and "node/gpu-undocumented-01" in out
        strategy = subprocess.run(
            [
                str(KUBECTL),
                "--kubeconfig",
                str(kubeconfig),
                "get",
                "clusterpolicy",
                "cluster-policy",
                "-o",
                "jsonpath={.spec.mig.strategy}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert strategy == "single"
        namespaces = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "namespaces", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.split()
        # What a real install has: the GPU Operator's and migplan's own (deploy/base/namespace.yaml), so
        # `migplan run` against the twin finds the namespace of its Lease.
        assert {"namespace/gpu-operator", "namespace/migplan", "namespace/kube-node-lease"} <= set(namespaces)
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "cluster twin stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_unknown_drift_case_is_a_usage_error(tmp_path: Path) -> None:
    proc, kubeconfig = start(tmp_path, "--drift", "melted-gpu")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "unknown drift case 'melted-gpu'" in err
    assert not kubeconfig.exists()


def test_drift_on_unknown_node_is_a_usage_error(tmp_path: Path) -> None:
    proc, kubeconfig = start(tmp_path, "--drift", "node-missing:no-such-node")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "no-such-node" in err
    assert not kubeconfig.exists()


def test_device_plugin_config_flag(tmp_path: Path) -> None:
    proc, kubeconfig = start(tmp_path, "--device-plugin-config", "old-plugin-config", "--drift", "pod-wants-gpu")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("cluster twin ready: ")
        kubectl = [str(KUBECTL), "--kubeconfig", str(kubeconfig)]
        name = subprocess.run(
            [*kubectl, "get", "clusterpolicy", "cluster-policy", "-o", "jsonpath={.spec.devicePlugin.config.name}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert name == "old-plugin-config"
        data = subprocess.run(
            [*kubectl, "get", "configmap", "old-plugin-config", "-n", "gpu-operator", "-o", "jsonpath={.data.default}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "migStrategy: single" in data  # the inventory says mixed: the stale config contradicts it
        phase = subprocess.run(
            [*kubectl, "get", "pod", "wants-gpu", "-o", "jsonpath={.status.phase}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert phase == "Pending"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_dra_flag_publishes_resource_slices_kubectl_can_list(tmp_path: Path) -> None:
    proc, kubeconfig = start(tmp_path, "--dra", "dynamic-mig")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("cluster twin ready: ")
        kubectl = [str(KUBECTL), "--kubeconfig", str(kubeconfig)]
        out = subprocess.run(
            [
                *kubectl,
                "get",
                "resourceslices",
                "--field-selector",
                "spec.nodeName=gpu-h200-01",
                "-o",
                "jsonpath={.items[*].spec.sharedCounters[*].name}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "gpu-0-counter-set" in out.split(), out  # DynamicMIG: one counter set per GPU
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_unknown_dra_mode_is_a_usage_error(tmp_path: Path) -> None:
    proc, kubeconfig = start(tmp_path, "--dra", "hami")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--dra" in err
    assert not kubeconfig.exists()
