"""Sourcing's logic against an in-memory Git (the InventoryGit port): last known good, refusals, restarts.

The same behaviours are shown against real servers in tests/integration/test_git_sourcing.py; here the
Git side is a fake that keeps commits in a dict, so each rule is one short test with no transport.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Mapping
from pathlib import Path

import pytest

from reconciler import sourcing
from reconciler.adapters.git.source import GitFailure, GitRemote, Snapshot
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import InventoryFiles, VerifyMode, VerifySettings
from reconciler.model.revisions import Revision

CLUSTER = "apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: t}\nspec:\n  migStrategy: mixed\n"
OPERATOR = VerifySettings(VerifyMode.HEAD, ("ops@example.com ssh-ed25519 AAAAC3Nza",))
SIGNED = CLUSTER + "  verify: {mode: head, allowedSigners: ['ops@example.com ssh-ed25519 AAAAC3Nza']}\n"


def node(name: str, profile: str = "3g.71gb") -> str:
    return (
        f"apiVersion: migplan/v1\nkind: Node\nmetadata: {{name: {name}}}\nspec:\n  gpus:\n    - index: 0\n"
        "      model: H200-141GB\n      mig:\n        enabled: true\n        partitions:\n"
        f"          - {{profile: {profile}, placement: 4}}\n"
    )


class FakeGit:
    """Commits in a dict, branches in another; fails on request like a remote that is down."""

    def __init__(self) -> None:
        self.commits: dict[str, dict[str, bytes]] = {}
        self.signatures: dict[str, tuple[bytes, bytes]] = {}
        self.branches: dict[str, str] = {}
        self.pins: dict[str, str] = {}
        self.parents: dict[str, str | None] = {}
        self.down = False
        self.reads = 0

    def commit(self, files: Mapping[str, str], *, branch: str = "main") -> str:
        data = {p: b.encode() for p, b in files.items()}
        sha = hashlib.sha1(repr((sorted(data.items()), len(self.commits))).encode()).hexdigest()
        self.commits[sha] = data
        self.parents[sha] = self.branches.get(branch)
        self.branches[branch] = sha
        return sha

    # -- the port --
    def fetch(self) -> GitFailure | None:
        return GitFailure("MP701", "the remote cannot be reached") if self.down else None

    def resolve(self, rev: str) -> Revision | GitFailure:
        if rev in self.branches:
            return Revision(ref=rev, sha=self.branches[rev])
        return GitFailure("MP704", f"no branch, tag or commit named {rev!r}")

    def branch_named(self, rev: str) -> str | None:
        return rev if rev in self.branches else None

    def read(
        self, revision: Revision, root: str = "", *, exclude: str | None = None, previous: Snapshot | None = None
    ) -> Snapshot | GitFailure:
        self.reads += 1
        prefix = f"{root}/" if root else ""
        files = {p[len(prefix) :]: b for p, b in self.commits[revision.sha].items() if p.startswith(prefix)}
        if exclude:
            files = {p: b for p, b in files.items() if p != exclude and not p.startswith(exclude + "/")}
        blobs = {p: hashlib.sha1(b).hexdigest() for p, b in files.items()}
        return Snapshot(
            revision, root, InventoryFiles(files), blobs, hashlib.sha1(repr(sorted(blobs.items())).encode()).hexdigest()
        )

    def signature(self, sha: str) -> tuple[bytes, bytes] | None:
        return self.signatures.get(sha)

    def pin(self, name: str, sha: str) -> GitFailure | None:
        self.pins[name] = sha
        return None

    def has_commit(self, sha: str) -> bool:
        return sha in self.commits

    def descends_from(self, sha: str, ancestor: str) -> bool:
        at: str | None = sha
        while at is not None:
            if at == ancestor:
                return True
            at = self.parents.get(at)
        return False


def source(git: FakeGit, cache: Path, **kw: object) -> sourcing.InventorySource:
    calls: list[str] = []
    validate = kw.pop("validate", sourcing.validate_inventory)

    def counting(*a: object, **k: object) -> sourcing.ValidationResult:
        calls.append(str(k.get("revision")))
        return validate(*a, **k)  # type: ignore[operator, no-any-return]

    src = sourcing.InventorySource(
        GitRemote("https://git.example/inv.git", cache),
        ref="main",
        validate=counting,
        open_repo=lambda _r: git,
        **kw,  # type: ignore[arg-type]
    )
    src.validated = calls  # type: ignore[attr-defined]
    return src


def good(n: int = 1, **extra: str) -> dict[str, str]:
    return {"cluster.yaml": CLUSTER, **{f"nodes/n{i}.yaml": node(f"n{i}") for i in range(n)}, **extra}


def test_first_cycle_applies_the_head_and_persists_it(tmp_path: Path) -> None:
    git = FakeGit()
    sha = git.commit(good())
    r = source(git, tmp_path).cycle()
    assert r.changed and r.desired is not None and r.revision is not None and r.revision.sha == sha
    assert sha in git.pins.values()
    assert sha in (tmp_path / "state").joinpath(next((tmp_path / "state").iterdir()).name).read_text()


def test_an_invalid_revision_is_refused_and_the_last_known_good_kept(tmp_path: Path) -> None:
    git = FakeGit()
    ok = git.commit(good())
    src = source(git, tmp_path)
    src.cycle()
    bad = git.commit(good(**{"nodes/n0.yaml": node("n0", profile="9g.999gb")}))
    r = src.cycle()
    assert r.revision is not None and r.revision.sha == ok
    assert r.refused is not None and r.refused.code == "MP720" and r.refused.revision.sha == bad
    assert r.latest is not None and r.latest.sha == bad and r.stale
    validated = len(src.validated)  # type: ignore[attr-defined]
    again = src.cycle()  # the same refused head is not validated again
    assert again.refused is not None and len(src.validated) == validated  # type: ignore[attr-defined]


def test_a_remote_that_is_down_is_reported_and_the_cycle_carries_on(tmp_path: Path) -> None:
    git = FakeGit()
    ok = git.commit(good())
    src = source(git, tmp_path)
    src.cycle()
    git.down = True
    r = src.cycle()
    assert r.source_error is not None and r.source_error.code == "MP701"
    assert r.desired is not None and r.revision is not None and r.revision.sha == ok and not r.changed


def test_a_commit_that_only_touches_reports_is_no_change(tmp_path: Path) -> None:
    git = FakeGit()
    ok = git.commit(good())
    src = source(git, tmp_path)
    src.cycle()
    git.commit(good(**{"reports/drift.yaml": "x: 1\n"}))
    r = src.cycle()
    assert not r.changed and r.revision is not None and r.revision.sha == ok


def test_many_nodes_removed_is_refused_unless_confirmed(tmp_path: Path) -> None:
    git = FakeGit()
    git.commit(good(8))
    src = source(git, tmp_path)
    src.cycle()
    git.commit(good(2))
    r = src.cycle()
    assert r.refused is not None and r.refused.code == "MP725" and "removes 6 of the 8 nodes" in r.refused.reason
    confirmed = good(2, **{"cluster.yaml": CLUSTER + "  apply: {confirmNodeRemoval: 6}\n"})
    sha = git.commit(confirmed)
    r = src.cycle()
    assert r.refused is None and r.changed and r.revision is not None and r.revision.sha == sha


def test_a_restart_restores_the_last_known_good_without_the_network(tmp_path: Path) -> None:
    git = FakeGit()
    ok = git.commit(good())
    source(git, tmp_path).cycle()
    git.commit(good(**{"nodes/n0.yaml": "not: [valid"}))
    git.down = True
    r = source(git, tmp_path).cycle()  # a new process: the state file and the pin hold the applied one
    assert r.revision is not None and r.revision.sha == ok and r.changed  # a restart applies it once
    assert r.refused is not None and r.refused.code == "MP720"


def test_a_damaged_state_file_is_said_once_and_the_head_validated_afresh(tmp_path: Path) -> None:
    git = FakeGit()
    ok = git.commit(good())
    src = source(git, tmp_path)
    src.cycle()
    state = src.state_file
    state.write_text("{not json")
    fresh = source(git, tmp_path)
    r = fresh.cycle()
    assert r.source_error is not None and r.source_error.code == "MP722"
    assert r.revision is not None and r.revision.sha == ok
    assert fresh.cycle().source_error is None
    assert ok in state.read_text()  # the next save repaired it


def test_an_unsigned_head_is_refused_when_the_operator_requires_signatures(tmp_path: Path) -> None:
    git = FakeGit()
    git.commit(good())
    src = source(git, tmp_path, verify=OPERATOR)
    r = src.cycle()
    assert r.desired is None and r.refused is not None and r.refused.code == "MP710"


def test_a_revision_cannot_require_signatures_the_operator_does_not_enforce(tmp_path: Path) -> None:
    # spec.verify in the repository is not where trust is set: asking for it there is refused, not ignored
    git = FakeGit()
    git.commit(good(**{"cluster.yaml": SIGNED}))
    r = source(git, tmp_path).cycle()
    assert r.desired is None and r.refused is not None and r.refused.code == "MP952"
    assert "verify_mode: head" in r.refused.reason


def test_a_revision_changing_spec_verify_needs_a_key_of_the_operator(tmp_path: Path) -> None:
    git = FakeGit()
    ok = git.commit(good())
    src = source(git, tmp_path)
    assert src.cycle().changed
    relaxed = git.commit(good(**{"cluster.yaml": CLUSTER + "  verify: {mode: none, allowedSigners: ['x y z']}\n"}))
    r = src.cycle()
    assert r.refused is not None and r.refused.code == "MP950" and r.refused.revision.sha == relaxed
    assert "trust no key" in r.refused.reason
    assert r.revision is not None and r.revision.sha == ok


def test_a_head_that_does_not_descend_from_the_record_is_refused(tmp_path: Path) -> None:
    git = FakeGit()
    old = git.commit(good())
    src = source(git, tmp_path)
    src.cycle()
    newer = git.commit(good(2))
    assert src.cycle().revision == sha_rev(newer)
    git.branches["main"] = old  # force-push back
    r = source(git, tmp_path).cycle()  # a restart: the record (not the memory) refuses it
    assert r.refused is not None and r.refused.code == "MP951" and r.refused.revision.sha == old
    assert r.revision is not None and r.revision.sha == newer
    assert f"allow_rewind_to: {old}" in r.refused.reason
    allowed = source(git, tmp_path, allow_rewind_to=old).cycle()
    assert allowed.refused is None and allowed.revision is not None and allowed.revision.sha == old


def sha_rev(sha: str) -> Revision:
    return Revision(ref="main", sha=sha)


class BrokenStore:
    strict = True

    def describe(self) -> str:
        return "ConfigMap migplan/t"

    def load(self) -> object:
        raise MigplanError("HTTP 503: " + "x" * 100_000, code="MP851")

    def save(self, record: object) -> None:
        raise AssertionError("never saved when it cannot be read")


def test_a_record_that_cannot_be_read_applies_nothing(tmp_path: Path) -> None:
    git = FakeGit()
    git.commit(good())
    r = source(git, tmp_path, trust_store=BrokenStore()).cycle()
    assert r.desired is None and r.source_error is not None and r.source_error.code == "MP953"
    assert len(r.source_error.message) < 500  # the API's answer is cut, never echoed whole


@pytest.mark.parametrize("bad", [GitFailure("MP702", "credentials refused"), GitFailure("MP703", "host key")])
def test_a_repository_that_cannot_be_opened_is_a_source_error(tmp_path: Path, bad: GitFailure) -> None:
    src = sourcing.InventorySource(
        GitRemote("https://git.example/inv.git", tmp_path), ref="main", open_repo=lambda _r: bad
    )
    r = src.cycle()
    assert r.desired is None and r.source_error == bad


def test_load_revision_through_the_port(tmp_path: Path) -> None:
    git = FakeGit()
    sha = git.commit(good(3))
    loaded = sourcing.load_revision(
        GitRemote("https://git.example/inv.git", tmp_path), "main", open_repo=lambda _r: git
    )
    assert not isinstance(loaded, GitFailure)
    assert loaded.revision.sha == sha and loaded.validation.valid
    missing = sourcing.load_revision(
        GitRemote("https://git.example/inv.git", tmp_path), "nope", open_repo=lambda _r: git
    )
    assert isinstance(missing, GitFailure) and missing.code == "MP704"


def _bytes_held(src: sourcing.InventorySource, git: FakeGit) -> list[bytes]:
    """The file bytes the source itself holds (its Git handle, which holds every commit, left out)."""
    seen: set[int] = {id(git)}
    found: list[bytes] = []
    todo: list[object] = [src]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ in ("module", "function"):
            continue
        seen.add(id(obj))
        if isinstance(obj, bytes) and b"kind: " in obj:
            found.append(obj)
        todo.extend(gc.get_referents(obj))
    return found


def test_between_cycles_the_source_keeps_no_file_bytes(tmp_path: Path) -> None:
    # issue 29, runrss4: the applied snapshot keeps its blob ids, the parse cache its results; neither the bytes
    git = FakeGit()
    git.commit(good(3))
    src = source(git, tmp_path)
    assert src.cycle().changed
    assert _bytes_held(src, git) == []
    sha = git.commit(good(3, **{"nodes/n1.yaml": node("n1", profile="1g.18gb")}))
    r = src.cycle()  # a one-node change: the unchanged files are read again, one file parsed
    assert r.changed and r.revision is not None and r.revision.sha == sha and r.desired is not None
    assert [p.profile for p in r.desired.nodes["n1"].gpus[0].partitions] == ["1g.18gb"]
    assert [p.profile for p in r.desired.nodes["n0"].gpus[0].partitions] == ["3g.71gb"]
    assert _bytes_held(src, git) == []
    restarted = source(git, tmp_path)  # a new process restores the recorded revision
    assert restarted.cycle().revision is not None
    assert _bytes_held(restarted, git) == []
