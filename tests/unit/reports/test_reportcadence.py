"""The report cadence: status or findings commit at once, occupancy-only churn waits for
reports.minInterval; the digests and trailers that carry the last report across restarts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.controller.metrics import ControllerMetrics
from reconciler.logic.reports import reportcadence as rc
from reconciler.logic.reports.reportcadence import Cadence, ReportDigests

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
TEN = timedelta(minutes=10)


def _report(*, status: str = "InSync", used: int = 0, finding: str | None = None, rev: str = "main@sha1:aa") -> Any:
    findings = [] if finding is None else [{"code": finding, "message": "m"}]
    occupancy = [{"profile": "1g.18gb", "total": 7, "used": used, "holders": [{"pod": "ml/p", "count": used}]}]
    return {
        "kind": "DriftReport",
        "revision": rev,
        "inSync": status == "InSync",
        "summary": {status: 1},
        "clusterFindings": [],
        "nodes": [{"name": "n0", "status": status, "findings": findings, "occupancy": occupancy}],
    }


def _digests(doc: Any, source: Any = None) -> ReportDigests:
    # The files stand in for what render_reports writes: the document and the source state.
    source = source or {"revision": doc["revision"]}
    return rc.digests(doc, {"drift.yaml": repr((doc, source)).encode()}, source)


BASE = _digests(_report())
OCCUPANCY = _digests(_report(used=3))
STATUS = _digests(_report(status="Drifted"))
FINDING = _digests(_report(finding="MP506"))
REVISION = _digests(_report(rev="main@sha1:bb"))
SOURCE = _digests(_report(), {"revision": "main@sha1:aa", "refused": {"code": "MP702"}})


def test_occupancy_changes_only_the_content_digest() -> None:
    assert OCCUPANCY.status == BASE.status and OCCUPANCY.content != BASE.content
    for other in (STATUS, FINDING, REVISION, SOURCE):
        assert other.status != BASE.status and other.content != BASE.content


@pytest.mark.parametrize(
    ("new", "last", "last_at", "now", "interval", "expected"),
    [
        # no earlier report, or a tip without trailers: now
        (BASE, None, None, T0, TEN, Cadence(True, "no earlier report to compare with")),
        (OCCUPANCY, BASE, None, T0, TEN, Cadence(True, "no earlier report to compare with")),
        # same content: nothing to commit, nothing held
        (BASE, BASE, T0, T0 + timedelta(seconds=1), TEN, Cadence(False, "unchanged")),
        # status, finding, revision, source: at once, even one second after the last commit
        (STATUS, BASE, T0, T0 + timedelta(seconds=1), TEN, Cadence(True, "status or findings changed")),
        (FINDING, OCCUPANCY, T0, T0 + timedelta(seconds=1), TEN, Cadence(True, "status or findings changed")),
        (REVISION, BASE, T0, T0, TEN, Cadence(True, "status or findings changed")),
        (SOURCE, BASE, T0, T0, TEN, Cadence(True, "status or findings changed")),
        # occupancy only: held until last commit + interval, then committed
        (
            OCCUPANCY,
            BASE,
            T0,
            T0 + timedelta(minutes=3),
            TEN,
            Cadence(False, "occupancy only; held until the minimum interval has passed", held_until=T0 + TEN),
        ),
        (OCCUPANCY, BASE, T0, T0 + TEN, TEN, Cadence(True, "occupancy changed; minimum interval passed")),
        (OCCUPANCY, BASE, T0, T0 + 2 * TEN, TEN, Cadence(True, "occupancy changed; minimum interval passed")),
        # minInterval 0: every change commits
        (OCCUPANCY, BASE, T0, T0, timedelta(0), Cadence(True, "occupancy changed (no minimum interval)")),
        # a tip stamped in the future (someone else's commit, a skewed clock) is data, not a hold (issue 25)
        (
            OCCUPANCY,
            BASE,
            T0 + timedelta(days=365),
            T0,
            TEN,
            Cadence(True, "occupancy changed; the last report commit is dated 31536000 s in the future: not a hold"),
        ),
    ],
)
def test_decide(
    new: ReportDigests,
    last: ReportDigests | None,
    last_at: datetime | None,
    now: datetime,
    interval: timedelta,
    expected: Cadence,
) -> None:
    got = rc.decide(new=new, last=last, last_commit_at=last_at, now=now, min_interval=interval)
    assert got == expected
    assert got.held == (expected.held_until is not None)


def test_trailers_round_trip_and_refuse_anything_else() -> None:
    message = f"migplan: drift report for main — in sync\n\n{OCCUPANCY.trailers('reports/prod')}\n"
    assert rc.report_path(message) == "reports/prod"
    assert rc.parse_trailers(message, "reports/prod") == OCCUPANCY
    # another cluster's report on the same branch is not this one's last report
    assert rc.parse_trailers(message, "reports/staging") is None
    assert rc.parse_trailers("migplan: drift report, written by an older version", "reports") is None
    only_status = f"x\n\n{rc.PATH_TRAILER}: reports\n{rc.STATUS_TRAILER}: sha256:{'a' * 64}\n"
    assert rc.parse_trailers(only_status, "reports") is None
    no_path = f"x\n\n{rc.STATUS_TRAILER}: sha256:{'a' * 64}\n{rc.CONTENT_TRAILER}: sha256:{'b' * 64}\n"
    assert rc.parse_trailers(no_path, "reports") is None
    for bad in ("sha1:" + "a" * 64, "sha256:" + "a" * 63, "sha256:" + "A" * 64, "sha256:" + "a" * 64 + " x"):
        text = f"x\n\n{rc.PATH_TRAILER}: reports\n{rc.STATUS_TRAILER}: {bad}\n{rc.CONTENT_TRAILER}: {bad}\n"
        assert rc.parse_trailers(text, "reports") is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10m", 600),
        ("1h30m", 5400),
        ("90s", 90),
        ("0", 0),
        ("0s", 0),
        ("99h9999m99999s", 99 * 3600 + 9999 * 60 + 99999),
    ],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert rc.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "10x", "m", "1.5h", "-1m", "100h", "10m\n", " 10m", "1m1h", "1d", "10M"])
def test_parse_duration_refuses(text: str) -> None:
    assert rc.parse_duration(text) is None


def test_held_gauges_keep_the_first_held_time_and_clear_on_commit() -> None:
    m = ControllerMetrics()
    m.record_report("committed", 0, now=100.0)
    assert "migplan_report_held_since_timestamp_seconds 0.0" in m.render().decode()
    m.record_report("held", 0, now=200.0, held_until=700.0)
    m.record_report("held", 0, now=230.0, held_until=700.0)
    text = m.render().decode()
    assert "migplan_report_held_since_timestamp_seconds 200.0" in text
    assert "migplan_report_held_until_timestamp_seconds 700.0" in text
    assert 'migplan_report_pushes_total{result="held"} 2.0' in text
    m.record_report("committed", 0, now=700.0)
    text = m.render().decode()
    assert "migplan_report_held_since_timestamp_seconds 0.0" in text
    assert "migplan_report_held_until_timestamp_seconds 0.0" in text


def test_owner_holdings_and_observed_holders_are_occupancy_not_status() -> None:
    """Pods starting and stopping change who holds what (owner accounts, an observed cut's holders), not the
    status: the report is coalesced. What the plan reserves and the cut itself stay status."""
    base = {
        "kind": "DriftReport",
        "owners": [
            {"owner": "a", "profile": "1g.18gb", "source": "observed", "reserved": 2, "held": 0, "heldByOwner": 0}
        ],
        "nodes": [
            {
                "name": "n",
                "status": "InSync",
                "findings": [],
                "occupancy": [],
                "gpus": [{"index": 0, "partitions": [{"profile": "1g.18gb", "start": 0, "size": 1}]}],
            }
        ],
    }
    busy = json.loads(json.dumps(base))
    busy["owners"][0].update(held=1, heldByOwner=1)
    busy["nodes"][0]["gpus"][0]["partitions"][0]["holders"] = ["default/p"]
    a = rc.digests(base, {"x": b"1"}, {})
    b = rc.digests(busy, {"x": b"2"}, {})
    assert a.status == b.status and a.content != b.content
    recut = json.loads(json.dumps(base))
    recut["nodes"][0]["gpus"][0]["partitions"][0]["start"] = 1
    replanned = json.loads(json.dumps(base))
    replanned["owners"][0]["reserved"] = 3
    assert rc.digests(recut, {}, {}).status != a.status
    assert rc.digests(replanned, {}, {}).status != a.status


def test_a_future_dated_tip_never_holds_occupancy_across_cycles() -> None:
    # Cycle after cycle the tip stays dated a year ahead (nobody else rewrites it): before issue 25 every one of
    # these cycles was held ("until now + interval", recomputed each time), so the update was never committed.
    tip = T0 + timedelta(days=365)
    held = [
        rc.decide(new=OCCUPANCY, last=BASE, last_commit_at=tip, now=T0 + i * TEN, min_interval=TEN).commit
        for i in range(5)
    ]
    assert held == [True] * 5


def test_the_content_digest_over_blob_ids_follows_the_files_not_the_bytes_passed() -> None:
    """A report written into Git is summarised by its blob ids (a blob id is the digest of the bytes): equal ids,
    equal content; one id or one name different, different content; the status digest does not depend on them."""
    doc: dict[str, Any] = {"cluster": "c", "nodes": [{"name": "n1", "status": "InSync", "findings": []}]}
    ids = {"README.md": "a" * 40, "nodes/n1.md": "b" * 40}
    one = rc.digests(doc, {}, {}, blob_ids=ids)
    assert one == rc.digests(doc, {"ignored": b"x"}, {}, blob_ids=dict(reversed(list(ids.items()))))
    assert one.content != rc.digests(doc, {}, {}, blob_ids={**ids, "nodes/n1.md": "c" * 40}).content
    assert one.content != rc.digests(doc, {}, {}, blob_ids={"README.md": "a" * 40, "nodes/n2.md": "b" * 40}).content
    assert one.content != rc.digests(doc, {}, {}).content
    assert one.status == rc.digests(doc, {}, {}, blob_ids={**ids, "nodes/n1.md": "c" * 40}).status
