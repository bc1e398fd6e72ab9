"""Forwarding one HTTP request to an upstream server, for the test proxies (RBAC, fault injection)."""

from __future__ import annotations

import http.client
from http.server import BaseHTTPRequestHandler


def forward(handler: BaseHTTPRequestHandler, host: str, port: int, body: bytes | None, *, timeout: float) -> None:
    """Send the handler's request upstream and relay the response with an exact Content-Length."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection")}
    conn.request(handler.command, handler.path, body=body or None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    handler.send_response(resp.status)
    for k, v in resp.getheaders():
        if k.lower() not in ("transfer-encoding", "connection", "content-length"):
            handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
    conn.close()
