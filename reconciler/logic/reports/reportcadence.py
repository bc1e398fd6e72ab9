"""When a new report must be committed: at once, or held back to coalesce occupancy churn.

Pods start and stop all day; each changes the occupancy in the report, and a commit per change would
bury the reports branch in noise. What a person acts on — a node's status, a finding, the revision
applied, what the source refused — must reach Git at once. So a report is summarised by two digests:

- `status`: everything in the report except the per-node occupancy (and the slice maps' holders,
  which are drawn from it), plus the source state (revision, refused, stale...). A change here
  commits now.
- `content`: every report file byte for byte. A change here only (occupancy-only) commits when
  `reports.minInterval` has passed since the last report commit; until then it is held back.

Both digests ride in the report commit's message as trailers (`Migplan-Report-Path:`,
`Migplan-Report-Status:`, `Migplan-Report-Content:`), so the last committed report's summary and its
commit time are read from the reports branch (the newest commit naming this reports.path: clusters
sharing a branch each keep their own cadence): the Git history is the record, it survives restarts, replicas and a cache
directory that is an emptyDir. A tip without trailers (older version, someone else's commit) is
"unknown": commit now.

Pure: values in, values out (digests are hashlib over canonical JSON). No clock: `now` and the last
commit time are arguments.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson

from reconciler.model.durations import DURATION_PATTERN as DURATION_PATTERN
from reconciler.model.durations import parse_duration as parse_duration

DEFAULT_MIN_INTERVAL_SECONDS = 600
STATUS_TRAILER = "Migplan-Report-Status"
CONTENT_TRAILER = "Migplan-Report-Content"
PATH_TRAILER = "Migplan-Report-Path"

_TRAILER_RE = re.compile(rf"^({STATUS_TRAILER}|{CONTENT_TRAILER}): sha256:([0-9a-f]{{64}})$", re.MULTILINE)
_PATH_RE = re.compile(rf"^{PATH_TRAILER}: (\S+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ReportDigests:
    """What a report commit is compared by (see the module docstring)."""

    status: str
    content: str

    def trailers(self, path: str) -> str:
        """The lines appended to the report commit message (after a blank line). `path` is
        reports.path: several clusters may share one reports branch, each under its own path."""
        lines = (f"{PATH_TRAILER}: {path}", f"{STATUS_TRAILER}: sha256:{self.status}")
        return "\n".join((*lines, f"{CONTENT_TRAILER}: sha256:{self.content}"))


_OWNER_STATUS_KEYS = frozenset({"owner", "profile", "source", "reserved"})


def _without_holders(node: dict[str, Any]) -> dict[str, Any]:
    """A node's report entry without who holds its partitions now (its observed cut stays: a re-cut is status).
    A DRA node's claims are its holders: a pod taking a device is occupancy; its published devices are status."""
    dra = node.get("dra")
    if isinstance(dra, Mapping):
        node = {**node, "dra": {k: v for k, v in dra.items() if k not in ("claims", "claimsMore")}}
    gpus = node.get("gpus")
    if not isinstance(gpus, list):
        return node
    return {
        **node,
        "gpus": [
            {
                **g,
                "partitions": [
                    {k: v for k, v in p.items() if k != "holders"}
                    for p in g.get("partitions", ())
                    if isinstance(p, Mapping)
                ],
            }
            if isinstance(g, Mapping)
            else g
            for g in gpus
        ],
    }


def digests(
    report_json: Mapping[str, Any],
    files: Mapping[str, bytes],
    source: Mapping[str, Any],
    *,
    blob_ids: Mapping[str, str] | None = None,
) -> ReportDigests:
    """The digests of a report: `report_json` is report_to_json()'s document, `files` the rendered
    report files, `source` the Git source's state as rendered into the report. With `blob_ids` (file ->
    Git blob id, the report as written into the object database: adapters/git/reportstore.py) the content
    digest is taken over those ids instead of `files`: a blob id is the digest of the file's bytes, so
    the unchanged pages need not be read or kept to know the report did not change."""
    status = status_digest(report_json, source)
    if blob_ids is not None:
        return ReportDigests(status=status, content=blobs_digest(blob_ids))
    h = hashlib.sha256()
    for name, data in sorted(files.items()):
        h.update(name.encode("utf-8", "surrogateescape") + b"\0" + str(len(data)).encode() + b"\0" + data)
    return ReportDigests(status=status, content=h.hexdigest())


def status_digest(report_json: Mapping[str, Any], source: Mapping[str, Any]) -> str:
    """The status digest of digests(): taken apart so a caller can drop the document (the largest value of a
    fleet's report cycle) before the pages are written, and take the content digest from their blob ids later."""
    nodes = [_without_holders({k: v for k, v in n.items() if k != "occupancy"}) for n in report_json.get("nodes", ())]
    # Owner accounts: what the plan reserves is status; how much of it pods hold right now is occupancy (a pod of
    # another owner on a partition is a finding, MP541, and changes the status through the findings).
    owners = [{k: v for k, v in o.items() if k in _OWNER_STATUS_KEYS} for o in report_json.get("owners", ())]
    status_view = {
        **{k: v for k, v in report_json.items() if k not in ("nodes", "owners")},
        "owners": owners,
        "nodes": nodes,
        "source": source,
    }
    return hashlib.sha256(orjson.dumps(status_view, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()


def blobs_digest(blob_ids: Mapping[str, str]) -> str:
    """The content digest of digests() taken over the report's blob ids (file -> Git blob id)."""
    h = hashlib.sha256()
    for name, oid in sorted(blob_ids.items()):
        h.update(b"blob\0" + name.encode("utf-8", "surrogateescape") + b"\0")
        h.update(oid.encode("ascii", "replace") + b"\0")
    return h.hexdigest()


def report_path(message: str) -> str | None:
    """The reports.path a report commit message names (its last `Migplan-Report-Path:` line)."""
    found = _PATH_RE.findall(message)
    return str(found[-1]) if found else None


def parse_trailers(message: str, path: str) -> ReportDigests | None:
    """The digests a report commit message carries for the report at `path`; None when the path
    differs or a digest is missing or malformed (a commit message is anyone's text: only exact
    `Name: sha256:<64 hex>` lines count, the last wins)."""
    if report_path(message) != path:
        return None
    found = dict(_TRAILER_RE.findall(message))
    if STATUS_TRAILER not in found or CONTENT_TRAILER not in found:
        return None
    return ReportDigests(status=found[STATUS_TRAILER], content=found[CONTENT_TRAILER])


@dataclass(frozen=True, slots=True)
class Cadence:
    """The decision. `commit`: hand the report to Git now. `reason`: why, in words. `held_until`:
    when a held report becomes due (None unless held)."""

    commit: bool
    reason: str
    held_until: datetime | None = None

    @property
    def held(self) -> bool:
        return self.held_until is not None


def decide(
    *,
    new: ReportDigests,
    last: ReportDigests | None,
    last_commit_at: datetime | None,
    now: datetime,
    min_interval: timedelta,
) -> Cadence:
    """Commit now, or hold back until `last_commit_at + min_interval`.

    - no known last report (no branch yet, a tip without trailers): now;
    - same content as the last report: nothing to commit (the outbox would find the tree unchanged);
    - status or findings (or revision, source state) changed: now, whatever the interval;
    - occupancy only: now when `min_interval` has passed since the last report commit, else held.
    A last commit time in the future (someone else's commit, a replica with a skewed clock) is data, not a
    command: it holds nothing, the report is committed now (dated by this clock), and the reason says so.
    Holding "until the minimum interval after that time" would hold for as long as the tip stays in the
    future, i.e. for ever when the tip is dated years ahead (issue 25).
    """
    if last is None or last_commit_at is None:
        return Cadence(True, "no earlier report to compare with")
    if new.content == last.content:
        return Cadence(False, "unchanged")
    if new.status != last.status:
        return Cadence(True, "status or findings changed")
    if min_interval <= timedelta(0):
        return Cadence(True, "occupancy changed (no minimum interval)")
    if last_commit_at > now:
        ahead = int((last_commit_at - now).total_seconds())
        return Cadence(True, f"occupancy changed; the last report commit is dated {ahead} s in the future: not a hold")
    due = last_commit_at + min_interval
    if now >= due:
        return Cadence(True, "occupancy changed; minimum interval passed")
    return Cadence(False, "occupancy only; held until the minimum interval has passed", held_until=due)
