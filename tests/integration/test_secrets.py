"""Secrets never leave the process, and report commits never touch the inventory (issue 10, items 1-2).

A whole `migplan reconcile --once --repo` cycle runs against git http-backend behind basic auth with a
repository URL that carries a token alone (`http://TOKEN@host/...`) and a `?private_token=` parameter,
through an outage (the report waits in the outbox) and the push after it; every channel is searched for
the secrets: stdout, stderr, `-o json`, the outbox files, everything in the cache directory, the
twin's Events and `git log -p --all` of the remote.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitserver import GitDaemon, HttpGitServer, git, make_bare, seed

from reconciler.adapters.git import source as gitsource
from reconciler.adapters.git.reports import InventoryTarget, Outbox, commit_report
from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
from reconciler.model.inventory import ReportSettings
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
TOKEN = "tok3nSECRETuser"  # the lone userinfo: the basic-auth user name
PASSWORD = "pw-SECRET-from-env"  # MIGPLAN_GIT_PASSWORD
QUERY_TOKEN = "qSECRETparam789"
SECRETS = (TOKEN, PASSWORD, QUERY_TOKEN)


def _inventory_files() -> dict[str, str]:
    return {str(p.relative_to(INVENTORY)): p.read_text() for p in INVENTORY.rglob("*") if p.is_file()}


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), **env}
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "reconcile", *args], capture_output=True, text=True, env=full, timeout=120
    )


def _events(twin: ClusterTwin) -> str:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(twin.kubeconfig)))
    return str([(e.reason, e.message) for e in api.list_event_for_all_namespaces().items])


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_no_channel_carries_a_url_secret_through_an_outage_and_the_push(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "work", _inventory_files())
    server = HttpGitServer(srv, user=TOKEN, password=PASSWORD).start()
    url = server.url("inv").replace("http://", f"http://{TOKEN}@") + f"?private_token={QUERY_TOKEN}"
    cache = tmp_path / "cache"
    env = {"MIGPLAN_GIT_PASSWORD": PASSWORD}
    outputs: list[str] = []
    try:
        with ClusterTwin.from_inventory(INVENTORY) as twin:
            common = ["--once", "--kubeconfig", str(twin.kubeconfig), "--repo", url, "--cache-dir", str(cache)]
            first = _cli(*common, "-o", "json", env=env)
            outputs += [first.stdout, first.stderr]
            assert '"status": "committed"' in first.stdout, first.stdout[-3000:] + first.stderr
            twin.settle()  # the cluster changes: the next report differs
            server.stop()
            during = _cli(*common, env=env)
            outputs += [during.stdout, during.stderr]
            assert "Report: queued" in during.stdout, during.stdout[-3000:] + during.stderr
            assert "MP701" in during.stdout  # the outage is reported ...
            outbox = sorted((cache / "outbox").rglob("*.json"))
            assert outbox, "the report during the outage must wait in the outbox"
            queued = [p.read_text() for p in outbox]
            assert all("MP701" in q or "drift" in q for q in queued)
            server.start()
            after = _cli(*common, "-o", "json", env=env)
            outputs += [after.stdout, after.stderr]
            assert '"status": "committed"' in after.stdout, after.stdout[-3000:] + after.stderr
            events = _events(twin)
    finally:
        server.stop()
    history = git("log", "-p", "--all", cwd=bare)
    assert "source_error" in history or "MP701" in history  # the queued report did reach history
    cache_files = "\n".join(
        p.read_text(errors="replace") + str(p) for p in cache.rglob("*") if p.is_file() and p.stat().st_size < 1 << 20
    )
    for name, text in [
        *(("cli output", o) for o in outputs),
        *(("outbox", q) for q in queued),
        ("cache directory", cache_files),
        ("reports history", history),
        ("events", events),
    ]:
        assert not _leaks(text), f"{name} leaks {_leaks(text)}"


@pytest.fixture()
def daemon(tmp_path: Path):
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(
        bare,
        tmp_path / "work",
        {
            "cluster.yaml": "kind: Cluster\n",
            "nodes/n1.yaml": "n1\n",
            "layouts/l.yaml": "l\n",
            "inv/nodes/n2.yaml": "x\n",
        },
    )
    d = GitDaemon(srv).start()
    yield d, bare
    d.stop()


def _tree(bare: Path, rev: str) -> str:
    return git("ls-tree", "-r", rev, cwd=bare)


@pytest.mark.parametrize(
    ("path", "root"),
    [
        ("nodes", ""),
        ("Nodes", ""),
        ("layouts/reports", ""),
        ("cluster.yaml", ""),
        ("CLUSTER.YAML", ""),
        ("inv", "inv"),
        ("inv/nodes", "inv"),
        ("inv", "inv/sub"),
        (".", ""),
        ("..", ""),
        ("./nodes", ""),
        ("nodes/", ""),
        ("/nodes", ""),
    ],
)
def test_report_writer_refuses_to_touch_the_followed_inventory(daemon, tmp_path: Path, path: str, root: str) -> None:
    d, bare = daemon
    before = _tree(bare, "main")
    repo = InventoryRepo.open(GitRemote(d.url("inv"), tmp_path / "cache", GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    out = commit_report(
        repo,
        settings=ReportSettings(branch="main", path=path),
        files={"drift.yaml": b"x\n"},
        message="m",
        inventory=InventoryTarget(branch="main", root=root),
    )
    assert out.status == "refused" and out.failure is not None
    assert out.failure.code in ("MP412", gitsource.UNSAFE_PATH)
    assert _tree(bare, "main") == before
    assert Outbox.for_repo(repo).entries() == []


def test_unknown_followed_branch_is_taken_as_the_reports_branch(daemon, tmp_path: Path) -> None:
    d, bare = daemon
    before = _tree(bare, "main")
    repo = InventoryRepo.open(GitRemote(d.url("inv"), tmp_path / "cache", GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    out = commit_report(repo, settings=ReportSettings(branch="main", path="nodes"), files={"a": b"x"}, message="m")
    assert out.status == "refused" and out.failure is not None and out.failure.code == "MP412"
    assert _tree(bare, "main") == before


def test_report_on_the_followed_branch_changes_only_reports_path(daemon, tmp_path: Path) -> None:
    d, bare = daemon
    work = tmp_path / "work"
    (work / "tool.sh").write_text("#!/bin/sh\n")
    (work / "tool.sh").chmod(0o755)
    os.symlink("nodes", work / "out")  # a symlink named like a reports directory
    seed(bare, work, {"README.md": "inventory\n"}, message="more")
    before = git("rev-parse", "main", cwd=bare)
    repo = InventoryRepo.open(GitRemote(d.url("inv"), tmp_path / "cache", GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    target = InventoryTarget(branch="main", root="")
    ok = commit_report(
        repo, settings=ReportSettings(branch="main", path="reports"), files={"drift.yaml": b"d\n"}, message="m",
        inventory=target,
    )  # fmt: skip
    assert ok.status == "committed", ok
    changed = git("diff", "--name-status", before, "main", cwd=bare).splitlines()
    assert changed == ["A\treports/drift.yaml"]
    # through the symlink `out -> nodes`: refused, nothing pushed, the symlink kept
    tip = git("rev-parse", "main", cwd=bare)
    via_link = commit_report(
        repo, settings=ReportSettings(branch="main", path="out/drift"), files={"drift.yaml": b"d\n"}, message="m",
        inventory=target,
    )  # fmt: skip
    assert via_link.status == "refused" and via_link.failure is not None
    assert "symlink" in via_link.failure.message
    assert git("rev-parse", "main", cwd=bare) == tip
    assert "120000" in git("ls-tree", "main", "out", cwd=bare)


def test_validate_refuses_reports_on_the_followed_inventory(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    files = _inventory_files()
    files["cluster.yaml"] = files["cluster.yaml"].replace(
        "reports: {branch: migplan-reports, path: reports}", "reports: {branch: main, path: nodes}"
    )
    work.mkdir()
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "inv", cwd=work)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    run = [sys.executable, "-m", "reconciler", "validate"]
    by_rev = subprocess.run([*run, "--repo", str(work), "--rev", "main"], capture_output=True, text=True, env=env)
    assert by_rev.returncode == 1 and "MP412" in by_rev.stdout, by_rev.stdout + by_rev.stderr
    assert "cluster.yaml:" in by_rev.stdout
    by_dir = subprocess.run([*run, str(work)], capture_output=True, text=True, env=env)
    assert by_dir.returncode == 1 and "MP412" in by_dir.stdout
