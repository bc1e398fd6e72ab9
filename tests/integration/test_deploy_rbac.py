"""The RBAC of deploy/ is enough for a full cycle, every verb it grants is used, and a cycle without one
fails cleanly (refused before any write).

Two enforcers, so neither can agree with deploy/ by accident: an RBAC-evaluating proxy (rbacproxy.py) between
migplan and the twin records every request and checks it against deploy/'s Roles, ClusterRoles and bindings
(which lets the least-privilege test remove each verb in turn without re-running the cycle); and the API
server twin itself, holding deploy/'s RBAC objects and authorizing a ServiceAccount token with real 403s.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from gitserver import make_bare, seed
from kubernetes import client
from rbacproxy import Authorizer, RbacProxy

from reconciler.adapters.kube.agentmode import KubeNodeState
from reconciler.adapters.kube.gpuclients import KubeGpuClients
from reconciler.adapters.kube.layoutowner import KubeLayoutOwner
from reconciler.adapters.kube.lease import KubeLease
from reconciler.adapters.nvml import NvmlGpu
from reconciler.agent import actuate_once
from reconciler.controller.loop import Controller, CycleContext, kube_configuration
from reconciler.gitops import GitCycle
from reconciler.model.cycles import CycleStatus
from reconciler.resources import inventory_dir
from reconciler.settings import Settings, load_settings
from reconciler.twin.apiserver.kubeconfig import write_kubeconfig
from reconciler.twin.cluster import ClusterTwin

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "deploy" / "base"
CONTROLLER = ("migplan", "migplan-controller")
AGENT = ("migplan", "migplan-agent")


def rbac_docs() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in ("rbac-controller.yaml", "rbac-agent.yaml"):
        out.extend(d for d in yaml.safe_load_all((BASE / name).read_text()) if d)
    return out


def authorizer(docs: list[dict[str, Any]], sa: tuple[str, str]) -> Authorizer:
    return Authorizer(docs, sa_namespace=sa[0], sa_name=sa[1])


def user(sa: tuple[str, str]) -> str:
    return f"system:serviceaccount:{sa[0]}:{sa[1]}"


@dataclass
class Env:
    root: Path
    repo: Path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    root = tmp_path_factory.mktemp("rbac")
    (root / "srv").mkdir()
    bare = make_bare(root / "srv", "inv")
    inv = inventory_dir()
    files = {str(p.relative_to(inv)): p.read_text() for p in inv.rglob("*.yaml")}
    # One cycle must make every kind of write, node labels included: no wait for the ConfigMap to propagate
    # (the twin's kubelet projects it at once).
    no_wait = "  apply:\n    configPropagationSeconds: 0\n"
    files["cluster.yaml"] = files["cluster.yaml"].replace("  apply:\n", no_wait, 1)
    seed(bare, root / "work", files)
    return Env(root, bare)


def article_twin() -> ClusterTwin:
    # The article's cluster: single strategy and a stale device-plugin config, so a cycle has to write
    # every kind of change (ConfigMap, ClusterPolicy, node labels; the DaemonSet is the operator's).
    twin = ClusterTwin.from_inventory(
        inventory_dir(), strategy="single", device_plugin_config="device-plugin-config", tls=False
    ).start()
    twin.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "migplan"}})
    return twin


def settings_for(e: Env, kubeconfig: Path, tag: str, **extra: Any) -> Settings:
    flags = {
        "repo": str(e.repo),
        "cache_dir": str(e.root / f"cache-{tag}"),
        "kubeconfig": str(kubeconfig),
        "namespace": "migplan",
        "identity": f"rbac-{tag}",
        "listen": "127.0.0.1:0",
        "interval_seconds": 1.0,
        "jitter_seconds": 0.1,
        "lease_duration_seconds": 4,
        "renew_deadline_seconds": 3,
        "retry_period_seconds": 0.5,
        "trust_state_config_map": "migplan-source-trust",  # as deploy/base/config.yaml
        **extra,
    }
    return load_settings(env={}, flags=flags)


@pytest.fixture(scope="module")
def full_run(env: Env) -> Iterator[tuple[RbacProxy, RbacProxy, ClusterTwin]]:
    """A controller (Lease, engine, Events, node marks, report) to convergence + an agent pass, both
    through the enforcing proxy with deploy/'s rules."""
    twin = article_twin()
    docs = rbac_docs()
    ctl_proxy = RbacProxy(twin.api.port, authorizer=authorizer(docs, CONTROLLER), user=user(CONTROLLER)).start()
    agent_proxy = RbacProxy(twin.api.port, authorizer=authorizer(docs, AGENT), user=user(AGENT)).start()
    try:
        kc = write_kubeconfig(env.root / "ctl-kubeconfig", ctl_proxy.url, twin.api.token)
        s = settings_for(env, kc, "full")
        controller = Controller(s, GitCycle(s), kube_config=kube_configuration(str(kc)))
        controller.start()
        deadline = time.monotonic() + 300  # generous: a loaded 2-core machine runs a cycle late, never wrong
        try:
            while time.monotonic() < deadline:
                h = list(controller.runner.history)
                ok = controller.metrics.registry.get_sample_value("migplan_reconcile_total", {"result": "success"})
                if h and h[-1].ok and ok:
                    break
                time.sleep(0.2)
            # A standby forwarding a webhook to the leader (patches the Lease annotation).
            KubeLease(
                client.CoordinationV1Api(client.ApiClient(kube_configuration(str(kc)))),
                namespace="migplan",
                name="migplan-leader",
            ).request_trigger("forwarded")
        finally:
            assert controller.shutdown()
        # The agent's own calls: read its Node, write its annotations and label.
        akc = write_kubeconfig(env.root / "agent-kubeconfig", agent_proxy.url, twin.api.token)
        core = client.CoreV1Api(client.ApiClient(kube_configuration(str(akc))))
        agent_clients = KubeGpuClients(core)
        with NvmlGpu(nvml=twin.nvml("gpu-h200-01")) as gpus:
            actuate_once(gpus=gpus, node_state=KubeNodeState(core), node="gpu-h200-01", clients=agent_clients)
        agent_clients.remaining("gpu-h200-01")  # the wait for GPU client pods a re-cut makes
        # Who else writes the node's layout, asked before a published layout is built: its ResourceSlices.
        assert KubeLayoutOwner(core.api_client).other_writer("gpu-h200-01") is None
        yield ctl_proxy, agent_proxy, twin
    finally:
        ctl_proxy.stop()
        agent_proxy.stop()
        twin.stop()


def test_deploy_rbac_is_enough_for_a_full_cycle(full_run: tuple[RbacProxy, RbacProxy, ClusterTwin]) -> None:
    ctl, agent, twin = full_run
    assert ctl.denied == [] and agent.denied == [], [str(a) for a in ctl.denied + agent.denied]
    policy = twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")
    assert policy["spec"]["mig"]["strategy"] == "mixed"  # the cycle did its writes, under deploy/'s RBAC
    seen = {str(a) for a in ctl.distinct()}
    print("\ncontroller requests:\n  " + "\n  ".join(sorted(seen)))
    print("agent requests:\n  " + "\n  ".join(sorted(str(a) for a in agent.distinct())))
    # The cycle exercised every kind of write the RBAC exists for.
    for needed in (
        "patch core/nodes",
        "patch nvidia.com/clusterpolicies",
        "patch core/configmaps in gpu-operator",
        "create core/events in default",
        "update coordination.k8s.io/leases in migplan",
    ):
        assert needed in seen, needed


def _rule_verbs(docs: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    for di, d in enumerate(docs):
        for ri, rule in enumerate(d.get("rules") or []):
            out.extend((di, ri, v) for v in rule["verbs"])
    return out


def test_every_granted_verb_is_needed(full_run: tuple[RbacProxy, RbacProxy, ClusterTwin]) -> None:
    """Least privilege: removing any single verb from deploy/'s rules denies a request the run made."""
    ctl, agent, _ = full_run
    docs = rbac_docs()
    requests = {CONTROLLER: ctl.seen, AGENT: agent.seen}
    unused = []
    for di, ri, verb in _rule_verbs(docs):
        trimmed = copy.deepcopy(docs)
        trimmed[di]["rules"][ri]["verbs"].remove(verb)
        denied = [a for sa, seen in requests.items() for a in seen if not authorizer(trimmed, sa).allowed(a)]
        if not denied:
            unused.append(f"{docs[di]['kind']}/{docs[di]['metadata']['name']} rule {ri}: {verb}")
    # `create` on the mig-parted ConfigMap and on the Lease are needed on a fresh cluster only (the
    # twin starts with the ConfigMap; the Lease is created by the first replica): checked below.
    # `create` on pods/eviction is needed only when a drain evicts (allowDisruption): checked by
    # test_drain_evictions_are_granted_and_needed. `patch` on the device-plugin DaemonSet is needed only when the
    # GPU Operator does not own it (the twin's is the operator's, which rolls itself on a strategy change):
    # planner fixture strategy-marker-dropped-own-daemonset.
    assert set(unused) <= {
        "Role/migplan-controller rule 0: create",
        "ClusterRole/migplan-controller rule 2: create",
        "Role/migplan-controller rule 2: patch",
        # `update` of the trust record: needed from the second accepted revision on (the run accepts one);
        # tests/integration/test_git_trust.py writes it again and again through the same adapter.
        "Role/migplan-source-trust rule 1: update",
        # DeviceClasses are written only where NVIDIA's DRA driver publishes static MIG devices (the full run has no
        # DRA node): tests/integration/test_dra_deviceclasses_twin.py creates and patches them through KubeCluster.
        "ClusterRole/migplan-controller rule 10: create",
        "ClusterRole/migplan-controller rule 10: patch",
    }, unused


def test_create_verbs_are_used_on_a_fresh_cluster(env: Env) -> None:
    twin = article_twin()
    twin.store.delete("configmaps", "migplan-mig-parted-config", "gpu-operator")
    proxy = RbacProxy(twin.api.port, authorizer=authorizer(rbac_docs(), CONTROLLER), user=user(CONTROLLER)).start()
    try:
        kc = write_kubeconfig(env.root / "fresh-kubeconfig", proxy.url, twin.api.token)
        s = settings_for(env, kc, "fresh")
        api = client.ApiClient(kube_configuration(str(kc)))
        outcome = GitCycle(s)(CycleContext("test", api, lambda: True, s))
        assert outcome.status is not CycleStatus.FAILED, outcome.failures
        assert "create core/configmaps in gpu-operator" in {str(a) for a in proxy.distinct()}
        assert proxy.denied == []
    finally:
        proxy.stop()
        twin.stop()


@pytest.mark.parametrize(
    ("kind", "name", "resource", "verb"),
    [
        ("ClusterRole", "migplan-controller", "nodes", "patch"),
        ("ClusterRole", "migplan-controller", "pods", "list"),
        ("ClusterRole", "migplan-controller", "clusterpolicies", "patch"),
        # (no daemonsets/patch: the twin's device-plugin DaemonSet is the GPU Operator's, which migplan never
        # restarts — the operator's own update rolls it on a strategy change)
    ],
)
def test_a_cycle_without_one_verb_fails_cleanly(env: Env, kind: str, name: str, resource: str, verb: str) -> None:
    docs = rbac_docs()
    for d in docs:
        if d["kind"] == kind and d["metadata"]["name"] == name:
            for rule in d["rules"]:
                if resource in rule["resources"] and verb in rule["verbs"]:
                    rule["verbs"].remove(verb)
    twin = article_twin()
    proxy = RbacProxy(twin.api.port, authorizer=authorizer(docs, CONTROLLER), user=user(CONTROLLER)).start()
    try:
        kc = write_kubeconfig(env.root / f"kc-{resource}-{verb}", proxy.url, twin.api.token)
        s = settings_for(env, kc, f"{resource}-{verb}")
        api = client.ApiClient(kube_configuration(str(kc)))
        outcome = GitCycle(s)(CycleContext("test", api, lambda: True, s))
        assert outcome.status is CycleStatus.FAILED
        text = " ".join(outcome.failures)
        assert "Forbidden" in text or "forbidden" in text or "403" in text, text
        assert proxy.denied and all(a.verb == verb and a.resource == resource for a in proxy.denied)
        # Clean: the engine's server-side dry run (or its observe step) was refused first, so no write
        # reached the cluster for real (the report goes to Git, not to the API).
        writes = {"create", "update", "patch", "delete"}
        real_writes = [str(a) for a, dry in proxy.calls if a.verb in writes and not dry and a not in proxy.denied]
        # migplan's own record of the revision it verified (trustStateConfigMap) is bookkeeping in its namespace,
        # written when the revision is accepted, whatever the cluster then allows: not a change to the cluster.
        real_writes = [w for w in real_writes if w != "create core/configmaps in migplan"]
        assert real_writes == [], real_writes
        assert twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]["mig"]["strategy"] == "single"
    finally:
        proxy.stop()
        twin.stop()


# --- the same rules enforced by the API server twin itself (no proxy) -----------------------------------

RBAC_RESOURCES = {
    "ClusterRole": "clusterroles.rbac.authorization.k8s.io",
    "ClusterRoleBinding": "clusterrolebindings.rbac.authorization.k8s.io",
    "Role": "roles.rbac.authorization.k8s.io",
    "RoleBinding": "rolebindings.rbac.authorization.k8s.io",
}


def _install_rbac(twin: ClusterTwin, docs: list[dict[str, Any]]) -> None:
    for d in docs:
        if d["kind"] == "ServiceAccount":
            continue
        twin.store.create(RBAC_RESOURCES[d["kind"]], d, d["metadata"].get("namespace"))


@pytest.mark.parametrize("drop", [None, ("ClusterRole", "migplan-controller", "nodes", "patch")])
def test_the_twin_enforces_deploy_rbac_on_a_controller_cycle(env: Env, drop: tuple[str, str, str, str] | None) -> None:
    docs = rbac_docs()
    if drop is not None:
        kind, name, resource, verb = drop
        for d in docs:
            if d["kind"] == kind and d["metadata"]["name"] == name:
                for rule in d["rules"]:
                    if resource in rule["resources"] and verb in rule["verbs"]:
                        rule["verbs"].remove(verb)
    twin = article_twin()
    try:
        _install_rbac(twin, docs)
        token = twin.api.service_account_token(*CONTROLLER)
        kc = twin.api.write_kubeconfig(env.root / f"sa-kubeconfig-{drop is None}", token=token)
        s = settings_for(env, kc, f"sa-{drop is None}")
        api = client.ApiClient(kube_configuration(str(kc)))
        outcome = GitCycle(s)(CycleContext("test", api, lambda: True, s))
        strategy = twin.store.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"]["mig"]["strategy"]
        if drop is None:
            assert outcome.status is not CycleStatus.FAILED, outcome.failures
            assert strategy == "mixed"
        else:
            assert outcome.status is CycleStatus.FAILED
            assert "forbidden" in " ".join(outcome.failures).lower(), outcome.failures
            assert strategy == "single"  # refused by the dry run before any real write
    finally:
        twin.stop()


# --- the drain (allowDisruption): create pods/eviction, list poddisruptionbudgets ---------------------------


def _drain_twin(root: Path) -> tuple[ClusterTwin, Any]:
    """A node whose GPU 1 is re-cut while a ReplicaSet's pod holds its 2g.35gb, allowDisruption on."""
    from reconciler.commands.reconcile import load_desired

    def inventory(where: Path, gpu1: list[str]) -> Path:
        (where / "nodes").mkdir(parents=True)
        spec = {"migStrategy": "mixed", "apply": {"allowDisruption": True, "configPropagationSeconds": 0}}
        doc = {"apiVersion": "migplan/v1", "kind": "Cluster", "metadata": {"name": "t"}, "spec": spec}
        (where / "cluster.yaml").write_text(yaml.safe_dump(doc))
        gpus = [
            {"index": 0, "model": "H200-141GB", "mig": {"enabled": True, "partitions": [{"profile": "7g.141gb"}]}},
            {"index": 1, "model": "H200-141GB", "mig": {"enabled": True, "partitions": [{"profile": p} for p in gpu1]}},
        ]
        node = {"apiVersion": "migplan/v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {"gpus": gpus}}
        (where / "nodes" / "n.yaml").write_text(yaml.safe_dump(node))
        return where

    twin = ClusterTwin.from_inventory(
        inventory(root / "before", ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]), tls=False
    ).start()
    twin.settle()
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "emb-5d", "uid": "rs-1", "controller": True}
    res = {"nvidia.com/mig-2g.35gb": "1"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "emb-0", "labels": {"app": "emb"}, "ownerReferences": [owner]},
        "spec": {
            "nodeName": "n",
            "containers": [{"name": "m", "image": "x", "resources": {"requests": res, "limits": res}}],
        },
    }
    twin.store.create("pods", pod, "default")
    twin.settle()
    desired, diagnostics = load_desired(inventory(root / "after", ["1g.18gb"] * 7))
    assert desired is not None, [str(d) for d in diagnostics]
    return twin, desired


@pytest.mark.parametrize("drop_eviction", [False, True])
def test_drain_evictions_are_granted_and_needed(tmp_path: Path, drop_eviction: bool) -> None:
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.engine import reconcile_once

    docs = rbac_docs()
    if drop_eviction:
        for d in docs:
            for rule in d.get("rules") or []:
                if rule["resources"] == ["pods/eviction"]:
                    rule["verbs"].remove("create")
    twin, desired = _drain_twin(tmp_path)
    proxy = RbacProxy(twin.api.port, authorizer=authorizer(docs, CONTROLLER), user=user(CONTROLLER)).start()
    try:
        kc = write_kubeconfig(tmp_path / "kubeconfig", proxy.url, twin.api.token)
        cluster = KubeCluster.from_kubeconfig(str(kc))
        try:
            result = reconcile_once(desired=desired, cluster=cluster)
        finally:
            cluster.close()
        seen = {str(a) for a in proxy.distinct()}
        assert "list policy/poddisruptionbudgets" in seen
        pod = twin.store.list("pods", "default")
        still_there = [
            p for p in pod if p["metadata"]["name"] == "emb-0" and not p["metadata"].get("deletionTimestamp")
        ]
        if not drop_eviction:
            assert proxy.denied == [] and not result.errors, [str(a) for a in proxy.denied]
            assert "create core/pods/eviction in default" in seen
            assert not still_there  # evicted
        else:
            assert {str(a) for a in proxy.denied} == {"create core/pods/eviction in default"}
            assert result.errors and "forbidden" in " ".join(e.message for e in result.errors).lower()
            assert still_there
            # refused by the dry run: nothing was written for real (no cordon either)
            writes = [str(a) for a, dry in proxy.calls if a.verb in ("create", "patch") and not dry]
            assert writes == [], writes
    finally:
        proxy.stop()
        twin.stop()
