"""Kubernetes API server twin: an in-process, threaded HTTP server with the semantics of a real kube-apiserver.

`ApiServerTwin` (twin.py) starts it; `Store` (store.py) holds the objects and implements the write semantics;
server.py speaks HTTP. ASSUMPTIONS.md lists where the twin deliberately or knowingly differs from the real v1.36
server recorded in tests/reference/kube-apiserver/.
"""

from .errors import ApiError
from .server import RequestRecord
from .store import Store
from .twin import ApiServerTwin, clusterpolicy_crd, clusterpolicy_required_spec

EventType = str  # "ADDED" | "MODIFIED" | "DELETED" as passed to Store.subscribe callbacks

__all__ = [
    "ApiError",
    "ApiServerTwin",
    "EventType",
    "RequestRecord",
    "Store",
    "clusterpolicy_crd",
    "clusterpolicy_required_spec",
]
