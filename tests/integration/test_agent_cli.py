"""`migplan agent` and `migplan run` on the command line: bad configuration is a clear error (exit 2),
and without an NVIDIA driver the agent says so instead of crashing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reconciler.logic.codecs import observedcodec
from reconciler.twin.apiserver import ApiServerTwin


def migplan(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


def test_agent_needs_a_node_name() -> None:
    proc = migplan("agent", "--once")
    assert proc.returncode == 2 and "--node (or NODE_NAME) is required" in proc.stderr


def test_bad_settings_are_named(tmp_path: Path) -> None:
    proc = migplan("agent", "--once", "--node", "n1", env={"MIGPLAN_INTERVAL_SECONDS": "often"})
    assert proc.returncode == 2 and "MP800" in proc.stderr and "MIGPLAN_INTERVAL_SECONDS" in proc.stderr
    proc = migplan("run", "--once")
    assert proc.returncode == 2 and "--repo (or MIGPLAN_REPO) is required" in proc.stderr
    proc = migplan("run", "--repo", str(tmp_path), "--lease-duration", "0")
    assert proc.returncode == 2 and "lease_duration_seconds" in proc.stderr


def nvml_present() -> bool:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def test_agent_once_with_no_published_layout(tmp_path: Path) -> None:
    with ApiServerTwin() as api:
        api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        proc = migplan("agent", "--once", "--node", "n1", "--kubeconfig", str(kubeconfig))
        node = api.store.get("nodes", "n1")
    if nvml_present():
        # A machine with a driver: the agent reports the real GPUs and, with no layout published, changes nothing.
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.startswith("no-layout")
        assert "migplan.io/mig-observed" in node["metadata"]["annotations"]
    else:
        # No libnvidia-ml here: NVML's own error, translated, and exit 2. The observation says why, with
        # no GPU in it (never a guessed layout), and nothing else is written to the node.
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "nvmlInit" in proc.stderr and "NVML_ERROR_LIBRARY_NOT_FOUND" in proc.stderr
        annotations = node["metadata"].get("annotations") or {}
        obs = observedcodec.decode(annotations["migplan.io/mig-observed"])
        assert obs.gpus == () and obs.sources["nvml"].startswith("MP935: ")
        assert "NVML_ERROR_LIBRARY_NOT_FOUND" in obs.sources["nvml"]
        assert obs.sources["podResources"].startswith("MP930: ")  # no kubelet socket on this machine
        assert "migplan.io/mig.state.reason" not in annotations


def test_observe_only_publishes_what_it_could_read_and_succeeds(tmp_path: Path) -> None:
    """Every apply mode runs the observer: an unreadable source is a published reason, never a crash."""
    with ApiServerTwin() as api:
        api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        socket = tmp_path / "kubelet.sock"
        proc = migplan(
            "agent", "--once", "--observe-only", "--node", "n1", "--kubeconfig", str(kubeconfig),
            "--pod-resources-socket", str(socket),
        )  # fmt: skip
        node = api.store.get("nodes", "n1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    obs = observedcodec.decode(node["metadata"]["annotations"]["migplan.io/mig-observed"])
    assert obs.sources["podResources"] == f"MP930: pod-resources socket {socket} does not exist (is " + (
        "/var/lib/kubelet/pod-resources mounted?)"
    )
    if not nvml_present():
        assert obs.gpus == () and obs.sources["nvml"].startswith("MP935: ")
    assert "migplan.io/mig.state" not in (node["metadata"].get("labels") or {})  # it never actuates


def test_observe_only_reads_the_twin_kubelet_over_its_socket() -> None:
    """The real command, the real gRPC client, the twin's kubelet: the kubelet source answers; NVML is what
    this machine has (none here: the reason is published and no kubelet device is called unknown)."""
    from reconciler.resources import inventory_dir
    from reconciler.twin.cluster import ClusterTwin

    with ClusterTwin.from_inventory(inventory_dir()) as twin:
        twin.settle()
        node = "gpu-h200-01"
        proc = migplan(
            "agent", "--once", "--observe-only", "--node", node, "--kubeconfig", str(twin.kubeconfig),
            "--pod-resources-socket", str(twin.pod_resources_socket(node)),
        )  # fmt: skip
        annotations = twin.store.get("nodes", node)["metadata"]["annotations"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    obs = observedcodec.decode(annotations["migplan.io/mig-observed"])
    assert obs.sources["podResources"] == "ok"
    if not nvml_present():
        assert obs.gpus == () and obs.unknown_devices == ()
        assert "podResources ok" in proc.stdout and "nvml MP935" in proc.stdout
