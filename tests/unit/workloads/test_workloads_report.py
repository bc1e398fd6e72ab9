"""--reports-from-git reads drift.yaml from a branch people can push to: a wrongly typed field is ReportUnreadable
(MP622), and a few KB of YAML aliases naming the same rows millions of times is refused, not iterated for hours."""

from __future__ import annotations

import time

import pytest

from reconciler.logic.workloads import workloads


def test_occupancy_that_is_not_a_list_is_unreadable() -> None:
    for occupancy in ("5", "{profile: x}", "x"):
        data = f"kind: DriftReport\nnodes: [{{name: a, occupancy: {occupancy}}}]\n".encode()
        with pytest.raises(workloads.ReportUnreadable):
            workloads.free_from_drift_report(data)


def test_aliases_that_multiply_rows_are_refused_quickly() -> None:
    n = 1100  # 1100 nodes x 1100 rows from 13 KB
    rows = ",".join(["&m {profile: 1g.18gb, total: 7, used: 1}", *["*m"] * (n - 1)])
    data = (
        f"kind: DriftReport\nocc: &o [{rows}]\nnode: &n {{name: a, occupancy: *o}}\nnodes: [{','.join(['*n'] * n)}]\n"
    )
    start = time.monotonic()
    with pytest.raises(workloads.ReportUnreadable, match="aliases"):
        workloads.free_from_drift_report(data.encode())
    assert time.monotonic() - start < 5
    # The same shape within the bound is read: every row counted once per node that names it.
    small = data.replace(",*n" * (n - 1), "").encode()
    _, free = workloads.free_from_drift_report(small)
    assert free == {"a": {"nvidia.com/mig-1g.18gb": 6 * n}}


def test_a_value_pyyaml_cannot_construct_is_unreadable() -> None:
    for value in ("2026-13-45", "!!int x", "!!bool maybe"):
        data = f"kind: DriftReport\nrevision: {value}\nnodes: []\n".encode()
        with pytest.raises(workloads.ReportUnreadable, match="cannot read"):
            workloads.free_from_drift_report(data)
