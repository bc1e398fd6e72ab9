"""`migplan check-workloads`: the manifest corpus against the example plan, every finding's code and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.workloads import workloads
from reconciler.logic.workloads.manifests import read_manifests
from reconciler.model.inventory import DesiredState

CORPUS = Path(__file__).resolve().parents[2] / "corpus-workloads"
CASES = sorted(p for p in CORPUS.iterdir() if p.suffix in (".yaml", ".json"))
_EXPECT = re.compile(r"#\s*expect:\s*(.*)")


@pytest.fixture(scope="module")
def desired() -> DesiredState:
    result = validate_inventory(read_inventory_dir(resources.inventory_dir()), catalog=load_catalog())
    assert result.desired is not None and result.valid
    return result.desired


def expected(path: Path) -> set[tuple[str, int]]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    m = _EXPECT.match(first)
    if m is None:  # JSON cannot carry a comment: a JSON case is a good one
        assert path.suffix == ".json"
        return set()
    words = m.group(1).split()
    if words == ["none"]:
        return set()
    return {(w.split("@")[0], int(w.split("@")[1])) for w in words}


def check(path: Path, desired: DesiredState) -> list[tuple[str, int | None]]:
    manifests, diags = read_manifests(path.read_bytes(), file=path.name)
    found, _ = workloads.check_workloads(
        manifests, desired=desired, nodes=workloads.plan_nodes(desired, load_catalog())
    )
    return [(d.code, d.line) for d in diags + found]


def test_the_corpus_has_a_case_for_every_rule_that_reads_a_manifest() -> None:
    codes = {c for p in CASES for c, _ in expected(p)}
    # MP600 (unreadable bytes) and MP614 (free now) need inputs a corpus file cannot carry: tested below.
    assert set(workloads.CODES) - codes == {"MP600", "MP614", "MP620", "MP621", "MP622", "MP623"}
    assert any(not expected(p) for p in CASES)


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_corpus_case(path: Path, desired: DesiredState) -> None:
    got = check(path, desired)
    assert sorted(set(got), key=str) == sorted(expected(path), key=str), got
    assert len(got) == len(set(got)), f"a finding is reported twice: {got}"


def test_profile_not_offered_names_the_closest(desired: DesiredState) -> None:
    manifests, _ = read_manifests((CORPUS / "mp606-profile-not-offered.yaml").read_bytes(), file="m.yaml")
    found, _ = workloads.check_workloads(
        manifests, desired=desired, nodes=workloads.plan_nodes(desired, load_catalog())
    )
    (d,) = found
    assert "closest offered: 4g.40gb" in d.message or "closest offered: 3g.71gb" in d.message, d.message


def test_demand_above_what_is_free_now_names_where_pods_still_fit(desired: DesiredState) -> None:
    nodes = workloads.plan_nodes(desired, load_catalog())
    report = (
        b"apiVersion: migplan/v1\nkind: DriftReport\nrevision: main@sha1:abc\nnodes:\n"
        b"- name: gpu-h200-01\n  occupancy:\n  - {profile: 3g.71gb, total: 1, used: 1}\n"
        b"- name: gpu-h200-02\n  occupancy:\n  - {profile: 3g.71gb, total: 1, used: 0}\n"
    )
    revision, free = workloads.free_from_drift_report(report)
    assert revision == "main@sha1:abc"
    nodes = workloads.with_cluster_facts(nodes, free=free)
    manifests, _ = read_manifests((CORPUS / "good-article-pod.yaml").read_bytes(), file="pod.yaml")
    two = [manifests[0], manifests[0]]
    found, summaries = workloads.check_workloads(two, desired=desired, nodes=nodes, free_source="the report")
    # The first pod takes the one free 3g.71gb (on gpu-h200-02); the second finds none left.
    assert [s["freeFits"] for s in summaries] == [1, 0]
    assert [d.code for d in found] == ["MP614"]
    assert "only 0 can be placed now" in found[0].message
    three = workloads.check_workloads([manifests[0]], desired=desired, nodes=nodes, free_source="the report")[1]
    assert three[0]["freeFits"] == 1


@pytest.mark.parametrize(
    "data",
    [
        b"kind: DriftReport\nnodes: 7\n",
        b"apiVersion: migplan/v1\nkind: DriftReport\nnodes:\n- name: a\n  occupancy:\n"
        b"  - {profile: x, total: -1, used: 0}\n",
        b"apiVersion: migplan/v1\nkind: DriftReport\nnodes:\n- {occupancy: []}\n",
        b"{{{",
        b"kind: Something\nnodes: []\n",
    ],
)
def test_a_damaged_report_is_refused(data: bytes) -> None:
    with pytest.raises(workloads.ReportUnreadable):
        workloads.free_from_drift_report(data)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"\xff\xfe binary", "MP600"),
        (b"apiVersion: v1\nkind: Pod\x00\n", "MP600"),
        (
            b"a: &a [x,x,x,x,x,x,x,x,x]\n"
            + b"".join(
                b"%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n" % ((98 + i,) * 2 + (97 + i,) * 9) for i in range(8)
            ),
            "MP601",
        ),
        (b"[" * 5000, "MP601"),
    ],
)
def test_hostile_bytes_are_findings_never_a_crash(data: bytes, code: str) -> None:
    manifests, diags = read_manifests(data, file="x.yaml")
    assert manifests == []
    assert [d.code for d in diags] == [code]


def test_live_taints_and_labels_are_judged(desired: DesiredState) -> None:
    nodes = workloads.plan_nodes(desired, load_catalog())
    tainted = {n.name: (workloads.Taint("nvidia.com/gpu", "present", "NoSchedule"),) for n in nodes}
    live = workloads.with_cluster_facts(nodes, taints=tainted, labels={n.name: dict(n.labels) for n in nodes})
    manifests, _ = read_manifests((CORPUS / "good-article-pod.yaml").read_bytes(), file="pod.yaml")
    found, _ = workloads.check_workloads(manifests, desired=desired, nodes=live)
    assert [d.code for d in found] == ["MP616"]
    assert "taint nvidia.com/gpu=present:NoSchedule not tolerated" in found[0].message
    tolerating = (
        (CORPUS / "good-article-pod.yaml")
        .read_bytes()
        .replace(
            b"  containers:",
            b"  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n  containers:",
        )
    )
    manifests, _ = read_manifests(tolerating, file="pod.yaml")
    found, _ = workloads.check_workloads(manifests, desired=desired, nodes=live)
    assert found == []


def test_a_huge_file_is_refused_before_it_is_parsed() -> None:
    from reconciler.logic.workloads import manifests

    data = b"#" * (manifests.MAX_FILE_BYTES + 1)
    found, diags = read_manifests(data, file="huge.yaml")
    assert found == [] and [d.code for d in diags] == ["MP600"]
    assert "larger than" in diags[0].message


def test_every_diagnostic_has_its_registered_severity(desired: DesiredState) -> None:
    for path in CASES:
        manifests, diags = read_manifests(path.read_bytes(), file=path.name)
        found, _ = workloads.check_workloads(
            manifests, desired=desired, nodes=workloads.plan_nodes(desired, load_catalog())
        )
        for d in diags + found:
            assert d.severity is workloads.CODES[d.code].severity, (path.name, d)
