"""Fake GitLab and GitHub REST APIs on 127.0.0.1, shaped like the real ones, for `migplan post-comment`.

Only the calls a merge-request bot makes, with the real paths, verbs, status codes, error bodies and
pagination:
- GitLab v4 (docs.gitlab.com/api/notes): `GET|POST /api/v4/projects/:id/merge_requests/:iid/notes`,
  `PUT .../notes/:note_id`; `PRIVATE-TOKEN` header; a missing or unknown token is 401
  `{"message": "401 Unauthorized"}`, a token without the role 403 `{"message": "403 Forbidden"}`, an
  unknown project or MR 404 `{"message": "404 Not found"}`; offset pagination with `per_page`/`page`,
  `Link` (rel next/first/last), `X-Next-Page`, `X-Page`, `X-Per-Page`, `X-Total`; notes carry `id`,
  `body`, `author.username`, `system`. Editing another user's note is 403.
- GitHub (docs.github.com/rest/issues/comments): `GET|POST /repos/{o}/{r}/issues/{n}/comments`,
  `PATCH /repos/{o}/{r}/issues/comments/{id}`; `Authorization: Bearer|token`; no token 401
  `{"message": "Requires authentication"}`, a wrong one 401 `{"message": "Bad credentials"}`, one
  without the permission 403 `{"message": "Resource not accessible by integration"}`; `per_page`
  (max 100) / `page` with a `Link` header; comments carry `id`, `body`, `user.login`.
`GET /api/v4/user` (GitLab) answers the token's user; GitHub's `GET /user` answers 403 "Resource not
accessible by integration" to an Actions/App installation token and the login to a personal one.
`fail_next` makes the next requests answer a given status (502, 429, ...) to test retries; `requests`
logs every call (method, path, the headers' names) so tests can count and check them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Logged:
    method: str
    path: str
    header_names: tuple[str, ...]
    raw_headers: str
    body: bytes


@dataclass
class FakeForge:
    kind: str  # "gitlab" | "github"
    tokens: dict[str, str] = field(default_factory=dict)  # token -> username
    readonly_tokens: set[str] = field(default_factory=set)  # known, but not allowed to write (403)
    user_tokens: set[str] = field(default_factory=set)  # GitHub: personal tokens, which may read GET /user
    forbidden_tokens: set[str] = field(default_factory=set)  # known, refused even for reading (403)
    # tokens of accounts with write access to the repository, which GitHub lets edit anyone's comment
    # ("Anyone with write access to a repository can edit comments on issues, pull requests, and commits")
    moderator_tokens: set[str] = field(default_factory=set)
    projects: dict[str, int] = field(default_factory=dict)  # project key -> merge request / PR number
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    fail_next: list[int] = field(default_factory=list)
    # the next answers, verbatim: (status, headers, body), for answers no real forge should give
    answer_next: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    requests: list[Logged] = field(default_factory=list)
    max_per_page: int = 100
    next_id: int = 1000
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}" + ("/api/v4" if self.kind == "gitlab" else "")

    def add(self, body: str, author: str, *, system: bool = False) -> int:
        with self.lock:
            self.next_id += 1
            cid = self.next_id
            self.comments[cid] = {"id": cid, "body": body, "author": author, "system": system}
            return cid

    def _shape(self, c: dict[str, Any]) -> dict[str, Any]:
        if self.kind == "gitlab":
            author = {"id": 1, "username": c["author"]}
            return {"id": c["id"], "type": None, "body": c["body"], "author": author, "system": c["system"],
                    "noteable_type": "MergeRequest", "created_at": "2026-12-03T08:00:00Z"}  # fmt: skip
        return {"id": c["id"], "node_id": "IC_x", "body": c["body"], "user": {"login": c["author"], "id": 1},
                "html_url": f"https://github.example/c/{c['id']}", "created_at": "2026-12-03T08:00:00Z"}  # fmt: skip


_GL_COLLECTION = re.compile(r"^/api/v4/projects/([^/]+)/merge_requests/(\d+)/notes$")
_GL_ITEM = re.compile(r"^/api/v4/projects/([^/]+)/merge_requests/(\d+)/notes/(\d+)$")
_GH_COLLECTION = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$")
_GH_ITEM = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/comments/(\d+)$")


def _handler(forge: FakeForge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _user(self) -> tuple[str | None, str | None]:
            if forge.kind == "gitlab":
                token = self.headers.get("PRIVATE-TOKEN")
            else:
                auth = self.headers.get("Authorization", "")
                scheme, _, token = auth.partition(" ")
                token = token if scheme.lower() in ("bearer", "token") else None
            return token, forge.tokens.get(token or "")

        def _unauthorized(self, token: str | None) -> None:
            if forge.kind == "gitlab":
                self._send(401, {"message": "401 Unauthorized"})
            elif not token:
                self._send(401, {"message": "Requires authentication", "documentation_url": "https://docs"})
            else:
                self._send(401, {"message": "Bad credentials", "documentation_url": "https://docs"})

        def _forbidden(self) -> None:
            if forge.kind == "gitlab":
                self._send(403, {"message": "403 Forbidden"})
            else:
                self._send(403, {"message": "Resource not accessible by integration"})

        def _not_found(self) -> None:
            self._send(404, {"message": "404 Not found" if forge.kind == "gitlab" else "Not Found"})

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            url = urlsplit(self.path)
            forge.requests.append(Logged(method, url.path, tuple(self.headers.keys()), str(self.headers), body))
            with forge.lock:
                fail = forge.fail_next.pop(0) if forge.fail_next else None
            if fail is not None:
                self._send(fail, {"message": f"{fail} injected"})
                return
            with forge.lock:
                verbatim = forge.answer_next.pop(0) if forge.answer_next else None
            if verbatim is not None:
                status, headers, data = verbatim
                self.send_response(status)
                for k, v in {"Content-Length": str(len(data)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                return
            token, user = self._user()
            if user is None and token not in forge.readonly_tokens | forge.forbidden_tokens:
                self._unauthorized(token)
                return
            if token in forge.forbidden_tokens or (method != "GET" and token in forge.readonly_tokens):
                self._forbidden()
                return
            user = user or "reader"
            if method == "GET" and url.path == ("/api/v4/user" if forge.kind == "gitlab" else "/user"):
                if forge.kind == "github" and token not in forge.user_tokens:
                    self._forbidden()  # an Actions/App installation token may not read /user
                    return
                self._send(200, {"id": 1, "username": user} if forge.kind == "gitlab" else {"id": 1, "login": user})
                return
            if forge.kind == "gitlab":
                coll, item = _GL_COLLECTION.match(url.path), _GL_ITEM.match(url.path)
                key_of = lambda m: unquote(m.group(1))  # noqa: E731
                verb_update = "PUT"
            else:
                coll, item = _GH_COLLECTION.match(url.path), _GH_ITEM.match(url.path)
                key_of = lambda m: f"{m.group(1)}/{m.group(2)}"  # noqa: E731
                verb_update = "PATCH"
            if coll is not None:
                if forge.projects.get(key_of(coll)) != int(coll.group(3 if forge.kind == "github" else 2)):
                    self._not_found()
                    return
                if method == "GET":
                    self._list(url.query, url.path)
                    return
                if method == "POST":
                    doc = json.loads(body or b"{}")
                    if not isinstance(doc.get("body"), str) or not doc["body"]:
                        self._send(400 if forge.kind == "gitlab" else 422, {"message": "body is missing"})
                        return
                    cid = forge.add(doc["body"], user)
                    self._send(201, forge._shape(forge.comments[cid]))
                    return
            if item is not None and method == verb_update:
                if forge.kind == "gitlab" and forge.projects.get(key_of(item)) != int(item.group(2)):
                    self._not_found()
                    return
                cid = int(item.group(3))
                c = forge.comments.get(cid)
                if c is None:
                    self._not_found()
                    return
                if c["author"] != user and token not in forge.moderator_tokens:
                    self._forbidden()
                    return
                c["body"] = json.loads(body)["body"]
                self._send(200, forge._shape(c))
                return
            self._not_found()

        def _list(self, query: str, path: str) -> None:
            q = parse_qs(query)
            per_page = min(int(q.get("per_page", ["20" if forge.kind == "gitlab" else "30"])[0]), forge.max_per_page)
            page = int(q.get("page", ["1"])[0])
            items = sorted(forge.comments.values(), key=lambda c: c["id"])
            if forge.kind == "github":
                items = [c for c in items if not c["system"]]
            chunk = items[(page - 1) * per_page : page * per_page]
            last = max(1, -(-len(items) // per_page))
            base = f"http://127.0.0.1:{forge.port}{path}?per_page={per_page}"
            links = []
            headers: dict[str, str] = {}
            if page < last:
                links.append(f'<{base}&page={page + 1}>; rel="next"')
            links += [f'<{base}&page=1>; rel="first"', f'<{base}&page={last}>; rel="last"']
            headers["Link"] = ", ".join(links)
            if forge.kind == "gitlab":
                headers |= {"X-Page": str(page), "X-Per-Page": str(per_page), "X-Total": str(len(items)),
                            "X-Next-Page": str(page + 1) if page < last else ""}  # fmt: skip
            self._send(200, [forge._shape(c) for c in chunk], headers)

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PUT(self) -> None:
            self._handle("PUT")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    return Handler


@contextmanager
def serve(forge: FakeForge) -> Iterator[FakeForge]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(forge))
    server.daemon_threads = True
    forge.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, name=f"fake-{forge.kind}", daemon=True)
    thread.start()
    try:
        yield forge
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
