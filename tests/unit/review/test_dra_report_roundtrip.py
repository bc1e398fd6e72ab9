"""A plan without a cluster names a DRA node's devices and claims from the committed drift report (issue 30 item 4):
the controller's report records, per DRA node, the regime, the GPUs' minor numbers, the published device names and
the claims (drarecord); reportoccupancy reads them back strictly; the review and the comment are the live ones.
Hostile records are skipped with MP754 (MP755 for a capped list), never a crash or a silent "no claim"."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from reconciler.catalog import load_catalog
from reconciler.logic.drift import drarecord
from reconciler.logic.inventory.validation import ValidationResult
from reconciler.logic.reports.reports import render_drift_yaml
from reconciler.logic.review.dradevices import DraNote, DraReview, dra_review, with_notes
from reconciler.logic.review.mrcomment import PlanSection, render_comment
from reconciler.logic.review.reportoccupancy import observed_from_report, read_dra
from reconciler.logic.review.revdiff import diff_states, disruptions
from reconciler.model.dra import ClaimedDevice, DraDevice, NodeDra, ObservedClaim
from reconciler.model.drift import DRA_CLAIMS_CAP, DRA_DEVICES_CAP, DriftReport, NodeReport, NodeStatus
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


def _gpu(index: int, *parts: tuple[str, int, int]) -> GpuSpec:
    return GpuSpec(
        index=index,
        model="H200-141GB",
        mig_enabled=True,
        partitions=tuple(Partition(p, placement=s) for p, s, _ in parts),
        placements=tuple(Placement(s, size) for _, s, size in parts),
    )


# GPU 1 (minor 5): the 2g.35gb and the 1g.18gb swap places, the 3g.71gb stays
BASE = (_gpu(1, ("3g.71gb", 4, 4), ("2g.35gb", 0, 2), ("1g.18gb", 2, 1)),)
AFTER = (_gpu(1, ("3g.71gb", 4, 4), ("2g.35gb", 2, 2), ("1g.18gb", 0, 1)),)
DEVICES = ("gpu-5-mig-3g71gb-9-4", "gpu-5-mig-2g35gb-14-0", "gpu-5-mig-1g18gb-19-2")


def _state(gpus: tuple[GpuSpec, ...], sha: str) -> DesiredState:
    return DesiredState(cluster=CLUSTER, nodes={"n": NodeSpec("n", gpus)}, revision=Revision("main", sha * 40))


def _live(counters: tuple[str, ...] = ()) -> ObservedState:
    """The cluster as the controller observes it: node n DRA static, its observer measured GPU 1's minor 5."""
    gpus = (ObservedGpu(1, "GPU-1", "NVIDIA H200", True, True, False, minor=5),)
    claims = (
        ObservedClaim("ml", "emb", (ClaimedDevice("gpu.nvidia.com", "n", DEVICES[1]),), ("ml/emb-pod",)),
        ObservedClaim("ml", "llm", (ClaimedDevice("gpu.nvidia.com", "n", DEVICES[0]),), ("ml/llm-pod",)),
    )
    return ObservedState(
        nodes={"n": ObservedNode("n", observation=NodeObservation("v2", gpus)), "plain": ObservedNode("plain")},
        dra={"n": NodeDra("n", tuple(DraDevice(x, kind="mig") for x in DEVICES), counters)},
        claims=claims,
    )


def _report_doc(live: ObservedState) -> dict[str, Any]:
    """The report the controller commits for `live`, as the plan reads it back from drift.yaml."""
    claimed = drarecord.claims_by_pool(live.claims)
    nodes = tuple(
        NodeReport(name, NodeStatus.IN_SYNC, dra=drarecord.node_record(name, live, None, claimed))
        for name in sorted(live.nodes)
    )
    report = DriftReport(cluster="c", revision=Revision("main", "a" * 40), strategy="mixed", nodes=nodes)
    doc = yaml.safe_load(render_drift_yaml(report))
    assert isinstance(doc, dict)
    return doc


def _review(observed: ObservedState) -> DraReview | None:
    before, after = _state(BASE, "a"), _state(AFTER, "b")
    return dra_review(diff_states(before, after), before, after, observed, CATALOG)


def _comment(observed: ObservedState, notes: tuple[DraNote, ...] = ()) -> str:
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
        pods_from="the committed drift report",
        dra=with_notes(dra_review(diff, before, after, observed, CATALOG), notes),
    )
    return render_comment([section])


def test_the_report_records_dra_nodes_only() -> None:
    doc = _report_doc(_live())
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert "dra" not in by_name["plain"]  # a device-plugin node's record does not change
    dra = by_name["n"]["dra"]
    assert dra["regime"] == "dra-static" and "writer" not in dra
    assert dra["minors"] == [{"index": 1, "minor": 5}]
    assert dra["devices"] == sorted(DEVICES)
    assert dra["claims"] == [
        {"claim": "ml/emb", "devices": [DEVICES[1]], "pods": ["ml/emb-pod"]},
        {"claim": "ml/llm", "devices": [DEVICES[0]], "pods": ["ml/llm-pod"]},
    ]


def test_the_plan_from_the_report_is_the_live_plan() -> None:
    live = _review(_live())
    from_report = _review(observed_from_report(_report_doc(_live())))
    assert live is not None and from_report is not None
    assert from_report == live  # devices, names, claims, pods and notes alike
    assert {d.device for d in from_report.devices} == {
        "gpu-5-mig-2g35gb-14-0",
        "gpu-5-mig-2g35gb-14-2",
        "gpu-5-mig-1g18gb-19-2",
        "gpu-5-mig-1g18gb-19-0",
    }
    assert from_report.claims == ("ml/emb",) and from_report.pods == ("ml/emb-pod",)
    assert from_report.notes == ()  # the minor came with the report: no MP749


def test_the_comment_from_the_report_names_devices_claim_and_pod() -> None:
    text = _comment(observed_from_report(_report_doc(_live())))
    assert "**DRA devices** on 1 node(s)" in text and "2 destroyed, 2 created" in text
    row = next(line for line in text.splitlines() if "gpu-5-mig-2g35gb-14-0" in line)
    assert "destroy" in row and "ml/emb" in row and "ml/emb-pod" in row
    assert "gpu-5-mig-3g71gb-9-4" not in text and "ml/llm" not in text  # unchanged: not disrupted


def test_a_dynamic_mig_node_in_the_report_names_nothing() -> None:
    doc = _report_doc(_live(counters=("gpu-1-counter-set",)))
    assert doc["nodes"][0]["dra"]["regime"] == "dra-dynamic-mig"
    review = _review(observed_from_report(doc))
    assert review is not None and review.devices == ()


def _hostile(mutate: dict[str, Any]) -> tuple[DraReview | None, list[tuple[str, str]]]:
    doc = _report_doc(_live())
    node = doc["nodes"][0]
    assert node["name"] == "n"
    node["dra"] = mutate["__whole__"] if "__whole__" in mutate else {**node["dra"], **mutate}
    problems = [(code, message) for code, where, message in read_dra(doc).problems if where == "n"]
    return _review(observed_from_report(doc)), problems


@pytest.mark.parametrize(
    "whole", ["dra-static", 7, None, [], {"regime": "static"}, {"regime": "dra-static", "devices": "gpu-5"}]
)
def test_an_unreadable_record_is_mp754_and_names_nothing(whole: Any) -> None:
    review, problems = _hostile({"__whole__": whole})
    assert review is not None and review.devices == ()
    assert [c for c, _ in problems] == ["MP754"] and "cannot be read" in problems[0][1]


@pytest.mark.parametrize("writer", [5, "", "x" * 201])
def test_a_bad_writer_is_mp754(writer: Any) -> None:
    review, problems = _hostile({"writer": writer})
    assert review is not None and review.devices == () and [c for c, _ in problems] == ["MP754"]


def test_another_writer_makes_the_node_not_static() -> None:
    review, problems = _hostile({"writer": "NVIDIA's DRA driver (DynamicMIG, GPUCluster g)"})
    assert review is not None and review.devices == () and problems == []


@pytest.mark.parametrize(
    "minors",
    [
        [{"index": 1, "minor": True}],
        [{"index": -1, "minor": 5}],
        [{"index": 1, "minor": 5}, {"index": 1, "minor": 6}],
        [{"index": 1, "minor": 1 << 40}],
        "gpu-5",
        [{"index": i, "minor": i} for i in range(65)],
    ],
)
def test_unreadable_minors_fall_back_to_the_index_with_a_warning(minors: Any) -> None:
    review, problems = _hostile({"minors": minors})
    assert [c for c, _ in problems] == ["MP754"] and "minor" in problems[0][1]
    assert review is not None and [n.code for n in review.notes] == ["MP749"]  # the index, said as such


def test_hostile_device_names_and_claims_are_skipped_with_a_warning() -> None:
    bad_claims = [
        {"claim": "../etc", "devices": [DEVICES[1]], "pods": ["ml/x"]},
        {"claim": "ml/a", "devices": ["; rm -rf /"], "pods": []},
        {"claim": "ml/b", "devices": [DEVICES[1]], "pods": "ml/x"},
        {"claim": "ml/c", "devices": [DEVICES[1]] * 17, "pods": []},
        {"claim": "ml/d", "devices": [], "pods": []},
        "ml/e",
        {"claim": "ml/emb", "devices": [DEVICES[1]], "pods": ["ml/emb-pod"]},
    ]
    review, problems = _hostile({"devices": [*DEVICES, "<script>", 42, "gpu-5-mig-x"], "claims": bad_claims})
    codes = sorted(c for c, _ in problems)
    assert codes == ["MP754", "MP754"]
    assert any("3 device name(s)" in m for _, m in problems) and any("6 claim(s)" in m for _, m in problems)
    assert review is not None and review.claims == ("ml/emb",)  # the readable claim still counts


@pytest.mark.parametrize("more", [{"claimsMore": 3}, {"devicesMore": 1}, {"claimsMore": "x"}, {"claimsMore": True}])
def test_a_capped_or_odd_count_is_mp755_and_shown(more: dict[str, Any]) -> None:
    doc = _report_doc(_live())
    doc["nodes"][0]["dra"].update(more)
    notes = tuple(DraNote(c, n, m) for c, n, m in read_dra(doc).problems)
    assert [n.code for n in notes] == ["MP755"]
    text = _comment(observed_from_report(doc), notes)
    assert "MP755" in text and "partial" in text


def test_a_huge_record_is_bounded() -> None:
    doc = _report_doc(_live())
    dra = doc["nodes"][0]["dra"]
    dra["devices"] = [f"gpu-{i % 1000}-mig-1g18gb-19-{i % 7}" for i in range(50_000)]
    dra["claims"] = [{"claim": f"ml/c{i}", "devices": [DEVICES[1]], "pods": []} for i in range(10_000)]
    got = read_dra(doc)
    assert len(got.published["n"].devices) <= DRA_DEVICES_CAP and len(got.claims) == DRA_CLAIMS_CAP
    assert any("claim(s)" in m for _, _, m in got.problems)  # the rest is said, not dropped silently


def test_only_notes_still_show_in_the_comment() -> None:
    doc = _report_doc(_live())
    doc["nodes"][0]["dra"] = "garbage"
    notes = tuple(DraNote(c, n, m) for c, n, m in read_dra(doc).problems)
    text = _comment(observed_from_report(doc), notes)
    assert "**DRA devices**: none named." in text and "MP754" in text


_WILD: list[Any] = [None, True, -1, 0, 2**70, 1.5, "", "x" * 300, "ml/emb", DEVICES[1], [], {}, [None], {"a": 1}]


def test_any_value_anywhere_in_a_record_never_crashes() -> None:
    """Every key of the record (and of a claim, and of a minor) set to each wild value: read, reviewed, rendered."""
    record = _report_doc(_live())["nodes"][0]["dra"]
    paths: list[tuple[str, ...]] = [(k,) for k in (*record, "devicesMore", "claimsMore")]
    paths += [("claims", k) for k in ("claim", "devices", "pods")] + [("minors", k) for k in ("index", "minor")]
    for path in paths:
        for wild in _WILD:
            if (path == ("claims",) and wild == []) or (path[0] == "minors" and wild == 0 and wild is not False):
                continue  # plausible values (no claim, GPU 0 / minor 0): whoever can push the branch can say them
            doc = _report_doc(_live())
            target = doc["nodes"][0]["dra"]
            if len(path) == 2:
                target = target[path[0]][0]
            target[path[-1]] = wild
            got = read_dra(doc)
            notes = tuple(DraNote(c, n, m) for c, n, m in got.problems)
            review = _review(observed_from_report(doc, got))
            assert review is not None
            if review.claims != ("ml/emb",):  # the disrupted claim got lost: the plan must say why
                assert notes or review.notes, (path, wild)  # damaged (MP754/755), or the index taken (MP749)
            _comment(observed_from_report(doc, got), notes)
