"""The commands a benchmark's twin process answers over its pipe (one loop for every benchmark that runs a twin in a
child process, so the measured migplan process and its floors never share the twin's interpreter)."""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any


def answer(conn: Connection, twin: Any) -> None:
    """Serve `(command, argument)` requests until "stop": counts, reset, settle, inject, pods."""
    while True:
        cmd, arg = conn.recv()
        if cmd == "stop":
            twin.stop()
            conn.send(None)
            return
        if cmd == "counts":
            conn.send(twin.request_counts())
        elif cmd == "reset":
            twin.reset_counts()
            conn.send(None)
        elif cmd == "settle":
            twin.settle(timeout=600)
            conn.send(None)
        elif cmd == "inject":
            for case in arg:
                twin.inject(case)
            conn.send(None)
        elif cmd == "pods":
            conn.send(len(twin.store.list("pods")))
