"""Where desired state comes from, cycle after cycle: fetch → read → verify → validate → last known good.

Contract of `InventorySource(remote, ref=, root=).cycle() -> SourceResult`:
- the newest revision of `ref` is applied only if it validates and, when `verify.mode: head`, its
  head commit carries a good signature by a trusted key; otherwise the result keeps the last
  known good revision and names both revisions, with the refusal's code, reason, diagnostics and
  (for signatures) who signed it;
- a remote that is down or refuses the credentials is reported in `source_error` and the cycle
  carries on with the cached revision;
- the last known good revision survives restarts: a trust record (reconciler.model.trust) in a
  `TrustStore` — a ConfigMap written through the official client or a file on a volume the operator
  chose; by default a JSON state file in the cache dir, which an emptyDir loses — plus a ref in the
  bare cache (refs/migplan/last-known-good/...) so Git's gc keeps its objects;
- files are re-parsed only when their blob id changed (validation's ParseCache, kept across cycles);
- a new commit that leaves the inventory files as they were (e.g. the controller's own report commit
  on the same branch) is not a change: `changed` is False and the revision stays the applied one,
  so the controller's commits never trigger a re-apply (nor a report naming a new revision).
Trust comes from outside the revision it judges (as Flux keeps `verify` on the GitRepository object):
- the signature policy (required or not, trusted keys) is the operator's `verify` (the controller's
  settings, keys from a mounted ConfigMap or Secret); a revision's own `spec.verify` never trusts a key;
- a revision whose `spec.verify` differs from the last verified revision's is refused (MP950) unless its
  head is signed by a key the operator's policy trusts; one that asks for signatures the operator's
  policy does not enforce is refused (MP952) rather than silently not verified;
- once a revision is recorded as verified, only its descendants are accepted: a force-push back to an
  older commit, seen after a restart, a failover or a fresh cache, is refused (MP951) unless the operator
  names that very commit in `allow_rewind_to`;
- a record store that cannot be read (the API server down, a damaged ConfigMap) stops new revisions
  (MP953) until it can: not knowing the last verified revision is never read as "there was none".

Orchestration over the Git and signature adapters and the pure validation; I/O: disk and network.
`load_revision(...)` is the one-shot form for `migplan validate --repo` and `migplan plan`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.adapters.git import signatures
from reconciler.adapters.git.source import GitFailure, GitRemote, InventoryRepo, Snapshot
from reconciler.logic.inventory.reporttarget import normalize_root
from reconciler.logic.inventory.validation import ParseCache, ValidationResult, validate_inventory
from reconciler.model import trust
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.errors import MigplanError
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
POLICY_CHANGED = "MP950"  # spec.verify changed, and the head is not signed by a key the operator trusts
NOT_FAST_FORWARD = "MP951"  # the head does not descend from the last verified revision (force-push back)
POLICY_NOT_ENFORCED = "MP952"  # spec.verify asks for signatures the operator's policy does not enforce
TRUST_STATE = "MP953"  # the last verified revision cannot be read or recorded: no new revision applied

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
    def descends_from(self, sha: str, ancestor: str) -> bool: ...


class TrustStore(Protocol):
    """Where the last verified revision is kept, outside the repository (the port).

    `load` returns None when nothing was ever recorded and raises MigplanError (or DamagedRecord) when it
    cannot tell; `save` raises MigplanError. `strict`: a damaged record stops new revisions (MP953)
    instead of being ignored; every store but the default cache file is strict."""

    strict: bool

    def describe(self) -> str: ...
    def load(self) -> trust.TrustRecord | None: ...
    def save(self, record: trust.TrustRecord) -> None: ...


class FileTrustStore:
    """The record as a JSON file. In the cache dir by default (not strict: an emptyDir loses it anyway);
    on a volume of the operator's choice with `trust_state_file` (strict)."""

    def __init__(self, path: Path, *, strict: bool) -> None:
        self.path = path
        self.strict = strict

    def describe(self) -> str:
        return f"state file {self.path}"

    def load(self) -> trust.TrustRecord | None:
        try:
            with self.path.open("rb") as fh:
                return trust.decode(fh.read(trust.MAX_RECORD_BYTES + 1))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise MigplanError(f"cannot read {self.describe()}: {exc.strerror}", code=TRUST_STATE) from exc

    def save(self, record: trust.TrustRecord) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(trust.encode(record))
            tmp.replace(self.path)  # atomic: a crash leaves the old state or the new one
        except OSError as exc:
            raise MigplanError(f"cannot save the last known good revision: {exc}", code=STATE_NOT_SAVED) from exc


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
    snapshot: Snapshot  # without its files' bytes (Snapshot.without_bytes): kept between cycles
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
        trust_store: TrustStore | None = None,
        allow_rewind_to: str = "",
    ) -> None:
        """`verify`: the operator's signature policy (None: signatures not required, no key trusted).
        `trust_store`: where the last verified revision is recorded (None: a file in the cache dir).
        `allow_rewind_to`: the one commit the operator accepts as a non-fast-forward of the record."""
        self.remote = remote
        self._open = open_repo
        self.ref = ref
        self.root = normalize_root(root)
        self.verify = verify if verify is not None else VerifySettings()
        self.trust_store: TrustStore = trust_store or FileTrustStore(self.state_file, strict=False)
        self.allow_rewind_to = allow_rewind_to.lower()
        self._record: trust.TrustRecord | None = None  # the last verified revision, as stored
        self.cache = cache if cache is not None else ParseCache()
        self._validate = validate
        self._repo: InventoryGit | None = None
        self._applied: _Applied | None = None
        self._refused: Refusal | None = None
        self._restored = False
        self._record_loaded = False
        self._reported_once = False
        self._same_content_sha: str | None = None  # a newer commit already found to change nothing
        self._restore_problem: GitFailure | None = None  # the state file was damaged (said once)

    # -- persistence ------------------------------------------------------------------------------
    @property
    def _key(self) -> str:
        # The URL without its secret: rotating a token in the URL is the same source.
        return trust.source_key(redact(self.remote.url), self.ref, self.root)

    @property
    def state_file(self) -> Path:
        return self.remote.cache_dir / "state" / f"last-known-good-{self._key}.json"

    def _pin_name(self) -> str:
        return f"last-known-good/{self._key}"

    def _save(self, applied: _Applied) -> GitFailure | None:
        """Record the accepted revision; a failure is reported, the in-memory record still holds."""
        assert self._repo is not None
        pinned = self._repo.pin(self._pin_name(), applied.snapshot.revision.sha)
        rev = applied.snapshot.revision
        self._record = trust.TrustRecord(
            sha=rev.sha, ref=rev.ref, key=self._key, policy=trust.policy_digest(applied.desired.cluster.verify)
        )
        try:
            self.trust_store.save(self._record)
        except MigplanError as exc:
            code = exc.code if exc.code == STATE_NOT_SAVED else TRUST_STATE
            return GitFailure(code, f"the last verified revision was not recorded in {self.trust_store.describe()}: "
                                    f"{_short(exc.message)}")  # fmt: skip
        return pinned

    def _load_record(self) -> GitFailure | None:
        """Read the trust record (once per process; again after a failure). A failure of a strict store
        is MP953: the cycle applies nothing new until the store answers (fail closed)."""
        where = self.trust_store.describe()
        try:
            record = self.trust_store.load()
        except trust.DamagedRecord as exc:
            if not self.trust_store.strict:
                self._record_loaded = True
                self._restore_problem = self._damaged(str(exc))
                return None
            return GitFailure(
                TRUST_STATE,
                f"the last verified revision in {where} is damaged ({exc}); no new revision is applied "
                "until it is repaired or deleted by an operator",
            )
        except MigplanError as exc:
            if not self.trust_store.strict:  # the cache's file: unreadable is as good as damaged
                self._record_loaded = True
                self._restore_problem = self._damaged(_short(exc.message))
                return None
            return GitFailure(
                TRUST_STATE,
                f"the last verified revision cannot be read from {where} ({_short(exc.message)}); "
                "no new revision is applied until it can",
            )
        self._record_loaded = True
        # A record of another source (the settings now name another repository, branch or root) says
        # nothing about this one's history.
        self._record = record if record is not None and record.key == self._key else None
        return None

    def _restore(self, repo: InventoryGit) -> None:
        """After a restart: the recorded revision becomes the last known good again, once its commit is
        in the cache (at once for a warm cache, after the first fetch for a fresh one)."""
        record = self._record
        if record is None or self._applied is not None or self._restored or not repo.has_commit(record.sha):
            return
        self._restored = True
        revision = Revision(ref=record.ref, sha=record.sha)
        snap = repo.read(revision, self.root, exclude=None)
        if isinstance(snap, GitFailure):
            return
        result = self._validate(
            snap.files, revision=revision, cache=self.cache, blob_ids=snap.blob_ids, **self._where()
        )
        if result.desired is not None:
            snap = self._without_reports(repo, snap, result.desired)
            self._applied = _Applied(snap.without_bytes(), result.desired, result.warnings, None)

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
        if not self._record_loaded and (unknown := self._load_record()) is not None:
            return self._carry_on(None, source_error=unknown)
        self._restore(repo)  # before the fetch: a restart with the remote down still acts
        fetch_error = repo.fetch()
        self._restore(repo)  # a fresh cache: the recorded commit came with the fetch (if still reachable)
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
        # History first: a head that does not descend from the recorded revision is refused before its
        # files or signature are even looked at (an old signed commit is still an old commit).
        if (rewound := self._rewind_refusal(repo, latest)) is not None:
            return self._refuse(rewound, fetch_error)

        exclude = self._reports_path(applied.desired) if applied is not None else None
        snap = repo.read(latest, self.root, exclude=exclude, previous=applied.snapshot if applied else None)
        if isinstance(snap, GitFailure):
            return self._carry_on(latest, source_error=snap)
        if applied is not None and snap.blob_ids == applied.snapshot.blob_ids:
            # Same inventory files: e.g. the controller's own report commit on this branch.
            self._same_content_sha = latest.sha
            return self._carry_on(latest, source_error=fetch_error, changed=False, same_content=True)

        # The operator's policy, before parsing: an untrusted commit's files are never even parsed.
        check = self._check_signature(repo, latest, self.verify)
        if check is not None and not check.trusted:
            return self._refuse(self._signature_refusal(latest, check), fetch_error)
        result = self._validate(snap.files, revision=latest, cache=self.cache, blob_ids=snap.blob_ids, **self._where())
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
        policy = self._policy_refusal(repo, latest, result.desired.cluster.verify, check)
        if isinstance(policy, Refusal):
            return self._refuse(policy, fetch_error)
        check = policy or check
        if applied is not None and (why := node_removal_refusal(applied.desired, result.desired)) is not None:
            return self._refuse(Refusal(latest, NODES_REMOVED, why, result.diagnostics), fetch_error)
        snap = self._without_reports(repo, snap, result.desired)
        self._applied = _Applied(snap.without_bytes(), result.desired, result.warnings, check)
        self._refused = None
        self._restored = True  # what the record named is superseded
        saved = self._save(self._applied)
        return self._carry_on(latest, source_error=fetch_error or saved, changed=True)

    def _rewind_refusal(self, repo: InventoryGit, latest: Revision) -> Refusal | None:
        """MP951 when `latest` is not the recorded revision nor one of its descendants, unless the
        operator named exactly this commit in `allow_rewind_to`."""
        record = self._record
        if record is None or latest.sha == record.sha or repo.descends_from(latest.sha, record.sha):
            return None
        if self.allow_rewind_to and latest.sha == self.allow_rewind_to:
            return None
        return Refusal(
            latest,
            NOT_FAST_FORWARD,
            f"it does not descend from the last verified revision {record.sha[:12]} (recorded in "
            f"{self.trust_store.describe()}): the branch was force-pushed or its history rewritten; to accept "
            f"it, set allow_rewind_to: {latest.sha} in the controller's settings",
        )

    def _policy_refusal(
        self,
        repo: InventoryGit,
        latest: Revision,
        declared: VerifySettings,
        check: signatures.SignatureCheck | None,
    ) -> Refusal | signatures.SignatureCheck | None:
        """MP952 when cluster.yaml asks for signatures the operator's policy does not enforce; MP950 when
        it changes spec.verify without a signature by a key of the operator's policy. Otherwise the
        signature check made for a policy change (or None)."""
        if declared.mode is VerifyMode.HEAD and self.verify.mode is not VerifyMode.HEAD:
            return Refusal(
                latest,
                POLICY_NOT_ENFORCED,
                "cluster.yaml sets spec.verify.mode: head, but only the controller's settings decide whether "
                "signatures are required (verify_mode: head and the trusted keys, from a mounted ConfigMap or "
                "Secret): set them there, or remove spec.verify",
            )
        record = self._record
        if record is None or trust.policy_digest(declared) == record.policy:
            return None
        if check is None:  # the operator requires no signature, but a policy change needs one
            check = self._check_signature(repo, latest, dataclasses.replace(self.verify, mode=VerifyMode.HEAD))
        if check is not None and check.trusted:
            return check
        keys = self.verify.allowed_signers or self.verify.gpg_public_keys
        why = check.describe() if check is not None and keys else "the controller's settings trust no key"
        return Refusal(
            latest,
            POLICY_CHANGED,
            f"it changes spec.verify in cluster.yaml, which only a commit signed by a key of the controller's "
            f"settings may do ({why})",
            signer=None if check is None else check.signer,
        )

    # -- helpers ----------------------------------------------------------------------------------
    def _where(self) -> dict[str, Any]:
        """Where this inventory lives, for the rule that keeps report commits off it (MP412)."""
        return {"followed_branch": self.ref.removeprefix("refs/heads/"), "root": self.root}

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


def _short(text: str, limit: int = 300) -> str:
    """A message from elsewhere (the API server, the disk), cut to one bounded line."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


if TYPE_CHECKING:

    def _conforms(x: InventoryRepo) -> InventoryGit:
        return x

    def _stores(x: FileTrustStore) -> TrustStore:
        return x
