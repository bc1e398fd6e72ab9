"""ConfigMaps migplan reads every cycle, poisoned by whoever may edit them (issue 25): the mig-parted ConfigMap
migplan writes itself and the device-plugin config the ClusterPolicy names. A few hundred bytes of YAML aliases
there, or an impossible date, end in findings on that object; the cycle completes, with no internal error."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import reconcile_once
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).resolve().parents[2] / "inventory"
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_poisoned_configmaps_end_in_findings_and_the_cycle_completes() -> None:
    desired, _diagnostics = load_desired(str(INVENTORY))
    assert desired is not None
    ops = desired.cluster.gpu_operator
    with ClusterTwin.from_inventory(INVENTORY, device_plugin_config="dp-config") as twin:
        store = twin.api.store
        mig = store.get("configmaps", ops.mig_config_map, ops.namespace)
        key = next(iter(mig["data"]))
        store.patch("configmaps", ops.mig_config_map, {"data": {key: LAUGHS + "version: *i\n"}}, ops.namespace)
        store.patch(
            "configmaps",
            "dp-config",
            {"data": {"a": LAUGHS + "flags: {migStrategy: *i}\n", "b": "since: 2026-13-45\n"}},
            ops.namespace,
        )
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
        try:
            result = reconcile_once(desired=desired, cluster=cluster, dry_run=True)
        finally:
            cluster.close()
    assert result.report is not None and not any(e.code == "MP899" for e in result.errors), result.errors
    messages = [f.message for n in result.report.nodes for f in n.findings] + [
        f.message for f in result.report.cluster_findings
    ]
    text = "\n".join(messages)
    assert "cannot be read: its aliases expand to more than" in text or "cannot be parsed" in text, text
    assert max(len(m) for m in messages) < 2000  # nothing expanded into a message
