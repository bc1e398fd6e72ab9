"""Reports committed back to Git (pygit2): never lost, never noise.

Contract of `commit_report(repo, settings=, files=, message=, bot=)`:
- the report files (name -> bytes, e.g. drift.yaml, README.md) replace the content of
  `settings.path` on `settings.branch` (created as an orphan branch when absent); everything else on
  that branch is kept as it is;
- a commit is made only when the resulting tree differs from the branch tip's (content comparison by
  tree id, so nothing time-varying may be in the files — the caller's job);
- file names and `settings.path` are checked first: absolute paths, `..`, backslashes, NUL, empty
  components and `.git` are refused with an error value and nothing is written;
- the bot never rewrites the inventory: with `inventory` (the branch the controller follows and its
  root) the same rule as `migplan validate`'s MP412 refuses a `reports.path` that is, contains or
  lies in the inventory (cluster.yaml, nodes/, layouts/) on that branch — an unknown branch counts
  as the same one. The new tree is the tip's tree with only the subtree at `reports.path` replaced
  (every other entry kept by id); a path component that is a file, symlink or submodule at the tip
  is refused, and the commit's diff is checked to touch nothing outside `reports.path` before it is
  pushed;
- no secret reaches Git: secrets enter a report through settings, URLs and error texts, and are redacted
  where they enter (the Git source's state, GitFailure, Finding messages); this module keeps one guard
  (reconciler.model.redaction) over the commit message and the files at the top of the report (drift.yaml,
  README.md: they quote the source's state, settings and errors), before they are queued and again when an
  outbox entry is read. Per-node files (nodes/, maps/) are not scanned: thousands of files at fleet size, built
  only from values already redacted. Entries queued by older versions (no `scrubbed` mark) are scanned whole;
- a push rejected because someone else pushed first is resolved by fetching, re-creating the commit
  on the new tip and retrying with exponential backoff (tenacity);
- every report goes through an outbox in the cache directory first (one JSON file per report,
  surviving restarts); a report that cannot be pushed now stays there and is pushed, in order, by a
  later call. Nothing is dropped. Files already written into the repository's object database
  (`blobs`: name -> blob id, adapters/git/reportstore.py) are queued by id, not by content: the blobs
  are on disk before the entry is, so a crash loses nothing, and an entry costs ~100 bytes a file
  instead of the report base64 (tens of MB at fleet size). An id that is not a blob of the repository
  sets the entry aside as unreadable. A report the same as the last one pushed (or found on the branch),
  with nothing queued, is not written there (it is already in the branch's history); it is still set
  against the branch tip, and queued only if that push cannot be made now.
- with a `signer` (reconciler.adapters.git.commitsigning), every report commit is signed as git signs
  (`gpgsig` header over the commit buffer: pygit2 `create_commit_string` + `create_commit_with_signature`);
  a signature that cannot be made leaves the report queued with MP730, so nothing is pushed unsigned.
For a local repository (no remote) the commit is written straight into it, on the reports branch only.

Not pure: disk and network I/O. With adapters/git/source.py the only modules importing pygit2.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pygit2
import tenacity
from pygit2.enums import FileMode

from reconciler.adapters.git.commitsigning import CommitSigner, SigningFailed
from reconciler.adapters.git.source import (
    GIT_FAILED,
    ORIGIN,
    PUSH_REJECTED,
    UNSAFE_PATH,
    GitFailure,
    InventoryRepo,
    classify,
)
from reconciler.logic.inventory import reporttarget
from reconciler.model.inventory import ReportSettings
from reconciler.model.redaction import redact, redact_bytes
from reconciler.model.revisions import Revision

INVENTORY_OVERLAP = reporttarget.CODE  # MP412: the same rule and code as `migplan validate`

_NAME_RE = re.compile(r"^[A-Za-z0-9_.@+-]+$")
# _path_problem's fast path: what it accepts, spelled as a whole path (one pattern, `\Z`-anchored by fullmatch), and
# the components it refuses although their characters are allowed.
_SAFE_PATH = re.compile(r"[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+-]+)*")
_SPECIAL_PART = re.compile(r"(?:^|/)(?:\.{1,2}|\.git)(?:/|\Z)", re.IGNORECASE)
# An outbox entry's mark: its files went through guard_files (older entries have none and are scrubbed whole).
SCRUBBED = "guard/1"


def guarded(name: str) -> bool:
    """Whether a report file is one the guard scans: those at the top of the report, which quote the source's
    state, settings and error texts; per-node files (a folder in the name) hold only already-redacted values."""
    return "/" not in name


def guard_files(files: Mapping[str, bytes], *, everything: bool = False) -> dict[str, bytes]:
    """The report files with the guard applied (to every file with `everything`: entries of older versions)."""
    return {name: redact_bytes(data) if everything or guarded(name) else data for name, data in files.items()}


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Author and committer of report commits."""

    name: str = "migplan"
    email: str = "migplan@localhost"


@dataclass(frozen=True, slots=True)
class InventoryTarget:
    """Where the inventory the controller follows lives: report commits must never touch it.
    `branch` None means unknown (treated as the reports branch, the safe assumption)."""

    branch: str | None = None
    root: str = ""


@dataclass(frozen=True, slots=True)
class ReportOutcome:
    """What happened to a report.

    status: "committed" (a new commit is on the remote), "unchanged" (the branch already holds this
    content: no commit), "held" (occupancy-only change coalesced by reports.minInterval: not queued,
    `held_until` says when it is due; older outbox entries were still pushed), "queued" (kept in the
    outbox; `failure` says why), "refused" (unsafe path: nothing written), "failed" (the outbox itself
    cannot be written: the report is not kept).
    `pushed` lists the commits pushed by this call, older outbox entries included.
    """

    status: str
    commit: str | None = None
    pushed: tuple[str, ...] = ()
    pending: int = 0
    failure: GitFailure | None = None
    attempts: int = 0  # commit+push attempts made; more than len(pushed) means a push race was lost and retried
    held_until: datetime | None = None  # with "held": when the coalesced report becomes due


@dataclass(frozen=True, slots=True)
class LastReport:
    """The reports branch tip as this cache last saw it: its commit message and commit time (UTC)."""

    message: str
    committed_at: datetime


def last_report(
    repo: InventoryRepo, branch: str, matches: Callable[[str], bool], *, limit: int = 100
) -> LastReport | None:
    """The newest commit of the reports branch (first parents, at most `limit` back from the tip)
    whose message `matches`, from the cache and without network: the source's fetch of this cycle
    brought it up to date, and commit_report fetches again before it commits. None when there is
    none, the branch is absent or unreadable, or its name unsafe: the caller then commits as if
    there were no earlier report."""
    if check_branch(repo, branch) is not None:
        return None
    name = f"refs/heads/{branch}" if repo.remote.is_local else f"refs/remotes/{ORIGIN}/{branch}"
    try:
        ref = repo.repo.references.get(name)
        if ref is None:
            return None
        commit: pygit2.Commit | None = ref.peel(pygit2.Commit)
        for _ in range(limit):
            if commit is None:
                break
            if matches(str(commit.message)):
                return LastReport(str(commit.message), datetime.fromtimestamp(commit.commit_time, UTC))
            commit = commit.parents[0] if commit.parents else None
    except (pygit2.GitError, ValueError, OverflowError, OSError, KeyError):
        return None
    return None


def report_message(revision: Revision, counts: Mapping[str, int]) -> str:
    """`migplan: drift report for main@sha1:… — 3 drifted, 1 missing` (zero counts left out).

    Labels may be statuses as the report counts them (`InSync`, `Drifted`): they are written in words.
    """
    parts = [f"{n} {re.sub(r'(?<=[a-z])(?=[A-Z])', ' ', label).lower()}" for label, n in counts.items() if n]
    return f"migplan: drift report for {revision} — {', '.join(parts) if parts else 'in sync'}"


def check_report_paths(path: str, names: Sequence[str]) -> GitFailure | None:
    """Refuse any report path that could land outside `path` (or inside .git)."""
    for candidate in (path, *names):
        problem = _path_problem(candidate)
        if problem is not None:
            return GitFailure(UNSAFE_PATH, f"refusing report path {candidate!r}: {problem}")
    return None


def check_branch(repo: InventoryRepo, branch: str) -> GitFailure | None:
    """Refuse a branch name that is not a plain branch, or that would move a checked-out work tree."""
    if not branch or ":" in branch or branch.startswith(("-", "+", "refs/")) or "\x00" in branch:
        return GitFailure(UNSAFE_PATH, f"refusing reports branch {branch!r}: not a plain branch name")
    if not pygit2.reference_is_valid_name(f"refs/heads/{branch}"):
        return GitFailure(UNSAFE_PATH, f"refusing reports branch {branch!r}: not a valid branch name")
    git = repo.repo
    checked_out = (
        repo.remote.is_local
        and not git.is_bare
        and not git.head_is_unborn
        and not git.head_is_detached
        and git.head.shorthand == branch
    )
    if checked_out:
        # Moving the checked-out branch under a person's work tree would make their files look
        # modified; reports go to another branch (or through a remote) instead.
        return GitFailure(
            UNSAFE_PATH,
            f"refusing to commit reports onto {branch!r}: it is checked out in {git.workdir}; "
            "use another reports.branch",
        )
    return None


def _path_problem(p: str) -> str | None:
    # The common case first, in two regex scans: every component of the allowed characters and none of them
    # `.`, `..` or `.git`. A report of every node changed checks some 18 paths per node twice (issue 29, adoptcpu).
    if _SAFE_PATH.fullmatch(p) is not None and _SPECIAL_PART.search(p) is None:
        return None
    return _why_unsafe(p)


def _why_unsafe(p: str) -> str | None:
    """What is wrong with a report path, rule by rule (the message says which)."""
    if not p:
        return "empty"
    if "\x00" in p:
        return "contains NUL"
    if "\\" in p:
        return "contains a backslash"
    if p.startswith("/") or re.match(r"^[A-Za-z]:", p):
        return "is absolute"
    for part in p.split("/"):
        if part in ("", ".", ".."):
            return "has an empty, '.' or '..' component"
        if part.lower() == ".git":
            return "names .git"
        if not _NAME_RE.fullmatch(part):  # fullmatch: "reports\n" must not pass a `$`
            return f"component {part!r} has characters outside [A-Za-z0-9_.@+-]"
    return None


class _Rejected(Exception):
    """Someone else moved the branch first: fetch, re-create, retry."""


class _Refused(Exception):
    """The commit would touch something outside reports.path: never pushed, never retried."""

    def __init__(self, failure: GitFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


class _Offline(Exception):
    def __init__(self, failure: GitFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


class Outbox:
    """Reports waiting to be pushed, one JSON file each, in arrival order, under the cache dir."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        # Outside the outbox: it holds only entries (and the ones set aside), so "the outbox is empty" stays a
        # plain check of the directory (<cache>/pushed/<repo digest> for <cache>/outbox/<repo digest>).
        self._done_file = directory.parent.with_name("pushed") / directory.name

    @classmethod
    def for_repo(cls, repo: InventoryRepo) -> Outbox:
        digest = hashlib.sha256(repo.remote.url.encode()).hexdigest()[:16]
        return cls(repo.remote.cache_dir / "outbox" / digest)

    def put(self, entry: Mapping[str, Any]) -> Path:
        existing = self.entries()
        try:
            last = self.load(existing[-1]) if existing else {}
        except (OSError, ValueError):
            last = {}  # damaged: flush sets it aside
        if last and all(last.get(k) == entry.get(k) for k in ("branch", "path", "files", "blobs")):
            # Same report content as the newest queued one (a long outage, one cycle a minute):
            # pushing it twice would change nothing, so the queue does not grow.
            return existing[-1]
        # numbered after every file ever queued here, set-aside ones included, so none is overwritten
        seq = max((int(p.name.split(".")[0]) for p in self.directory.iterdir() if p.name[:10].isdigit()), default=0) + 1
        target = self.directory / f"{seq:010d}.json"
        tmp = target.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(entry, fh)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(target)  # atomic: a crash leaves either no entry or a whole one
        return target

    def entries(self) -> list[Path]:
        return sorted(self.directory.glob("*.json"))

    def done(self) -> str | None:
        """The entry_digest of the last report pushed or found already on the branch (None: unknown)."""
        try:
            return self._done_file.read_text(encoding="ascii").strip() or None
        except (OSError, ValueError):
            return None

    def mark_done(self, digest: str) -> None:
        """Remember the report just pushed (or found there); a failure to remember only costs a queued copy."""
        with contextlib.suppress(OSError):
            self._done_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._done_file.with_suffix(".tmp")
            tmp.write_text(digest, encoding="ascii")
            tmp.replace(self._done_file)

    def set_aside(self, path: Path, why: str) -> Path:
        """Keep an entry that cannot be pushed out of the queue, for a person to look at."""
        target = path.with_suffix(f".{why}")
        path.replace(target)
        return target

    @staticmethod
    def load(path: Path) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data


def check_inventory_target(settings: ReportSettings, inventory: InventoryTarget) -> GitFailure | None:
    """Refuse report settings that would make a commit touch the inventory (MP412, as validate)."""
    problem = reporttarget.report_target_problem(settings, followed_branch=inventory.branch, root=inventory.root)
    return None if problem is None else GitFailure(INVENTORY_OVERLAP, f"refusing to commit reports: {problem}")


def commit_report(
    repo: InventoryRepo,
    *,
    settings: ReportSettings,
    files: Mapping[str, bytes],
    message: str,
    bot: BotIdentity = BotIdentity(),
    max_attempts: int = 6,
    signer: CommitSigner | None = None,
    inventory: InventoryTarget = InventoryTarget(),
    blobs: Mapping[str, str] | None = None,
) -> ReportOutcome:
    """Queue this report, then push every queued report in order (see the module docstring). `blobs`: report
    files already in the repository's object database (name -> blob id), guarded as `files` are when stored."""
    stored = dict(blobs or {})
    twice = sorted(set(files) & set(stored))
    refused = (
        (GitFailure(UNSAFE_PATH, f"refusing report files named twice: {twice[:3]!r}") if twice else None)
        or check_report_paths(settings.path, [*files, *stored])
        or check_inventory_target(settings, inventory)
        or check_branch(repo, settings.branch)
    )
    if refused is not None:
        return ReportOutcome(status="refused", failure=refused)
    # Guarded before it is stored: an entry queued during an outage is pushed later, into history.
    clean = guard_files(files)
    entry = {
        "branch": settings.branch,
        "path": settings.path,
        "message": redact(message),
        "author": [bot.name, bot.email],
        "files": {name: base64.b64encode(data).decode("ascii") for name, data in sorted(clean.items())},
        "inventory": {"branch": inventory.branch, "root": inventory.root},
        "scrubbed": SCRUBBED,
    }
    if stored:
        entry["blobs"] = dict(sorted(stored.items()))
    try:
        outbox = Outbox.for_repo(repo)
    except OSError as exc:
        failure = GitFailure(GIT_FAILED, f"cannot write the report outbox: {exc}", repo.remote.url)
        return ReportOutcome(status="failed", failure=failure)
    if not outbox.entries() and outbox.done() == entry_digest(entry):
        # The same report as the last one pushed (or found already there): it is in the branch's history,
        # so nothing is lost without a queued copy; not writing one saves a file as big as the report (tens
        # of MB at 5,000 nodes) every cycle. It is still set against the branch tip (re-committed if someone
        # changed the branch); queued only if that push cannot be made now.
        return flush_outbox(repo, max_attempts=max_attempts, signer=signer, unqueued=entry)
    try:
        waiting = set(outbox.entries())
        queued = outbox.put(entry)
    except OSError as exc:
        # Nowhere to keep it: say so loudly rather than pretend it is queued.
        failure = GitFailure(GIT_FAILED, f"cannot write the report outbox: {exc}", repo.remote.url)
        return ReportOutcome(status="failed", failure=failure)
    if queued in waiting:  # the newest queued entry holds the same files: it is pushed as it was queued
        return flush_outbox(repo, max_attempts=max_attempts, signer=signer)
    # The entry just written is pushed from memory (the same content as its file): not read back and decoded,
    # a copy of the report less at fleet size.
    return flush_outbox(repo, max_attempts=max_attempts, signer=signer, in_memory=(queued, entry, clean))


def entry_digest(entry: Mapping[str, Any]) -> str:
    """What makes two outbox entries the same report: branch, path and files (not the message or author)."""
    h = hashlib.sha256()
    for part in (entry.get("branch"), entry.get("path")):
        h.update(f"{part}\0".encode())
    for name, data in sorted((entry.get("files") or {}).items()):
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(str(data).encode())
    for name, oid in sorted((entry.get("blobs") or {}).items()):
        h.update(f"blob\0{name}\0{oid}\0".encode())
    return h.hexdigest()


_OID_HEX = re.compile(r"[0-9a-f]{40}")


def _entry_blobs(
    git: pygit2.Repository, entry: Mapping[str, Any], files: Mapping[str, bytes], *, guard: bool
) -> dict[str, bytes | pygit2.Oid]:
    """The entry's files with its `blobs` (name -> blob id) as Oids; each must name a blob of this repository
    and no name may be in `files` as well (ValueError/KeyError otherwise: the entry is set aside as unreadable).
    With `guard` (an entry read back from the outbox), each id is checked to name a blob and the top files among
    them are read and guarded again, as `files` are on read; without (the entry commit_report just queued, its
    blobs written by this process), the ids are taken as they are."""
    raw = entry.get("blobs") or {}
    if not isinstance(raw, Mapping):
        raise ValueError("blobs is not a mapping")
    out: dict[str, bytes | pygit2.Oid] = dict(files)
    for name, hexid in raw.items():
        if not isinstance(name, str) or not isinstance(hexid, str) or not _OID_HEX.fullmatch(hexid) or name in out:
            raise ValueError(f"bad blob entry {name!r}")
        oid = pygit2.Oid(hex=hexid)
        if not guard:
            out[name] = oid
            continue
        if git.odb.read_header(oid)[0] != pygit2.enums.ObjectType.BLOB:  # KeyError when absent
            raise ValueError(f"{name!r} is not a blob")
        if guarded(name):
            data = bytes(git[oid].peel(pygit2.Blob).data)
            clean = redact_bytes(data)
            out[name] = oid if clean is data else git.create_blob(clean)
        else:
            out[name] = oid
    return out


def flush_outbox(
    repo: InventoryRepo,
    *,
    max_attempts: int = 6,
    signer: CommitSigner | None = None,
    unqueued: Mapping[str, Any] | None = None,
    in_memory: tuple[Path, Mapping[str, Any], Mapping[str, bytes]] | None = None,
) -> ReportOutcome:
    """Push queued reports in order; stop at the first that cannot be pushed now (kept for later).
    `unqueued`: a report not written to the outbox (the same as the last one done, see commit_report),
    pushed after the queued ones and put in the outbox only if it cannot be pushed now.
    `in_memory`: (outbox file, its entry, its guarded files) of the entry commit_report just queued."""
    outbox = Outbox.for_repo(repo)
    pushed: list[str] = []
    attempts = 0
    last_status, last_commit = "unchanged", None
    refused: GitFailure | None = None
    items: list[Path | None] = [*outbox.entries(), *([None] if unqueued is not None else [])]
    for path in items:
        try:
            if in_memory is not None and path == in_memory[0]:
                entry = dict(in_memory[1])  # guarded by commit_report (and reportstore) just now
                files = _entry_blobs(repo.repo, entry, in_memory[2], guard=False)
            else:
                entry = dict(unqueued or {}) if path is None else Outbox.load(path)
                # Guarded again on read; entries queued by older versions (no mark, or before redaction
                # existed) are scrubbed whole: they must not carry a secret into history either.
                decoded = guard_files(
                    {str(name): base64.b64decode(data) for name, data in entry["files"].items()},
                    everything=entry.get("scrubbed") != SCRUBBED,
                )
                # (blob ids are checked and the top files among them guarded again only for an entry read back
                # from the outbox: an unqueued report was stored, guarded, by this process just now)
                files = _entry_blobs(repo.repo, entry, decoded, guard=path is not None)
            branch, root, message = str(entry["branch"]), str(entry["path"]), redact(str(entry["message"]))
            bot = BotIdentity(*(str(x) for x in entry["author"]))
            inventory = _entry_inventory(entry)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, pygit2.GitError):
            if path is not None:
                outbox.set_aside(path, "unreadable")  # never block the queue on one damaged file
            continue
        refused = (
            check_report_paths(root, list(files))
            or check_inventory_target(ReportSettings(branch=branch, path=root), inventory)
            or check_branch(repo, branch)
        )
        if refused is not None:
            if path is not None:
                outbox.set_aside(path, "refused")  # an edited (or older, unsafe) entry: never written to Git
            continue
        try:
            for attempt in tenacity.Retrying(
                stop=tenacity.stop_after_attempt(max_attempts),
                wait=tenacity.wait_random_exponential(multiplier=0.05, max=2.0),
                retry=tenacity.retry_if_exception_type(_Rejected),
                reraise=True,
            ):
                with attempt:
                    attempts += 1
                    commit = _commit_and_push(
                        repo,
                        branch=branch,
                        root=root,
                        files=files,
                        message=message,
                        bot=bot,
                        signer=signer,
                        inventory=inventory,
                    )
        except _Refused as exc:
            refused = exc.failure
            if path is not None:
                outbox.set_aside(path, "refused")  # the branch tip makes it unsafe: kept for a person to see
            continue
        except (_Offline, _Rejected) as exc:
            if isinstance(exc, _Offline):
                failure = exc.failure
            else:
                failure = GitFailure(PUSH_REJECTED, f"push of {branch} kept being rejected: {exc}", repo.remote.url)
            if path is None:
                try:
                    outbox.put(entry)  # could not be pushed now: queued after all, so nothing is lost
                except OSError as put_exc:
                    lost = GitFailure(GIT_FAILED, f"cannot write the report outbox: {put_exc}", repo.remote.url)
                    return ReportOutcome(status="failed", pushed=tuple(pushed), failure=lost, attempts=attempts)
            return ReportOutcome(
                status="queued", pushed=tuple(pushed), pending=len(outbox.entries()), failure=failure, attempts=attempts
            )
        if path is not None:
            path.unlink(missing_ok=True)  # (the cache lock keeps other processes out; never crash on it)
        outbox.mark_done(entry_digest(entry))
        refused = None
        if commit is None:
            last_status, last_commit = "unchanged", None
        else:
            pushed.append(commit)
            last_status, last_commit = "committed", commit
    if refused is not None:  # the newest report was refused: say so, with why
        return ReportOutcome(status="refused", pushed=tuple(pushed), failure=refused, attempts=attempts)
    return ReportOutcome(status=last_status, commit=last_commit, pushed=tuple(pushed), pending=0, attempts=attempts)


def _entry_inventory(entry: Mapping[str, Any]) -> InventoryTarget:
    """The inventory an entry was queued for; entries from older versions did not record it."""
    raw = entry.get("inventory")
    if not isinstance(raw, Mapping):
        return InventoryTarget()  # unknown: checked as if the reports branch were the followed one
    branch = raw.get("branch")
    return InventoryTarget(branch=None if branch is None else str(branch), root=str(raw.get("root") or ""))


def _commit_and_push(
    repo: InventoryRepo,
    *,
    branch: str,
    root: str,
    files: Mapping[str, bytes | pygit2.Oid],
    message: str,
    bot: BotIdentity,
    signer: CommitSigner | None = None,
    inventory: InventoryTarget,
) -> str | None:
    """One attempt: build the report tree on the current tip; commit and push only if it differs."""
    git = repo.repo
    local = repo.remote.is_local
    if not local:
        failure = repo.fetch()
        if failure is not None:
            raise _Offline(failure)
    tip_ref = f"refs/heads/{branch}" if local else f"refs/remotes/{ORIGIN}/{branch}"
    ref = git.references.get(tip_ref)
    tip = ref.peel(pygit2.Commit) if ref is not None else None
    tree_id = _report_tree(git, tip, root=root, files=files)
    if tip is not None and tip.tree_id == tree_id:
        return None
    _check_commit_diff(git, tip, tree_id, root=root, same_branch=_same_branch(inventory, branch), inventory=inventory)
    who = pygit2.Signature(bot.name, bot.email)
    parents = [tip.id] if tip is not None else []
    commit_id = _create_commit(
        git, who=who, message=message, tree_id=tree_id, parents=parents, signer=signer, url=repo.remote.url
    )
    if local:
        current = git.references.get(tip_ref)
        if (current.target if current is not None else None) != (tip.id if tip is not None else None):
            raise _Rejected("the branch moved while the report was being written")
        git.references.create(tip_ref, commit_id, force=True)
        return str(commit_id)
    outgoing = f"refs/migplan/outgoing/{branch}"
    git.references.create(outgoing, commit_id, force=True)
    try:
        with repo.network() as callbacks:
            repo.origin().push([f"{outgoing}:refs/heads/{branch}"], callbacks=callbacks)
    except pygit2.GitError as exc:
        low = str(exc).lower()
        if any(s in low for s in ("non-fast", "fastforward", "fast-forward", "not present locally", "fetch first")):
            raise _Rejected(str(exc)) from exc
        raise _Offline(classify(exc, repo.remote.url)) from exc
    except Exception as exc:  # credentials/host-key refusals raised from our callbacks
        raise _Offline(classify(exc, repo.remote.url)) from exc
    if callbacks.rejected:
        raise _Rejected("; ".join(f"{r}: {m}" for r, m in callbacks.rejected.items()))
    git.references.create(tip_ref, commit_id, force=True)
    return str(commit_id)


def _create_commit(
    git: pygit2.Repository,
    *,
    who: pygit2.Signature,
    message: str,
    tree_id: pygit2.Oid,
    parents: list[pygit2.Oid],
    signer: CommitSigner | None,
    url: str,
) -> pygit2.Oid:
    """The report commit object, signed over its buffer when a signer is configured (no ref is moved)."""
    if signer is None:
        unsigned: pygit2.Oid = git.create_commit(None, who, who, message, tree_id, parents)
        return unsigned
    # pygit2's stub says Oid; the call returns the commit buffer as text (what git signs).
    parent_args: list[str | pygit2.Oid] = list(parents)
    content = str(git.create_commit_string(who, who, message, tree_id, parent_args))
    try:
        signature = signer.sign(content.encode("utf-8"))
    except SigningFailed as exc:
        # Offline, not rejected: the report stays in the outbox and is retried (signed) next cycle.
        raise _Offline(GitFailure(exc.code, exc.message, url)) from exc
    signed: pygit2.Oid = git.create_commit_with_signature(content, signature)
    return signed


def _report_tree(
    git: pygit2.Repository, tip: pygit2.Commit | None, *, root: str, files: Mapping[str, bytes | pygit2.Oid]
) -> pygit2.Oid:
    """The tip's tree with only the subtree at `root` replaced by exactly the report files.

    Built with tree builders from the tip's trees, so every entry outside `root` keeps its id, mode
    and name byte for byte (an index would normalise modes and drop what it cannot represent)."""
    leaf = _files_tree(git, files) if files else None
    tree = tip.tree if tip is not None else None
    new = _replace(git, tree, root.split("/"), leaf, walked="")
    if new is None:
        empty: pygit2.Oid = git.TreeBuilder().write()
        return empty
    return new


def _files_tree(git: pygit2.Repository, files: Mapping[str, bytes | pygit2.Oid]) -> pygit2.Oid:
    """The report tree: bytes are written as blobs, Oids name blobs already in the object database."""
    nested: dict[str, Any] = {}
    for name, data in sorted(files.items(), key=lambda item: item[0]):
        *dirs, base = name.split("/")
        node = nested
        for d in dirs:
            child = node.setdefault(d, {})
            if not isinstance(child, dict):
                raise _Refused(GitFailure(UNSAFE_PATH, f"refusing report files: {name!r} is under a file"))
            node = child
        if isinstance(node.get(base), dict):
            raise _Refused(GitFailure(UNSAFE_PATH, f"refusing report files: {name!r} is also a directory"))
        node[base] = data
    return _write_nested(git, nested)


def _write_nested(git: pygit2.Repository, nested: Mapping[str, Any]) -> pygit2.Oid:
    builder = git.TreeBuilder()
    for name, value in sorted(nested.items()):
        if isinstance(value, dict):
            builder.insert(name, _write_nested(git, value), FileMode.TREE)
        else:
            blob = value if isinstance(value, pygit2.Oid) else git.create_blob(value)
            builder.insert(name, blob, FileMode.BLOB)
    oid: pygit2.Oid = builder.write()
    return oid


_KINDS = {FileMode.LINK: "symlink", FileMode.COMMIT: "submodule"}


def _replace(
    git: pygit2.Repository, tree: pygit2.Tree | None, parts: list[str], leaf: pygit2.Oid | None, *, walked: str
) -> pygit2.Oid | None:
    """`tree` with the entry at `parts` set to `leaf` (removed when None); None when it ends up empty."""
    head, rest = parts[0], parts[1:]
    here = walked + head
    existing = tree[head] if tree is not None and head in tree else None
    if existing is not None and existing.filemode != FileMode.TREE:
        # A file, symlink (e.g. `reports -> nodes`) or submodule where the reports directory goes:
        # replacing it would delete something outside the reports, and following it could land anywhere.
        kind = _KINDS.get(existing.filemode, "file")
        raise _Refused(
            GitFailure(
                UNSAFE_PATH,
                f"refusing to commit reports under {here!r}: it is a {kind} on the reports branch, not a directory",
            )
        )
    builder = git.TreeBuilder(tree) if tree is not None else git.TreeBuilder()
    if rest:
        sub = cast(pygit2.Tree, git[existing.id]) if existing is not None else None
        child = _replace(git, sub, rest, leaf, walked=here + "/")
    else:
        child = leaf
    if child is None:
        if existing is not None:
            builder.remove(head)
    else:
        builder.insert(head, child, FileMode.TREE)
    if len(builder) == 0:
        return None
    oid: pygit2.Oid = builder.write()
    return oid


def _same_branch(inventory: InventoryTarget, branch: str) -> bool:
    return inventory.branch is None or reporttarget.same_branch(inventory.branch, branch)


def _check_commit_diff(
    git: pygit2.Repository,
    tip: pygit2.Commit | None,
    tree_id: pygit2.Oid,
    *,
    root: str,
    same_branch: bool,
    inventory: InventoryTarget,
) -> None:
    """The last word before a push: every path the commit adds, changes or deletes is under `root`,
    and (on the followed branch) none is an inventory file. Raises _Refused otherwise."""
    new = cast(pygit2.Tree, git[tree_id])
    diff = tip.tree.diff_to_tree(new) if tip is not None else new.diff_to_tree(swap=True)
    prefix = root + "/"
    for delta in diff.deltas:
        for changed in {delta.old_file.path, delta.new_file.path}:
            outside = changed != root and not changed.startswith(prefix)
            touches = same_branch and reporttarget.inventory_overlap(changed, inventory.root) is not None
            if outside or touches:
                raise _Refused(
                    GitFailure(
                        INVENTORY_OVERLAP if touches else UNSAFE_PATH,
                        f"refusing a report commit that would change {changed!r} "
                        f"({'an inventory file' if touches else 'outside reports.path ' + repr(root)})",
                    )
                )
