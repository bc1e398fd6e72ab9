"""The pygit2 inventory source against real servers: git daemon, git http-backend behind lighttpd
(basic auth, plain HTTP and HTTPS with a self-signed CA), a user-mode sshd; plus a local repository
read in place."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitserver import GitDaemon, HttpGitServer, SshGitServer, git, make_bare, seed

from reconciler.adapters.git import source as gitsource
from reconciler.adapters.git.source import GitAuth, GitFailure, GitRemote, InventoryRepo, Snapshot
from reconciler.model.revisions import Revision

FILES = {
    "clusters/a/cluster.yaml": "kind: Cluster\n",
    "clusters/a/nodes/n1.yaml": "kind: Node # n1\n",
    "clusters/a/nodes/n2.yaml": "kind: Node # n2\n",
    "clusters/a/reports/drift.yaml": "old report\n",
    "README.md": "top level\n",
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = tmp_path_factory.mktemp("srv")
    bare = make_bare(root, "inv")
    work = tmp_path_factory.mktemp("work") / "inv"
    first = seed(bare, work, FILES, message="first")
    git("tag", "v1", cwd=work)
    git("push", "-q", "origin", "v1", cwd=work)
    second = seed(bare, work, {"clusters/a/nodes/n2.yaml": "kind: Node # n2 changed\n"}, message="second")
    daemon, http, ssh = GitDaemon(root), HttpGitServer(root), SshGitServer(root)
    https = HttpGitServer(root, tls=True)
    started: list[GitDaemon | HttpGitServer | SshGitServer] = []
    try:
        for srv in (daemon, http, ssh, https):
            srv.start()
            started.append(srv)
        yield {
            "daemon": daemon, "http": http, "ssh": ssh, "https": https,
            "first": first, "second": second, "work": work, "bare": bare,
        }  # fmt: skip
    finally:  # also when one of them failed to start: never leave a server behind
        for srv in started:
            srv.stop()


def _open(url: str, cache: Path, auth: GitAuth | None = None) -> InventoryRepo:
    repo = InventoryRepo.open(GitRemote(url, cache, auth or GitAuth(), timeout_ms=3000))
    assert isinstance(repo, InventoryRepo), repo
    return repo


def _snap(repo: InventoryRepo, rev: str, root: str = "clusters/a", **kw: object) -> Snapshot:
    revision = repo.resolve(rev)
    assert isinstance(revision, Revision), revision
    snap = repo.read(revision, root, **kw)  # type: ignore[arg-type]
    assert isinstance(snap, Snapshot), snap
    return snap


def test_git_daemon_clone_reads_branch_tag_and_commit_without_work_tree(servers, tmp_path: Path) -> None:
    repo = _open(servers["daemon"].url("inv"), tmp_path)
    assert repo.fetch() is None
    assert repo.repo.is_bare and repo.repo.workdir is None  # object database only
    head = _snap(repo, "main")
    assert head.revision == Revision("main", servers["second"])
    assert str(head.revision) == f"main@sha1:{servers['second']}"
    assert head.files["nodes/n2.yaml"] == b"kind: Node # n2 changed\n"
    assert set(head.files) == {"cluster.yaml", "nodes/n1.yaml", "nodes/n2.yaml", "reports/drift.yaml"}
    # blob ids are Git's own: the same as `git rev-parse REV:path`
    assert head.blob_ids["nodes/n1.yaml"] == git("rev-parse", "main:clusters/a/nodes/n1.yaml", cwd=servers["work"])
    tagged = _snap(repo, "v1")
    assert tagged.revision.sha == servers["first"]
    assert tagged.files["nodes/n2.yaml"] == b"kind: Node # n2\n"
    by_sha = _snap(repo, servers["first"][:12])
    assert by_sha.revision.sha == servers["first"] and by_sha.tree_id == tagged.tree_id


def test_exclude_reports_and_top_level_root(servers, tmp_path: Path) -> None:
    repo = _open(servers["daemon"].url("inv"), tmp_path)
    assert repo.fetch() is None
    snap = _snap(repo, "main", exclude="clusters/a/reports")
    assert "reports/drift.yaml" not in snap.files
    whole = _snap(repo, "main", root="")
    assert "README.md" in whole.files and "clusters/a/nodes/n1.yaml" in whole.files


def test_unknown_revision_and_missing_root_are_error_values(servers, tmp_path: Path) -> None:
    repo = _open(servers["daemon"].url("inv"), tmp_path)
    assert repo.fetch() is None
    missing = repo.resolve("no-such-branch")
    assert isinstance(missing, GitFailure) and missing.code == gitsource.REVISION_NOT_FOUND
    revision = repo.resolve("main")
    assert isinstance(revision, Revision)
    no_root = repo.read(revision, "clusters/zz")
    assert isinstance(no_root, GitFailure) and no_root.code == gitsource.ROOT_NOT_FOUND
    file_root = repo.read(revision, "README.md")
    assert isinstance(file_root, GitFailure) and file_root.code == gitsource.ROOT_NOT_FOUND


def test_previous_snapshot_reuses_unchanged_blobs(servers, tmp_path: Path) -> None:
    repo = _open(servers["daemon"].url("inv"), tmp_path)
    assert repo.fetch() is None
    old = _snap(repo, "v1")
    new = _snap(repo, "main", previous=old)
    assert new.files["nodes/n1.yaml"] is old.files["nodes/n1.yaml"]  # not read again
    assert new.files["nodes/n2.yaml"] is not old.files["nodes/n2.yaml"]
    changed = {p for p in new.blob_ids if new.blob_ids[p] != old.blob_ids.get(p)}
    assert changed == {"nodes/n2.yaml"}


def test_cache_survives_restart_and_remote_down(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    first = seed(bare, tmp_path / "work", {"inv/cluster.yaml": "a\n"})
    daemon = GitDaemon(srv).start()
    try:
        repo = _open(daemon.url("inv"), tmp_path / "cache")
        assert repo.fetch() is None
        second = seed(bare, tmp_path / "work", {"inv/nodes/n1.yaml": "n1\n"})
        restarted = _open(daemon.url("inv"), tmp_path / "cache")  # a new process: same cache dir
        assert _snap(restarted, "main", root="inv").revision.sha == first  # cached, not yet fetched
        assert restarted.fetch() is None
        assert _snap(restarted, "main", root="inv").revision.sha == second
    finally:
        daemon.stop()
    down = restarted.fetch()
    assert isinstance(down, GitFailure) and down.code == gitsource.UNREACHABLE, down
    assert daemon.url("inv") in str(down)
    # the cached revision is still readable while the remote is down
    assert _snap(restarted, "main", root="inv").files["nodes/n1.yaml"] == b"n1\n"


def test_local_repository_is_read_in_place(servers) -> None:
    repo = InventoryRepo.open(GitRemote(str(servers["work"]), Path("/nonexistent-cache")))
    assert isinstance(repo, InventoryRepo)
    assert repo.fetch() is None
    snap = _snap(repo, "HEAD")
    assert snap.revision.sha == servers["second"]
    assert _snap(repo, "v1").revision.sha == servers["first"]
    assert not Path("/nonexistent-cache").exists()


def test_not_a_repository(tmp_path: Path) -> None:
    got = InventoryRepo.open(GitRemote(str(tmp_path), tmp_path / "cache"))
    assert isinstance(got, GitFailure) and got.code == gitsource.GIT_FAILED


# -- HTTP(S) with basic auth / token ---------------------------------------------------------------
def test_http_basic_auth_clone_and_fetch(servers, tmp_path: Path) -> None:
    http = servers["http"]
    repo = _open(http.url("inv"), tmp_path, GitAuth(username=http.user, password=http.password))
    assert repo.fetch() is None
    assert _snap(repo, "main").revision.sha == servers["second"]
    # the token form sends the token as the basic-auth password
    token = _open(http.url("inv"), tmp_path / "t", GitAuth(username=http.user, token=http.password))
    assert token.fetch() is None


@pytest.mark.parametrize(
    "auth",
    [GitAuth(username="ci", password="wrong"), GitAuth(username="nobody", token="s3cret"), GitAuth()],
    ids=["wrong-password", "wrong-user", "no-credentials"],
)
def test_http_wrong_credentials_is_a_clear_error(servers, tmp_path: Path, auth: GitAuth) -> None:
    repo = _open(servers["http"].url("inv"), tmp_path, auth)
    got = repo.fetch()
    assert isinstance(got, GitFailure) and got.code == gitsource.AUTH_REFUSED, got
    assert "credentials" in got.message
    assert "wrong" not in repr(auth) and "s3cret" not in repr(auth)  # secrets never in reprs


def test_https_with_token_and_a_trusted_ca(servers, tmp_path: Path) -> None:
    https = servers["https"]
    remote = GitRemote(
        https.url("inv"), tmp_path, GitAuth(username=https.user, token=https.password), ca_file=https.ca_file
    )
    repo = InventoryRepo.open(remote)
    assert isinstance(repo, InventoryRepo)
    assert repo.fetch() is None
    assert _snap(repo, "main").revision.sha == servers["second"]


def test_https_untrusted_certificate_is_refused(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    make_bare(srv, "inv")
    other = HttpGitServer(srv, tls=True).start()  # its own self-signed certificate, trusted by nobody
    try:
        repo = _open(other.url("inv"), tmp_path / "cache", GitAuth(username=other.user, password=other.password))
        got = repo.fetch()
    finally:
        other.stop()
    assert isinstance(got, GitFailure) and got.code == gitsource.HOST_KEY_REFUSED, got


# -- SSH with a key, known_hosts enforced ----------------------------------------------------------
def test_ssh_key_and_known_host(servers, tmp_path: Path) -> None:
    ssh = servers["ssh"]
    repo = _open(ssh.url("inv"), tmp_path, GitAuth(ssh_private_key=ssh.client_key, known_hosts=ssh.known_hosts))
    assert repo.fetch() is None
    assert _snap(repo, "main").revision.sha == servers["second"]


def test_ssh_unknown_or_changed_host_key_is_refused(servers, tmp_path: Path) -> None:
    ssh = servers["ssh"]
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kind, key = Path(f"{other}.pub").read_text().split()[:2]
    wrong = tmp_path / "known_hosts_wrong"
    wrong.write_text(f"[127.0.0.1]:{ssh.port} {kind} {key}\n")
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    for i, known in enumerate((wrong, empty, None)):
        auth = GitAuth(ssh_private_key=ssh.client_key, known_hosts=known)
        repo = _open(ssh.url("inv"), tmp_path / f"cache{i}", auth)
        got = repo.fetch()
        assert isinstance(got, GitFailure) and got.code == gitsource.HOST_KEY_REFUSED, (known, got)


def test_ssh_unauthorized_key_is_refused(servers, tmp_path: Path) -> None:
    ssh = servers["ssh"]
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    repo = _open(ssh.url("inv"), tmp_path, GitAuth(ssh_private_key=stranger, known_hosts=ssh.known_hosts))
    got = repo.fetch()
    assert isinstance(got, GitFailure) and got.code == gitsource.AUTH_REFUSED, got


def test_secrets_in_urls_never_reach_error_values(servers, tmp_path: Path) -> None:
    http = servers["http"]
    url = http.url("inv").replace("http://", "http://ci:topsecret-pw@")
    repo = _open(url, tmp_path)
    got = repo.fetch()
    assert isinstance(got, GitFailure) and got.code == gitsource.AUTH_REFUSED, got
    assert "topsecret-pw" not in str(got) and "ci:***@" in got.url


def test_missing_known_hosts_file_is_a_host_key_refusal(servers, tmp_path: Path) -> None:
    ssh = servers["ssh"]
    auth = GitAuth(ssh_private_key=ssh.client_key, known_hosts=tmp_path / "does-not-exist")
    got = _open(ssh.url("inv"), tmp_path, auth).fetch()
    assert isinstance(got, GitFailure) and got.code == gitsource.HOST_KEY_REFUSED and "cannot be read" in got.message


def test_a_snapshot_kept_without_bytes_holds_none_and_the_next_read_reads_every_file(servers, tmp_path: Path) -> None:
    # What a controller keeps between cycles (issue 29, runrss4): the blob ids, not the files' bytes.
    repo = _open(servers["daemon"].url("inv"), tmp_path)
    assert repo.fetch() is None
    old = _snap(repo, "v1")
    kept = old.without_bytes()
    assert dict(kept.files) == {} and kept.blob_ids == old.blob_ids
    assert (kept.revision, kept.root, kept.tree_id) == (old.revision, old.root, old.tree_id)
    new = _snap(repo, "main", previous=kept)
    assert dict(new.files) == dict(_snap(repo, "main").files) and new.blob_ids == _snap(repo, "main").blob_ids
    assert new.files["nodes/n1.yaml"] is not old.files["nodes/n1.yaml"]  # read again: nothing kept to reuse
