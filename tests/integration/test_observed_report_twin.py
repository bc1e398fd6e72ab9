"""The controller reads what the node observers publish, end to end on the twin.

The observer (`reconciler.observer.publish_pass`, through the production NVML, PodResources and Kubernetes
adapters) runs for every node of the example fleet against the twin, with two deliberate differences from
the plan: on gpu-h200-01 GPU 1 a pod of another owner holds a partition (foreign-holder), and GPU 0 was cut
without placements so the driver chose them (driver-placed). Then one controller cycle (`reconcile_once`
over the Kubernetes adapter): the report's holders and placements must be exactly the twin's own truth (its
GPUs' instances and the pod each compute instance is held by), and every entry must say `observed`.

Then the annotation as something else than the observer writes it, through the API: an hour-old report
(silent: facts unused, inference instead), and a malformed one (MP547, the node is left alone).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client

from reconciler.adapters.kube.agentmode import OBSERVED, KubeNodeState
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.commands.reconcile import load_desired
from reconciler.controller.loop import kube_configuration
from reconciler.engine import CycleResult, reconcile_once
from reconciler.logic.codecs import observedcodec
from reconciler.logic.reports import reports
from reconciler.model.inventory import DesiredState
from reconciler.observer import publish_pass
from reconciler.resources import inventory_dir
from reconciler.twin.cluster import ClusterTwin

FOREIGN = ("gpu-h200-01", 1)
DRIVER = ("gpu-h200-01", 0)

Cut = dict[tuple[int, int], tuple[str, frozenset[str]]]  # (start, size) -> (profile, holder pods)


def _desired() -> DesiredState:
    desired, diagnostics = load_desired(inventory_dir())
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


def _core(twin: ClusterTwin) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))


def _observe_every_node(twin: ClusterTwin) -> None:
    core = _core(twin)
    for node in sorted(twin.fleet.nodes):
        publish_pass(
            open_gpus=lambda node=node: NvmlGpu(nvml=twin.nvml(node)),  # type: ignore[misc]
            holders=KubeletPodResources(str(twin.pod_resources_socket(node)), timeout_seconds=5),
            node_state=KubeNodeState(core, heartbeat_seconds=300),
            node=node,
        )


def _cycle(twin: ClusterTwin, *, now: datetime | None = None, dry_run: bool = True) -> CycleResult:
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig), page_size=2)
    try:
        return reconcile_once(desired=_desired(), cluster=cluster, dry_run=dry_run, now=now)
    finally:
        cluster.close()


def _twin_cut(twin: ClusterTwin, node: str) -> dict[int, Cut]:
    """The twin's truth: each GPU's instances and the pod holding each one's compute instance."""
    out: dict[int, Cut] = {}
    for gpu in twin.gpus(node):
        cut: Cut = {}
        for gi in gpu.gpu_instances.values():
            holders = frozenset(ci.holder for ci in gi.compute_instances.values() if ci.holder)
            cut[(gi.start, gi.size)] = (gi.profile.name, holders)
        out[gpu.index] = cut
    return out


def _report_cut(result: CycleResult, node: str) -> dict[int, Cut]:
    assert result.report is not None
    out: dict[int, Cut] = {}
    for g in result.report.slice_maps[node]:
        assert (g.layout_source, g.holders_source) == ("observed", "observed"), (node, g.index)
        out[g.index] = {
            (p.start, p.size): (p.profile, frozenset(p.holder.split(", ")) if p.holder else frozenset())
            for p in g.partitions
            if p.state != "missing" and p.start is not None
        }
    return out


@pytest.fixture(scope="module")
def observed_twin() -> Iterator[tuple[ClusterTwin, CycleResult]]:
    drift = [f"foreign-holder:{FOREIGN[0]}:{FOREIGN[1]}", f"driver-placed:{DRIVER[0]}:{DRIVER[1]}"]
    with ClusterTwin.from_inventory(inventory_dir(), drift=drift) as twin:
        twin.settle()
        _observe_every_node(twin)
        yield twin, _cycle(twin)


def test_the_reports_holders_and_placements_are_exactly_the_twins(
    observed_twin: tuple[ClusterTwin, CycleResult],
) -> None:
    twin, result = observed_twin
    assert result.report is not None and not result.errors
    held = 0
    for node in sorted(twin.fleet.nodes):
        truth = _twin_cut(twin, node)
        assert _report_cut(result, node) == truth, node
        held += sum(1 for cut in truth.values() for _, pods in cut.values() if pods)
        (entry,) = [n for n in result.report.nodes if n.name == node]
        assert entry.observer == "reporting"
        assert entry.occupancy and {o.source for o in entry.occupancy} == {"observed"}
        # occupancy's counts are the real ones: per profile, instances and held instances (whole GPUs: the
        # MIG-disabled ones, nobody holds one in the example fleet)
        for o in entry.occupancy:
            if o.profile == "gpu":
                assert (o.total, o.used) == (sum(1 for g in twin.gpus(node) if not g.mig_current), 0), node
                continue
            real = [pods for cut in truth.values() for (p, pods) in cut.values() if p == o.profile]
            assert (o.total, o.used) == (len(real), sum(1 for pods in real if pods)), (node, o.profile)
    assert held == len(twin.fleet.pods)
    assert {f.code for f in result.report.findings} & {"MP543", "MP544", "MP545", "MP546", "MP547"} == set()


def test_the_driver_chosen_placements_and_the_foreign_holder_are_findings(
    observed_twin: tuple[ClusterTwin, CycleResult],
) -> None:
    twin, result = observed_twin
    assert result.report is not None
    node, gpu = DRIVER
    (placed,) = [f for f in result.report.findings if f.code == "MP540"]
    assert (placed.node, placed.gpu) == (node, gpu)
    driver_map = next(g for g in result.report.slice_maps[node] if g.index == gpu)
    assert any(p.state == "moved" for p in driver_map.partitions)
    foreign_node, foreign_gpu = FOREIGN
    borrowed = {
        pod for (_, pods) in _twin_cut(twin, foreign_node)[foreign_gpu].values() for pod in pods if "-borrowed-" in pod
    }
    assert len(borrowed) == 1
    (taken,) = [f for f in result.report.findings if f.code == "MP541"]
    assert (taken.node, taken.gpu, taken.pods) == (foreign_node, foreign_gpu, tuple(borrowed))
    (pod_key,) = borrowed
    pod = twin.store.get("pods", pod_key.split("/")[1], pod_key.split("/")[0])
    assert taken.observed == pod["metadata"]["labels"]["app"] != taken.desired  # the pod's own owner, named
    doc = reports.report_to_json(result.report)
    owner = next(a for a in doc["owners"] if a["owner"] == taken.desired and a["profile"] == taken.profile)
    assert owner["foreignHolders"] == sorted(borrowed) and owner["source"] == "observed"
    text = reports.render_reports(result.report)[reports.node_page_name(node)].decode()
    excerpt = text[text.index("## Slice maps") :]
    excerpt = excerpt[: excerpt.index("Slice maps (")]
    assert "[observed cut, holders observed]" in excerpt and "placed by the driver" in excerpt
    print("\n" + excerpt)


def test_a_silent_or_malformed_observation_written_through_the_api(
    observed_twin: tuple[ClusterTwin, CycleResult],
) -> None:
    twin, _ = observed_twin
    core = _core(twin)
    silent_node, bad_node = "gpu-h200-02", "gpu-h100-01"
    text = core.read_node(silent_node).metadata.annotations[OBSERVED]
    old = json.loads(text)
    old["observedAt"] = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    core.patch_node(silent_node, {"metadata": {"annotations": {OBSERVED: json.dumps(old)}}})
    core.patch_node(bad_node, {"metadata": {"annotations": {OBSERVED: '{"version":"v2","gpus":[{"index":-1}]}'}}})
    # the bad node's plan differs from its GPUs, so a cycle would relabel it: nothing is written on it instead
    core.patch_node(bad_node, {"metadata": {"labels": {"nvidia.com/mig.config": "someone-elses"}}})
    twin.reset_counts()
    result = _cycle(twin, dry_run=False)
    assert result.report is not None
    codes = {(f.node, f.code) for f in result.report.findings}
    assert (silent_node, "MP543") in codes and (bad_node, "MP547") in codes
    status = {n.name: n for n in result.report.nodes}
    assert status[silent_node].observer == "silent" and status[bad_node].observer == "malformed"
    assert {o.source for o in status[silent_node].occupancy} == {"inferred"}
    assert all(g.layout_source == "planned" for g in result.report.slice_maps[silent_node])
    writes = [r for r in twin.api.request_log() if r.verb in ("create", "update", "patch", "delete")]
    assert writes and not [r for r in writes if r.resource == "nodes" and r.name == bad_node], writes
    held = [c for c in result.plan.changes if c.subject == f"node/{bad_node}"] if result.plan else []
    assert held and "MP547" in held[0].reason
    assert observedcodec.decode(core.read_node(silent_node).metadata.annotations[OBSERVED]).observed_at is not None
