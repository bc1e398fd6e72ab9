"""Where desired state comes from, cycle after cycle: fetch → read → verify → validate → last known good.

Contract of `InventorySource(remote, ref=, root=).cycle() -> SourceResult`:
- the newest revision of `ref` is applied only if it validates and, when `verify.mode: head`, its
  head commit carries a good signature by a trusted key; otherwise the result keeps the last
  known good revision and names both revisions, with the refusal's code, reason, diagnostics and
  (for signatures) who signed it;
- a remote that is down or refuses the credentials is reported in `source_error` and the cycle
  carries on with the cached revision;
- the last known good revision survives restarts: a JSON state file in the cache dir plus a ref in
  the bare cache (refs/migplan/last-known-good/...) so Git's gc keeps its objects;
- files are re-parsed only when their blob id changed (validation's ParseCache, kept across cycles);
- a new commit that leaves the inventory files as they were (e.g. the controller's own report commit
  on the same branch) is not a change: `changed` is False and the revision stays the applied one,
  so the controller's commits never trigger a re-apply (nor a report naming a new revision).
Trust anchors for `verify` come from, in order: the settings passed in by the operator, the last
known good revision's cluster.yaml, and only for the very first revision its own cluster.yaml
(trust on first use, as a new repository has nothing else to go by). A commit can therefore not
switch verification off, or add its own key, without being signed by a key already trusted.

Orchestration over the Git and signature adapters and the pure validation; I/O: disk and network.
`load_revision(...)` is the one-shot form for `migplan validate --repo` and `migplan plan`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.adapters.git import signatures
from reconciler.adapters.git.source import GitFailure, GitRemote, InventoryRepo, Snapshot
from reconciler.logic.inventory.reporttarget import normalize_root
from reconciler.logic.inventory.validation import ParseCache, ValidationResult, validate_inventory
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.inventory import DesiredState, InventoryFiles, VerifyMode, VerifySettings
from reconciler.model.redaction import redact, redact_value
from reconciler.model.revisions import Revision

INVALID_REVISION = "MP720"  # the newer revision does not validate: not applied
STATE_NOT_SAVED = "MP721"  # the last known good could not be persisted (a restart would not find it)
NODES_REMOVED = "MP725"  # the newer revision drops many nodes of the applied one, unconfirmed: not applied


def node_removal_refusal(applied: DesiredState, candidate: DesiredState) -> str | None:
    """Why `candidate` may not replace `applied` on its own, or None. Pure.

    An inventory that suddenly has far fewer nodes than the revision being applied is more often a
    bad merge, a wrong `--path` or a half-pushed tree than a decommissioning: more than one node and
    more than a quarter of the applied nodes gone is refused unless the candidate's cluster.yaml
    sets `spec.apply.confirmNodeRemoval` to exactly the number removed."""
    removed = sorted(set(applied.nodes) - set(candidate.nodes))
    if len(removed) <= 1 or len(removed) * 4 <= len(applied.nodes):
        return None
    if candidate.cluster.apply.confirm_node_removal == len(removed):
        return None
    shown = ", ".join(removed[:5]) + (f" and {len(removed) - 5} more" if len(removed) > 5 else "")
    return (
        f"it removes {len(removed)} of the {len(applied.nodes)} nodes of the applied revision ({shown}); "
        f"set spec.apply.confirmNodeRemoval: {len(removed)} in cluster.yaml to confirm"
    )


STATE_DAMAGED = "MP722"  # the last known good state file cannot be read or is damaged: ignored

Validator = Callable[..., ValidationResult]


class InventoryGit(Protocol):
    """What sourcing needs of a Git repository (the port; reconciler.adapters.git.source.InventoryRepo is
    the adapter over pygit2, tests/unit/controller/test_sourcing.py has an in-memory fake). Every failure is a
    GitFailure value, never an exception."""

    def fetch(self) -> GitFailure | None: ...
    def resolve(self, rev: str) -> Revision | GitFailure: ...
    def branch_named(self, rev: str) -> str | None: ...
    def read(
        self, revision: Revision, root: str = "", *, exclude: str | None = None, previous: Snapshot | None = None
    ) -> Snapshot | GitFailure: ...
    def signature(self, sha: str) -> tuple[bytes, bytes] | None: ...
    def pin(self, name: str, sha: str) -> GitFailure | None: ...
    def has_commit(self, sha: str) -> bool: ...


# Opens the repository a remote names (the cache clone for a URL): InventoryRepo.open in production.
Opener = Callable[[GitRemote], "InventoryGit | GitFailure"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a revision is not applied."""

    revision: Revision
    code: str  # MP720 invalid; MP710 unsigned, MP711 untrusted signer, MP712 bad signature
    reason: str
    diagnostics: tuple[Diagnostic, ...] = ()
    signer: str | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.revision} is not applied: {self.reason}"


@dataclass(frozen=True, slots=True)
class SourceResult:
    """One cycle's answer: what to act on, and everything the report must say about the source."""

    desired: DesiredState | None  # act on this (None only when no revision was ever valid)
    revision: Revision | None  # revision of `desired` (the last known good)
    latest: Revision | None  # the head of the ref seen this cycle (may be refused)
    changed: bool  # desired differs from the previous cycle's: something to apply
    refused: Refusal | None = None  # why `latest` is not the applied revision
    source_error: GitFailure | None = None  # fetch/resolve/read problem; the cycle used the cache
    warnings: tuple[Diagnostic, ...] = ()  # validation warnings of the applied revision
    signature: signatures.SignatureCheck | None = None  # of the applied revision, when verified

    @property
    def stale(self) -> bool:
        """True when the newest revision is not the one being acted on."""
        return self.latest is not None and self.revision is not None and self.latest.sha != self.revision.sha

    def to_json(self) -> dict[str, Any]:
        """The source's state for reports and `-o json`: deterministic (no clock), secrets redacted."""
        out: dict[str, Any] = {
            "revision": None if self.revision is None else str(self.revision),
            "latest": None if self.latest is None else str(self.latest),
            "stale": self.stale,
        }
        if self.refused is not None:
            out["refused"] = {
                "revision": str(self.refused.revision),
                "code": self.refused.code,
                "reason": self.refused.reason,
                "signer": self.refused.signer,
                "errors": [d.to_json() for d in self.refused.diagnostics if d.is_error],
            }
        if self.source_error is not None:
            e = self.source_error
            out["source_error"] = {"code": e.code, "message": e.message, "url": e.url}
        if self.signature is not None:
            out["signature"] = {"status": self.signature.status.value, "format": self.signature.format,
                                "signer": self.signature.signer}  # fmt: skip
        # Reasons and diagnostics quote what Git and the files said; none may carry a URL's secret.
        cleaned: dict[str, Any] = redact_value(out)
        return cleaned


@dataclass(frozen=True, slots=True)
class LoadedRevision:
    snapshot: Snapshot
    validation: ValidationResult

    @property
    def revision(self) -> Revision:
        return self.snapshot.revision


def load_revision(
    remote: GitRemote,
    rev: str,
    *,
    root: str = "",
    cache: ParseCache | None = None,
    fetch: bool = True,
    validate: Validator = validate_inventory,
    open_repo: Opener = InventoryRepo.open,
) -> LoadedRevision | GitFailure:
    """Fetch (remote URLs), resolve `rev`, read `root` at it and validate. For one-shot commands."""
    repo = open_repo(remote)
    if isinstance(repo, GitFailure):
        return repo
    if fetch and (failure := repo.fetch()) is not None:
        return failure
    revision = repo.resolve(rev)
    if isinstance(revision, GitFailure):
        return revision
    snap = repo.read(revision, root)
    if isinstance(snap, GitFailure):
        return snap
    result = validate(
        snap.files,
        revision=revision,
        cache=cache,
        blob_ids=snap.blob_ids,
        followed_branch=repo.branch_named(rev),  # report commits stay off it (MP412)
        root=normalize_root(root),
    )
    return LoadedRevision(snap, result)


@dataclass(frozen=True, slots=True)
class _Applied:
    snapshot: Snapshot
    desired: DesiredState
    warnings: tuple[Diagnostic, ...]
    signature: signatures.SignatureCheck | None


class InventorySource:
    """One per controller: keeps the cache repo, the parse cache and the last known good revision."""

    def __init__(
        self,
        remote: GitRemote,
        *,
        ref: str,
        root: str = "",
        verify: VerifySettings | None = None,
        cache: ParseCache | None = None,
        validate: Validator = validate_inventory,
        open_repo: Opener = InventoryRepo.open,
    ) -> None:
        self.remote = remote
        self._open = open_repo
        self.ref = ref
        self.root = normalize_root(root)
        self.verify_override = verify
        self.cache = cache if cache is not None else ParseCache()
        self._validate = validate
        self._repo: InventoryGit | None = None
        self._applied: _Applied | None = None
        self._refused: Refusal | None = None
        self._restored = False
        self._reported_once = False
        self._same_content_sha: str | None = None  # a newer commit already found to change nothing
        self._restore_problem: GitFailure | None = None  # the state file was damaged (said once)

    # -- persistence ------------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        key = hashlib.sha256(f"{self.remote.url}\0{self.ref}\0{self.root}".encode()).hexdigest()[:16]
        return self.remote.cache_dir / "state" / f"last-known-good-{key}.json"

    def _pin_name(self) -> str:
        return f"last-known-good/{self.state_file.stem.removeprefix('last-known-good-')}"

    def _save(self, applied: _Applied) -> GitFailure | None:
        """Persist the last known good; a failure is reported, the in-memory one still holds."""
        assert self._repo is not None
        pinned = self._repo.pin(self._pin_name(), applied.snapshot.revision.sha)
        rev = applied.snapshot.revision
        try:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(
                json.dumps({"url": redact(self.remote.url), "ref": rev.ref, "sha": rev.sha, "root": self.root})
            )
            tmp.replace(self.state_file)  # atomic: a crash leaves the old state or the new one
        except OSError as exc:
            return GitFailure(STATE_NOT_SAVED, f"cannot save the last known good revision: {exc}")
        return pinned

    def _restore(self, repo: InventoryGit) -> None:
        """After a restart: load the last known good revision from the cache, without the network."""
        self._restored = True
        try:
            state = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return  # the very first cycle
        except (OSError, ValueError) as exc:
            self._restore_problem = self._damaged(str(getattr(exc, "strerror", None) or exc))
            return
        if not isinstance(state, dict) or not isinstance(state.get("sha", ""), str):
            self._restore_problem = self._damaged("not a state document")
            return
        sha = str(state.get("sha", ""))
        if not sha or not repo.has_commit(sha):
            return
        revision = Revision(ref=str(state.get("ref", self.ref)), sha=sha)
        snap = repo.read(revision, self.root, exclude=None)
        if isinstance(snap, GitFailure):
            return
        result = self._validate(
            snap.files, revision=revision, cache=self.cache, blob_ids=snap.blob_ids, **self._where()
        )
        if result.desired is not None:
            snap = self._without_reports(repo, snap, result.desired)
            self._applied = _Applied(snap, result.desired, result.warnings, None)

    def _damaged(self, why: str) -> GitFailure:
        # Said once, as this cycle's source error (exit 2); the remote's head is then validated afresh
        # like on a first run, and the next successful save replaces the damaged file.
        return GitFailure(STATE_DAMAGED, f"last known good state file {self.state_file} is damaged ({why}); ignored")

    # -- the cycle --------------------------------------------------------------------------------
    def cycle(self) -> SourceResult:
        result = self._cycle()
        problem, self._restore_problem = self._restore_problem, None
        if problem is not None and result.source_error is None:
            result = dataclasses.replace(result, source_error=problem)
        return result

    def _cycle(self) -> SourceResult:
        repo = self._repo
        if repo is None:
            opened = self._open(self.remote)
            if isinstance(opened, GitFailure):
                return self._carry_on(None, source_error=opened)
            repo = self._repo = opened
        if not self._restored:
            self._restore(repo)
        fetch_error = repo.fetch()
        latest = repo.resolve(self.ref)
        if isinstance(latest, GitFailure):
            return self._carry_on(None, source_error=fetch_error or latest)
        applied = self._applied
        if applied is not None and latest.sha == applied.snapshot.revision.sha:
            return self._carry_on(latest, source_error=fetch_error, changed=False)
        if applied is not None and latest.sha == self._same_content_sha:
            return self._carry_on(latest, source_error=fetch_error, changed=False, same_content=True)
        if self._refused is not None and self._refused.revision.sha == latest.sha:
            return self._carry_on(latest, source_error=fetch_error, refused=self._refused)

        exclude = self._reports_path(applied.desired) if applied is not None else None
        snap = repo.read(latest, self.root, exclude=exclude, previous=applied.snapshot if applied else None)
        if isinstance(snap, GitFailure):
            return self._carry_on(latest, source_error=snap)
        if applied is not None and snap.blob_ids == applied.snapshot.blob_ids:
            # Same inventory files: e.g. the controller's own report commit on this branch.
            self._same_content_sha = latest.sha
            return self._carry_on(latest, source_error=fetch_error, changed=False, same_content=True)

        # Trust first where the anchors are known already (operator or last known good): an
        # untrusted commit's files are then never even parsed.
        check: signatures.SignatureCheck | None = None
        anchors = self._verify_settings(None)
        if anchors is not None:
            check = self._check_signature(repo, latest, anchors)
            if check is not None and not check.trusted:
                return self._refuse(self._signature_refusal(latest, check), fetch_error)
        result = self._validate(snap.files, revision=latest, cache=self.cache, blob_ids=snap.blob_ids, **self._where())
        if anchors is None:
            first_use = self._verify_settings(result) or VerifySettings()
            check = self._check_signature(repo, latest, first_use)
            if check is not None and not check.trusted:
                return self._refuse(self._signature_refusal(latest, check), fetch_error)
        if result.desired is None:
            errors = result.errors
            first = f"; first: {errors[0]}" if errors else ""
            refusal = Refusal(
                latest,
                INVALID_REVISION,
                f"the inventory is invalid ({len(errors)} error(s){first})",
                result.diagnostics,
            )
            return self._refuse(refusal, fetch_error)
        if applied is not None and (why := node_removal_refusal(applied.desired, result.desired)) is not None:
            return self._refuse(Refusal(latest, NODES_REMOVED, why, result.diagnostics), fetch_error)
        snap = self._without_reports(repo, snap, result.desired)
        self._applied = _Applied(snap, result.desired, result.warnings, check)
        self._refused = None
        saved = self._save(self._applied)
        return self._carry_on(latest, source_error=fetch_error or saved, changed=True)

    # -- helpers ----------------------------------------------------------------------------------
    def _where(self) -> dict[str, Any]:
        """Where this inventory lives, for the rule that keeps report commits off it (MP412)."""
        return {"followed_branch": self.ref.removeprefix("refs/heads/"), "root": self.root}

    def _verify_settings(self, candidate: ValidationResult | None) -> VerifySettings | None:
        """The trust anchors: the operator's, else the last known good's, else (first revision only,
        given its validation) the candidate's own; None while they can only come from the candidate."""
        if self.verify_override is not None:
            return self.verify_override
        if self._applied is not None:
            return self._applied.desired.cluster.verify
        if candidate is not None and candidate.desired is not None:
            return candidate.desired.cluster.verify  # trust on first use (see module docstring)
        return None

    @staticmethod
    def _check_signature(
        repo: InventoryGit, revision: Revision, verify: VerifySettings
    ) -> signatures.SignatureCheck | None:
        if verify.mode is not VerifyMode.HEAD:
            return None
        sig = repo.signature(revision.sha)
        return signatures.verify_signature(None if sig is None else sig[0], b"" if sig is None else sig[1], verify)

    @staticmethod
    def _signature_refusal(revision: Revision, check: signatures.SignatureCheck) -> Refusal:
        return Refusal(revision, check.code or signatures.UNTRUSTED_CODE, check.describe(), signer=check.signer)

    def _reports_path(self, desired: DesiredState) -> str:
        # reports.path is relative to the repository top level; ignore it when inside the root
        return desired.cluster.reports.path

    def _without_reports(self, repo: InventoryGit, snap: Snapshot, desired: DesiredState) -> Snapshot:
        """The snapshot minus files under reports.path, so report commits never look like changes."""
        path = normalize_root(self._reports_path(desired))
        if not path:
            return snap
        rel = path if not self.root else (path[len(self.root) + 1 :] if path.startswith(self.root + "/") else "")
        if not rel:
            return snap
        keep = {p for p in snap.files if p != rel and not p.startswith(rel + "/")}
        if len(keep) == len(snap.files):
            return snap
        unreadable = getattr(snap.files, "unreadable", {})
        return Snapshot(
            revision=snap.revision,
            root=snap.root,
            files=InventoryFiles(
                {p: snap.files[p] for p in keep},
                {p: why for p, why in unreadable.items() if p != rel and not p.startswith(rel + "/")},
            ),
            blob_ids={p: snap.blob_ids[p] for p in keep},
            tree_id=snap.tree_id,
        )

    def _refuse(self, refusal: Refusal, fetch_error: GitFailure | None) -> SourceResult:
        self._refused = refusal
        return self._carry_on(refusal.revision, source_error=fetch_error, refused=refusal)

    def _carry_on(
        self,
        latest: Revision | None,
        *,
        source_error: GitFailure | None,
        changed: bool = False,
        refused: Refusal | None = None,
        same_content: bool = False,
    ) -> SourceResult:
        applied = self._applied
        if applied is None:
            return SourceResult(None, None, latest, False, refused=refused, source_error=source_error)
        # A restart's first cycle must apply the restored revision: nothing has been applied yet.
        first = not self._reported_once
        self._reported_once = True
        return SourceResult(
            desired=applied.desired,
            revision=applied.snapshot.revision,
            latest=applied.snapshot.revision if same_content else latest,
            changed=changed or first,
            refused=refused,
            source_error=source_error,
            warnings=applied.warnings,
            signature=applied.signature,
        )


if TYPE_CHECKING:

    def _conforms(x: InventoryRepo) -> InventoryGit:
        return x
