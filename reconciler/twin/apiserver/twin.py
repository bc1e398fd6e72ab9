"""`ApiServerTwin`: start/stop the API server twin from Python (context manager), with a ClusterPolicy CRD.

Side effects: binds 127.0.0.1:<free port> and runs the HTTP server in a daemon thread until stop().
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from . import certs
from .certs import TlsFiles
from .disruption import DisruptionController
from .kubeconfig import write_kubeconfig
from .rbac import ServiceAccountUser
from .server import RequestRecord, TwinHTTPServer
from .store import Store
from .workloads import ReplacementController

CLUSTERPOLICY_CRD_FILE = "clusterpolicy-crd.yaml"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def clusterpolicy_crd() -> dict[str, Any]:
    """The ClusterPolicy CRD: our own, written from the facts of the GPU Operator's (reconciler/twin/data, header)."""
    text = resources.files("reconciler.twin").joinpath("data", CLUSTERPOLICY_CRD_FILE).read_text()
    crd: dict[str, Any] = yaml.load(text, Loader=yaml.CSafeLoader)
    return crd


def clusterpolicy_required_spec() -> tuple[str, ...]:
    """The spec fields the CRD requires of a ClusterPolicy (read from the CRD, not restated)."""
    version = next(v for v in clusterpolicy_crd()["spec"]["versions"] if v.get("storage"))
    return tuple(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"])


class ApiServerTwin:
    """A running API server twin. `with ApiServerTwin() as api:` -> api.url, api.token, api.store."""

    def __init__(
        self,
        token: str | None = None,
        *,
        install_clusterpolicy_crd: bool = True,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        bare: bool = False,
        store: Store | None = None,
        tls: bool = True,
        max_mutating_in_flight: int | None = None,
    ) -> None:
        self.token = token or secrets.token_urlsafe(24)
        self.max_mutating_in_flight = max_mutating_in_flight  # None: no limit (server.py `_mutating_slot`)
        self.tls = tls
        self._tls_dir: Path | None = None
        self._tls_files: TlsFiles | None = None
        self.store = store if store is not None else Store(bare=bare)
        self.store.ensure_namespaces(namespaces)
        if install_clusterpolicy_crd:
            self.store.install_crd(clusterpolicy_crd())
        # kube-controller-manager's disruption controller (PodDisruptionBudget status); none on a bare server.
        self.disruption = None if self.store.bare else DisruptionController(self.store)
        # kube-controller-manager's ReplicaSet controller, reduced to replacing a Deployment's evicted pod.
        self.replacements = None if self.store.bare else ReplacementController(self.store)
        self._server: TwinHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._sa_tokens: dict[str, ServiceAccountUser] = {}

    # ------------------------------------------------------------ lifecycle

    def start(self) -> ApiServerTwin:
        if self._server is not None:
            return self
        if self.tls and self._tls_files is None:
            self._tls_dir = Path(tempfile.mkdtemp(prefix="migplan-twin-tls-"))
            self._tls_files = certs.generate(self._tls_dir)
        self._server = TwinHTTPServer(self.store, self.token, self._tls_files)
        self._server.sa_tokens = self._sa_tokens
        if self.max_mutating_in_flight is not None:
            self._server.mutating_slots = threading.BoundedSemaphore(self.max_mutating_in_flight)
        self._thread = threading.Thread(target=self._server.serve_forever, name="apiserver-twin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._tls_dir is not None:
            shutil.rmtree(self._tls_dir, ignore_errors=True)
            self._tls_dir, self._tls_files = None, None

    def __enter__(self) -> ApiServerTwin:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------ access

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the API server twin is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def ca_pem(self) -> bytes | None:
        """PEM of the CA that signed the server certificate (None for plain http)."""
        return self._tls_files.ca_pem() if self._tls_files is not None else None

    @property
    def ca_file(self) -> Path | None:
        return self._tls_files.ca_cert if self._tls_files is not None else None

    def write_kubeconfig(self, path: str | Path, token: str | None = None) -> Path:
        """A kubeconfig (token + embedded CA) for kubectl and kubernetes.config.load_kube_config; by default with
        the admin token, or with a token from service_account_token()."""
        return write_kubeconfig(path, self.url, token or self.token, ca_pem=self.ca_pem)

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token authenticating as system:serviceaccount:NAMESPACE:NAME; its requests are authorized by the
        RBAC objects in the store (rbac.py), denials are the real 403s."""
        token = secrets.token_urlsafe(24)
        self._sa_tokens[token] = ServiceAccountUser(namespace, name)
        return token

    def request_counts(self) -> dict[tuple[str, str, str], int]:
        """Requests served so far by (HTTP method, resource, verb), e.g. ("GET", "nodes", "list")."""
        if self._server is None:
            return {}
        with self._server.counts_lock:
            return dict(self._server.counts)

    def request_log(self) -> list[RequestRecord]:
        """Every resource request served so far, in order (method, verb, group, resource, subresource, namespace,
        name, path, query, authenticated) - e.g. to check calls against RBAC rules."""
        if self._server is None:
            return []
        with self._server.counts_lock:
            return list(self._server.log)

    def reset_counts(self) -> None:
        """Clear request_counts() and request_log()."""
        if self._server is not None:
            with self._server.counts_lock:
                self._server.counts.clear()
                self._server.log.clear()
