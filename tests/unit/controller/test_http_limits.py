"""The controller's HTTP server cannot be held: a half-sent or idle request is dropped after the read
timeout, and connections beyond the cap are answered 503 at once instead of each taking a thread."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from reconciler.controller.http import ControllerHttp
from reconciler.controller.metrics import ControllerMetrics

READ_TIMEOUT = 0.5
GUARD = 10.0  # the client's own socket timeout: a server still holding the connection fails the test


@pytest.fixture
def server() -> Iterator[ControllerHttp]:
    srv = ControllerHttp(
        host="127.0.0.1",
        port=0,
        metrics=ControllerMetrics(),
        healthy=lambda: (True, ""),
        ready=lambda: (True, ""),
        on_push=lambda reason: None,
        secret=lambda: "s3cret",
        branch="main",
        read_timeout=READ_TIMEOUT,
        max_connections=2,
    )
    srv.start()
    yield srv
    srv.stop()


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=GUARD)
    return sock


def _closed_by_server(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (raises if it never does)."""
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def _healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=GUARD) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_half_sent_webhook_is_dropped_after_the_read_timeout(server: ControllerHttp) -> None:
    with _connect(server.port) as sock:
        sock.sendall(
            b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nContent-Length: 1000\r\n\r\n" + b"{" * 10
        )
        assert _closed_by_server(sock) == b""  # nothing answered, nothing verified: just closed


def test_half_sent_headers_are_dropped_after_the_read_timeout(server: ControllerHttp) -> None:
    with _connect(server.port) as sock:
        sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
        assert _closed_by_server(sock) == b""


def test_trickled_body_gets_no_more_than_the_read_timeout(server: ControllerHttp) -> None:
    # One byte at a time, each within the socket timeout: the body as a whole must still arrive in time.
    with _connect(server.port) as sock:
        sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nContent-Length: 100\r\n\r\n")
        closed = False
        for _ in range(40):
            try:
                sock.sendall(b"x")
            except OSError:
                closed = True
                break
            time.sleep(READ_TIMEOUT / 4)
        if not closed:
            sock.settimeout(GUARD)
            assert _closed_by_server(sock) == b""


def test_connections_beyond_the_cap_are_refused_at_once_then_served_again(server: ControllerHttp) -> None:
    idle = [_connect(server.port) for _ in range(2)]
    try:
        # Both slots are taken by clients that send nothing; the next one gets 503 and is closed.
        with _connect(server.port) as extra:
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _closed_by_server(extra).startswith(b"HTTP/1.1 503")
        # The idle ones are dropped after the read timeout, which frees the slots.
        for sock in idle:
            assert _closed_by_server(sock) == b""
    finally:
        for sock in idle:
            sock.close()
    assert _healthz(server.port) == 200
