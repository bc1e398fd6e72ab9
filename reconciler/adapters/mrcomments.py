"""One migplan comment per merge request, created once and updated on every push (GitLab and GitHub).

The CI job runs `migplan plan`, then `migplan post-comment`, which calls this adapter. The comment
is found again by its author AND a hidden HTML marker at the start of its body (`<!-- migplan:plan KEY -->`,
KEY so that several clusters or jobs can keep one comment each): a comment that does not *start* with the
marker is never touched, and neither is a marked comment by any other account than the token's own (`author`,
else what `GET /user` says; GitHub refuses that to Actions tokens, whose comments are `github-actions[bot]`'s:
the command passes that name). A marker is text anyone can paste; an author is not. When the account cannot
be known at all, no existing comment is updated: a new one is created (a duplicate, never a hijack).

The REST calls, as the forges publish them:
- GitLab (docs.gitlab.com/api/notes, "Merge requests"): `GET /projects/:id/merge_requests/:iid/notes`
  (paginated: `Link` header with rel="next", and `X-Next-Page`), `POST .../notes` `{"body"}`,
  `PUT .../notes/:note_id` `{"body"}`; the token goes in `PRIVATE-TOKEN`. System notes are skipped.
- GitHub (docs.github.com/rest/issues/comments; a pull request is an issue for comments):
  `GET /repos/{owner}/{repo}/issues/{number}/comments` (paginated by `Link` rel="next"),
  `POST` the same path `{"body"}`, `PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}`;
  the token goes in `Authorization: Bearer`.

HTTP goes through urllib3 (already in the dependency tree with the Kubernetes client): a connect and a
read timeout on every request, no redirects followed (a token is never sent to another host; a `next`
link to another origin is refused too), answers read up to MAX_ANSWER_BYTES and within one whole-answer
deadline (`answer_deadline`, the command's --timeout: a server that trickles its answer a byte at a time
resets a socket read timeout with every byte, never this one), and parsed only when they hold at most
MAX_JSON_CONTAINERS objects and arrays (a 32 MB answer of `{}` would cost about a gigabyte once parsed).
A connection failure, a timeout, 429 or 5xx is retried with exponential backoff (tenacity); 401/403 is the token refused
(MP741), never retried. The token is never part of a URL, a message or a log line: every message is
also passed through the one URL-credential redaction, and the token's own text is masked if an API
ever echoed it.
"""

from __future__ import annotations

import enum
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import orjson
import tenacity
import urllib3

from reconciler.model.errors import MigplanError
from reconciler.model.redaction import redact

TOKEN_MISSING = "MP740"  # no token in the environment variable the forge needs
TOKEN_REFUSED = "MP741"  # the API answered 401 or 403: the token is wrong, expired or lacks the scope
API_UNREACHABLE = "MP742"  # connection refused, timeout, 429 or 5xx, still after the retries
API_ANSWER_BAD = "MP743"  # an answer migplan cannot use: not JSON, wrong shape, too big, 404, a redirect
MR_CONTEXT_MISSING = "MP744"  # which project and merge request (or repository and pull request) is unknown
COMMENT_BODY_BAD = "MP745"  # the comment body cannot be read (missing, not UTF-8)

MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_JSON_CONTAINERS = 200_000  # a page of 100 comments holds a few hundred; counted before parsing
MAX_PAGES = 100  # 100 per page: 10,000 comments on one merge request is already absurd
PER_PAGE = 100
_KEY = re.compile(r"[A-Za-z0-9._-]{1,64}")


class ForgeError(MigplanError):
    """A posting failure with its stable code (MP740-MP745); the message never carries the token."""


class TokenRefused(ForgeError):
    """The forge answered 401 or 403: the token is wrong, expired or lacks the scope."""

    code = TOKEN_REFUSED


class AnswerUnusable(ForgeError):
    """An answer migplan cannot use (not JSON, wrong shape, too big, 404, a redirect)."""

    code = API_ANSWER_BAD


class Forge(enum.StrEnum):
    GITLAB = "gitlab"
    GITHUB = "github"


# The comment size each forge accepts: GitHub's body limit (65,536 characters); GitLab's note limit
# (1,000,000 characters in `Note` validation, documented as 1 MB in some versions): counted here in UTF-8
# bytes, which satisfies both readings.
COMMENT_LIMIT = {Forge.GITLAB: 1_000_000, Forge.GITHUB: 65_536}


def _chars(text: str) -> int:
    return len(text)


def _utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


MEASURE = {Forge.GITLAB: _utf8_bytes, Forge.GITHUB: _chars}


def marker(key: str) -> str:
    """The hidden first line that identifies migplan's comment for `key`."""
    if not _KEY.fullmatch(key):
        raise ForgeError(f"comment key {key!r} must be 1-64 of A-Z a-z 0-9 . _ -", code=MR_CONTEXT_MISSING)
    return f"<!-- migplan:plan {key} -->"


@dataclass(frozen=True, slots=True)
class Target:
    """Where the comment goes: the API base and the merge request (GitLab) or pull request (GitHub)."""

    forge: Forge
    api_url: str  # https://gitlab.example.com/api/v4 or https://api.github.com
    project: str  # GitLab: numeric id or "group/project"; GitHub: "owner/repo"
    number: int  # GitLab merge request iid; GitHub pull request number

    def describe(self) -> str:
        if self.forge is Forge.GITLAB:
            return f"merge request !{self.number} of project {self.project}"
        return f"pull request #{self.number} of {self.project}"


@dataclass(frozen=True, slots=True)
class Posted:
    action: str  # "created" | "updated"
    comment_id: int
    chars: int


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    headers: Mapping[str, str]
    data: bytes


class _Retry(Exception):
    """A transient failure (connection, timeout, 429, 5xx): worth another attempt."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="?([^";]*)"?')


def next_link(link_header: str | None) -> str | None:
    """The rel="next" URL of an RFC 8288 Link header (GitHub and GitLab paginate with it), or None."""
    for url, rels in _LINK.findall(link_header or ""):
        if "next" in rels.split():
            return str(url)
    return None


class ForgeClient:
    """The three calls migplan needs on one forge: list the comments, create one, update one."""

    def __init__(
        self,
        target: Target,
        token: str,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        attempts: int = 4,
        backoff: float = 1.0,
        pool: urllib3.PoolManager | None = None,
        answer_deadline: float | None = None,
    ) -> None:
        """`answer_deadline`: seconds one request may take from sending to the last byte of its answer
        (default: connect + read timeout)."""
        if not token:
            raise ForgeError("no API token", code=TOKEN_MISSING)
        parts = urlsplit(target.api_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ForgeError(f"API URL {redact(target.api_url)!r} is not an http(s) URL", code=MR_CONTEXT_MISSING)
        if parts.username or parts.password:
            raise ForgeError("the API URL must not carry credentials (use the token variable)", code=MR_CONTEXT_MISSING)
        self.target = target
        self._token = token
        self._origin = (parts.scheme, parts.hostname, parts.port)
        self._base = target.api_url.rstrip("/")
        self._timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self._deadline = answer_deadline if answer_deadline is not None else connect_timeout + read_timeout
        self._attempts = max(1, attempts)
        self._backoff = backoff
        # retries=False: no hidden urllib3 retries and no redirects followed (tenacity retries, visibly)
        self._pool = pool or urllib3.PoolManager(retries=False, timeout=self._timeout)

    # -- paths -------------------------------------------------------------------------------------
    def _collection(self) -> str:
        t = self.target
        if t.forge is Forge.GITLAB:
            return f"{self._base}/projects/{quote(t.project, safe='')}/merge_requests/{t.number}/notes"
        owner_repo = "/".join(quote(p, safe="") for p in t.project.split("/", 1))
        return f"{self._base}/repos/{owner_repo}/issues/{t.number}/comments"

    def _item(self, comment_id: int) -> str:
        if self.target.forge is Forge.GITLAB:
            return f"{self._collection()}/{comment_id}"
        owner_repo = "/".join(quote(p, safe="") for p in self.target.project.split("/", 1))
        return f"{self._base}/repos/{owner_repo}/issues/comments/{comment_id}"

    def _headers(self) -> dict[str, str]:
        common = {"Accept": "application/json", "Content-Type": "application/json", "User-Agent": "migplan"}
        if self.target.forge is Forge.GITLAB:
            return common | {"PRIVATE-TOKEN": self._token}
        return common | {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self._token}",
            "X-GitHub-Api-Version": "2022-11-28",
        }

    # -- one request, retried ----------------------------------------------------------------------
    def _clean(self, text: str) -> str:
        return redact(text.replace(self._token, "***"))

    def _once(self, method: str, url: str, body: bytes | None) -> _Answer:
        """One request, bounded as a whole: run on a worker thread and abandoned at the deadline (the
        socket timeouts bound each read, not the answer; a trickling server would otherwise hold the
        job for hours). The abandoned thread ends with its socket; a CLI run exits without waiting."""
        box: queue.Queue[tuple[_Answer | None, BaseException | None]] = queue.Queue(maxsize=1)

        def work() -> None:
            try:
                box.put((self._exchange(method, url, body), None))
            except BaseException as exc:  # handed to the caller's thread, raised there
                box.put((None, exc))

        threading.Thread(target=work, name="migplan-forge-request", daemon=True).start()
        try:
            answer, error = box.get(timeout=self._deadline)
        except queue.Empty:
            raise _Retry(f"{method} {url}: no whole answer within {self._deadline:g} s") from None
        if error is not None:
            raise error
        assert answer is not None
        return answer

    def _exchange(self, method: str, url: str, body: bytes | None) -> _Answer:
        try:
            resp = self._pool.request(
                method, url, body=body, headers=self._headers(), preload_content=False, redirect=False
            )
        except urllib3.exceptions.HTTPError as exc:
            raise _Retry(f"{method} {url}: {type(exc).__name__}: {exc}") from None
        try:
            data = resp.read(MAX_ANSWER_BYTES + 1)
        except urllib3.exceptions.HTTPError as exc:
            raise _Retry(f"{method} {url}: reading the answer: {type(exc).__name__}") from None
        finally:
            resp.release_conn()
        if resp.status == 429 or resp.status >= 500:
            raise _Retry(f"{method} {url}: HTTP {resp.status}")
        if len(data) > MAX_ANSWER_BYTES:
            raise AnswerUnusable(f"{method} {url}: answer larger than {MAX_ANSWER_BYTES} bytes")
        return _Answer(resp.status, {k.lower(): v for k, v in resp.headers.items()}, data)

    def _request(self, method: str, url: str, payload: Mapping[str, Any] | None = None) -> _Answer:
        body = orjson.dumps(payload) if payload is not None else None
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._attempts),
            wait=tenacity.wait_exponential(multiplier=self._backoff, max=max(self._backoff * 8, 0.001)),
            retry=tenacity.retry_if_exception_type(_Retry),
            reraise=True,
        )
        try:
            answer = retrying(self._once, method, url, body)
        except _Retry as exc:
            raise ForgeError(
                self._clean(f"{exc.message} (after {self._attempts} attempt(s))"), code=API_UNREACHABLE
            ) from None
        except ForgeError as exc:
            raise type(exc)(self._clean(exc.message), code=exc.code) from None
        if answer.status in (401, 403):
            raise TokenRefused(
                self._clean(
                    f"{method} {url}: HTTP {answer.status}: the token was refused ({_api_message(answer.data)}); "
                    f"{self._needs()}"
                )
            )
        if not 200 <= answer.status < 300:
            raise AnswerUnusable(self._clean(f"{method} {url}: HTTP {answer.status} ({_api_message(answer.data)})"))
        return answer

    def _needs(self) -> str:
        if self.target.forge is Forge.GITLAB:
            return "a GitLab project or personal access token with the api scope and at least the Reporter role"
        return "a GitHub token with pull-requests: write (or issues: write) on this repository"

    # -- the three calls ---------------------------------------------------------------------------
    def comments(self) -> Iterator[Mapping[str, Any]]:
        """Every comment of the merge request, oldest first, following the `next` links."""
        sep = "?"
        url: str | None = f"{self._collection()}{sep}per_page={PER_PAGE}"
        if self.target.forge is Forge.GITLAB:
            url = f"{url}&sort=asc&order_by=created_at"
        for _page in range(MAX_PAGES):
            assert url is not None
            answer = self._request("GET", url)
            items = _json(answer.data, url)
            if not isinstance(items, list):
                raise AnswerUnusable(f"GET {url}: expected a JSON list of comments")
            for item in items:
                if isinstance(item, dict):
                    yield item
            url = self._next(answer, url)
            if url is None:
                return
        raise AnswerUnusable(f"more than {MAX_PAGES} pages of comments")

    def _next(self, answer: _Answer, current: str) -> str | None:
        nxt = next_link(answer.headers.get("link"))
        if nxt is None and self.target.forge is Forge.GITLAB:
            page = answer.headers.get("x-next-page", "").strip()
            # str.isdigit accepts superscripts and other scripts' digits, which int() refuses: ASCII only
            if page.isascii() and page.isdigit() and len(page) <= 9:
                nxt = re.sub(r"([?&])page=\d+", "", current) + f"&page={int(page)}"
        if nxt is None:
            return None
        parts = urlsplit(nxt)
        if (parts.scheme, parts.hostname, parts.port) != self._origin:
            # The token goes with every request: never to another origin than the API's own.
            raise AnswerUnusable(f"the next-page link leaves the API ({redact(nxt)!r})")
        return nxt

    def whoami(self) -> str | None:
        """The account the token belongs to (GitLab `GET /user` username, GitHub `GET /user` login), or
        None where the forge does not say: GitHub answers 403 to an Actions or App installation token."""
        url = f"{self._base}/user"
        try:
            answer = self._request("GET", url)
        except ForgeError as exc:
            if isinstance(exc, TokenRefused) and self.target.forge is Forge.GITHUB and "HTTP 403" in exc.message:
                return None
            raise
        doc = _json(answer.data, url)
        name = doc.get("username" if self.target.forge is Forge.GITLAB else "login") if isinstance(doc, dict) else None
        return name if isinstance(name, str) and name else None

    def find(self, key: str, *, author: str | None = None) -> int | None:
        """The id of the newest comment that starts with `key`'s marker (by `author` when given)."""
        mark = marker(key)
        found: int | None = None
        for item in self.comments():
            if item.get("system") is True:  # GitLab system notes ("added 1 commit")
                continue
            body = item.get("body")
            if not isinstance(body, str) or not body.lstrip().startswith(mark):
                continue
            if author is not None and _author(self.target.forge, item) != author:
                continue
            cid = item.get("id")
            if isinstance(cid, int) and not isinstance(cid, bool) and cid > 0:
                found = cid
        return found

    def create(self, body: str) -> int:
        answer = self._request("POST", self._collection(), {"body": body})
        return _id(answer.data, "POST")

    def update(self, comment_id: int, body: str) -> int:
        method = "PUT" if self.target.forge is Forge.GITLAB else "PATCH"
        answer = self._request(method, self._item(comment_id), {"body": body})
        return _id(answer.data, method)

    def close(self) -> None:
        self._pool.clear()


def _author(forge: Forge, item: Mapping[str, Any]) -> str | None:
    who = item.get("author" if forge is Forge.GITLAB else "user")
    if not isinstance(who, dict):
        return None
    name = who.get("username" if forge is Forge.GITLAB else "login")
    return name if isinstance(name, str) else None


def _json(data: bytes, where: str) -> Any:
    # Counted before parsing (C speed, over-counting braces inside strings): the parse is then bounded.
    if data.count(b"{") + data.count(b"[") > MAX_JSON_CONTAINERS:
        raise AnswerUnusable(f"{where}: the answer holds more than {MAX_JSON_CONTAINERS} JSON objects or arrays")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise AnswerUnusable(f"{where}: the answer is not JSON") from None


def _id(data: bytes, method: str) -> int:
    doc = _json(data, method)
    cid = doc.get("id") if isinstance(doc, dict) else None
    if not isinstance(cid, int) or isinstance(cid, bool) or cid <= 0:
        raise AnswerUnusable(f"{method}: the answer has no comment id")
    return cid


def _api_message(data: bytes) -> str:
    """The API's own short error text (GitLab `message`/`error`, GitHub `message`), one line, bounded."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return "no JSON message"
    msg = doc.get("message") or doc.get("error") if isinstance(doc, dict) else None
    text = str(msg) if msg is not None else "no message"
    return " ".join(text.split())[:200]


_DETAILS_OPEN = re.compile(r"<details\b", re.I)
_DETAILS_CLOSE = re.compile(r"</details>", re.I)


def fit(body: str, limit: int, measure: Callable[[str], int] = _chars) -> str:
    """`body` cut at a line boundary to at most `limit` (by `measure`: characters, or UTF-8 bytes), with
    open `<details>` closed and a line saying how much was cut. `migplan plan` already caps its comment;
    this is the last guard, for a body from elsewhere or a limit lower than the plan's."""
    if measure(body) <= limit:
        return body
    lines = body.split("\n")
    kept: list[str] = []
    size = 0
    reserve = 400
    for line in lines:
        if size + measure(line) + 1 > limit - reserve:
            break
        kept.append(line)
        size += measure(line) + 1
    text = "\n".join(kept)
    opened = len(_DETAILS_OPEN.findall(text)) - len(_DETAILS_CLOSE.findall(text))
    dropped = len(lines) - len(kept)
    tail = ["", "</details>"] * max(opened, 0)
    tail += ["", f"*Comment cut to fit the forge's limit: {dropped} more line(s) are in the CI job's output.*"]
    return text + "\n".join(tail) + "\n"


def post(client: ForgeClient, *, key: str, body: str, author: str | None = None) -> Posted:
    """Update migplan's comment for `key` on the merge request, or create it (see the module docstring).

    Only a comment written by the token's own account (`author`, else what the forge says) and starting
    with the marker is updated: a comment someone else writes with the marker, newer or not, is never taken
    for migplan's. When the account cannot be known, nothing is updated and a new comment is created."""
    forge = client.target.forge
    full = fit(f"{marker(key)}\n{body}", COMMENT_LIMIT[forge], MEASURE[forge])
    who = author or client.whoami()
    existing = client.find(key, author=who) if who is not None else None
    if existing is not None:
        return Posted("updated", client.update(existing, full), len(full))
    return Posted("created", client.create(full), len(full))
