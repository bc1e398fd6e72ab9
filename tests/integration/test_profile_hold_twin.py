"""A node whose GPUs do not offer its plan's profiles is held before it is labelled (issue 26 item 4).

The plan says gpu-h100-01 holds H200s cut into 1g.18gb (valid against the catalog's H200); the twin's node has H100s,
and its GFD labels say so. mig-parted would leave such a GPU empty and report success; migplan never labels the node
for that config and reports MP564, cycle after cycle, while the other nodes converge.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from helpers.inventories import H100_NODE, plan_h100_node_as_h200

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import reconcile_once
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
NODE = H100_NODE


def test_a_node_whose_gpus_lack_the_plans_profiles_is_never_labelled(tmp_path: Path) -> None:
    root = tmp_path / "inventory"
    shutil.copytree(INVENTORY, root)
    plan_h100_node_as_h200(root)
    cluster_file = root / "cluster.yaml"
    cluster_file.write_text(
        cluster_file.read_text().replace("  apply:\n", "  apply:\n    configPropagationSeconds: 0\n")
    )
    desired, diags = load_desired(root)
    assert desired is not None, [str(d) for d in diags]
    t0 = datetime.now(UTC)
    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        for pod in twin.store.list("pods", "default"):  # nothing holds its partitions: only the check can hold it
            if pod["spec"].get("nodeName") == NODE:
                twin.store.delete("pods", pod["metadata"]["name"], "default", grace_period_seconds=0)
        twin.settle()
        label_before = twin.store.get("nodes", NODE)["metadata"]["labels"].get("nvidia.com/mig.config")
        for i in range(4):
            cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
            try:
                result = reconcile_once(desired=desired, cluster=cluster, now=t0 + timedelta(minutes=i))
            finally:
                cluster.close()
            twin.settle()
            assert not [c for c in result.applied if c.subject == f"node/{NODE}" and c.kind is Kind.NODE_MIG_CONFIG]
            assert result.report is not None
            (held,) = [f for f in result.report.findings if f.node == NODE and f.code == "MP564"]
            assert "H100-80GB" in held.message and "1g.18gb" in held.message
        node = twin.store.get("nodes", NODE)
        assert node["metadata"]["labels"].get("nvidia.com/mig.config") == label_before
        others = [n for n in desired.nodes if n != NODE]
        assert all(
            twin.store.get("nodes", n)["metadata"]["labels"].get("nvidia.com/mig.config") == result.plan.node_configs[n]  # type: ignore[union-attr]
            for n in others
        )
