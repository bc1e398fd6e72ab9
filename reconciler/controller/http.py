"""The controller's HTTP endpoints: /metrics, /healthz, /readyz and POST /webhook.

A stdlib ThreadingHTTPServer on its own thread (no web framework for four routes). Health and
readiness are callables supplied by the loop, so this module knows nothing of leases or cycles:
- /healthz: the process is alive and its loops are not stuck (liveness; failing it restarts the pod);
- /readyz: the replica can do its job (API reachable, settings loaded); a standby replica is ready —
  it serves webhooks and forwards them to the leader, and a rollout must not wait for it to lead.
Webhook bodies are capped (413 above the limit) and verified by `webhook.verify` before anything else.
A client that is slow or stops half-way cannot hold a thread: each connection has a read timeout (and
the body must arrive whole within it), and at most `max_connections` are served at once — one more is
answered 503 and closed at once, before a thread is spent on it. A connection that fails is logged at
debug level, never as a traceback on stderr.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from reconciler.controller import webhook
from reconciler.controller.metrics import CONTENT_TYPE_LATEST, ControllerMetrics
from reconciler.model.errors import MigplanError

log = logging.getLogger("migplan.http")
LISTEN_FAILED = "MP800"  # a settings error: `listen` names an address this process cannot listen on

Check = Callable[[], tuple[bool, str]]

_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"


class _BoundedServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer with a cap on concurrent connections and quiet connection errors."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any, *, max_connections: int) -> None:
        # The class attribute is AF_INET: an IPv6 literal would fail to bind as "address family" noise.
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        try:
            request.settimeout(1.0)
            request.sendall(_BUSY)
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("http connection from %s failed", client_address, exc_info=True)


class _BodyTimeout(Exception):
    pass


def _read_body(rfile: Any, length: int, *, seconds: float) -> bytes:
    """Exactly `length` bytes, all of them within `seconds` (a trickling client does not get more)."""
    ends = time.monotonic() + seconds
    chunks: list[bytes] = []
    left = length
    while left > 0:
        if time.monotonic() > ends:
            raise _BodyTimeout
        chunk = rfile.read1(min(left, 65536))
        if not chunk:
            raise _BodyTimeout  # the client closed half-way
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class ControllerHttp:
    def __init__(
        self,
        *,
        host: str,
        port: int,
        metrics: ControllerMetrics,
        healthy: Check,
        ready: Check,
        on_push: Callable[[str], None],
        secret: Callable[[], str],
        branch: str,
        max_body: int = 5 * 1024 * 1024,
        read_timeout: float = 10.0,
        max_connections: int = 64,
    ) -> None:
        class Handler(BaseHTTPRequestHandler):
            server_version = "migplan"
            sys_version = ""
            timeout = read_timeout  # socket timeout of every read (StreamRequestHandler.setup)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http %s", format % args)

            def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, metrics.render(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    ok, why = (healthy if path == "/healthz" else ready)()
                    self._send(200 if ok else 503, (why or "ok").encode() + b"\n")
                else:
                    self._send(404, b"not found\n")

            def do_POST(self) -> None:
                if self.path.split("?", 1)[0] != "/webhook":
                    self._send(404, b"not found\n")
                    return
                try:
                    length = int(self.headers.get("Content-Length") or "0")
                except ValueError:
                    length = -1
                if length < 0:
                    self._send(400, b"bad Content-Length\n")
                    return
                if length > max_body:
                    metrics.webhooks.labels("unknown", "rejected").inc()
                    self._send(413, b"payload too large\n")
                    self.close_connection = True
                    return
                try:
                    body = _read_body(self.rfile, length, seconds=read_timeout)
                except (_BodyTimeout, TimeoutError):
                    metrics.webhooks.labels("unknown", "rejected").inc()
                    self.close_connection = True  # half-sent: nothing to answer, nothing verified
                    return
                verdict = webhook.verify(dict(self.headers.items()), body, secret=secret(), branch=branch)
                metrics.webhooks.labels(verdict.provider, verdict.outcome).inc()
                log.info("webhook %s", verdict.reason, extra={"provider": verdict.provider, "status": verdict.status})
                if verdict.trigger:
                    on_push(f"webhook:{verdict.provider}")
                reply = {"status": verdict.outcome, "reason": verdict.reason}
                self._send(verdict.status, json.dumps(reply).encode(), "application/json")

        try:
            self._server = _BoundedServer((host, port), Handler, max_connections=max_connections)
        except OSError as exc:  # in use, not an address of this host, a name that does not resolve
            shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise MigplanError(f"listen: cannot listen on {shown}: {exc.strerror or exc}", code=LISTEN_FAILED) from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="migplan-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
