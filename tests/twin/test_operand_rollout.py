"""The twin's operator rolls its operands as gpu-operator and the DaemonSet controller do (ASSUMPTIONS-operator.md,
"the mig-manager DaemonSet and operand rollouts"): a `spec.migManager` change re-renders the mig-manager DaemonSet
(TransformMIGManager) and the pods are replaced one node at a time (maxUnavailable 1), each new pod Ready
`operand_ready_seconds` later on the twin's clock; each new mig-manager pod runs its node's current label once, and
a pod not yet replaced still reads the ConfigMap it was started with."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.twinclock import TwinClock

from reconciler.twin.cluster import ClusterTwin
from reconciler.twin.operator import rollingupdate
from reconciler.twin.operator.dsupdate import HASH_ANNOTATION

INVENTORY = Path(__file__).resolve().parents[2] / "inventory"
NS = "gpu-operator"
MM = "nvidia-mig-manager"
CP = "cluster-policy"
READY = 15.0
GPU_NODES = ["gpu-a100-01", "gpu-h100-01", "gpu-h200-01", "gpu-h200-02"]


@pytest.fixture
def clock() -> TwinClock:
    return TwinClock(step=0.0)


@pytest.fixture
def twin(clock: TwinClock) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY, tls=False, operand_ready_seconds=READY, **clock.twin_kwargs()) as t:
        t.settle()
        yield t
        assert t.operator.errors == []


def mm_pods(twin: ClusterTwin) -> dict[str, dict[str, Any]]:
    """node → its mig-manager pod."""
    return {
        p["spec"]["nodeName"]: p
        for p in twin.store.list("pods", NS)
        if (p["metadata"].get("labels") or {}).get("app") == MM
    }


def generation(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["pod-template-generation"])


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions", []))


def watch_unavailable(twin: ClusterTwin) -> list[int]:
    """numberUnavailable of the mig-manager DaemonSet at every status write."""
    seen: list[int] = []

    def cb(kind: str, obj: dict[str, Any]) -> None:
        if obj.get("kind") == "DaemonSet" and obj["metadata"]["name"] == MM and "status" in obj:
            seen.append(int(obj["status"].get("numberUnavailable") or 0))

    twin.store.subscribe(cb)
    return seen


def run_for(twin: ClusterTwin, clock: TwinClock, seconds: float, step: float = 5.0) -> None:
    """Let `seconds` of simulated time pass, the twin looking at its clock every `step`."""
    for _ in range(round(seconds / step)):
        clock.advance(step)
        twin.tick()


def test_a_mig_manager_env_change_rolls_one_node_at_a_time_and_each_new_pod_reruns_the_label(
    twin: ClusterTwin, clock: TwinClock
) -> None:
    before = mm_pods(twin)
    assert sorted(before) == GPU_NODES and {generation(p) for p in before.values()} == {"1"}
    hash_before = twin.store.get("daemonsets.apps", MM, NS)["metadata"]["annotations"][HASH_ANNOTATION]
    runs_before = {n: list(twin.operator.mig_manager_log.get(n, [])) for n in GPU_NODES}
    unavailable = watch_unavailable(twin)
    env = [{"name": "WITH_REBOOT", "value": "true"}]
    twin.store.patch("clusterpolicies.nvidia.com", CP, {"spec": {"migManager": {"env": env}}})
    twin.settle()
    ds = twin.store.get("daemonsets.apps", MM, NS)
    assert ds["metadata"]["annotations"][HASH_ANNOTATION] != hash_before  # TransformMIGManager: a new template
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    assert {"name": "WITH_REBOOT", "value": "true"} in container["env"]
    new_gen = str(ds["metadata"]["generation"])
    for done in range(1, len(GPU_NODES) + 1):
        pods = mm_pods(twin)
        # the first `done` nodes by name have their new pod (the last one of them still starting), the rest the old
        assert [generation(pods[n]) == new_gen for n in GPU_NODES] == [i < done for i in range(len(GPU_NODES))]
        assert not ready(pods[GPU_NODES[done - 1]])
        run_for(twin, clock, READY)
        assert ready(mm_pods(twin)[GPU_NODES[done - 1]])
    assert all(generation(p) == new_gen and ready(p) for p in mm_pods(twin).values())
    assert max(unavailable) == 1  # never two nodes without an available mig-manager at once
    # the asset declares none: the API server's default (SetDefaults_DaemonSet)
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    for node in GPU_NODES:
        label = twin.store.get("nodes", node)["metadata"]["labels"]["nvidia.com/mig.config"]
        new_lines = twin.operator.mig_manager_log[node][len(runs_before[node]) :]
        assert f"Updating to MIG config: {label}" in new_lines  # a new process runs the current label once
        assert twin.store.get("nodes", node)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"


def test_until_the_rollout_reaches_a_node_its_mig_manager_reads_the_old_configmap(
    twin: ClusterTwin, clock: TwinClock
) -> None:
    """The transient migplan must avoid: the ClusterPolicy names a new ConfigMap, a node not rolled yet gets a label
    only the new file holds, and its (old) mig-manager turns it `failed`."""
    old = twin.store.get("configmaps", "migplan-mig-parted-config", NS)
    text = old["data"]["config.yaml"] + "  only-in-new:\n    - devices: all\n      mig-enabled: false\n"
    twin.store.create("configmaps", {"metadata": {"name": "new-mig-parted"}, "data": {"config.yaml": text}}, NS)
    twin.store.patch("clusterpolicies.nvidia.com", CP, {"spec": {"migManager": {"config": {"name": "new-mig-parted"}}}})
    twin.settle()
    last = GPU_NODES[-1]
    assert mm_pods(twin)[last]["spec"]["volumes"][0]["configMap"]["name"] == "migplan-mig-parted-config"
    twin.store.patch("nodes", last, {"metadata": {"labels": {"nvidia.com/mig.config": "only-in-new"}}})
    twin.settle()
    labels = twin.store.get("nodes", last)["metadata"]["labels"]
    assert labels["nvidia.com/mig.config.state"] == "failed"
    assert any("only-in-new" in line for line in twin.operator.mig_manager_log[last][-4:])
    # once the rollout reaches it, the new pod runs the same label against the new file: success
    run_for(twin, clock, READY * len(GPU_NODES))
    assert mm_pods(twin)[last]["spec"]["volumes"][0]["configMap"]["name"] == "new-mig-parted"
    assert twin.store.get("nodes", last)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"


def test_an_unparsable_max_unavailable_writes_neither_daemonset(twin: ClusterTwin) -> None:
    """applyUpdateStrategyConfig: strconv.ParseInt's error fails the DaemonSet step; nothing is rolled."""
    before = {n: p["metadata"]["uid"] for n, p in mm_pods(twin).items()}
    bad = {"daemonsets": {"rollingUpdate": {"maxUnavailable": "one"}}, "migManager": {"env": [{"name": "A"}]}}
    twin.store.patch("clusterpolicies.nvidia.com", CP, {"spec": bad})
    twin.settle()
    assert {n: p["metadata"]["uid"] for n, p in mm_pods(twin).items()} == before
    twin.store.patch(
        "clusterpolicies.nvidia.com", CP, {"spec": {"daemonsets": {"rollingUpdate": {"maxUnavailable": "50%"}}}}
    )
    twin.settle()
    ds = twin.store.get("daemonsets.apps", MM, NS)
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "50%"
    starting = [n for n, p in mm_pods(twin).items() if not ready(p)]
    assert len(starting) == 2  # ceil(50% of 4)


@pytest.mark.parametrize(
    ("strategy", "desired", "want"),
    [
        (None, 5000, 1),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 3}}, 10, 3),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}}, 5000, 500),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1%"}}, 3, 1),  # rounded up
        ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "7"}}, 10, 7),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": -2}}, 10, 1),  # invalid: the default
        ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": True}}, 10, 1),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "9" * 40}}, 10, 1),
        ({"type": "RollingUpdate", "rollingUpdate": "x"}, 10, 1),
    ],
)
def test_max_unavailable_as_the_daemonset_controller_scales_it(strategy: Any, desired: int, want: int) -> None:
    ds = {"spec": {} if strategy is None else {"updateStrategy": strategy}}
    assert rollingupdate.max_unavailable(ds, desired) == want


def test_which_old_pods_go_now() -> None:
    pods = [
        rollingupdate.NodePods("a", True, False, True),
        rollingupdate.NodePods("b", True, False, False),  # old and broken: replaced whatever the budget
        rollingupdate.NodePods("c", True, False, True),
        rollingupdate.NodePods("d", True, True, True),
    ]
    assert rollingupdate.to_replace(pods, 1) == ["b", "a"]
    assert rollingupdate.to_replace(pods, 2) == ["b", "a", "c"]
    starting = [*pods[:3], rollingupdate.NodePods("d", True, True, False)]  # a new pod not available yet
    assert rollingupdate.to_replace(starting, 1) == ["b"]
    missing = [*pods[:3], rollingupdate.NodePods("d", False, False, False)]
    assert rollingupdate.to_replace(missing, 1) == ["b"]
    assert rollingupdate.to_replace(pods, 0) == ["b"]
