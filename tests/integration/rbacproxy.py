"""An RBAC-enforcing, request-recording HTTP proxy in front of the API server twin (test helper).

The twin does not authorize requests, so the tests put this proxy between migplan and the twin: it turns
each request into Kubernetes authorization attributes (verb, API group, resource, subresource, namespace,
name — as the real apiserver's RequestInfoFactory does), records them, and checks them against the RBAC
objects of deploy/ for one ServiceAccount, the way the RBAC authorizer does (ClusterRoles through
ClusterRoleBindings anywhere; Roles — or ClusterRoles — through RoleBindings in their namespace; verbs,
apiGroups, resources `res/sub`, resourceNames, `*`). A denied request gets a 403 `Status` shaped like the
real server's, and never reaches the twin.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from httpforward import forward


@dataclass(frozen=True, slots=True)
class Attributes:
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str

    def __str__(self) -> str:
        res = self.resource + (f"/{self.subresource}" if self.subresource else "")
        grp = self.group or "core"
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {grp}/{res}{where}"


def attributes(method: str, raw_path: str) -> Attributes | None:
    """Authorization attributes of a resource request; None for non-resource paths (/version, /api, /apis)."""
    parsed = urllib.parse.urlsplit(raw_path)
    query = urllib.parse.parse_qs(parsed.query)
    parts = [p for p in parsed.path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return None
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        if len(parts) < 3:
            return None
        group, rest = parts[1], parts[3:]
    if not rest:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if resource == "namespaces" and len(rest) == 2 and namespace:
        resource, name = "namespaces", namespace
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete" if name else "deletecollection"}
    if method == "GET":
        verb = "watch" if query.get("watch", ["false"])[0] in ("true", "1") else "get" if name else "list"
    else:
        verb = verbs.get(method, method.lower())
    return Attributes(verb, group, resource, sub, namespace, name)


def _matches(rule: Mapping[str, Any], a: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and a.verb not in verbs:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and a.group not in groups:
        return False
    res = a.resource + (f"/{a.subresource}" if a.subresource else "")
    resources = rule.get("resources") or []
    if "*" not in resources and res not in resources:
        return False
    names = rule.get("resourceNames") or []
    return not names or a.name in names


class Authorizer:
    """RBAC rules of a set of manifests, for one subject (a ServiceAccount)."""

    def __init__(self, docs: Iterable[Mapping[str, Any]], *, sa_namespace: str, sa_name: str) -> None:
        docs = [d for d in docs if isinstance(d, Mapping)]
        cluster_roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
        roles = {
            (d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs if d.get("kind") == "Role"
        }
        self.cluster_rules: list[Mapping[str, Any]] = []
        self.namespaced_rules: dict[str, list[Mapping[str, Any]]] = {}

        def subject_matches(binding: Mapping[str, Any]) -> bool:
            return any(
                s.get("kind") == "ServiceAccount" and s.get("name") == sa_name and s.get("namespace") == sa_namespace
                for s in binding.get("subjects") or []
            )

        for d in docs:
            if d.get("kind") not in ("ClusterRoleBinding", "RoleBinding") or not subject_matches(d):
                continue
            ref = d["roleRef"]
            if ref["kind"] == "ClusterRole":
                rules = cluster_roles.get(ref["name"], {}).get("rules") or []
            else:
                rules = roles.get((d["metadata"].get("namespace", ""), ref["name"]), {}).get("rules") or []
            if d["kind"] == "ClusterRoleBinding":
                self.cluster_rules.extend(rules)
            else:
                self.namespaced_rules.setdefault(d["metadata"].get("namespace", ""), []).extend(rules)

    def allowed(self, a: Attributes) -> bool:
        if any(_matches(r, a) for r in self.cluster_rules):
            return True
        return bool(a.namespace) and any(_matches(r, a) for r in self.namespaced_rules.get(a.namespace, []))


def forbidden_status(a: Attributes, user: str) -> dict[str, Any]:
    """The 403 body the real RBAC authorizer sends."""
    res = a.resource + (f"/{a.subresource}" if a.subresource else "")
    scope = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    subject = f'{res} "{a.name}"' if a.name else res
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{subject} is forbidden: User "{user}" cannot {a.verb} resource "{res}" '
        f'in API group "{a.group}" {scope}',
        "reason": "Forbidden",
        "details": {"name": a.name, "group": a.group, "kind": a.resource}
        if a.name
        else {"group": a.group, "kind": a.resource},
        "code": 403,
    }


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # clients closing keep-alive connections at shutdown are not errors worth printing


class RbacProxy:
    """http://127.0.0.1:<port> → the twin's plain-HTTP URL, enforcing `authorizer` (None: record only)."""

    def __init__(self, upstream_port: int, *, authorizer: Authorizer | None, user: str) -> None:
        self.authorizer = authorizer
        self.user = user
        self.seen: list[Attributes] = []
        self.calls: list[tuple[Attributes, bool]] = []  # (attributes, dryRun=All) of every resource request
        self.denied: list[Attributes] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                attrs = attributes(self.command, self.path)
                if attrs is not None:
                    dry = "dryRun=All" in urllib.parse.urlsplit(self.path).query
                    with proxy._lock:
                        proxy.seen.append(attrs)
                        proxy.calls.append((attrs, dry))
                    if proxy.authorizer is not None and not proxy.authorizer.allowed(attrs):
                        with proxy._lock:
                            proxy.denied.append(attrs)
                        data = json.dumps(forbidden_status(attrs, proxy.user)).encode()
                        self.send_response(403)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return
                forward(self, "127.0.0.1", upstream_port, body, timeout=60)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RbacProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def distinct(self) -> list[Attributes]:
        with self._lock:
            return sorted(
                {Attributes(a.verb, a.group, a.resource, a.subresource, a.namespace, "") for a in self.seen},
                key=str,
            )
