"""The merge-request comment's size cap: a 5,000-node diff still fits GitHub's and GitLab's limits, with
the heads whole, per-node blocks as room allows and the rest counted; and the capacity delta's arithmetic."""

from __future__ import annotations

import re

import pytest

from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.review.capacity import capacity_delta, usage_from_report
from reconciler.logic.review.mrcomment import MAX_SUMMARY_ROWS, PlanSection, render_comment
from reconciler.logic.review.revdiff import diff_states, disruptions
from reconciler.model.inventory import ClusterSpec, DesiredState, GpuSpec, MigStrategy, NodeSpec, Partition, Placement
from reconciler.model.revisions import Revision

CLUSTER = b"apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: big}\nspec:\n  migStrategy: mixed\n"
# Valid H200 cuts (profile, start, size): the article's 3g+2g+1g+1g, and seven 1g.18gb.
CUTS = {
    "balanced": (("3g.71gb", 4, 4), ("2g.35gb", 0, 2), ("1g.18gb", 2, 1), ("1g.18gb", 3, 1)),
    "small": tuple(("1g.18gb", i, 1) for i in range(7)),
}


def _state(n: int, cut: str, sha: str) -> DesiredState:
    """n nodes of 8 H200s, built as validation builds them (the 5,000-node validation is benchmarked elsewhere)."""
    parts = CUTS[cut]

    def gpu(i: int, node: int) -> GpuSpec:
        partitions = tuple(
            Partition(p, s, f"team-{node % 40}" if k == 0 else None) for k, (p, s, _) in enumerate(parts)
        )
        return GpuSpec(i, "H200-141GB", True, partitions, placements=tuple(Placement(s, z) for _, s, z in parts))

    nodes = {f"n{k:05d}": NodeSpec(f"n{k:05d}", tuple(gpu(i, k) for i in range(8))) for k in range(n)}
    return DesiredState(ClusterSpec("big", MigStrategy.MIXED), nodes, revision=Revision("main", sha * 40))


@pytest.fixture(scope="module")
def big() -> PlanSection:
    before, after = _state(5000, "balanced", "a"), _state(5000, "small", "b")
    diff = diff_states(before, after)
    assert len(diff.changes) == 5000 * 8 * 7  # per GPU: 3g and 2g destroyed, five 1g created, 1g at 2 and 3 kept
    validation = validate_inventory({"cluster.yaml": CLUSTER}, revision=after.revision)
    return PlanSection(
        cluster="big", root="", base=str(before.revision), target=str(after.revision),
        validation=validation, diff=diff, disrupts=disruptions(diff, before, after, None),
        capacity=capacity_delta(before, after, None),
    )  # fmt: skip


@pytest.mark.parametrize("limit", [60_000, 65_536, 1_000_000])
def test_a_5000_node_diff_fits_the_limit(big: PlanSection, limit: int) -> None:
    comment = render_comment([big], max_chars=limit)
    assert len(comment) <= limit
    shown = comment.count("<details>")
    assert shown == comment.count("</details>") > 0
    assert f"*… {5000 - shown} more node(s) not shown to keep this comment under {limit:,} characters" in comment
    summary_rows = [ln for ln in comment.splitlines() if re.match(r"\| `n\d{5}` \|", ln)]
    assert len(summary_rows) == MAX_SUMMARY_ROWS and f"… and {5000 - MAX_SUMMARY_ROWS} more node(s)" in comment
    assert "| `3g.71gb` | 40000 → 0 | ? |" in comment and "| `1g.18gb` | 80000 → 280000 | ? |" in comment


def test_a_small_diff_is_shown_whole(big: PlanSection) -> None:
    before, after = _state(3, "balanced", "a"), _state(3, "small", "b")
    diff = diff_states(before, after)
    section = PlanSection(
        cluster="c", root="", base="a", target="b", validation=big.validation, diff=diff,
        disrupts=disruptions(diff, before, after, None), capacity=capacity_delta(before, after, None),
    )  # fmt: skip
    comment = render_comment([section])
    assert comment.count("<details>") == 3 and "not shown" not in comment


def test_capacity_free_counts_per_node() -> None:
    before, after = _state(2, "balanced", "a"), _state(2, "small", "b")
    report = {"nodes": [
        {"name": "n00000", "occupancy": [{"profile": "3g.71gb", "used": 8}, {"profile": "1g.18gb", "used": 3}]},
        {"name": "n00001", "occupancy": [{"profile": "3g.71gb", "used": 2}, {"profile": "1g.18gb", "used": True}]},
        {"name": 5, "occupancy": "x"},
    ]}  # fmt: skip
    usage = usage_from_report(report)
    assert usage == {"n00000": {"3g.71gb": 8, "1g.18gb": 3}, "n00001": {"3g.71gb": 2}}
    delta = capacity_delta(before, after, usage)
    by = {p.profile: p for p in delta.profiles}
    assert (by["3g.71gb"].before, by["3g.71gb"].after, by["3g.71gb"].free_before, by["3g.71gb"].free_after) == (
        16,
        0,
        6,
        0,
    )
    assert by["3g.71gb"].last_free_removed
    # 1g.18gb: before 16 per node, 3 used on n00000 -> 13 + 16 free; after 56 per node -> 53 + 56
    assert (by["1g.18gb"].free_before, by["1g.18gb"].free_after) == (29, 109)
    assert {o.owner for o in delta.owners} == {"team-0", "team-1"}
    assert delta.owners[0].before == {"3g.71gb": 8} and delta.owners[0].after == {"1g.18gb": 8}
