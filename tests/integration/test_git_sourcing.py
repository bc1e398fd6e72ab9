"""Sourcing over a real git daemon: one-node change = one parse, last known good across invalid
revisions and restarts, remote down / wrong credentials, the controller's own commits, verify: head."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gitserver import GitDaemon, HttpGitServer, cluster_yaml, git, make_bare, node_yaml, seed

from reconciler.adapters.git import source as gitsource
from reconciler.adapters.git.reports import BotIdentity, commit_report
from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
from reconciler.logic.inventory.validation import ParseCache
from reconciler.model.inventory import ReportSettings, VerifyMode, VerifySettings
from reconciler.sourcing import INVALID_REVISION, NODES_REMOVED, InventorySource, LoadedRevision, load_revision

NODES = {f"inv/nodes/gpu-{i}.yaml": node_yaml(f"gpu-{i}") for i in range(3)}


@pytest.fixture()
def served(tmp_path: Path):
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    work = tmp_path / "work"
    first = seed(bare, work, {"inv/cluster.yaml": cluster_yaml(), **NODES}, message="first")
    daemon = GitDaemon(srv).start()
    yield daemon, bare, work, first
    daemon.stop()


def _source(url: str, cache_dir: Path, **kw: object) -> InventorySource:
    return InventorySource(GitRemote(url, cache_dir, timeout_ms=2000), ref="main", root="inv", **kw)  # type: ignore[arg-type]


def test_one_node_change_costs_one_parse(served, tmp_path: Path) -> None:
    daemon, bare, work, first = served
    cache = ParseCache()
    source = _source(daemon.url("inv"), tmp_path / "cache", cache=cache)
    r1 = source.cycle()
    assert r1.desired is not None and r1.changed and r1.revision is not None and r1.revision.sha == first
    assert set(r1.desired.nodes) == {"gpu-0", "gpu-1", "gpu-2"}
    assert cache.parses == 4  # cluster.yaml + 3 nodes
    second = seed(bare, work, {"inv/nodes/gpu-1.yaml": node_yaml("gpu-1", owner="new-owner")}, message="owner")
    r2 = source.cycle()
    assert r2.changed and r2.revision is not None and r2.revision.sha == second
    assert cache.parses == 5  # exactly one more: the changed node
    assert r2.desired is not None and r2.desired.nodes["gpu-1"].gpus[0].partitions[0].owner == "new-owner"
    r3 = source.cycle()  # nothing new
    assert not r3.changed and cache.parses == 5 and r3.revision == r2.revision


def test_invalid_revision_is_refused_and_last_known_good_kept_across_restart(served, tmp_path: Path) -> None:
    daemon, bare, work, first = served
    source = _source(daemon.url("inv"), tmp_path / "cache")
    assert source.cycle().changed
    bad = seed(bare, work, {"inv/nodes/gpu-2.yaml": node_yaml("gpu-2", profile="9g.99gb")}, message="bad")
    r = source.cycle()
    assert r.desired is not None and r.revision is not None and r.revision.sha == first  # still the good one
    assert r.latest is not None and r.latest.sha == bad and r.stale and not r.changed
    assert r.refused is not None and r.refused.code == INVALID_REVISION and r.refused.revision.sha == bad
    assert any(d.file == "nodes/gpu-2.yaml" and d.code == "MP302" for d in r.refused.diagnostics)
    assert bad in str(r.refused) and "invalid" in r.refused.reason
    doc = r.to_json()
    assert doc["revision"] == f"main@sha1:{first}" and doc["latest"] == f"main@sha1:{bad}" and doc["stale"]
    assert doc["refused"]["code"] == "MP720" and doc["refused"]["errors"][0]["file"] == "nodes/gpu-2.yaml"
    # a restart while the remote is down: the last known good comes back from the cache dir
    daemon.stop()
    restarted = _source(daemon.url("inv"), tmp_path / "cache")
    r = restarted.cycle()
    assert r.source_error is not None and r.source_error.code == gitsource.UNREACHABLE
    assert r.desired is not None and r.revision is not None and r.revision.sha == first
    assert r.changed  # first cycle of a new process: apply what we have
    assert r.refused is not None and r.refused.revision.sha == bad  # the cached head is still refused
    daemon.start()
    fixed = seed(bare, work, {"inv/nodes/gpu-2.yaml": node_yaml("gpu-2", owner="fixed")}, message="fix")
    r = restarted.cycle()
    assert r.source_error is None and r.refused is None and r.changed
    assert r.revision is not None and r.revision.sha == fixed and not r.stale


def test_first_revision_invalid_means_nothing_to_apply(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "w", {"inv/cluster.yaml": "kind: Cluster\n"})
    daemon = GitDaemon(srv).start()
    try:
        r = _source(daemon.url("inv"), tmp_path / "cache").cycle()
    finally:
        daemon.stop()
    assert r.desired is None and r.revision is None and not r.changed
    assert r.refused is not None and r.refused.diagnostics


def test_wrong_credentials_keep_the_cached_revision(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    first = seed(bare, tmp_path / "w", {"inv/cluster.yaml": cluster_yaml(), **NODES})
    http = HttpGitServer(srv).start()
    try:
        good = GitRemote(http.url("inv"), tmp_path / "cache", GitAuth(username=http.user, password=http.password))
        assert InventorySource(good, ref="main", root="inv").cycle().changed
        seed(bare, tmp_path / "w", {"inv/nodes/gpu-9.yaml": node_yaml("gpu-9")}, message="new node")
        rotated = GitRemote(http.url("inv"), tmp_path / "cache", GitAuth(username=http.user, password="expired"))
        r = InventorySource(rotated, ref="main", root="inv").cycle()
    finally:
        http.stop()
    assert r.source_error is not None and r.source_error.code == gitsource.AUTH_REFUSED
    assert r.revision is not None and r.revision.sha == first and r.desired is not None
    assert "gpu-9" not in r.desired.nodes


def test_controller_report_commits_on_the_same_branch_do_not_trigger_a_reapply(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    # reports on the inventory branch itself, inside the inventory root
    cluster = cluster_yaml(reports="{branch: main, path: inv/reports}")
    first = seed(bare, tmp_path / "w", {"inv/cluster.yaml": cluster, **NODES})
    daemon = GitDaemon(srv).start()
    try:
        remote = GitRemote(daemon.url("inv"), tmp_path / "cache")
        source = InventorySource(remote, ref="main", root="inv")
        r1 = source.cycle()
        assert r1.changed and r1.desired is not None
        repo = InventoryRepo.open(remote)
        assert isinstance(repo, InventoryRepo)
        out = commit_report(
            repo,
            settings=ReportSettings(branch="main", path="inv/reports"),
            files={"drift.yaml": b"nodes: {}\n"},
            message="migplan: drift report",
            bot=BotIdentity(),
        )
        assert out.status == "committed"
        r2 = source.cycle()
        r3 = source.cycle()  # remembered: the bot's commit is not read again
    finally:
        daemon.stop()
    assert git("rev-parse", "main", cwd=bare) == out.commit  # the branch did move ...
    assert not r2.changed and r2.revision is not None and r2.revision.sha == first  # ... but nothing to apply
    assert not r2.stale and r2.refused is None
    assert not r3.changed and r3.revision == r2.revision and not r3.stale


def _ssh_key(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


def test_verify_head_refuses_unsigned_and_untrusted_heads(tmp_path: Path) -> None:
    alice_pub = _ssh_key(tmp_path / "alice")
    _ssh_key(tmp_path / "mallory")
    verify = f'  verify:\n    mode: head\n    allowedSigners: ["alice@example.com {alice_pub}"]\n'
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    work = tmp_path / "w"
    git("clone", "-q", str(bare), str(work))

    def commit(files: dict[str, str], signer: str | None) -> str:
        for rel, text in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        git("add", "-A", cwd=work)
        sign = (
            "-c",
            "gpg.format=ssh",
            "-c",
            f"user.signingkey={tmp_path / (signer or '')}",
            "-c",
            "commit.gpgsign=true",
        )
        git(*(sign if signer else ()), "commit", "-q", "-m", f"by {signer}", cwd=work)
        git("push", "-q", "origin", "HEAD:main", cwd=work)
        return git("rev-parse", "HEAD", cwd=work)

    good = commit({"inv/cluster.yaml": cluster_yaml(verify=verify), **NODES}, "alice")
    daemon = GitDaemon(srv).start()
    try:
        parse_cache = ParseCache()
        # the operator's policy (the controller's settings): the in-repository spec.verify only has to agree
        operator = VerifySettings(VerifyMode.HEAD, (f"alice@example.com {alice_pub}",))
        source = _source(daemon.url("inv"), tmp_path / "cache", cache=parse_cache, verify=operator)
        r = source.cycle()
        assert r.changed and r.signature is not None and r.signature.signer == "alice@example.com"
        parsed = parse_cache.parses
        unsigned = commit({"inv/nodes/gpu-0.yaml": node_yaml("gpu-0", owner="x")}, None)
        r = source.cycle()
        assert r.refused is not None and r.refused.code == "MP710" and r.refused.revision.sha == unsigned
        assert parse_cache.parses == parsed  # an untrusted commit's files are not even parsed
        assert r.revision is not None and r.revision.sha == good
        # mallory also switches verification off in the same commit: the trusted settings still apply
        by_mallory = commit({"inv/cluster.yaml": cluster_yaml()}, "mallory")
        r = source.cycle()
        assert r.refused is not None and r.refused.code == "MP711" and r.refused.revision.sha == by_mallory
        assert r.refused.signer is not None and r.refused.signer.startswith("SHA256:")
        assert r.revision is not None and r.revision.sha == good
        signed = commit({"inv/nodes/gpu-1.yaml": node_yaml("gpu-1", owner="y")}, "alice")
        r = source.cycle()
        assert r.refused is None and r.changed and r.revision is not None and r.revision.sha == signed
    finally:
        daemon.stop()


def test_load_revision_for_one_shot_commands(served, tmp_path: Path) -> None:
    daemon, _bare, _work, first = served
    got = load_revision(GitRemote(daemon.url("inv"), tmp_path / "cache"), "main", root="inv")
    assert isinstance(got, LoadedRevision) and got.validation.valid and got.revision.sha == first
    missing = load_revision(GitRemote(daemon.url("inv"), tmp_path / "cache"), "nope", root="inv")
    assert not isinstance(missing, LoadedRevision) and missing.code == gitsource.REVISION_NOT_FOUND


def test_state_that_cannot_be_saved_is_reported_and_the_cycle_still_acts(served, tmp_path: Path) -> None:
    daemon, _bare, _work, first = served
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "state").write_text("a file where the state directory should be")
    r = _source(daemon.url("inv"), cache_dir).cycle()
    assert r.changed and r.revision is not None and r.revision.sha == first and r.desired is not None
    assert r.source_error is not None and r.source_error.code == "MP721"


def test_a_revision_that_drops_many_nodes_is_refused_until_confirmed(served, tmp_path: Path) -> None:
    daemon, bare, work, first = served
    source = _source(daemon.url("inv"), tmp_path / "cache")
    assert source.cycle().changed
    # 2 of 3 nodes gone (a bad merge, a half-pushed tree): not applied, and the report says why
    drop = seed(bare, work, {"inv/nodes/gpu-1.yaml": None, "inv/nodes/gpu-2.yaml": None}, message="drop")  # type: ignore[dict-item]
    r = source.cycle()
    assert r.refused is not None and r.refused.code == NODES_REMOVED and r.refused.revision.sha == drop
    assert "confirmNodeRemoval: 2" in r.refused.reason and "gpu-1, gpu-2" in r.refused.reason
    assert r.revision is not None and r.revision.sha == first and r.desired is not None
    assert set(r.desired.nodes) == {"gpu-0", "gpu-1", "gpu-2"}
    assert r.to_json()["refused"]["code"] == "MP725"
    # a confirmation for another number confirms nothing
    wrong = cluster_yaml() + "  apply: {confirmNodeRemoval: 1}\n"
    seed(bare, work, {"inv/cluster.yaml": wrong}, message="confirm the wrong count")
    assert (r := source.cycle()).refused is not None and r.refused.code == NODES_REMOVED
    confirmed = seed(
        bare, work, {"inv/cluster.yaml": cluster_yaml() + "  apply: {confirmNodeRemoval: 2}\n"}, message="confirm"
    )
    r = source.cycle()
    assert r.refused is None and r.changed and r.revision is not None and r.revision.sha == confirmed
    assert r.desired is not None and set(r.desired.nodes) == {"gpu-0"}


def test_removing_one_node_needs_no_confirmation(served, tmp_path: Path) -> None:
    daemon, bare, work, _first = served
    source = _source(daemon.url("inv"), tmp_path / "cache")
    assert source.cycle().changed
    one = seed(bare, work, {"inv/nodes/gpu-2.yaml": None}, message="decommission gpu-2")  # type: ignore[dict-item]
    r = source.cycle()
    assert r.refused is None and r.revision is not None and r.revision.sha == one
