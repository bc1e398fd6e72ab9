"""Redaction where secrets enter a report (issue 29, item 3).

Secrets reach a report through settings, URLs and error texts: a Finding's message is redacted when the Finding
is made, the report's top files (drift.yaml, README.md: they quote the source, settings and errors) and the commit
message are guarded when queued and again when pushed, and per-node files are not scanned (thousands of them at
fleet size). An outbox entry queued by an older version (no `scrubbed` mark) is still scrubbed whole.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from gitserver import git, make_bare, seed

from reconciler.adapters.git.reports import SCRUBBED, BotIdentity, Outbox, commit_report, flush_outbox, guard_files
from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
from reconciler.model.drift import Finding
from reconciler.model.inventory import ReportSettings

SETTINGS = ReportSettings(branch="migplan-reports", path="reports")
SECRET = "hunter2SECRET"
URL = f"https://bot:{SECRET}@git.example.com/inv.git?private_token={SECRET}"


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[InventoryRepo, Path]:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "work", {"cluster.yaml": "kind: Cluster\n"})
    opened = InventoryRepo.open(GitRemote(str(bare), tmp_path / "cache", GitAuth(), timeout_ms=2000))
    assert isinstance(opened, InventoryRepo)
    return opened, bare


def test_a_finding_quoting_an_error_text_is_redacted_when_made() -> None:
    f = Finding(code="MP999", message=f"cannot reach {URL}: 401", node="gpu-1")
    assert SECRET not in f.message and SECRET not in str(f) and SECRET not in json.dumps(f.to_json())
    assert "bot:***@git.example.com" in f.message and "private_token=***" in f.message
    plain = Finding(code="MP999", message="gpu 3 holds 1g.18gb at placement 2, desired 3")
    assert plain.message == "gpu 3 holds 1g.18gb at placement 2, desired 3"


def test_the_guard_scans_the_top_files_and_leaves_per_node_files_alone() -> None:
    files = {
        "drift.yaml": f"source: {URL}\n".encode(),
        "README.md": f"see {URL}\n".encode(),
        "nodes/gpu-1.md": b"# gpu-1\n\nplain node page\n",
    }
    out = guard_files(files)
    assert SECRET not in out["drift.yaml"].decode() and SECRET not in out["README.md"].decode()
    assert out["nodes/gpu-1.md"] is files["nodes/gpu-1.md"]  # not scanned: the very same bytes object
    # everything=True (entries of older versions): every file is scanned
    old = guard_files({"nodes/gpu-1.md": f"{URL}\n".encode()}, everything=True)
    assert SECRET not in old["nodes/gpu-1.md"].decode()


def test_message_and_top_files_reach_history_redacted(repo: tuple[InventoryRepo, Path]) -> None:
    opened, bare = repo
    files = {"drift.yaml": f"source_error: {URL}\n".encode(), "nodes/gpu-1.md": b"# gpu-1\n"}
    out = commit_report(opened, settings=SETTINGS, files=files, message=f"report from {URL}", bot=BotIdentity())
    assert out.status == "committed", out
    history = git("log", "-p", "--all", cwd=bare)
    assert SECRET not in history
    assert "private_token=***" in history


def test_an_entry_queued_by_an_older_version_is_scrubbed_whole(repo: tuple[InventoryRepo, Path]) -> None:
    opened, bare = repo
    outbox = Outbox.for_repo(opened)
    old_entry = {  # the shape older versions queued: no "scrubbed" mark, a secret in a per-node file
        "branch": SETTINGS.branch,
        "path": SETTINGS.path,
        "message": "older report",
        "author": ["migplan", "migplan@localhost"],
        "files": {"nodes/gpu-1.md": base64.b64encode(f"error: {URL}\n".encode()).decode("ascii")},
    }
    outbox.put(old_entry)
    out = flush_outbox(opened)
    assert out.status == "committed", out
    assert SECRET not in git("log", "-p", "--all", cwd=bare)


def test_a_marked_entry_is_guarded_again_on_read(repo: tuple[InventoryRepo, Path]) -> None:
    opened, bare = repo
    outbox = Outbox.for_repo(opened)
    edited = {  # marked, but its top file and message were edited on disk to hold a secret
        "branch": SETTINGS.branch,
        "path": SETTINGS.path,
        "message": f"edited {URL}",
        "author": ["migplan", "migplan@localhost"],
        "files": {"README.md": base64.b64encode(f"{URL}\n".encode()).decode("ascii")},
        "scrubbed": SCRUBBED,
    }
    outbox.put(edited)
    assert flush_outbox(opened).status == "committed"
    assert SECRET not in git("log", "-p", "--all", cwd=bare)


def test_the_report_just_queued_is_pushed_from_memory_not_read_back(
    repo: tuple[InventoryRepo, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Issue 29, item 2: a copy of the report less at fleet size.) Reading the just-written entry back fails
    here; the report is committed all the same, from memory, guarded, and leaves the outbox."""
    opened, bare = repo

    def unreadable(path: Path) -> dict[str, object]:
        raise OSError(f"{path} must not be read back")

    monkeypatch.setattr(Outbox, "load", staticmethod(unreadable))
    files = {"README.md": f"{URL}\n".encode(), "nodes/gpu-1.md": b"# gpu-1\n"}
    out = commit_report(opened, settings=SETTINGS, files=files, message="m", bot=BotIdentity())
    assert out.status == "committed" and out.pending == 0, out
    assert git("show", f"{SETTINGS.branch}:reports/nodes/gpu-1.md", cwd=bare) == "# gpu-1"
    assert SECRET not in git("log", "-p", "--all", cwd=bare)
    assert not Outbox.for_repo(opened).entries()
