"""A server that accepts connections and never answers: the hang every timeout must survive.

It listens on 127.0.0.1, accepts every connection and keeps it open without sending a byte. With
`tls`, it completes the TLS handshake first (so the client is past its connect timeout and waits
for an HTTP answer that never comes); without, a TLS client waits for the server's hello forever.
`accepted` counts connections, which shows how many attempts a client made.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from pathlib import Path
from types import TracebackType


class SilentServer:
    def __init__(self, *, tls_cert: Path | None = None, tls_key: Path | None = None) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = int(self._sock.getsockname()[1])
        self._tls: ssl.SSLContext | None = None
        if tls_cert is not None and tls_key is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(tls_cert, tls_key)
        self._held: list[socket.socket] = []
        self._accepted = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="silent-server", daemon=True)

    @property
    def accepted(self) -> int:
        with self._lock:
            return self._accepted

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self._held.append(conn)
                self._accepted += 1
            if self._tls is not None:
                threading.Thread(target=self._handshake, args=(conn,), daemon=True).start()

    def _handshake(self, conn: socket.socket) -> None:
        assert self._tls is not None
        try:
            wrapped = self._tls.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError):
            return
        with self._lock:
            self._held.append(wrapped)  # keep it referenced, so it stays open

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stopping.set()
        self._sock.close()
        with self._lock:
            for conn in self._held:
                with contextlib.suppress(OSError):
                    conn.close()
