"""Adopting a cluster whose ClusterPolicy names the operator's ConfigMap, over the mig-manager rollout the switch
starts (issue 26 item 3): migplan writes its ConfigMap (carrying the configs the nodes' labels name), points the
ClusterPolicy at it, and the operator rolls the mig-manager DaemonSet one node at a time (15 s a pod, on the twin's
clock). migplan relabels a node to a config only its own ConfigMap holds once that node's mig-manager reads it
(MP567 until then): no node's state is ever `failed` on the way."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from helpers.twinclock import TwinClock, desired_from, reconcile_cycle

from reconciler.model.plans import Action, Kind
from reconciler.twin.cluster import ClusterTwin

REPO = Path(__file__).resolve().parents[2]
NS = "gpu-operator"
CP = "cluster-policy"
FOREIGN = "default-mig-parted-config"
OURS = "migplan-mig-parted-config"
READY = 15.0  # seconds a new mig-manager pod takes to start (ASSUMPTIONS-operator.md)
H200 = ("gpu-h200-01", "gpu-h200-02")
# The operator's own name for the H200s' geometry (3g.71gb + 2g.35gb + 2 x 1g.18gb on every GPU): mig-parted's assert
# passes on it, so relabelling between the two names changes no GPU.
BALANCED = {
    "all-balanced": [
        {
            "devices": "all",
            "mig-enabled": True,
            "mig-devices": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
        }
    ]
}


def _inventory(tmp: Path) -> Path:
    root = tmp / "inventory"
    shutil.copytree(REPO / "inventory", root)
    cluster = root / "cluster.yaml"
    text = cluster.read_text()
    # a short propagation wait, so that only the rollout can keep a relabel back once the ConfigMap is written
    text = text.replace(
        "    maxUnavailableNodes: 1", "    maxUnavailableNodes: 4\n    configPropagationSeconds: 5\n   "
    )
    cluster.write_text(text)
    return root


def _run_for(twin: ClusterTwin, clock: TwinClock, seconds: float, step: float = 5.0) -> None:
    for _ in range(round(seconds / step)):
        clock.advance(step)
        twin.tick()


def _labels(twin: ClusterTwin, node: str) -> dict[str, str]:
    labels: dict[str, str] = twin.store.get("nodes", node)["metadata"]["labels"]
    return labels


def _foreign_cluster(twin: ClusterTwin, clock: TwinClock) -> None:
    """The cluster as migplan finds it: the ClusterPolicy names the operator's ConfigMap, the H200s carry its
    `all-balanced`, migplan's ConfigMap does not exist."""
    ours = yaml.safe_load(twin.store.get("configmaps", OURS, NS)["data"]["config.yaml"])
    configs = {**ours["mig-configs"], **BALANCED}
    doc = {"version": "v1", "mig-configs": configs}
    twin.store.create("configmaps", {"metadata": {"name": FOREIGN}, "data": {"config.yaml": yaml.safe_dump(doc)}}, NS)
    twin.store.patch("clusterpolicies.nvidia.com", CP, {"spec": {"migManager": {"config": {"name": FOREIGN}}}})
    _run_for(twin, clock, READY * 5)
    for node in H200:
        twin.store.patch("nodes", node, {"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}})
    twin.settle()
    # the operator's file as it would be: none of migplan's H200 config
    kept = {k: v for k, v in configs.items() if k in BALANCED or k == "all-disabled" or _named_by_non_h200(twin, k)}
    doc = {"version": "v1", "mig-configs": kept}
    twin.store.patch("configmaps", FOREIGN, {"data": {"config.yaml": yaml.safe_dump(doc)}}, NS)
    twin.store.delete("configmaps", OURS, NS)
    twin.settle()
    for node in H200:
        assert _labels(twin, node)["nvidia.com/mig.config.state"] == "success"


def _named_by_non_h200(twin: ClusterTwin, config: str) -> bool:
    return any(_labels(twin, n)["nvidia.com/mig.config"] == config for n in ("gpu-a100-01", "gpu-h100-01"))


def test_adoption_over_the_mig_manager_rollout_never_turns_a_node_failed(tmp_path: Path) -> None:
    clock = TwinClock(step=0.0)
    desired = desired_from(_inventory(tmp_path))
    with ClusterTwin.from_inventory(
        REPO / "inventory", tls=False, operand_ready_seconds=READY, **clock.twin_kwargs()
    ) as twin:
        twin.settle()
        _foreign_cluster(twin, clock)
        states: list[tuple[str, str, str]] = []

        def record(kind: str, obj: dict[str, Any]) -> None:
            if obj.get("kind") == "Node":
                labels = obj["metadata"].get("labels") or {}
                states.append(
                    (
                        obj["metadata"]["name"],
                        labels.get("nvidia.com/mig.config", ""),
                        labels.get("nvidia.com/mig.config.state", ""),
                    )
                )

        twin.store.subscribe(record)
        held: set[str] = set()
        relabelled: dict[str, float] = {}
        planned: dict[str, str] = {}
        for _ in range(12):
            result = reconcile_cycle(twin, desired, clock)
            assert result.plan is not None
            planned = dict(result.plan.node_configs)
            for c in result.plan.changes:
                node = c.subject.removeprefix("node/")
                if c.kind is Kind.NODE_MIG_CONFIG and c.code == "MP567":
                    held.add(node)
                if c.kind is Kind.NODE_MIG_CONFIG and c.action is Action.CONFIGURE:
                    relabelled.setdefault(node, clock.seconds)
            twin.settle()
            _run_for(twin, clock, 15.0)
        assert [s for s in states if s[2] == "failed"] == []
        # the hold was exercised: the H200s come last in the rollout (nodes by name) and waited for it
        assert set(H200) <= held
        for node in H200:
            labels = _labels(twin, node)
            assert labels["nvidia.com/mig.config"] == planned[node] != "all-balanced"
            assert labels["nvidia.com/mig.config.state"] == "success"
        cp = twin.store.get("clusterpolicies.nvidia.com", CP)
        assert cp["spec"]["migManager"]["config"]["name"] == OURS
