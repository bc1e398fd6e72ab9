"""What a report cycle holds while it writes the pages (issue 29, `runrss5`): drift.yaml's document (report_to_json,
the largest value of a fleet's report cycle) is digested and rendered first and is gone before the pages are rendered
and stored; the report commit's digests are the ones the whole document gives. Against a real `git daemon` on
loopback and the cluster twin, as test_report_store.py."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

from servedcluster import h200_fleet, served

from reconciler import gitops
from reconciler.logic.reports import reportcadence


class _Doc(dict[str, Any]):
    """report_to_json's document, with a weak reference to watch its lifetime (a plain dict takes none)."""


def test_the_report_document_is_gone_while_the_pages_are_stored(tmp_path: Path, monkeypatch: Any) -> None:
    from reconciler.adapters.git.source import GitAuth, GitRemote
    from reconciler.sourcing import InventorySource

    docs: list[weakref.ref[_Doc]] = []  # each cycle's document, watched
    whole: list[dict[str, Any]] = []  # a copy of it (the cycle keeps none) and the source state, to digest them
    alive_while_storing: list[bool] = []
    committed: list[reportcadence.ReportDigests] = []
    real_to_json, real_top = gitops.report_to_json, gitops.render_top_files
    real_store, real_commit = gitops.store_report, gitops.commit_report

    def to_json(report: Any) -> _Doc:
        doc = _Doc(real_to_json(report))
        docs.append(weakref.ref(doc))
        whole.append(dict(doc))
        return doc

    def top(report: Any, *, source: Any = None, doc: Any = None) -> Any:
        whole.append(dict(source))
        return real_top(report, source=source, doc=doc)

    def store(*args: Any, **kwargs: Any) -> Any:
        gc.collect()
        alive_while_storing.append(docs[-1]() is not None)
        return real_store(*args, **kwargs)

    def commit(repo: Any, *, blobs: dict[str, str], message: str, **kwargs: Any) -> Any:
        # the digests the whole document gives (reportcadence.digests), as the message's trailers carry them
        digests = reportcadence.digests(whole[0], {}, whole[1], blob_ids=blobs)
        assert f"sha256:{digests.status}" in message and f"sha256:{digests.content}" in message, message
        committed.append(digests)
        return real_commit(repo, blobs=blobs, message=message, **kwargs)

    monkeypatch.setattr(gitops, "report_to_json", to_json)
    monkeypatch.setattr(gitops, "store_report", store)
    monkeypatch.setattr(gitops, "commit_report", commit)
    monkeypatch.setattr(gitops, "render_top_files", top)
    with served(tmp_path, h200_fleet("held", 3, "{profile: 3g.71gb}", 2)) as (daemon, cluster, _, _):
        source = InventorySource(
            GitRemote(daemon.url("inv"), tmp_path / "cache", GitAuth(), timeout_ms=5000), ref="main"
        )
        out = gitops.run_gitops_cycle(source=source, cluster=cluster, deadline=60)
        assert out.report is not None and out.report.status == "committed", out.to_json()
    assert alive_while_storing == [False]
    assert len(committed) == 1
