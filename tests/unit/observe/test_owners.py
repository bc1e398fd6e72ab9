"""Owner accounting and the "name the partition, not the card" rules (reconciler.logic.observe.owners)."""

from __future__ import annotations

from datetime import UTC, datetime
from xml.etree import ElementTree

from helpers import planning as fixtures

from reconciler.logic.drift import drift
from reconciler.logic.observe import owners
from reconciler.logic.planning import planner
from reconciler.logic.reports import reports, slicesvg
from reconciler.model.drift import GpuSliceMap, SlicePartition
from reconciler.model.inventory import GpuSpec, MigStrategy, NodeSpec, Partition
from reconciler.model.observed import ContainerResources, ObservedPod

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
PLANS = {
    "gpu-mig": NodeSpec(
        name="gpu-mig",
        gpus=(
            GpuSpec(0, "H200-141GB", True, (Partition("3g.71gb"), Partition("2g.35gb"))),
            GpuSpec(1, "H200-141GB", False),
        ),
    ),
    "gpu-whole": NodeSpec(name="gpu-whole", gpus=(GpuSpec(0, "H200-141GB", False),)),
}


def _pod(res: str, node: str | None = None, selector: dict[str, str] | None = None) -> ObservedPod:
    return ObservedPod(
        namespace="ml",
        name="p",
        node=node,
        phase="Running" if node else "Pending",
        containers=(ContainerResources("main", limits={res: 1}),),
        node_selector=selector or {},
    )


def test_whole_gpu_on_a_mig_node_is_mp549_with_the_profiles_to_ask_for() -> None:
    (issue,) = owners.workload_issues(_pod("nvidia.com/gpu", "gpu-mig"), PLANS, MigStrategy.MIXED)
    assert issue.code == "MP549" and "nvidia.com/mig-2g.35gb, nvidia.com/mig-3g.71gb" in issue.message
    assert owners.workload_issues(_pod("nvidia.com/gpu", "gpu-whole"), PLANS, MigStrategy.MIXED) == ()
    # under `single` nvidia.com/gpu IS a MIG device: asking for it is right
    assert owners.workload_issues(_pod("nvidia.com/gpu", "gpu-mig"), PLANS, MigStrategy.SINGLE) == ()


def test_pinning_a_node_or_a_gpu_uuid_is_mp548() -> None:
    host = owners.workload_issues(
        _pod("nvidia.com/mig-3g.71gb", selector={"kubernetes.io/hostname": "gpu-mig"}), PLANS, MigStrategy.MIXED
    )
    assert [i.code for i in host] == ["MP548"] and "kubernetes.io/hostname=gpu-mig" in host[0].message
    uuid = owners.workload_issues(
        _pod("nvidia.com/mig-3g.71gb", selector={"example.com/gpu": "GPU-5d1c0a5e-0000"}), PLANS, MigStrategy.MIXED
    )
    assert [i.code for i in uuid] == ["MP548"]
    fine = owners.workload_issues(
        _pod("nvidia.com/mig-3g.71gb", selector={"nvidia.com/gpu.product": "NVIDIA-H200"}), PLANS, MigStrategy.MIXED
    )
    assert fine == ()


def test_accounts_count_reserved_held_and_foreign_per_owner_and_profile() -> None:
    maps = {
        "n": (
            GpuSliceMap(
                0,
                "H200-141GB",
                True,
                8,
                (
                    SlicePartition("3g.71gb", 0, 4, owner="vllm", holder="ml/v"),
                    SlicePartition("3g.71gb", 4, 4, owner="vllm", holder="ml/n"),
                    SlicePartition("1g.18gb", 6, 1, owner=None, holder="ml/v", state="unplanned"),
                ),
                layout_source="observed",
                holders_source="observed",
            ),
        ),
        "m": (GpuSliceMap(0, "H200-141GB", True, 8, (SlicePartition("3g.71gb", 0, 4, owner="vllm", holder="ml/x"),)),),
    }
    got = owners.accounts(maps, {"ml/v": "vllm", "ml/n": None, "ml/x": "train"}, [("vllm", "3g.71gb", "ml/n")])
    by = {(a.owner, a.profile): a for a in got}
    vllm = by[("vllm", "3g.71gb")]
    assert (vllm.reserved, vllm.held, vllm.held_by_owner, vllm.source) == (3, 3, 1, "mixed")
    assert vllm.foreign == ("ml/n", "ml/x")  # observed (given) and inferred (owner differs)
    assert by[("vllm", "1g.18gb")].held_by_owner == 1 and by[("vllm", "1g.18gb")].reserved == 0
    assert by[("train", "3g.71gb")].held_by_owner == 1


def _report(case: str) -> drift.DriftReport:
    desired = fixtures.desired_state(fixtures.read(case, "desired.yaml"))
    observed = fixtures.observed_state(fixtures.read(case, "observed.yaml") or {}, desired)
    analysis = drift.analyze(desired, observed, now=NOW)
    return drift.build_report(desired, observed, analysis, planner.plan(desired, observed, now=NOW))


def test_report_json_says_observed_or_inferred_everywhere() -> None:
    doc = reports.report_to_json(_report("observed-layout-and-owners"))
    (node,) = doc["nodes"]
    assert node["observer"] == "reporting"
    assert {o["source"] for o in node["occupancy"]} == {"observed"}
    gpus = {g["index"]: g for g in node["gpus"]}
    assert all(g["layout"] == "observed" and g["holders"] == "observed" for g in gpus.values())
    moved = [p for p in gpus[0]["partitions"] if p.get("state") == "moved"]
    assert moved == [
        {"profile": "1g.18gb", "start": 4, "size": 1, "state": "moved", "plannedStart": 1, "owner": "embeddings",
         "holders": ["ml/embed-0"]}
    ]  # fmt: skip
    assert [p["holders"] for p in gpus[2]["partitions"]] == [["ml/notebook"]]
    owners_ = {(a["owner"], a["profile"]): a for a in doc["owners"]}
    assert owners_[("vllm", "7g.141gb")]["foreignHolders"] == ["ml/notebook"]
    assert owners_[("vllm", "7g.141gb")]["source"] == "observed"
    inferred = reports.report_to_json(_report("pod-findings"))
    assert {o["source"] for n in inferred["nodes"] for o in n["occupancy"]} == {"inferred"}
    assert all("gpus" not in n for n in inferred["nodes"])  # the planned cut is the inventory itself


def test_readme_and_svg_say_observed() -> None:
    report = _report("observed-layout-and-owners")
    files = reports.render_reports(report)
    text = files["nodes/gpu-a.md"].decode()
    assert "GPU 0  H200-141GB  MIG  [observed cut, holders observed]" in text
    assert "(placed by the driver; planned at 1)" in text
    readme = files["README.md"].decode()
    assert "## Owners" in readme and "ml/notebook" in readme
    svg = ElementTree.fromstring(files[slicesvg.gpu_map_name("gpu-a", 3)])
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text or "" for t in svg.iter(f"{ns}title")]
    assert any("held by ml/stray (observed: the kubelet's allocation); not in the plan" in t for t in titles)
    desc = svg.find(f"{ns}desc")
    assert desc is not None and "Cut: observed on the GPU" in (desc.text or "")


def test_metrics_rows_owner_holdings_and_observer_states() -> None:
    from reconciler.controller import signals
    from reconciler.controller.metrics import ControllerMetrics

    report = _report("observed-layout-and-owners")
    rows = {(o, p): (h, f) for o, p, h, f in signals.owner_holding_rows(report)}
    assert rows[("vllm", "7g.141gb")] == (0, 1) and rows[("embeddings", "1g.18gb")] == (1, 0)
    assert all(o for o, _ in rows)  # labels: owners and profiles only, never pods
    owner = {(o, p): (t, u) for o, p, t, u in signals.owner_rows(report)}
    assert ("", "1g.18gb") not in owner  # the 1g.18gb the GPU has and the plan lacks is no one's
    assert owner[("embeddings", "1g.18gb")] == (2, 1)
    health = _report("observer-health")
    assert signals.observer_counts(health) == {"silent": 1, "reporting": 2, "malformed": 1}
    m = ControllerMetrics()
    m.set_observers(signals.observer_counts(health))
    m.set_owner_holdings(signals.owner_holding_rows(report))
    text = m.render().decode()
    assert 'migplan_observers{state="silent"} 1.0' in text and 'migplan_observers{state="absent"} 0.0' in text
    assert 'migplan_owner_holdings{owner="vllm",profile="7g.141gb",state="held_by_other_owners"} 1.0' in text
    assert "notebook" not in text


def test_each_map_says_what_was_observed_when_the_observer_is_partly_trusted() -> None:
    report = _report("observer-health")
    sources = {n: {(g.layout_source, g.holders_source) for g in gpus} for n, gpus in report.slice_maps.items()}
    assert sources["gpu-b"] == {("planned", "inferred")}  # silent: nothing of it is used
    assert sources["gpu-c"] == {("observed", "inferred")}  # the kubelet did not answer: layout only
    assert sources["gpu-d"] == {("planned", "inferred")}  # malformed
    assert sources["gpu-e"] == {("observed", "inferred")}  # v1: no holders in that format
    occ = {n.name: {o.source for o in n.occupancy} for n in report.nodes}
    assert occ == {"gpu-b": {"inferred"}, "gpu-c": {"inferred"}, "gpu-d": {"inferred"}, "gpu-e": {"inferred"}}
    files = reports.render_reports(report)
    text = "".join(files[reports.node_page_name(n.name)].decode() for n in report.nodes)
    assert "[observed cut, holders inferred]" in text and "[planned cut, holders inferred]" in text


def test_svg_outlines_partitions_off_the_plan() -> None:
    files = reports.render_reports(_report("observed-layout-and-owners"))
    ns = "{http://www.w3.org/2000/svg}"
    gpu0 = ElementTree.fromstring(files[slicesvg.gpu_map_name("gpu-a", 0)])
    strokes = {r.get("stroke") for r in gpu0.iter(f"{ns}rect")}
    assert slicesvg.OFF_PLAN["moved"][0] in strokes and slicesvg.OFF_PLAN["unplanned"][0] not in strokes
    legend = [t.text for t in gpu0.iter(f"{ns}text")]
    assert "placed by the driver, not as planned" in legend
    gpu3 = ElementTree.fromstring(files[slicesvg.gpu_map_name("gpu-a", 3)])
    assert slicesvg.OFF_PLAN["unplanned"][0] in {r.get("stroke") for r in gpu3.iter(f"{ns}rect")}
