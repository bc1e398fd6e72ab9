"""HTTP front of the API server twin: routing, authentication, content types, lists, watches, logs, discovery.

Threaded HTTP/1.1 (keep-alive; watches are chunked streams), bound to 127.0.0.1 on a free port. Every request is
counted by (method, resource, verb) so benchmarks can prove which calls production code made. Status codes,
bodies and content types follow the real server's transcripts (errors.json): JSON `Status` 404 for unknown
resources of known groups, text/plain "404 page not found" for unknown groups and paths, 401 for a wrong bearer
token, 403 for anonymous requests beyond /version and the health endpoints, 415 for PATCH without a patch type.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
import yaml

from . import apply, discovery, eviction, fieldmanager, openapi, protobuf, rbac, tables
from .certs import TlsFiles
from .errors import (
    ApiError,
    FieldError,
    bad_request,
    invalid,
    method_not_allowed,
    resource_not_found,
    unsupported_media_type,
)
from .kinds import NODE_INFO_FIELDS
from .rbac import ServiceAccountUser
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector
from .store import Store, WatchEvent

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}
APPLY_PATCH = "application/apply-patch+yaml"
_PUBLIC_PATHS = ("/version", "/healthz", "/livez", "/readyz")
_TEXT_404 = b"404 page not found\n"
_DEFAULT_WATCH_TIMEOUT = 1800.0
# UIDs the twin's "service-accounts" FlowSchema / "workload-low" priority level answer with (fixed, made up)
PF_FLOW_SCHEMA_UID = "6a0b4e4f-6d1e-4c43-9a52-2f0a3c1b7e01"
PF_PRIORITY_LEVEL_UID = "0e4b2f5d-1c7a-4f0e-8b3d-5a9c6e2d4f02"
_DATE_TEXT: list[tuple[int, str]] = [(-1, "")]  # (whole second, its Date header text): see _Handler.date_time_string


@dataclass(frozen=True)
class RequestRecord:
    """One resource request as the authorizer would see it (for RBAC checks against deploy/'s rules)."""

    method: str
    verb: str  # get, list, watch, create, update, patch, delete, deletecollection
    group: str
    resource: str  # plural
    subresource: str
    namespace: str
    name: str
    path: str
    query: str
    authenticated: bool


class _NotFoundText(Exception):
    """Unknown path outside the API: plain-text 404 like the Go mux."""


class Route:
    """A parsed API path."""

    def __init__(self, rt: ResourceType, namespace: str | None, name: str | None, sub: str | None, watch: bool):
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.sub = sub
        self.watch = watch


def _go_json_error(exc: json.JSONDecodeError) -> str:
    """Go encoding/json wording for the two malformations clients actually produce."""
    if exc.pos >= len(exc.doc.rstrip()):
        return "unexpected end of JSON input"
    ch = exc.doc[exc.pos]
    if exc.msg.startswith("Expecting property name"):
        return f"invalid character '{ch}' looking for beginning of object key string"
    if exc.msg.startswith("Expecting value"):
        return f"invalid character '{ch}' looking for beginning of value"
    if exc.msg.startswith("Expecting ':'"):
        return f"invalid character '{ch}' after object key"
    if exc.msg.startswith("Expecting ','"):
        return f"invalid character '{ch}' after object key:value pair"
    return f"invalid character '{ch}' after top-level value"


@dataclass
class _Write:
    """What every write of one request shares: dryRun=All, fieldValidation=Strict, its body's media type, its field
    manager, and the warnings the answer carries."""

    dry_run: bool
    strict: bool
    content_type: str
    manager: str = ""
    warnings: list[str] = field(default_factory=list)


class TwinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # stop() must not wait for clients that keep idle keep-alive connections open (their threads are daemons)
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, store: Store, token: str, tls: TlsFiles | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls.server_cert, tls.server_key)
            # handshake lazily in the handler thread, so one slow client cannot stall accept()
            self.socket = ctx.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self.store = store
        self.token = token
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.sa_tokens: dict[str, ServiceAccountUser] = {}  # minted ServiceAccount tokens (RBAC-checked)
        self.log: list[RequestRecord] = []
        self.counts_lock = threading.Lock()
        self.stopping = threading.Event()
        # --max-mutating-requests-inflight (None: unlimited); see _mutating_slot
        self.mutating_slots: threading.BoundedSemaphore | None = None

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        # no Nagle: a keep-alive response must not wait for the client's delayed ACK (~40 ms per request)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (closed the connection of a watch it stopped reading) is not the server's error:
        Go's net/http drops such a connection without a word (net/http/server.go `conn.serve`); anything else is
        printed as socketserver does."""
        if isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLEOFError | ssl.SSLZeroReturnError):
            return
        super().handle_error(request, client_address)

    def count(self, method: str, resource: str, verb: str) -> None:
        with self.counts_lock:
            self.counts[(method, resource, verb)] += 1


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    _table_headers_sent = False
    # buffered writes: headers and body leave in one send(); handle_one_request flushes after each response
    wbufsize = 64 * 1024
    server: TwinHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: tests and the demo print what matters themselves

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header of every response, as BaseHTTPRequestHandler writes it, formatted once per second
        (email.utils.formatdate took some 40 us of each PATCH): it shows whole seconds, so every moment of a second
        gives the same text, except within a thousandth of the next second, where formatdate's rounding to
        microseconds may carry over: such a moment is formatted as it comes."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        now = time.time()
        second = int(now)
        if now - second >= 0.999:
            return super().date_time_string(now)
        cached_second, text = _DATE_TEXT[0]
        if cached_second != second:
            text = super().date_time_string(now)
            _DATE_TEXT[0] = (second, text)  # one tuple replaced at once: threads read either the old or the new
        return text

    # ------------------------------------------------------------ entry points

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        body = self._read_body()
        split = urlsplit(self.path)
        path = split.path
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        try:
            user = self._authenticate()
            if path in _PUBLIC_PATHS or path.startswith(("/healthz/", "/livez/", "/readyz/")):
                self._public(path)
                return
            if path.startswith(("/openapi/v2", "/openapi/v3")):
                if user is None:
                    raise self._forbidden_path(path)
                self._openapi(path)
                return
            if path in ("/api", "/api/", "/apis", "/apis/") or self._is_discovery(path):
                if user is None:
                    raise self._forbidden_path(path)
                self._discovery(path)
                return
            route = self._route(path)
            with self._mutating_slot(method, user) as admitted:
                if admitted:
                    self._serve(method, route, query, body, user)
        except _NotFoundText:
            self._send(404, _TEXT_404, "text/plain; charset=utf-8")
        except ApiError as err:
            self._send_status(err)
        except Exception as exc:  # a bug in the twin must still answer like a server, not hang the client
            self._send_status(ApiError(500, "InternalError", f"Internal error occurred: {exc!r}", {}))

    @contextlib.contextmanager
    def _mutating_slot(self, method: str, user: str | ServiceAccountUser | None) -> Iterator[bool]:
        """The max-in-flight filter for mutating resource requests (staging/src/k8s.io/apiserver/pkg/server/
        filters/maxinflight.go `WithMaxInFlightLimit`): after authentication, before authorization; a request
        that finds every slot taken is answered at once with 429, `Retry-After: 1` and the text body of
        `tooManyRequests`; system:masters (the twin's admin token) is never limited. The two
        X-Kubernetes-PF-* headers are what the Priority and Fairness filter adds to the same rejection
        (priority-and-fairness.go `setResponseHeaders`), with the twin's fixed UIDs."""
        slots = self.server.mutating_slots
        if slots is None or method in ("GET", "HEAD") or user == "admin":
            yield True
            return
        if not slots.acquire(blocking=False):
            self._send(
                429,
                b"Too many requests, please try again later.\n",
                "text/plain; charset=utf-8",
                {
                    "Retry-After": "1",
                    "X-Content-Type-Options": "nosniff",
                    "X-Kubernetes-PF-FlowSchema-UID": PF_FLOW_SCHEMA_UID,
                    "X-Kubernetes-PF-PriorityLevel-UID": PF_PRIORITY_LEVEL_UID,
                },
            )
            yield False
            return
        try:
            yield True
        finally:
            slots.release()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    # ------------------------------------------------------------ auth

    def _authenticate(self) -> str | ServiceAccountUser | None:
        """ "admin" for the twin's token (system:masters), a ServiceAccountUser for a minted token, None anonymous."""
        header = self.headers.get("Authorization")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token == self.server.token:
            return "admin"
        sa = self.server.sa_tokens.get(token) if scheme.lower() == "bearer" else None
        if sa is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        return sa

    @staticmethod
    def _forbidden_path(path: str) -> ApiError:
        return ApiError(403, "Forbidden", f'forbidden: User "system:anonymous" cannot get path "{path}"', {})

    @staticmethod
    def _forbidden(route: Route, verb: str, username: str = "system:anonymous") -> ApiError:
        rt = route.rt
        resource = rt.plural + (f"/{route.sub}" if route.sub else "")
        scope = f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
        target = f'{rt.plural} "{route.name}"' if route.name else rt.plural
        details: dict[str, Any] = {"name": route.name} if route.name else {}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        return ApiError(
            403,
            "Forbidden",
            f'{target} is forbidden: User "{username}" cannot {verb} resource "{resource}" in API group '
            f'"{rt.group}" {scope}',
            details,
        )

    # ------------------------------------------------------------ non-resource endpoints

    def _public(self, path: str) -> None:
        if path == "/version":
            self._send_json(200, discovery.VERSION_INFO)
        else:
            self._send(200, b"ok", "text/plain; charset=utf-8")

    def _openapi(self, path: str) -> None:
        # v3 only: enough for kubectl to choose server-side field validation (see openapi.py); no v2 document.
        types = self.server.store.resource_types()
        self.server.count("GET", path, "openapi")
        if path.rstrip("/") == "/openapi/v3":
            self._send_json(200, openapi.root(types))
            return
        if path.startswith("/openapi/v3/"):
            doc = openapi.group_version(types, path[len("/openapi/v3/") :].strip("/"))
            if doc is not None:
                self._send_json(200, doc)
                return
        raise _NotFoundText()

    def _is_discovery(self, path: str) -> bool:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) == 2:
            return True
        return parts[:1] == ["apis"] and len(parts) in (2, 3)

    def _discovery(self, path: str) -> None:
        store = self.server.store
        types = store.resource_types()
        parts = [p for p in path.split("/") if p]
        wants_aggregated = discovery.AGGREGATED_V2 in (self.headers.get("Accept") or "").replace(" ", "")
        self.server.count("GET", path, "discovery")
        if parts == ["api"]:
            if wants_aggregated:
                self._send_json(200, discovery.aggregated(types, core=True), discovery.AGGREGATED_V2)
            else:
                host = f"127.0.0.1:{self.server.server_address[1]}"
                self._send_json(200, discovery.api_versions(host))
            return
        if parts == ["apis"]:
            if wants_aggregated:
                self._send_json(200, discovery.aggregated(types, core=False), discovery.AGGREGATED_V2)
            else:
                self._send_json(200, discovery.api_group_list(types))
            return
        if parts[0] == "api":
            doc = discovery.api_resource_list(types, "", parts[1]) if parts[1] == "v1" else None
        elif len(parts) == 2:
            doc = discovery.api_group(types, parts[1])
        else:
            doc = discovery.api_resource_list(types, parts[1], parts[2])
        if doc is None:
            raise _NotFoundText()
        self._send_json(200, doc)

    # ------------------------------------------------------------ routing

    def _route(self, path: str) -> Route:
        parts = [unquote(p) for p in path.split("/") if p]
        store = self.server.store
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
            json_404 = True
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
            known = [t for t in store.resource_types() if t.group == group and t.version == version]
            if not known:
                raise _NotFoundText()
            json_404 = not known[0].is_custom
        else:
            raise _NotFoundText()

        def missing() -> Exception:
            return resource_not_found() if json_404 else _NotFoundText()

        watch = False
        if rest[:1] == ["watch"]:
            watch, rest = True, rest[1:]
        if not rest:
            raise missing()
        namespace = None
        # /namespaces/NS/<plural>/... is a namespaced path; /namespaces/NAME/status is the Namespace's subresource
        if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        rt = store.find_type(group, version, plural)
        if rt is None or (namespace is not None and not rt.namespaced):
            raise missing()
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) >= 3 else None
        if len(rest) > 3 or (sub is not None and sub not in rt.subresources):
            raise missing()
        return Route(rt, namespace, name, sub, watch)

    # ------------------------------------------------------------ resources

    def _serve(
        self, method: str, route: Route, query: dict[str, str], body: bytes, user: str | ServiceAccountUser | None
    ) -> None:
        """One request after routing: record it, authorize it, then hand it to its verb's handler."""
        verb = self._verb(method, route, query)
        self._record(method, route, verb, user)
        self._authorize(route, verb, user)
        rt = route.rt
        if rt.group == "authorization.k8s.io":
            if verb != "create":
                raise method_not_allowed()
            self._access_review(rt, self._decode_object(rt, body), user)
            return
        if verb in ("list", "watch"):
            self._list_or_watch(route, query, verb == "watch")
            return
        if verb == "get":
            self._get(route, query)
            return
        if verb == "create" and route.sub == "binding":
            self._bind(route, body)
            return
        write = _Write(
            dry_run=query.get("dryRun") == "All",
            strict=query.get("fieldValidation") == "Strict",
            content_type=(self.headers.get("Content-Type") or "").split(";")[0].strip(),
        )
        if verb in ("create", "update", "patch"):
            agent = self.headers.get("User-Agent") or ""
            write.manager = fieldmanager.request_manager(query, agent, verb, applying=write.content_type == APPLY_PATCH)
        if verb == "create":
            self._create(route, body, write)
        elif verb == "update":
            self._update(route, body, write)
        elif verb == "patch":
            self._patch(route, query, body, write)
        elif verb == "delete":
            self._delete(route, query, body, write)
        elif verb == "deletecollection":
            self._delete_collection(route, query, write)
        else:
            raise method_not_allowed()

    def _record(self, method: str, route: Route, verb: str, user: str | ServiceAccountUser | None) -> None:
        """Count the request and append it to the request log (what tests and benchmarks read back)."""
        rt = route.rt
        self.server.count(method, rt.key + (f"/{route.sub}" if route.sub else ""), verb)
        url = urlsplit(self.path)
        record = RequestRecord(
            method,
            verb,
            rt.group,
            rt.plural,
            route.sub or "",
            route.namespace or "",
            route.name or "",
            url.path,
            url.query,
            user is not None,
        )
        with self.server.counts_lock:
            self.server.log.append(record)

    def _authorize(self, route: Route, verb: str, user: str | ServiceAccountUser | None) -> None:
        """Anonymous requests are refused; a service account goes through RBAC, except to review its own access
        (system:basic-user lets everyone do that)."""
        if user is None:
            raise self._forbidden(route, verb)
        self_review = route.rt.key == "selfsubjectaccessreviews.authorization.k8s.io"
        attrs = rbac.Attributes(
            verb, route.rt.group, route.rt.plural, route.sub or "", route.namespace or "", route.name or ""
        )
        if isinstance(user, ServiceAccountUser) and not self_review and not self._rbac_allows(user, attrs):
            raise self._forbidden(route, verb, user.username)

    def _get(self, route: Route, query: dict[str, str]) -> None:
        """One object (as JSON, or as a Table row for kubectl), or a pod's log."""
        store, rt = self.server.store, route.rt
        if route.sub == "log":
            tail = self._int_param(query["tailLines"]) if query.get("tailLines") else None
            text = store.pod_log(
                route.namespace or "", route.name or "", query.get("container") or None, tail, strict=True
            )
            self._send(200, text.encode(), "text/plain")
            return
        raw = store.get_bytes(rt.key, route.name or "", route.namespace)
        if self._wants_table():
            obj = orjson.loads(raw)
            self._send_json(200, tables.table(rt, [obj], str(store.resource_version), single=True))
            return
        self._send(200, raw, "application/json")

    def _bind(self, route: Route, body: bytes) -> None:
        """pods/binding: the scheduler's write of a pod's node."""
        binding = self._decode_object(route.rt, body, kind="Binding")
        target = (binding.get("target") or {}).get("name")
        if not target:
            raise invalid("Binding", "", route.name or "", [FieldError("Required", "target.name")])
        annotations = (binding.get("metadata") or {}).get("annotations")
        self.server.store.bind(route.namespace or "", route.name or "", target, annotations=annotations)
        self._send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})

    def _create(self, route: Route, body: bytes, write: _Write) -> None:
        """A create, or pods/eviction (a create of an Eviction)."""
        store, rt = self.server.store, route.rt
        if route.sub == "eviction":
            doc = self._decode_object(rt, body, kind="Eviction")
            self._send_json(
                201, eviction.evict(store, route.namespace or "", route.name or "", doc, dry_run=write.dry_run)
            )
            return
        created = store.create(
            rt.key,
            self._decode_object(rt, body),
            route.namespace,
            dry_run=write.dry_run,
            strict=write.strict,
            warnings=write.warnings,
            field_manager=write.manager,
        )
        self._send_object(201, rt, created, write.warnings)

    def _update(self, route: Route, body: bytes, write: _Write) -> None:
        rt = route.rt
        updated = self.server.store.update(
            rt.key,
            self._decode_object(rt, body),
            route.namespace,
            subresource=route.sub,
            name=route.name,
            dry_run=write.dry_run,
            strict=write.strict,
            warnings=write.warnings,
            field_manager=write.manager,
        )
        self._send_object(200, rt, updated, write.warnings)

    def _patch(self, route: Route, query: dict[str, str], body: bytes, write: _Write) -> None:
        """A server-side apply, or a JSON, merge or strategic merge patch (the last not for custom resources)."""
        store, rt, ctype = self.server.store, route.rt, write.content_type
        if ctype == APPLY_PATCH:
            applied, was_created = store.apply(
                rt.key,
                route.name or "",
                apply.decode_config(body),
                route.namespace,
                field_manager=write.manager,
                force=fieldmanager.force_option(query),
                subresource=route.sub,
                dry_run=write.dry_run,
                strict=write.strict,
                warnings=write.warnings,
            )
            self._send_object(201 if was_created else 200, rt, applied, write.warnings)
            return
        if ctype == "application/strategic-merge-patch+json" and rt.is_custom:
            raise unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            )
        if ctype not in PATCH_TYPES:
            raise unsupported_media_type()
        try:
            patch = json.loads(body or b"null")
        except json.JSONDecodeError as exc:
            raise bad_request(f"error decoding patch: {_go_json_error(exc)}") from exc
        patched = store.patch(
            rt.key,
            route.name or "",
            patch,
            route.namespace,
            patch_type=PATCH_TYPES[ctype],
            subresource=route.sub,
            dry_run=write.dry_run,
            strict=write.strict,
            warnings=write.warnings,
            field_manager=write.manager,
        )
        self._send_object(200, rt, patched, write.warnings)

    def _delete(self, route: Route, query: dict[str, str], body: bytes, write: _Write) -> None:
        """A delete, with its options from the query or the body (DeleteOptions); pods and namespaces answer with
        the object (it may stay, terminating), other kinds with a Status."""
        rt = route.rt
        grace = query.get("gracePeriodSeconds")
        options: dict[str, Any] = {}
        if body.strip():
            try:
                options = json.loads(body)
            except json.JSONDecodeError as exc:
                raise bad_request(f"error decoding delete options: {_go_json_error(exc)}") from exc
        if grace is None and options.get("gracePeriodSeconds") is not None:
            grace = str(options["gracePeriodSeconds"])
        grace_s = self._int_param(grace) if grace is not None else None
        gone = self.server.store.delete(
            rt.key,
            route.name or "",
            route.namespace,
            grace_period_seconds=grace_s,
            dry_run=write.dry_run or options.get("dryRun") == ["All"],
            preconditions=options.get("preconditions"),
        )
        if rt.key == "pods" or rt.key == "namespaces":
            self._send_object(200, rt, gone, [])
            return
        details: dict[str, Any] = {"name": route.name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details["uid"] = gone.get("metadata", {}).get("uid", "")
        self._send_json(
            200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
        )

    def _delete_collection(self, route: Route, query: dict[str, str], write: _Write) -> None:
        store, rt = self.server.store, route.rt
        page = store.list(rt.key, route.namespace, query.get("labelSelector"), query.get("fieldSelector"))
        for obj in page:
            meta = obj["metadata"]
            store.delete(rt.key, meta["name"], meta.get("namespace"), grace_period_seconds=0, dry_run=write.dry_run)
        self._send_list(rt, [store.object_bytes(rt, o) for o in page], store.resource_version, None, None)

    def _access_review(self, rt: ResourceType, review: dict[str, Any], user: str | ServiceAccountUser | None) -> None:
        """SelfSubjectAccessReview / SubjectAccessReview: answer `status.allowed` for resource attributes."""
        spec = review.get("spec") or {}
        res = spec.get("resourceAttributes") or {}
        if rt.kind == "SubjectAccessReview":
            name = spec.get("user", "")
            parts = name.split(":")
            if "system:masters" in (spec.get("groups") or []):
                subject: str | ServiceAccountUser | None = "admin"
            elif len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
                subject = ServiceAccountUser(parts[2], parts[3])
            else:
                subject = None  # other users: no bindings modelled (ASSUMPTIONS.md)
        else:
            subject = user
        if subject == "admin":
            allowed = True
        elif isinstance(subject, ServiceAccountUser) and res:
            allowed = self._rbac_allows(
                subject,
                rbac.Attributes(
                    res.get("verb", ""),
                    res.get("group", ""),
                    res.get("resource", ""),
                    res.get("subresource", ""),
                    res.get("namespace", ""),
                    res.get("name", ""),
                ),
            )
        else:
            allowed = False
        out = {
            "kind": rt.kind,
            "apiVersion": rt.api_version,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": {"allowed": allowed},
        }
        self._send_json(201, out)

    def _rbac_allows(self, user: ServiceAccountUser, attrs: rbac.Attributes) -> bool:
        store = self.server.store
        return rbac.authorize(
            store.list("roles.rbac.authorization.k8s.io"),
            store.list("clusterroles.rbac.authorization.k8s.io"),
            store.list("rolebindings.rbac.authorization.k8s.io"),
            store.list("clusterrolebindings.rbac.authorization.k8s.io"),
            user,
            attrs,
        )

    def _verb(self, method: str, route: Route, query: dict[str, str]) -> str:
        watch = route.watch or query.get("watch") in ("1", "true", "True")
        if route.sub == "log":
            if method != "GET":
                raise method_not_allowed()
            return "get"
        if route.sub in ("binding", "eviction"):  # create-only subresources (eviction: EvictionREST.Create)
            if method != "POST" or route.name is None:
                raise method_not_allowed()
            return "create"
        if route.name is None:
            table = {"GET": "watch" if watch else "list", "POST": "create", "DELETE": "deletecollection"}
        else:
            table = {"GET": "watch" if watch else "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
            if route.sub:
                table.pop("DELETE")
        verb = table.get(method)
        if verb is None:
            raise method_not_allowed()
        return verb

    @staticmethod
    def _int_param(text: str) -> int:
        try:
            return int(text)
        except ValueError as exc:
            raise bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from exc

    def _decode_object(self, rt: ResourceType, body: bytes, kind: str | None = None) -> dict[str, Any]:
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype == protobuf.CONTENT_TYPE and rt.kind in protobuf.DECODERS:
            try:
                return protobuf.decode(body)
            except (protobuf.ProtobufError, UnicodeDecodeError) as exc:
                raise bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): {exc}") from exc
        if ctype not in ("application/json", "application/yaml", "application/x-yaml", "*/*", ""):
            # e.g. protobuf or CBOR from typed Go clients (kubectl create configmap): the twin speaks JSON only;
            # client-go then retries the request as JSON, as it does with any server that answers 415
            raise unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json, application/yaml"
            )
        text = body.decode("utf-8", errors="replace")
        try:
            if ctype in ("application/yaml", "application/x-yaml"):
                obj = yaml.load(text, Loader=yaml.CSafeLoader)
            else:
                obj = json.loads(text)
        except json.JSONDecodeError as exc:
            snippet = text if len(text) <= 30 else text[:30] + " ..."
            raise bad_request(
                f"the object provided is unrecognized (must be of type {kind or rt.kind}): couldn't get version/kind; "
                f"json parse error: {_go_json_error(exc)} ({snippet})"
            ) from exc
        except yaml.YAMLError as exc:
            raise bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): {exc}") from exc
        if not isinstance(obj, dict):
            raise bad_request(f"the object provided is unrecognized (must be of type {rt.kind})")
        return obj

    # ------------------------------------------------------------ lists and watches

    def _wants_table(self) -> bool:
        return "as=Table" in (self.headers.get("Accept") or "")

    def _list_or_watch(self, route: Route, query: dict[str, str], watch: bool) -> None:
        rt = route.rt
        store = self.server.store
        field_selector = query.get("fieldSelector")
        if route.name is not None:  # /watch/.../name: a watch on one object
            field_selector = ",".join(filter(None, [field_selector, f"metadata.name={route.name}"]))
        limit = self._int_param(query["limit"]) if query.get("limit") else 0
        timeout = self._int_param(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        if watch:
            self._watch(route, query, field_selector, timeout)
            return
        page = store.list_page(
            rt.key,
            route.namespace,
            query.get("labelSelector"),
            field_selector,
            limit=limit,
            continue_token=query.get("continue") or None,
            resource_version=query.get("resourceVersion"),
            resource_version_match=query.get("resourceVersionMatch"),
        )
        if self._wants_table():
            objs = [orjson.loads(i) for i in page.items]
            doc = tables.table(rt, objs, str(page.resource_version), single=False)
            if page.continue_token:
                doc["metadata"]["continue"] = page.continue_token
            self._send_json(200, doc)
            return
        self._send_list(rt, page.items, page.resource_version, page.continue_token, page.remaining)

    def _send_list(
        self, rt: ResourceType, items: list[bytes], rv: int, token: str | None, remaining: int | None
    ) -> None:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        head = orjson.dumps({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta})
        body = b"".join((head[:-1], b',"items":[', b",".join(items), b"]}"))
        self._send(200, body, "application/json")

    def _watch(self, route: Route, query: dict[str, str], field_selector: str | None, timeout: int | None) -> None:
        rt = route.rt
        store = self.server.store
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(field_selector, rt.field_selectors, rt.field_aliases)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        rv_text = query.get("resourceVersion") or ""
        initial: list[dict[str, Any]] = []
        self._table_headers_sent = False
        # WatchList (client-go informers, kubectl wait / rollout status): the current state as ADDED events, then a
        # BOOKMARK annotated k8s.io/initial-events-end, then the live events
        send_initial = query.get("sendInitialEvents") == "true"
        if rv_text in ("", "0") or send_initial:
            objs, start_rv = store.snapshot(rt.key, route.namespace)
            initial = [o for o in objs if store.matches(rt, o, labels, fields)]
        else:
            start_rv = self._int_param(rv_text)
        deadline = time.monotonic() + (timeout if timeout is not None else _DEFAULT_WATCH_TIMEOUT)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()  # the client sees the 200 at once, before any event
        try:
            for obj in initial:
                self._chunk(self._event_bytes(rt, "ADDED", obj))
            if send_initial and bookmarks:
                end = self._bookmark(rt, start_rv)
                end["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
                self._chunk(orjson.dumps({"type": "BOOKMARK", "object": end}) + b"\n")
            last = start_rv
            next_bookmark = min(deadline - 2, time.monotonic() + 60)
            while not self.server.stopping.is_set():
                try:
                    events, current = store.events_since(store._storage_key(rt), last)
                except ApiError as err:
                    self._chunk(orjson.dumps({"type": "ERROR", "object": err.status()}) + b"\n")
                    break
                for ev in events:
                    kind = self._event_type(route, rt, ev, labels, fields)
                    if kind == "DELETED" and ev.type == "MODIFIED" and ev.prev is not None:
                        # left the selector: the cacher sends the previous state at the new resourceVersion
                        gone = dict(ev.prev, metadata={**ev.prev["metadata"], "resourceVersion": str(ev.rv)})
                        self._chunk(self._event_bytes(rt, kind, gone))
                    elif kind is not None:
                        self._chunk(self._event_bytes(rt, kind, ev.obj))
                last = max(last, current)
                now = time.monotonic()
                if bookmarks and now >= next_bookmark:
                    mark = self._bookmark(rt, last)
                    self._chunk(orjson.dumps({"type": "BOOKMARK", "object": mark}) + b"\n")
                    next_bookmark = now + 60
                if now >= deadline:
                    break
                store.wait_for_events(last, min(deadline - now, max(next_bookmark - now, 0.05), 1.0))
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, TimeoutError, OSError):
            self.close_connection = True

    @staticmethod
    def _bookmark(rt: ResourceType, rv: int) -> dict[str, Any]:
        """An otherwise empty object of the watched kind carrying only the resourceVersion (watch.json)."""
        mark: dict[str, Any] = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(rv)}}
        if rt.key == "nodes":  # an empty Node still serialises its zero-valued status structs
            mark["spec"] = {}
            mark["status"] = {
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                "nodeInfo": dict.fromkeys(NODE_INFO_FIELDS, ""),
            }
        return mark

    def _event_type(self, route: Route, rt: ResourceType, ev: WatchEvent, labels: Any, fields: Any) -> str | None:
        """The event a filtered watch sends: an object entering the selector is ADDED, leaving it DELETED."""
        if route.namespace and ev.namespace != route.namespace:
            return None
        store = self.server.store
        now = store.matches(rt, ev.obj, labels, fields)
        if ev.type != "MODIFIED" or ev.prev is None:
            return ev.type if now else None
        before = store.matches(rt, ev.prev, labels, fields)
        if now and before:
            return "MODIFIED"
        if now:
            return "ADDED"
        return "DELETED" if before else None

    def _event_bytes(self, rt: ResourceType, event_type: str, obj: dict[str, Any]) -> bytes:
        view = self.server.store.view(rt, obj)
        if self._wants_table():  # kubectl get -w: every event's object is a one-row Table
            doc = tables.table(
                rt,
                [view],
                view["metadata"].get("resourceVersion", ""),
                single=True,
                headers=not self._table_headers_sent,
            )
            self._table_headers_sent = True
            return orjson.dumps({"type": event_type, "object": doc}) + b"\n"
        raw = self.server.store.object_bytes(rt, view)
        return b'{"type":"' + event_type.encode() + b'","object":' + raw + b"}\n"

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # ------------------------------------------------------------ responses

    def _send_object(self, code: int, rt: ResourceType, obj: dict[str, Any], warnings: list[str]) -> None:
        extra = {"Warning": ", ".join(f'299 - "{w.replace(chr(34), chr(92) + chr(34))}"' for w in warnings)}
        self._send(code, self.server.store.object_bytes(rt, obj), "application/json", extra if warnings else None)

    def _send_status(self, err: ApiError) -> None:
        self._send_json(err.code, err.status())

    def _send_json(self, code: int, doc: Any, content_type: str = "application/json") -> None:
        self._send(code, orjson.dumps(doc), content_type)

    def _send(self, code: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
