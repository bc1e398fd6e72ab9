"""Trust from outside the revision, over a real git daemon and the API server twin (issue 25, item 1).

The signature policy is the operator's (settings; keys from a mounted file), the last verified revision is
recorded in a ConfigMap written through the official client. Each test plays what the deploy/ layout makes
real: the Git cache is an emptyDir, so a restarted pod and a standby taking over start with an empty cache
and only the ConfigMap remembers. Before this change, trust came from the last known good revision kept in
that cache (or, with none, from the head's own cluster.yaml): every one of these heads was applied.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitserver import GitDaemon, cluster_yaml, git, make_bare, node_yaml
from kubernetes import client

from reconciler.adapters.git.source import GitRemote
from reconciler.adapters.kube.truststate import DATA_KEY, ConfigMapTrustStore
from reconciler.model.errors import MigplanError
from reconciler.settings import load_settings, verify_settings
from reconciler.sourcing import InventorySource, SourceResult
from reconciler.twin.apiserver.twin import ApiServerTwin

NS = "migplan"
RECORD = "migplan-source-trust"
NODES = {f"inv/nodes/gpu-{i}.yaml": node_yaml(f"gpu-{i}") for i in range(2)}
IN_REPO_VERIFY = '  verify:\n    mode: head\n    allowedSigners: ["alice@example.com {key}"]\n'


class Repo:
    """A bare repository served by git daemon, a work tree that commits (signed or not) and pushes."""

    def __init__(self, tmp: Path, daemon: GitDaemon, bare: Path) -> None:
        self.tmp, self.daemon, self.bare = tmp, daemon, bare
        self.work = tmp / "w"
        git("clone", "-q", str(bare), str(self.work))

    def commit(self, files: dict[str, str | None], signer: str | None) -> str:
        for rel, text in files.items():
            path = self.work / rel
            if text is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git("add", "-A", cwd=self.work)
        sign = ("-c", "gpg.format=ssh", "-c", f"user.signingkey={self.tmp / str(signer)}", "-c", "commit.gpgsign=true")
        git(*(sign if signer else ()), "commit", "-q", "-m", f"by {signer}", cwd=self.work)
        git("push", "-q", "origin", "HEAD:main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    def force_push(self, sha: str) -> None:
        # the served repository refuses non-fast-forward pushes (make_bare), as a protected branch does; the
        # force-push is done as whoever can override that (an admin, a compromised forge): on the ref itself
        git("update-ref", "refs/heads/main", sha, cwd=self.bare)
        git("fetch", "-q", "-f", "origin", cwd=self.work)
        git("reset", "-q", "--hard", sha, cwd=self.work)


def _ssh_key(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


@pytest.fixture()
def world(tmp_path: Path) -> Iterator[tuple[Repo, ApiServerTwin, client.ApiClient, str]]:
    alice = _ssh_key(tmp_path / "alice")
    _ssh_key(tmp_path / "mallory")
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    daemon = GitDaemon(srv).start()
    try:
        with ApiServerTwin(namespaces=("default", NS), tls=False) as api:
            cfg = client.Configuration()
            cfg.host = api.url
            cfg.api_key = {"authorization": f"Bearer {api.token}"}
            with client.ApiClient(cfg) as api_client:
                yield Repo(tmp_path, daemon, bare), api, api_client, alice
    finally:
        daemon.stop()


def _replica(repo: Repo, api_client: client.ApiClient, name: str, **settings: str) -> InventorySource:
    """One controller process: its own (fresh) cache dir, the operator's settings, the shared ConfigMap."""
    signers = repo.tmp / "allowed_signers"  # what deploy/ mounts from the ConfigMap migplan-trusted-signers
    signers.write_text(f"alice@example.com {(repo.tmp / 'alice.pub').read_text()}")
    s = load_settings(
        env={},
        flags={"verify_mode": "head", "verify_allowed_signers_file": str(signers), **settings},
    )
    store = ConfigMapTrustStore(namespace=NS, name=RECORD)
    store.bind(api_client)
    remote = GitRemote(repo.daemon.url("inv"), repo.tmp / f"cache-{name}", timeout_ms=5000)
    return InventorySource(
        remote, ref="main", root="inv", verify=verify_settings(s), trust_store=store, allow_rewind_to=s.allow_rewind_to
    )


def _applied(r: SourceResult) -> str | None:
    return None if r.revision is None or r.desired is None else r.revision.sha


def test_unsigned_head_removing_the_policy_is_refused_after_a_restart_with_a_fresh_cache(world) -> None:
    repo, _api, api_client, alice = world
    good = repo.commit({"inv/cluster.yaml": cluster_yaml(verify=IN_REPO_VERIFY.format(key=alice)), **NODES}, "alice")
    first = _replica(repo, api_client, "a").cycle()
    assert first.changed and _applied(first) == good and first.refused is None
    # an unsigned head that deletes spec.verify; the pod restarts: its emptyDir cache is gone
    unsigned = repo.commit({"inv/cluster.yaml": cluster_yaml()}, None)
    r = _replica(repo, api_client, "a-restarted").cycle()
    assert r.refused is not None and r.refused.code == "MP710" and r.refused.revision.sha == unsigned
    assert _applied(r) == good  # the recorded revision is restored from the ConfigMap and acted on
    # mallory signs the same deletion: her key is not the operator's
    by_mallory = repo.commit({"inv/nodes/gpu-0.yaml": node_yaml("gpu-0", owner="m")}, "mallory")
    r = _replica(repo, api_client, "a-again").cycle()
    assert r.refused is not None and r.refused.code == "MP711" and r.refused.revision.sha == by_mallory
    # alice signs on top: the policy change is accepted because the operator trusts her key
    signed = repo.commit({"inv/nodes/gpu-1.yaml": node_yaml("gpu-1", owner="y")}, "alice")
    r = _replica(repo, api_client, "a-later").cycle()
    assert r.refused is None and _applied(r) == signed


def test_standby_takeover_refuses_a_force_push_back_to_an_old_signed_commit(world) -> None:
    repo, _api, api_client, _alice = world
    old = repo.commit({"inv/cluster.yaml": cluster_yaml(), **NODES}, "alice")
    leader = _replica(repo, api_client, "leader")
    assert _applied(leader.cycle()) == old
    newer = repo.commit({"inv/nodes/gpu-1.yaml": node_yaml("gpu-1", owner="y")}, "alice")
    assert _applied(leader.cycle()) == newer
    repo.force_push(old)  # an old commit, signed by a trusted key: still a step back
    # the leader (warm cache) refuses it and keeps acting on the newer revision
    r = leader.cycle()
    assert r.refused is not None and r.refused.code == "MP951" and _applied(r) == newer
    # the standby takes over with an empty cache: the newer commit is no longer reachable, so it has
    # nothing it may act on, and says why
    standby = _replica(repo, api_client, "standby").cycle()
    assert standby.refused is not None and standby.refused.code == "MP951"
    assert standby.refused.revision.sha == old and standby.desired is None
    assert f"allow_rewind_to: {old}" in standby.refused.reason
    # the operator accepts exactly that commit, explicitly
    allowed = _replica(repo, api_client, "standby-allowed", allow_rewind_to=old).cycle()
    assert allowed.refused is None and _applied(allowed) == old
    # ... and from there the history moves forward again, with no setting needed
    onward = repo.commit({"inv/nodes/gpu-0.yaml": node_yaml("gpu-0", owner="z")}, "alice")
    assert _applied(_replica(repo, api_client, "later").cycle()) == onward


def test_force_push_back_before_verification_was_enabled(world) -> None:
    # the case: history is rewound to a commit from before spec.verify existed in the repository
    repo, _api, api_client, alice = world
    before = repo.commit({"inv/cluster.yaml": cluster_yaml(), **NODES}, "alice")
    enabled = repo.commit({"inv/cluster.yaml": cluster_yaml(verify=IN_REPO_VERIFY.format(key=alice))}, "alice")
    assert _applied(_replica(repo, api_client, "one").cycle()) == enabled
    repo.force_push(before)
    r = _replica(repo, api_client, "two").cycle()
    assert r.refused is not None and r.refused.code == "MP951" and r.desired is None


def test_a_policy_change_needs_an_operator_key_even_when_signatures_are_not_required(world) -> None:
    repo, _api, api_client, _alice = world
    first = repo.commit({"inv/cluster.yaml": cluster_yaml(), **NODES}, None)
    relaxed = {"verify_mode": "none"}
    assert _applied(_replica(repo, api_client, "one", **relaxed).cycle()) == first
    keys = '  verify:\n    mode: none\n    allowedSigners: ["mallory@example.com ssh-ed25519 AAAA"]\n'
    unsigned = repo.commit({"inv/cluster.yaml": cluster_yaml(verify=keys)}, None)
    r = _replica(repo, api_client, "two", **relaxed).cycle()
    assert r.refused is not None and r.refused.code == "MP950" and r.refused.revision.sha == unsigned
    assert _applied(r) == first
    signed = repo.commit({"inv/nodes/gpu-0.yaml": node_yaml("gpu-0", owner="q")}, "alice")
    r = _replica(repo, api_client, "three", **relaxed).cycle()
    assert r.refused is None and _applied(r) == signed


def test_a_damaged_or_unreadable_record_applies_nothing_new(world) -> None:
    repo, _api, api_client, _alice = world
    good = repo.commit({"inv/cluster.yaml": cluster_yaml(), **NODES}, "alice")
    assert _applied(_replica(repo, api_client, "one").cycle()) == good
    core = client.CoreV1Api(api_client)
    core.patch_namespaced_config_map(RECORD, NS, {"data": {DATA_KEY: "[" * 50_000}})
    r = _replica(repo, api_client, "two").cycle()
    assert r.desired is None and r.source_error is not None and r.source_error.code == "MP953"
    assert "damaged (larger than" in r.source_error.message and len(r.source_error.message) < 400
    # not knowing is not "there was none": deleting the record is an operator's act, then the head is taken
    core.delete_namespaced_config_map(RECORD, NS)
    assert _applied(_replica(repo, api_client, "three").cycle()) == good


def test_the_record_store_without_a_client_is_a_clear_error() -> None:
    with pytest.raises(MigplanError) as err:
        ConfigMapTrustStore(namespace=NS, name=RECORD).load()
    assert err.value.code == "MP953"
