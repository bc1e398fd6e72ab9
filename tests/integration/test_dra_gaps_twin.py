"""Issue 27's gaps on the cluster twin: a layout published before a node became DynamicMIG is withdrawn by the
controller (MP577) and refused by the node agent itself (MP578); HAMi's MIG mode, read from the annotation its
device plugin writes (`hami.io/node-nvidia-register`), is another writer: nothing is written there (MP575), and an
annotation migplan cannot read counts as HAMi's MIG mode (MP576)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers.draintwin import GPU0, GPU1_CUT, GPU1_RECUT, NODE, write_inventory
from kubernetes import client

from reconciler.adapters.kube.agentmode import KubeNodeState
from reconciler.adapters.kube.client import kube_configuration
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.layoutowner import KubeLayoutOwner
from reconciler.adapters.nvml import NvmlGpu
from reconciler.agent import AgentOutcome, actuate_once
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.logic.drift.thirdparty import HAMI_REGISTER
from reconciler.logic.planning.agentplan import MigState
from reconciler.logic.planning.desiredcodec import ANNOTATION as DESIRED
from reconciler.model.inventory import DesiredState
from reconciler.model.plans import Action, Kind
from reconciler.twin.cluster import ClusterTwin

T0 = datetime(2026, 12, 2, 10, tzinfo=UTC)
HAMI_MIG = json.dumps([{"id": "GPU-0", "count": 10, "devmem": 143771, "devcore": 100, "type": "NVIDIA-H200", "mode": m}
                       for m in ("mig", "mig")])  # fmt: skip
HAMI_CORE = HAMI_MIG.replace('"mig"', '"hami-core"')


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(write_inventory(tmp_path / "before", [GPU0, GPU1_CUT]), tls=False) as tw:
        tw.settle()
        yield tw


def _desired(root: Path) -> DesiredState:
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


def _cycle(twin: ClusterTwin, desired: DesiredState) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=T0)
    finally:
        cluster.close()


def _annotations(twin: ClusterTwin) -> dict[str, str]:
    return dict(twin.store.get("nodes", NODE)["metadata"].get("annotations") or {})


def _gpu1(twin: ClusterTwin) -> list[tuple[str, int]]:
    return sorted((gi.profile.name, gi.start) for gi in twin.gpus(NODE)[1].gpu_instances.values())


def _agent_pass(twin: ClusterTwin, *, with_owner: bool) -> AgentOutcome:
    api = client.ApiClient(kube_configuration(str(twin.kubeconfig)))
    core = client.CoreV1Api(api)
    owner = KubeLayoutOwner(api) if with_owner else None
    with NvmlGpu(nvml=twin.nvml(NODE)) as gpus:
        return actuate_once(gpus=gpus, node_state=KubeNodeState(core), node=NODE, owner=owner)


def _annotate(twin: ClusterTwin, value: str) -> None:
    twin.store.patch("nodes", NODE, {"metadata": {"annotations": {HAMI_REGISTER: value}}})


def _published_recut(twin: ClusterTwin, tmp_path: Path) -> DesiredState:
    """Agent mode: the controller publishes the re-cut of GPU 1 on the node while it is still migplan's."""
    desired = _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], mode="agent"))
    result = _cycle(twin, desired)
    assert not result.errors
    assert [c.kind for c in result.applied if c.subject == f"node/{NODE}"] == [Kind.AGENT_LAYOUT]
    assert DESIRED in _annotations(twin)
    return desired


# --- 1. a node that became DynamicMIG after migplan published its layout ----------------------------------------


def test_the_controller_withdraws_a_layout_published_before_the_node_became_dynamic_mig(
    twin: ClusterTwin, tmp_path: Path
) -> None:
    desired = _published_recut(twin, tmp_path)
    twin.dra_driver(NODE, dynamic_mig=True).start_plugin()
    result = _cycle(twin, desired)
    assert not result.errors
    (withdrawn,) = [c for c in result.applied if c.subject == f"node/{NODE}"]
    assert withdrawn.action is Action.DELETE and withdrawn.kind is Kind.AGENT_LAYOUT and withdrawn.code == "MP577"
    assert "DynamicMIG" in withdrawn.reason
    assert DESIRED not in _annotations(twin)
    assert result.report is not None
    (node,) = [n for n in result.report.nodes if n.name == NODE]
    assert [f.code for f in node.findings if f.code == "MP570"] == ["MP570"]  # both writers still named
    # Once withdrawn, nothing more is written there, cycle after cycle.
    again = _cycle(twin, desired)
    assert not [c for c in again.applied if c.subject == f"node/{NODE}"]
    assert DESIRED not in _annotations(twin)


@pytest.mark.parametrize("with_owner", [True, False])
def test_the_agent_refuses_a_published_layout_on_a_dynamic_mig_node(
    twin: ClusterTwin, tmp_path: Path, with_owner: bool
) -> None:
    _published_recut(twin, tmp_path)
    twin.dra_driver(NODE, dynamic_mig=True).start_plugin()
    assert _gpu1(twin) == []  # the driver destroyed what it did not create
    outcome = _agent_pass(twin, with_owner=with_owner)
    if not with_owner:
        # Without asking who owns the GPU, the agent builds the stale layout behind the driver's back: the
        # very fight the refusal prevents.
        assert outcome.executed and len(_gpu1(twin)) == 7
        return
    assert outcome.state is MigState.PENDING and outcome.executed == ()
    assert "[MP578]" in outcome.reason and "NVIDIA's DRA driver (DynamicMIG)" in outcome.reason
    assert _gpu1(twin) == []
    labels = twin.store.get("nodes", NODE)["metadata"]["labels"]
    assert labels["migplan.io/mig.state"] == "pending"
    assert "[MP578]" in _annotations(twin)["migplan.io/mig.state.reason"]


def test_the_agent_still_builds_its_layout_under_static_dra(twin: ClusterTwin, tmp_path: Path) -> None:
    _published_recut(twin, tmp_path)
    twin.dra_driver(NODE, dynamic_mig=False).start_plugin()  # static MIG: the driver creates nothing
    outcome = _agent_pass(twin, with_owner=True)
    assert outcome.state is MigState.SUCCESS, outcome.reason
    assert len(_gpu1(twin)) == 7


# --- 3. HAMi's MIG mode ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [None, "agent"])
def test_a_hami_mig_node_is_left_alone_with_a_finding_naming_both_writers(
    twin: ClusterTwin, tmp_path: Path, mode: str | None
) -> None:
    _annotate(twin, HAMI_MIG)
    before = twin.store.get("nodes", NODE)["metadata"]
    labels_before, annotations_before = dict(before.get("labels") or {}), dict(before.get("annotations") or {})
    result = _cycle(twin, _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT], mode=mode)))
    assert not result.errors
    assert not [c for c in result.applied if c.subject == f"node/{NODE}"]
    meta = twin.store.get("nodes", NODE)["metadata"]
    assert (meta.get("labels") or {}) == labels_before and (meta.get("annotations") or {}) == annotations_before
    assert result.plan is not None
    (held,) = [c for c in result.plan.changes if c.subject == f"node/{NODE}"]
    assert held.action is Action.SKIP and held.code == "MP575" and "HAMi" in held.reason
    assert result.report is not None
    (node,) = [n for n in result.report.nodes if n.name == NODE]
    (conflict,) = [f for f in node.findings if f.code == "MP575"]
    assert "HAMi's device plugin (MIG mode)" in conflict.message and "nodes/n.yaml" in conflict.message
    assert not [f for f in node.findings if f.code in ("MP501", "MP502", "MP503", "MP574")]
    assert len(_gpu1(twin)) == 4  # GPU 1 as it was cut


def test_hami_sharing_whole_gpus_is_no_other_writer(twin: ClusterTwin, tmp_path: Path) -> None:
    _annotate(twin, HAMI_CORE)
    result = _cycle(twin, _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT])))
    assert [c.kind for c in result.applied if c.subject == f"node/{NODE}"] == [Kind.NODE_MIG_CONFIG]


@pytest.mark.parametrize("value", ["GPU-0,10,143771,100,NVIDIA-H200,0,true:", "{}", '[{"id": "GPU-0"}]', "[1]", ""])
def test_a_hami_register_migplan_cannot_read_counts_as_mig_mode(twin: ClusterTwin, tmp_path: Path, value: str) -> None:
    _annotate(twin, value)
    result = _cycle(twin, _desired(write_inventory(tmp_path / "after", [GPU0, GPU1_RECUT])))
    assert not result.errors
    assert not [c for c in result.applied if c.subject == f"node/{NODE}"]
    assert result.report is not None
    (node,) = [n for n in result.report.nodes if n.name == NODE]
    codes = sorted(f.code for f in node.findings if f.code in ("MP575", "MP576"))
    assert codes == ["MP575", "MP576"]


def test_the_agent_refuses_a_published_layout_on_a_hami_mig_node(twin: ClusterTwin, tmp_path: Path) -> None:
    _published_recut(twin, tmp_path)
    _annotate(twin, HAMI_MIG)
    outcome = _agent_pass(twin, with_owner=True)
    assert outcome.state is MigState.PENDING and outcome.executed == ()
    assert "HAMi's device plugin (MIG mode)" in outcome.reason and "[MP578]" in outcome.reason
    assert len(_gpu1(twin)) == 4


# --- 2. without an observer, the claims alone give the report's holders ------------------------------------------


def _allocate(twin: ClusterTwin, claim: str, device: str, pod: str) -> None:
    """ResourceClaim `claim` allocated `device` of NVIDIA's driver and reserved for `pod` (status subresource)."""
    twin.store.create(
        "resourceclaims.resource.k8s.io",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": claim},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}},
        },
        "default",
    )
    status = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": device}]}
        },
        "reservedFor": [{"resource": "pods", "name": pod, "uid": "00000000-0000-0000-0000-000000000001"}],
    }
    twin.store.patch("resourceclaims.resource.k8s.io", claim, {"status": status}, "default", subresource="status")


def _device_of(twin: ClusterTwin, profile: str) -> tuple[str, int]:
    gpu = twin.gpus(NODE)[1]
    (gi,) = [g for g in gpu.gpu_instances.values() if g.profile.name == profile]
    return f"gpu-{gpu.minor}-mig-{profile.replace('.', '')}-{gi.profile.id}-{gi.start}", gi.start


@pytest.mark.parametrize("claimed", [True, False])
def test_without_an_observer_the_claims_give_the_reports_holders(
    twin: ClusterTwin, tmp_path: Path, claimed: bool
) -> None:
    device, start = _device_of(twin, "2g.35gb")
    if claimed:
        _allocate(twin, "emb-0-gpu", device, "emb-0")
        _allocate(twin, "junk", "gpu-1-mig-nonsense", "junk-0")  # a name that does not parse: not counted
    result = _cycle(twin, _desired(write_inventory(tmp_path / "same", [GPU0, GPU1_CUT])))
    assert not result.errors and result.report is not None
    (node,) = [n for n in result.report.nodes if n.name == NODE]
    (entry,) = [o for o in node.occupancy if o.profile == "2g.35gb"]
    if not claimed:
        assert entry.used == 0 and entry.holders == () and entry.source == "inferred"
        return
    assert entry.used == 1 and entry.total == 1 and entry.source == "observed"
    assert [(h.pod, h.count) for h in entry.holders] == [("default/emb-0", 1)]
    assert not [h for o in node.occupancy for h in o.holders if h.pod == "default/junk-0"]
    (gpu1,) = [g for g in result.report.slice_maps[NODE] if g.index == 1]
    (held,) = [p for p in gpu1.partitions if p.profile == "2g.35gb" and p.start == start]
    assert held.holder == "default/emb-0"


def test_the_controller_withdraws_a_layout_published_before_hami_took_the_node(
    twin: ClusterTwin, tmp_path: Path
) -> None:
    desired = _published_recut(twin, tmp_path)
    _annotate(twin, HAMI_MIG)
    result = _cycle(twin, desired)
    assert not result.errors
    (withdrawn,) = [c for c in result.applied if c.subject == f"node/{NODE}"]
    assert withdrawn.action is Action.DELETE and withdrawn.code == "MP577" and "HAMi" in withdrawn.reason
    assert DESIRED not in _annotations(twin) and HAMI_REGISTER in _annotations(twin)
