"""The kube adapter counts, per node, the pods a reboot ends (issue 26 item 2): every bound, unfinished pod that is
neither DaemonSet-managed nor a mirror pod; named up to REBOOT_NAMES_CAP (the first by key), counted whole."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube.rebootpods import RebootTally
from reconciler.model.inventory import GpuOperatorSettings
from reconciler.model.observed import REBOOT_NAMES_CAP


def _pod(
    name: str,
    *,
    node: str | None = "n1",
    ns: str = "web",
    phase: str = "Running",
    owner: str | None = "ReplicaSet",
    controller: bool = True,
    **meta: Any,
) -> dict[str, Any]:
    refs = [{"kind": owner, "name": f"{name}-owner", "controller": controller}] if owner else []
    return {
        "metadata": {"name": name, "namespace": ns, "ownerReferences": refs, "labels": {"app": name}, **meta},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]} if node else {"containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def _tally(*pods: dict[str, Any]) -> RebootTally:
    t = RebootTally()
    for p in pods:
        t.add(p)
    return t


def test_only_the_pods_a_reboot_ends_are_counted() -> None:
    t = _tally(
        _pod("api-0"),
        _pod("etl-0", ns="batch", owner="Job"),
        _pod("done", phase="Succeeded"),
        _pod("crashed", phase="Failed"),
        _pod("exporter", owner="DaemonSet"),
        _pod("static", owner="Node", annotations={"kubernetes.io/config.mirror": "abc"}),
        _pod("pending", node=None),
        _pod("going", deletionTimestamp="2026-12-03T12:00:00Z"),
        _pod("elsewhere", node="n2"),
    )
    n1 = t.by_node()["n1"]
    assert n1.count == 3 and n1.names == ("batch/etl-0", "web/api-0", "web/going")
    assert [p.key for p in n1.pods if p.terminating] == ["web/going"]
    assert n1.pods[1].labels == {"app": "api-0"} and n1.pods[1].owner is not None
    assert t.by_node()["n2"].count == 1 and set(t.by_node()) == {"n1", "n2"}


def test_a_pod_only_owned_by_a_daemonset_without_control_is_counted_and_bare() -> None:
    t = _tally(_pod("bare", owner=None), _pod("loose", owner="DaemonSet", controller=False))
    n1 = t.by_node()["n1"]
    assert n1.count == 2 and n1.unreplicated_count == 2
    assert [p.key for p in n1.unreplicated] == ["web/bare", "web/loose"]


def test_names_are_capped_to_the_first_by_key_whatever_the_listing_order() -> None:
    names = [f"p-{i:04d}" for i in range(500)]
    t = _tally(*(_pod(n) for n in reversed(names)))
    n1 = t.by_node()["n1"]
    assert n1.count == 500 and n1.names == tuple(f"web/{n}" for n in names[:REBOOT_NAMES_CAP])
    assert n1.describe().startswith("500 pods end (web/p-0000") and n1.describe().endswith(
        f"and {500 - REBOOT_NAMES_CAP} more)"
    )


def test_a_bare_pod_is_named_even_past_the_cap() -> None:
    t = _tally(*(_pod(f"a-{i:03d}") for i in range(REBOOT_NAMES_CAP * 2)), _pod("zz-bare", owner=None))
    n1 = t.by_node()["n1"]
    assert "web/zz-bare" not in n1.names and [p.key for p in n1.unreplicated] == ["web/zz-bare"]


def test_hostile_values_are_skipped_not_raised() -> None:
    t = _tally(
        {"metadata": "x", "spec": {"nodeName": "n1"}},
        {"metadata": {"name": "a", "namespace": "w"}, "spec": {"nodeName": 7}},
        {"metadata": {"name": "a", "namespace": "w", "labels": {"k": 1}}, "spec": {"nodeName": "n1"}, "status": None},
        {"metadata": {"namespace": "w"}, "spec": {"nodeName": "n1"}},  # no name: cannot be evicted, not counted
        {"metadata": {"name": "x" * 300, "namespace": "w"}, "spec": {"nodeName": "n1"}},
    )
    n1 = t.by_node()["n1"]
    assert n1.count == 1 and n1.names == ("w/a",) and n1.pods[0].labels == {} and n1.unreplicated_count == 1


def test_the_observed_state_carries_them_and_their_namespaces_budgets() -> None:
    ops = GpuOperatorSettings()
    pdb = {"metadata": {"name": "api", "namespace": "web"}, "spec": {"selector": {"matchLabels": {"app": "api-0"}}}}
    other = {"metadata": {"name": "x", "namespace": "nobody"}, "spec": {"selector": {"matchLabels": {"a": "b"}}}}
    observed = kubeobserve.observed_state(
        ops,
        nodes=[{"metadata": {"name": "n1"}}],
        pods=[_pod("api-0"), _pod("exporter", owner="DaemonSet")],
        cluster_policy=None,
        daemonset=None,
        config_map=lambda _name: None,
        device_plugin_log=lambda _o: None,
        mig_manager_log=lambda _o: None,
        max_log_reads=0,
        pdbs=[pdb, other],
    )
    assert observed.node_pods["n1"].names == ("web/api-0",)
    assert observed.pods == ()  # not a GPU pod: only counted, never kept whole
    assert [p.key for p in observed.pdbs] == ["web/api"]
