"""Inventory source over Git (pygit2): fetch a remote into a local bare cache, read a revision's tree.

Contract:
- `GitRemote(url, cache_dir, auth)` names where the inventory lives: an HTTP(S) URL (basic auth or a
  token), an SSH URL (key pair; the server's host key must be in `auth.known_hosts` — unknown keys
  are refused), a `git://` URL, or a local repository path (read in place, never copied).
- `InventoryRepo.open(remote)` opens (creating on first use) the bare cache repository for a remote
  under `cache_dir/repos/`; it survives restarts, so a cycle only fetches what is new.
- `fetch()`, `resolve(rev)` and `read(revision, root)` return error values (`GitFailure`, with a
  stable code) instead of raising: a remote that is down or refuses the credentials is something the
  caller reports while it carries on with what it already has.
- `read` takes files straight from the object database (no work tree) and returns, per path under
  the root, the bytes and the blob id; blob ids are what lets validation re-parse only what changed.

This module and adapters/git/reports.py are the only modules importing pygit2. Not pure: network
and disk I/O.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pygit2
from pygit2.enums import CredentialType, FetchPrune, ObjectType

from reconciler.adapters import deadline
from reconciler.logic.inventory.reporttarget import normalize_root
from reconciler.logic.inventory.yamldocs import MAX_FILE_BYTES
from reconciler.model.inventory import InventoryFiles
from reconciler.model.redaction import redact
from reconciler.model.revisions import Revision

# Stable error codes of the Git adapters (documented in docs/reference/codes.md).
UNREACHABLE = "MP701"  # the remote cannot be reached (down, refused connection, DNS, timeout)
AUTH_REFUSED = "MP702"  # the remote refused the credentials, or none were configured
HOST_KEY_REFUSED = "MP703"  # SSH host key not in known_hosts (or TLS certificate invalid)
REVISION_NOT_FOUND = "MP704"  # no branch, tag or commit of that name
ROOT_NOT_FOUND = "MP705"  # the inventory root is not a directory at that revision
PUSH_REJECTED = "MP706"  # the remote kept rejecting the report push (after retries)
UNSAFE_PATH = "MP707"  # a report path escapes reports.path
GIT_FAILED = "MP708"  # any other Git failure

ORIGIN = "origin"
_FETCH_REFSPECS = ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
_PIN_PREFIX = "refs/migplan/"
_SHA_RE = re.compile(r"[0-9a-fA-F]{4,40}")  # always fullmatch: "abcd\n" is not a commit
_LINK_MODE = 0o120000  # a symbolic link's tree-entry mode
MAX_TREE_DEPTH = 16  # as the directory loader (reconciler.adapters.fsinventory.MAX_DEPTH)
MAX_BLOB_BYTES = MAX_FILE_BYTES  # the loader's limit too; larger blobs are listed as unreadable, never read

# libgit2 reads known_hosts from its "home directory", a process-wide setting; SSH operations set it
# to the remote's own directory under this lock so two remotes never see each other's host keys.
_SSH_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class GitAuth:
    """Credentials for a remote. Secrets come from files/env at the edge; never logged."""

    username: str | None = None
    password: str | None = None  # HTTP basic password
    token: str | None = None  # HTTP token, sent as the basic-auth password (GitHub/GitLab convention)
    ssh_private_key: Path | None = None
    ssh_public_key: Path | None = None  # defaults to ssh_private_key + ".pub"
    ssh_passphrase: str = ""
    known_hosts: Path | None = None  # required for SSH: host keys not listed here are refused

    def __repr__(self) -> str:  # keep secrets out of logs and tracebacks
        return f"GitAuth(username={self.username!r}, ssh_private_key={self.ssh_private_key!r})"


@dataclass(frozen=True, slots=True)
class GitRemote:
    url: str  # https://…, http://…, ssh://…, git://…, or a local repository path
    cache_dir: Path
    auth: GitAuth = field(default_factory=GitAuth)
    # Connect timeout, and twice that for each read from the server (libgit2's server timeout: git's
    # upload-pack sends a keep-alive every 5 s while it works, so only a stalled server hits it). A
    # remote that accepts connections and never answers must not stall a cycle; both are cut further
    # to what is left of the cycle's deadline.
    timeout_ms: int = 10_000
    # Extra CA certificates (PEM) trusted for HTTPS, e.g. a company CA. libgit2 adds them to its
    # process-wide trust store (it cannot scope them to one remote); one remote per process is the norm.
    ca_file: Path | None = None

    @property
    def is_local(self) -> bool:
        return "://" not in self.url and not _is_scp_like(self.url)

    @property
    def is_ssh(self) -> bool:
        return self.url.startswith("ssh://") or _is_scp_like(self.url)


@dataclass(frozen=True, slots=True)
class GitFailure:
    """An error value from the Git adapters: a stable code, a sentence, and the remote it concerns."""

    code: str
    message: str
    url: str = ""

    def __post_init__(self) -> None:
        # A password or token written into a URL must never reach a log, a report or a status.
        object.__setattr__(self, "url", redact(self.url))
        object.__setattr__(self, "message", redact(self.message))

    def __str__(self) -> str:
        where = f" ({self.url})" if self.url else ""
        return f"{self.code}: {self.message}{where}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The files of an inventory root at one revision: path (relative to the root) -> bytes/blob id."""

    revision: Revision
    root: str
    files: Mapping[str, bytes]
    blob_ids: Mapping[str, str]
    tree_id: str  # the root's tree id (before `exclude`): equal tree ids mean identical content

    def without_bytes(self) -> Snapshot:
        """This snapshot as a long-lived controller keeps it between cycles: revision, root, blob ids and tree id,
        and no file's bytes (issue 29, `runrss4`: 3 KB per node file). Nothing reads them once the revision is
        validated (the ParseCache keeps each file's results, not its bytes); given to read() as `previous`, it
        makes every file be read again (about 50 us per file, once per new revision)."""
        unreadable = getattr(self.files, "unreadable", {})
        return Snapshot(self.revision, self.root, InventoryFiles(None, unreadable), self.blob_ids, self.tree_id)


def _is_scp_like(url: str) -> bool:
    # user@host:path (git's scp-like SSH syntax), but not C:\ paths or plain relative paths
    return re.match(r"^[\w.-]+@[\w.-]+:", url) is not None


class _Callbacks(pygit2.RemoteCallbacks):
    """Credentials, host-key policy and push status for one remote operation."""

    def __init__(self, remote: GitRemote) -> None:
        super().__init__()
        self._remote = remote
        self.attempts = 0
        self.rejected: dict[str, str] = {}

    def credentials(self, url: str, username_from_url: str | None, allowed_types: CredentialType) -> Any:
        self.attempts += 1
        if self.attempts > 1:
            # libgit2 asks again after every refusal; the same credentials will not get better.
            raise _AuthRefused("the remote refused the credentials")
        auth = self._remote.auth
        if allowed_types & CredentialType.SSH_KEY and auth.ssh_private_key is not None:
            public = auth.ssh_public_key or Path(f"{auth.ssh_private_key}.pub")
            user = username_from_url or auth.username or "git"
            return pygit2.Keypair(user, str(public), str(auth.ssh_private_key), auth.ssh_passphrase)
        if allowed_types & CredentialType.USERPASS_PLAINTEXT:
            secret = auth.token if auth.token is not None else auth.password
            if secret is not None:
                user = auth.username or username_from_url or "x-access-token"
                return pygit2.UserPass(user, secret)
        raise _AuthRefused("the remote asks for credentials and none are configured for it")

    def certificate_check(self, certificate: Any, valid: bool, host: bytes) -> bool:
        # For SSH `valid` means "found in known_hosts" (ours: see _ssh_home); for TLS, "chain
        # verified". Either way an unverified peer is refused, never trusted on first use.
        if not valid:
            raise _HostKeyRefused(f"host key or certificate of {host.decode(errors='replace')} is not trusted")
        return True

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message:
            self.rejected[refname] = message


class _AuthRefused(Exception):
    pass


class _HostKeyRefused(Exception):
    pass


class _DeadlinePassed(Exception):
    pass


def classify(exc: BaseException, url: str) -> GitFailure:
    """Map a pygit2/libgit2 failure to an error value with a stable code."""
    if isinstance(exc, _AuthRefused):
        return GitFailure(AUTH_REFUSED, str(exc), url)
    if isinstance(exc, _HostKeyRefused):
        return GitFailure(HOST_KEY_REFUSED, str(exc), url)
    if isinstance(exc, _DeadlinePassed):
        return GitFailure(deadline.CODE, str(exc), url)
    text = str(exc)
    low = text.lower()
    if any(s in low for s in ("hostkey", "host key", "known_hosts", "known hosts", "certificate")):
        return GitFailure(HOST_KEY_REFUSED, f"host key or certificate refused: {text}", url)
    if any(s in low for s in ("401", "403", "authentication", "credentials", "unauthorized")):
        return GitFailure(AUTH_REFUSED, f"the remote refused the credentials: {text}", url)
    unreachable = (
        "failed to connect",
        "connection refused",
        "could not connect",
        "timed out",
        "timeout",
        "resolve",
        "failed to send request",
        "early eof",
        "unexpected eof",
        "connection reset",
        "broken pipe",
        "socket",
        "failed to start ssh session",
        "failed to read",
        "failed to write",
        "unexpected http status code: 5",
        # OpenSSL's words for a read that timed out (libgit2's server timeout on an https:// remote)
        "resource temporarily unavailable",
        "syscall failure",
    )
    if any(s in low for s in unreachable):
        return GitFailure(UNREACHABLE, f"the remote cannot be reached: {text}", url)
    return GitFailure(GIT_FAILED, text or type(exc).__name__, url)


class InventoryRepo:
    """A repository to read inventory revisions from: the bare cache of a remote, or a local repo."""

    def __init__(self, remote: GitRemote, repo: pygit2.Repository) -> None:
        self.remote = remote
        self.repo = repo

    # -- opening --------------------------------------------------------------------------------
    @classmethod
    def open(cls, remote: GitRemote) -> InventoryRepo | GitFailure:
        if remote.is_local:
            path = pygit2.discover_repository(remote.url)
            if path is None:
                return GitFailure(GIT_FAILED, "not a Git repository", remote.url)
            return cls(remote, pygit2.Repository(path))
        cache = cache_path(remote)
        try:
            if (cache / "HEAD").is_file():
                repo = pygit2.Repository(str(cache))
            else:
                cache.parent.mkdir(parents=True, exist_ok=True)
                repo = pygit2.init_repository(str(cache), bare=True)
                repo.remotes.create(ORIGIN, redact(remote.url), _FETCH_REFSPECS[0])
                repo.remotes.add_fetch(ORIGIN, _FETCH_REFSPECS[1])
            # The cache's config on disk names the remote without its credentials (a password or
            # token in the URL stays in this process); network operations use `origin()` instead.
            if repo.remotes[ORIGIN].url != redact(remote.url):
                repo.remotes.set_url(ORIGIN, redact(remote.url))
                repo.remotes.set_push_url(ORIGIN, redact(remote.url))
        except (pygit2.GitError, OSError) as exc:
            return GitFailure(GIT_FAILED, f"cannot open the cache repository {cache}: {exc}", remote.url)
        return cls(remote, repo)

    # -- network --------------------------------------------------------------------------------
    def origin(self) -> pygit2.Remote:
        """The remote to fetch from and push to: `origin` as configured, or, when the URL carries a
        credential (kept out of the cache's config), an in-memory remote with the real URL."""
        if redact(self.remote.url) == self.remote.url:
            return self.repo.remotes[ORIGIN]
        return self.repo.remotes.create_anonymous(self.remote.url)

    @contextmanager
    def network(self) -> Iterator[_Callbacks]:
        """Callbacks for one remote operation, with timeouts and (for SSH) our known_hosts in effect."""
        connect_ms, read_ms = self.remote.timeout_ms, self.remote.timeout_ms * 2
        left = deadline.remaining()
        if left is not None:
            if left <= 0:
                raise _DeadlinePassed("the cycle ran past its deadline; Git request not sent")
            connect_ms, read_ms = min(connect_ms, int(left * 1000) + 1), min(read_ms, int(left * 1000) + 1)
        # libgit2 settings are process-wide; every operation sets its own before it starts.
        pygit2.settings.server_connect_timeout = connect_ms
        pygit2.settings.server_timeout = read_ms
        callbacks = _Callbacks(self.remote)
        if self.remote.ca_file is not None and self.remote.url.startswith("https://"):
            _trust_ca(self.remote.ca_file)
        if not self.remote.is_ssh:
            yield callbacks
            return
        with _SSH_LOCK:
            previous = pygit2.settings.homedir
            pygit2.settings.homedir = str(self._ssh_home())
            try:
                yield callbacks
            finally:
                if previous:
                    pygit2.settings.homedir = previous

    def _ssh_home(self) -> Path:
        # libssh2 (inside libgit2) checks host keys against <home>/.ssh/known_hosts; give it a home
        # holding exactly the configured file, so the user's own ~/.ssh never widens the trust.
        home = self.remote.cache_dir / "ssh-home" / hashlib.sha256(self.remote.url.encode()).hexdigest()[:16]
        ssh = home / ".ssh"
        ssh.mkdir(parents=True, exist_ok=True)
        target = ssh / "known_hosts"
        if self.remote.auth.known_hosts is not None:
            try:
                shutil.copyfile(self.remote.auth.known_hosts, target)
            except OSError as exc:
                raise _HostKeyRefused(f"known_hosts file {self.remote.auth.known_hosts} cannot be read: {exc}") from exc
        else:
            target.write_text("")
        return home

    def fetch(self) -> GitFailure | None:
        """Bring the cache up to date with the remote (no-op for a local repository)."""
        if self.remote.is_local:
            return None
        try:
            with self.network() as callbacks:
                origin = self.origin()
                refspecs = None if origin.name else _FETCH_REFSPECS  # an in-memory remote has none configured
                origin.fetch(refspecs=refspecs, callbacks=callbacks, prune=FetchPrune.PRUNE)
            if origin.name is None:
                # libgit2 writes the URL it fetched from into FETCH_HEAD (unused here): not its secret
                fetch_head = Path(self.repo.path) / "FETCH_HEAD"
                if fetch_head.is_file():
                    fetch_head.write_text(redact(fetch_head.read_text(errors="replace")))
        except (pygit2.GitError, _AuthRefused, _HostKeyRefused, _DeadlinePassed, OSError) as exc:
            return classify(exc, self.remote.url)
        return None

    # -- revisions ------------------------------------------------------------------------------
    def resolve(self, rev: str) -> Revision | GitFailure:
        """A branch, tag, full ref or (abbreviated) commit id -> Revision(ref=rev, sha=commit id)."""
        for name in self._candidates(rev):
            try:
                ref = self.repo.references.get(name)
            except (pygit2.GitError, ValueError):
                ref = None
            if ref is not None:
                try:
                    commit = ref.peel(pygit2.Commit)
                except (pygit2.GitError, ValueError):
                    continue
                return Revision(ref=rev, sha=str(commit.id))
        if _SHA_RE.fullmatch(rev) or rev == "HEAD" or "~" in rev or "^" in rev:
            try:
                obj = self.repo.revparse_single(rev)
                commit = obj.peel(pygit2.Commit)
                return Revision(ref="" if _SHA_RE.fullmatch(rev) else rev, sha=str(commit.id))
            except (KeyError, ValueError, pygit2.GitError):
                pass
        return GitFailure(REVISION_NOT_FOUND, f"no branch, tag or commit named {rev!r}", self.remote.url)

    def _candidates(self, rev: str) -> list[str]:
        if self.remote.is_local:
            if rev.startswith("refs/"):
                return [rev]
            return [f"refs/heads/{rev}", f"refs/tags/{rev}", f"refs/remotes/{rev}"]
        if rev.startswith("refs/heads/"):
            return [f"refs/remotes/{ORIGIN}/{rev.removeprefix('refs/heads/')}"]
        if rev.startswith("refs/"):
            return [rev]
        return [f"refs/remotes/{ORIGIN}/{rev}", f"refs/tags/{rev}"]

    def head_branch(self) -> str | None:
        """The branch the remote's HEAD names (for `--branch` defaults), if known."""
        try:
            if self.remote.is_local:
                return None if self.repo.head_is_detached else self.repo.head.shorthand
            ref = self.repo.references.get(f"refs/remotes/{ORIGIN}/HEAD")
            return None if ref is None else str(ref.resolve().shorthand).removeprefix(f"{ORIGIN}/")
        except pygit2.GitError:
            return None

    def branch_named(self, rev: str) -> str | None:
        """The branch `rev` names (HEAD: the remote's default branch), or None for a tag or a commit."""
        if rev == "HEAD":
            return self.head_branch()
        if rev.startswith("refs/") and not rev.startswith("refs/heads/"):
            return None
        name = rev.removeprefix("refs/heads/")
        where = f"refs/heads/{name}" if self.remote.is_local else f"refs/remotes/{ORIGIN}/{name}"
        try:
            return name if self.repo.references.get(where) is not None else None
        except (pygit2.GitError, ValueError):
            return None

    def commit_info(self, sha: str) -> tuple[str, str, str]:
        """(author name, author email, first line of the message) of a commit."""
        commit = self.repo[sha].peel(pygit2.Commit)
        return commit.author.name, commit.author.email, commit.message.split("\n", 1)[0]

    def signature(self, sha: str) -> tuple[bytes, bytes] | None:
        """(signature, signed payload) of a commit, or None when it is unsigned."""
        commit = self.repo[sha].peel(pygit2.Commit)
        sig, payload = commit.gpg_signature
        if sig is None:
            return None
        return bytes(sig), bytes(payload)

    # -- pins: refs in the cache that keep a commit (e.g. the last known good) across restarts ----
    def pin(self, name: str, sha: str) -> GitFailure | None:
        if self.remote.is_local:
            return None  # never write into a user's repository
        try:
            self.repo.references.create(_PIN_PREFIX + name, pygit2.Oid(hex=sha), force=True)
        except (pygit2.GitError, OSError, ValueError) as exc:
            return GitFailure(GIT_FAILED, f"cannot keep {sha[:12]} in the cache: {exc}", self.remote.url)
        return None

    def has_commit(self, sha: str) -> bool:
        try:
            return self.repo.get(sha) is not None
        except (ValueError, pygit2.GitError):
            return False

    def descends_from(self, sha: str, ancestor: str) -> bool:
        """True when commit `ancestor` is in the history of `sha` (a fast-forward from it). A commit the
        cache does not hold is in no history the cache holds: False, never a guess."""
        try:
            return bool(self.repo.descendant_of(pygit2.Oid(hex=sha), pygit2.Oid(hex=ancestor)))
        except (ValueError, KeyError, pygit2.GitError):
            return False

    # -- reading --------------------------------------------------------------------------------
    def read(
        self,
        revision: Revision,
        root: str = "",
        *,
        exclude: str | None = None,
        previous: Snapshot | None = None,
    ) -> Snapshot | GitFailure:
        """Every file under `root` at `revision`, from the object database.

        `exclude` (relative to the repository top level) drops a subtree, e.g. the reports directory
        when it sits inside the root. With `previous`, unchanged blobs whose bytes it holds are taken from it
        instead of being read again: a one-node change reads one blob (a snapshot kept `without_bytes`, as the
        controller keeps the applied one between cycles, holds none: every blob is read).
        """
        root = normalize_root(root)
        try:
            commit = self.repo[revision.sha].peel(pygit2.Commit)
            tree = commit.tree
            if root:
                entry = tree[root]
                if entry.type != ObjectType.TREE:
                    raise KeyError(root)
                tree = cast(pygit2.Tree, self.repo[entry.id])
        except KeyError:
            return GitFailure(ROOT_NOT_FOUND, f"inventory root {root or '/'!r} is not a directory at {revision}")
        except (ValueError, pygit2.GitError) as exc:
            return classify(exc, self.remote.url)
        excluded = _relative_exclude(root, exclude)
        files = InventoryFiles()
        blob_ids: dict[str, str] = {}
        self._walk(tree, excluded, files, blob_ids, previous)
        return Snapshot(revision=revision, root=root, files=files, blob_ids=blob_ids, tree_id=str(tree.id))

    def _blob_size(self, oid: pygit2.Oid) -> int:
        """The blob's size from its object header (libgit2's git_odb_read_header: the content is not inflated)."""
        try:
            return int(self.repo.odb.read_header(oid)[1])
        except (pygit2.GitError, KeyError, ValueError):
            return 0  # let the lookup that follows report what is wrong with it

    def _walk(
        self,
        top: pygit2.Tree,
        excluded: str | None,
        files: InventoryFiles,
        blob_ids: dict[str, str],
        previous: Snapshot | None,
    ) -> None:
        """Every blob under `top`, iteratively (a tree nested thousands deep cannot exhaust the stack).

        Recorded in files.unreadable instead of read (validation refuses the inventory, MP420): a
        symbolic link (its blob is the link target, not the file a reviewer saw), a submodule, a name
        that is not UTF-8, trees nested deeper than MAX_TREE_DEPTH."""
        prev_blobs = previous.blob_ids if previous is not None else {}
        prev_files = previous.files if previous is not None else {}
        stack: list[tuple[pygit2.Tree, str, int]] = [(top, "", 0)]
        while stack:
            tree, prefix, depth = stack.pop()
            for entry in tree:
                raw = entry.raw_name or b""
                name = raw.decode("utf-8", "backslashreplace")
                path = f"{prefix}{name}"
                if excluded is not None and path == excluded:
                    continue
                if name.encode("utf-8", "surrogatepass") != raw:
                    files.unreadable[path] = "the file name is not UTF-8"
                elif entry.filemode == _LINK_MODE:
                    files.unreadable[path] = "a symbolic link (never followed)"
                elif entry.type == ObjectType.TREE:
                    if depth + 1 >= MAX_TREE_DEPTH:
                        files.unreadable[path] = f"trees nested deeper than {MAX_TREE_DEPTH} levels"
                    else:
                        stack.append((cast(pygit2.Tree, self.repo[entry.id]), f"{path}/", depth + 1))
                elif entry.type == ObjectType.BLOB:
                    blob_id = str(entry.id)
                    blob_ids[path] = blob_id
                    if prev_blobs.get(path) == blob_id and (kept := prev_files.get(path)) is not None:
                        files[path] = kept  # (a snapshot kept without its bytes has none: read again)
                    elif (size := self._blob_size(entry.id)) > MAX_BLOB_BYTES:
                        # Size before read: looking the blob up inflates all of it (hundreds of MB per blob).
                        files.unreadable[path] = f"larger than {MAX_BLOB_BYTES} bytes ({size} bytes): not read"
                    else:
                        files[path] = cast(pygit2.Blob, self.repo[entry.id]).data
                else:
                    files.unreadable[path] = "a submodule (a commit, not a file)"


_TRUSTED_CA: set[str] = set()


def _trust_ca(ca_file: Path) -> None:
    key = str(ca_file.resolve())
    if key not in _TRUSTED_CA:  # loading is additive in OpenSSL; once per file is enough
        pygit2.settings.set_ssl_cert_locations(key, None)
        _TRUSTED_CA.add(key)


def _relative_exclude(root: str, exclude: str | None) -> str | None:
    if not exclude:
        return None
    exclude = normalize_root(exclude)
    if not root:
        return exclude
    if exclude.startswith(root + "/"):
        return exclude[len(root) + 1 :]
    return None


def cache_path(remote: GitRemote) -> Path:
    """Where the bare cache of a remote lives: one directory per URL under cache_dir/repos/."""
    digest = hashlib.sha256(remote.url.encode()).hexdigest()[:16]
    # the last path segment names the directory; a query string (which may hold a token) never does
    path = re.split(r"[?#]", remote.url, maxsplit=1)[0]
    tail = re.sub(r"[^\w.-]+", "-", path.rstrip("/").rsplit("/", 1)[-1] or "repo")[:40]
    return remote.cache_dir / "repos" / f"{tail}-{digest}.git"
