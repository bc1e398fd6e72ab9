"""The last verified revision in a ConfigMap (reconciler.sourcing.TrustStore over the official client).

Why a Kubernetes object: deploy/ gives the Git cache an emptyDir, so a record kept there dies with the pod,
and a standby that takes over starts from nothing. A ConfigMap in migplan's own namespace survives both,
and is written only through the controller's fenced client: a replica that lost the Lease cannot write it.

Contract: `load()` reads the ConfigMap (None on 404, MigplanError from the one translator otherwise,
reconciler.model.trust.DamagedRecord when its data is not a record migplan wrote); `save()` creates it or
replaces it with the resourceVersion last read, so two writers never silently overwrite each other (409).
Every call carries a timeout. I/O: the Kubernetes API.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.cluster import api_error
from reconciler.model import trust
from reconciler.model.errors import MigplanError

DATA_KEY = "last-verified.json"
_TIMEOUT = (5.0, 10.0)  # connect, read


class ConfigMapTrustStore:
    """One named ConfigMap; `bind()` it to the cycle's API client before each cycle."""

    strict = True  # a damaged record stops new revisions: see reconciler.sourcing

    def __init__(self, *, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        self._core: Any = None
        self._resource_version: str | None = None

    def bind(self, api_client: Any) -> None:
        if self._core is None or self._core.api_client is not api_client:
            self._core = client.CoreV1Api(api_client)

    def describe(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    def _api(self) -> Any:
        if self._core is None:
            raise MigplanError(f"{self.describe()}: no API client bound", code="MP953")
        return self._core

    def load(self) -> trust.TrustRecord | None:
        try:
            obj = self._api().read_namespaced_config_map(self.name, self.namespace, _request_timeout=_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                self._resource_version = None
                return None
            raise api_error(exc, f"read {self.describe()}") from exc
        self._resource_version = str(obj.metadata.resource_version)
        data = (obj.data or {}).get(DATA_KEY)
        if not isinstance(data, str):
            raise trust.DamagedRecord(f"no {DATA_KEY} key")
        return trust.decode(data)

    def _refresh(self) -> None:
        try:
            obj = self._api().read_namespaced_config_map(self.name, self.namespace, _request_timeout=_TIMEOUT)
            self._resource_version = str(obj.metadata.resource_version)
        except ApiException:
            self._resource_version = None

    def save(self, record: trust.TrustRecord) -> None:
        meta: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/managed-by": "migplan"},
        }
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
        body["data"] = {DATA_KEY: trust.encode(record)}
        api = self._api()
        try:
            if self._resource_version is None:
                obj = api.create_namespaced_config_map(
                    self.namespace, body, field_manager="migplan", _request_timeout=_TIMEOUT
                )
            else:
                meta["resourceVersion"] = self._resource_version
                obj = api.replace_namespaced_config_map(
                    self.name, self.namespace, body, field_manager="migplan", _request_timeout=_TIMEOUT
                )
        except ApiException as exc:
            if exc.status in (404, 409):
                self._refresh()  # the next save starts from what is stored now (or creates it again)
            raise api_error(exc, f"write {self.describe()}") from exc
        self._resource_version = str(obj.metadata.resource_version)
