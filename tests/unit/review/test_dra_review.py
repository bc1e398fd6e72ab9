"""`migplan plan` and the MR comment for a DRA-static node (issue 30 item 4): the devices a merge destroys and
creates by the names NVIDIA's DRA driver publishes them under, and the claims allocated a destroyed device with the
pods reserving them; in the text, the comment and the JSON. Content is asserted, not snapshots."""

from __future__ import annotations

from dataclasses import replace

from reconciler.catalog import load_catalog
from reconciler.logic.inventory.validation import ValidationResult
from reconciler.logic.review.dradevices import CREATE, DESTROY, DraReview, dra_review
from reconciler.logic.review.mrcomment import PlanSection, render_comment
from reconciler.logic.review.revdiff import diff_states, disruptions
from reconciler.model.dra import ClaimedDevice, DraDevice, NodeDra, ObservedClaim
from reconciler.model.inventory import (
    ApplyMode,
    ApplySettings,
    ClusterSpec,
    DesiredState,
    GpuSpec,
    MigStrategy,
    NodeSpec,
    Partition,
    Placement,
)
from reconciler.model.nodeobservation import NodeObservation, ObservedGpu
from reconciler.model.observed import ObservedNode, ObservedState
from reconciler.model.revisions import Revision

CATALOG = load_catalog()
CLUSTER = replace(ClusterSpec(name="c", mig_strategy=MigStrategy.MIXED), apply=ApplySettings(mode=ApplyMode.AGENT))


def _gpu(index: int, *parts: tuple[str, int, int], mig: bool = True) -> GpuSpec:
    return GpuSpec(
        index=index,
        model="H200-141GB",
        mig_enabled=mig,
        partitions=tuple(Partition(p, placement=s) for p, s, _ in parts),
        placements=tuple(Placement(s, size) for _, s, size in parts),
    )


BASE = (_gpu(0, mig=False), _gpu(1, ("3g.71gb", 4, 4), ("2g.35gb", 0, 2), ("1g.18gb", 2, 1)))
# GPU 1: the 2g.35gb and the 1g.18gb swap places, the 3g.71gb stays; GPU 0 gets MIG with one 7g.141gb
AFTER = (_gpu(0, ("7g.141gb", 0, 8)), _gpu(1, ("3g.71gb", 4, 4), ("2g.35gb", 2, 2), ("1g.18gb", 0, 1)))


def _state(gpus: tuple[GpuSpec, ...], sha: str) -> DesiredState:
    return DesiredState(cluster=CLUSTER, nodes={"n": NodeSpec("n", gpus)}, revision=Revision("main", sha * 40))


def _published(*names: str, counters: tuple[str, ...] = ()) -> NodeDra:
    return NodeDra("n", tuple(DraDevice(name=x, kind="mig") for x in names), counters)


def _observed(dra: NodeDra | None, claims: dict[str, str], minors: dict[int, int] | None = None) -> ObservedState:
    node = ObservedNode("n")
    if minors is not None:
        gpus = tuple(ObservedGpu(i, f"GPU-{i}", "NVIDIA H200", True, True, True, minor=m) for i, m in minors.items())
        node = replace(node, observation=NodeObservation("v2", gpus))
    claimed = tuple(
        ObservedClaim("ml", name, (ClaimedDevice("gpu.nvidia.com", "n", device),), (f"ml/{name}-pod",))
        for name, device in claims.items()
    )
    return ObservedState(nodes={"n": node}, dra={"n": dra} if dra is not None else {}, claims=claimed)


STATIC = _published("gpu-1-mig-3g71gb-9-4", "gpu-1-mig-2g35gb-14-0", "gpu-1-mig-1g18gb-19-2")
CLAIMS = {"emb": "gpu-1-mig-2g35gb-14-0", "llm": "gpu-1-mig-3g71gb-9-4", "whole": "gpu-0"}


def _review(observed: ObservedState | None) -> DraReview | None:
    before, after = _state(BASE, "a"), _state(AFTER, "b")
    return dra_review(diff_states(before, after), before, after, observed, CATALOG)


def test_a_static_node_shows_devices_by_driver_name_and_the_claims_a_destroy_takes() -> None:
    review = _review(_observed(STATIC, CLAIMS))
    assert review is not None and review.nodes == ("n",)
    got = {(d.action, d.device) for d in review.devices}
    assert got == {
        (DESTROY, "gpu-0"),  # MIG switched on: the whole GPU is no longer published
        (CREATE, "gpu-0-mig-7g141gb-0-0"),
        (DESTROY, "gpu-1-mig-2g35gb-14-0"),
        (CREATE, "gpu-1-mig-2g35gb-14-2"),
        (DESTROY, "gpu-1-mig-1g18gb-19-2"),
        (CREATE, "gpu-1-mig-1g18gb-19-0"),
    }  # the 3g.71gb stays: not listed, and its claim is not disrupted
    assert review.claims == ("ml/emb", "ml/whole") and review.pods == ("ml/emb-pod", "ml/whole-pod")
    (emb,) = [d for d in review.devices if d.claims == ("ml/emb",)]
    assert emb.device == "gpu-1-mig-2g35gb-14-0" and emb.action == DESTROY
    assert [n.code for n in review.notes] == ["MP749"]  # no observer: the index was taken for the minor


def test_the_observer_minor_numbers_name_the_devices() -> None:
    published = _published("gpu-5-mig-3g71gb-9-4", "gpu-5-mig-2g35gb-14-0", "gpu-5-mig-1g18gb-19-2")
    review = _review(_observed(published, {"emb": "gpu-5-mig-2g35gb-14-0"}, minors={0: 4, 1: 5}))
    assert review is not None and review.notes == ()
    assert {d.device for d in review.devices} >= {"gpu-4", "gpu-5-mig-2g35gb-14-0", "gpu-5-mig-1g18gb-19-0"}
    assert review.claims == ("ml/emb",)


def test_no_cluster_device_plugin_and_dynamic_mig_nodes_say_nothing() -> None:
    assert _review(None) is None
    plugin = _review(_observed(None, CLAIMS))
    assert plugin is not None and plugin.devices == () and plugin.nodes == ()
    dynamic = _review(_observed(_published("gpu-1-mig-1g18gb-19-2", counters=("gpu-1-counter-set",)), CLAIMS))
    assert dynamic is not None and dynamic.devices == ()


def _comment(observed: ObservedState) -> str:
    before, after = _state(BASE, "a"), _state(AFTER, "b")
    diff = diff_states(before, after)
    section = PlanSection(
        cluster="c",
        root="",
        base="a",
        target="b",
        validation=ValidationResult(after, ()),
        diff=diff,
        disrupts=disruptions(diff, before, after, observed),
        pods_from="asked live of the cluster",
        dra=dra_review(diff, before, after, observed, CATALOG),
    )
    return render_comment([section])


def test_the_comment_names_devices_claims_and_pods_of_the_dra_node() -> None:
    text = _comment(_observed(STATIC, CLAIMS))
    assert "**DRA devices** on 1 node(s)" in text and "3 destroyed, 3 created" in text
    row = next(line for line in text.splitlines() if "gpu-1-mig-2g35gb-14-0" in line)
    assert "destroy" in row and "ml/emb" in row and "ml/emb-pod" in row
    assert "gpu-1-mig-3g71gb-9-4" not in text  # unchanged: never listed
    summary = next(line for line in text.splitlines() if line.startswith("| `n`"))
    assert "DRA static: 3 device(s) destroyed, 3 created" in summary and "ml/whole-pod" in summary
    assert "MP749" in text
