"""coordination.k8s.io/v1 Lease for leader election, and a write fence for the controller's API client.

The Lease calls follow the real API server's rules as recorded in tests/reference/kube-apiserver/
leases.json: create (409 AlreadyExists when another candidate was first), PUT with the resourceVersion
last read (409 Conflict when someone renewed in between: that candidate lost the race), and MicroTime
fields written with exactly six fractional digits — the server refuses seconds-only, millisecond and
nanosecond forms with 400, and Python's `isoformat()` drops the fraction when microsecond == 0, so the
times are formatted here, never left to the client's serializer.

`FencedApiClient` is an `ApiClient` that refuses every non-read request once `may_write()` turns
false: the controller hands it to the engine, so a replica that has lost the Lease stops writing at
the very next request, whatever step the cycle is in. The elector uses its own, unfenced client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.cluster import MERGE_PATCH, TimeoutApiClient, api_error
from reconciler.model.errors import LeaseConflict, MigplanError

TRIGGER_ANNOTATION = "migplan.io/trigger"
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class NotLeader(MigplanError):
    """A write was attempted by a replica that does not hold the Lease; the request was not sent."""

    code = "MP820"


def micro_time(dt: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 in UTC with exactly 6 fractional digits."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    resource_version: str
    trigger: str = ""  # annotation a standby sets to ask the leader for a cycle (forwarded webhook)


def _record(obj: Any) -> LeaseRecord:
    spec = obj.spec
    return LeaseRecord(
        holder=spec.holder_identity or "",
        duration_seconds=int(spec.lease_duration_seconds or 0),
        acquire_time=spec.acquire_time,
        renew_time=spec.renew_time,
        transitions=int(spec.lease_transitions or 0),
        resource_version=str(obj.metadata.resource_version),
        trigger=(obj.metadata.annotations or {}).get(TRIGGER_ANNOTATION, ""),
    )


def _translate(exc: ApiException, what: str) -> MigplanError:
    """adapters/kube/cluster.py's one translator, where a 409 means another candidate wrote the Lease first."""
    return api_error(exc, what, conflict=LeaseConflict)


class KubeLease:
    """One named Lease (implements reconciler.controller.leader.LeasePort)."""

    def __init__(self, api: client.CoordinationV1Api, *, namespace: str, name: str, timeout: float = 5.0) -> None:
        self._api = api
        self.namespace = namespace
        self.name = name
        # Every Lease call is bounded: a hung request must not keep a leader believing it still leads
        # (is_leader() expires on its own anyway) nor stall the election loop past /healthz.
        self.timeout = timeout

    def _body(
        self,
        *,
        holder: str,
        duration: int,
        acquire: datetime | None,
        renew: datetime | None,
        transitions: int,
        resource_version: str | None = None,
        trigger: str = "",
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        if trigger:
            meta["annotations"] = {TRIGGER_ANNOTATION: trigger}
        spec: dict[str, Any] = {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "leaseTransitions": transitions,
        }
        if acquire is not None:
            spec["acquireTime"] = micro_time(acquire)
        if renew is not None:
            spec["renewTime"] = micro_time(renew)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def _send(self, method: str, path: str, body: dict[str, Any]) -> Any:
        """POST/PUT a Lease as a plain dict.

        The generated client would coerce the dict into a V1Lease and re-serialize its datetimes with
        isoformat(), which drops the fraction at microsecond 0 and makes the server answer 400 —
        so the request is built from the dict as is, through the same ApiClient (auth, TLS, host).
        """
        api_client = self._api.api_client
        params = api_client.param_serialize(
            method=method,
            resource_path=path,
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api_client.call_api(*params, _request_timeout=self.timeout)
        response.read()
        return api_client.response_deserialize(response, {"200": "V1Lease", "201": "V1Lease"}).data

    @property
    def _collection(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    def get(self) -> LeaseRecord | None:
        try:
            return _record(self._api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _translate(exc, f"read lease {self.namespace}/{self.name}") from exc

    def create(self, *, holder: str, duration: int, now: datetime) -> LeaseRecord:
        body = self._body(holder=holder, duration=duration, acquire=now, renew=now, transitions=0)
        try:
            return _record(self._send("POST", self._collection, body))
        except ApiException as exc:
            raise _translate(exc, f"create lease {self.namespace}/{self.name}") from exc

    def update(
        self,
        prev: LeaseRecord,
        *,
        holder: str,
        duration: int,
        acquire: datetime | None,
        renew: datetime | None,
        transitions: int,
    ) -> LeaseRecord:
        """PUT with `prev.resource_version`: fails with LeaseConflict if anyone wrote since we read."""
        body = self._body(
            holder=holder,
            duration=duration,
            acquire=acquire,
            renew=renew,
            transitions=transitions,
            resource_version=prev.resource_version,
            trigger=prev.trigger,
        )
        try:
            return _record(self._send("PUT", f"{self._collection}/{self.name}", body))
        except ApiException as exc:
            raise _translate(exc, f"update lease {self.namespace}/{self.name}") from exc

    def request_trigger(self, value: str) -> None:
        """Ask the leader for a cycle (a standby that received a webhook): merge-patch one annotation."""
        patch = {"metadata": {"annotations": {TRIGGER_ANNOTATION: value}}}
        try:
            self._api.patch_namespaced_lease(
                self.name,
                self.namespace,
                patch,
                _content_type=MERGE_PATCH,
                _request_timeout=self.timeout,
            )
        except ApiException as exc:
            raise _translate(exc, f"patch lease {self.namespace}/{self.name}") from exc


class FencedApiClient(TimeoutApiClient):
    """An ApiClient that sends a write only while `may_write()` is true (checked per request)."""

    def __init__(self, configuration: client.Configuration, may_write: Callable[[], bool]) -> None:
        super().__init__(configuration)
        self._may_write = may_write
        self.refused_writes = 0

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method.upper() not in _READ_METHODS and not self._may_write():
            self.refused_writes += 1
            raise NotLeader(f"refused {method} {url.split('?', 1)[0]}: this replica does not hold the leader Lease")
        return super().call_api(method, url, *args, **kwargs)
