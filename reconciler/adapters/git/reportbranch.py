"""The latest drift report committed on the reports branch, read from the object database (pygit2).

`migplan plan` uses it to say which pods a merge would disrupt without cluster credentials: the
controller commits `<reports.path>/drift.yaml` on `reports.branch` (reconciler/adapters/git/reports.py).
The branch is looked up as a local branch, then as `origin/<branch>` (a CI clone has remote-tracking
branches only). The report is data someone pushed, never trusted: at most MAX_REPORT_BYTES, YAML
without anchors or aliases (no billion laughs), nested at most MAX_DEPTH, at most `max_nodes` YAML nodes
(counted on the event stream before anything is built: loaded, a few MB of `[a,a,a,...]` cost ~750 MB; the
plan passes a budget from the base inventory's node count), a mapping of kind DriftReport; anything else is
MP746 with the reason, and the plan goes on without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pygit2
import yaml

from reconciler.adapters.git.source import GitFailure, InventoryRepo
from reconciler.logic.inventory.reporttarget import normalize_root

REPORT_UNUSABLE = "MP746"  # the committed report cannot be read or is not a drift report: not used
MAX_REPORT_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 16
MAX_NODES = 4_000_000  # YAML nodes; `migplan plan` passes a tighter budget from the inventory's size
NODES_PER_INVENTORY_NODE = 2_000  # a report holds ~100 YAML nodes per inventory node (8 GPUs, a few pods each)
DRIFT_FILE = "drift.yaml"


@dataclass(frozen=True, slots=True)
class CommittedReport:
    branch: str  # the ref it was found under ("migplan-reports" or "origin/migplan-reports")
    commit: str  # the report commit
    committed_at: int  # committer time, seconds since the epoch
    revision: str  # the inventory revision the report was computed against (its `revision:`)
    document: Mapping[str, Any]


def _loader() -> type[yaml.SafeLoader]:
    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader


def report_budget(inventory_nodes: int) -> int:
    """How many YAML nodes a report for an inventory of `inventory_nodes` nodes may hold."""
    return min(MAX_NODES, 100_000 + NODES_PER_INVENTORY_NODE * max(inventory_nodes, 0))


def parse_report(data: bytes, *, max_nodes: int = MAX_NODES) -> Mapping[str, Any] | str:
    """The drift report as data, or why it is refused (see the module docstring)."""
    if len(data) > MAX_REPORT_BYTES:
        return f"larger than {MAX_REPORT_BYTES} bytes"
    try:
        depth = 0
        count = 0
        for event in yaml.parse(data, Loader=_loader()):
            if isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent):
                count += 1
                if count > max_nodes:
                    return f"more than {max_nodes} YAML nodes (far more than a report of this inventory holds)"
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                return "it uses YAML anchors or aliases (migplan never writes them)"
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    return f"nested deeper than {MAX_DEPTH}"
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        doc = yaml.load(data, Loader=_loader())
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        return f"not YAML ({type(exc).__name__})"
    if not isinstance(doc, dict) or doc.get("kind") != "DriftReport" or not isinstance(doc.get("nodes"), list):
        return "not a migplan DriftReport"
    return doc


def latest_report(
    repo: InventoryRepo, branch: str, path: str, *, max_nodes: int = MAX_NODES
) -> CommittedReport | GitFailure | None:
    """The report at the tip of `branch` (None when no such branch exists: nothing was ever reported)."""
    for candidate in (branch, f"origin/{branch}"):
        revision = repo.resolve(candidate)
        if isinstance(revision, GitFailure):
            continue
        try:
            commit = repo.repo[revision.sha].peel(pygit2.Commit)
            tree = commit.tree
            entry = tree["/".join(p for p in (normalize_root(path), DRIFT_FILE) if p)]
            if entry.type != pygit2.enums.ObjectType.BLOB:
                raise KeyError(DRIFT_FILE)
            # Size before read: the object header says it without inflating the blob.
            if int(repo.repo.odb.read_header(entry.id)[1]) > MAX_REPORT_BYTES:
                return GitFailure(REPORT_UNUSABLE, f"the report on {candidate} is larger than {MAX_REPORT_BYTES} bytes")
            blob = repo.repo[entry.id]
            assert isinstance(blob, pygit2.Blob)
            data = bytes(blob.data)
            when = int(commit.commit_time)
        except KeyError:
            return GitFailure(REPORT_UNUSABLE, f"no {path}/{DRIFT_FILE} on {candidate} at {revision.sha[:12]}")
        except (ValueError, pygit2.GitError) as exc:
            return GitFailure(REPORT_UNUSABLE, f"cannot read the report on {candidate}: {exc}")
        doc = parse_report(data, max_nodes=max_nodes)
        if isinstance(doc, str):
            return GitFailure(REPORT_UNUSABLE, f"the report on {candidate} ({revision.sha[:12]}) is unusable: {doc}")
        rev = doc.get("revision")
        return CommittedReport(candidate, revision.sha, when, rev if isinstance(rev, str) else "?", doc)
    return None
