"""Kubernetes Events and the migplan-owned node status annotations, through the official client.

Events are core/v1 Events shaped as tests/reference/kube-apiserver/events.json records them: for a
cluster-scoped object (Node, ClusterPolicy) the Event must live in namespace `default` (another
namespace is a 422), `involvedObject` names the object, `source.component` is `migplan-controller`,
`reason` is PascalCase, `type` Normal or Warning, first/lastTimestamp in RFC 3339 seconds, count 1,
and the name is `<object>.<random hex>` (what client-go's recorder does, avoiding generateName so a
retried POST cannot create two).

Node marks are two annotations, `migplan.io/reconcile.state` and `migplan.io/reconcile.reason`,
written with one JSON merge patch per node and only for nodes whose mark changed.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.cluster import api_error
from reconciler.adapters.kube.nodemeta import patch_node_metadata
from reconciler.model.errors import MigplanError
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from reconciler.model.redaction import redact
from reconciler.model.signals import EventIntent, MarkState, NodeMark

log = logging.getLogger("migplan.events")

STATE_ANNOTATION = "migplan.io/reconcile.state"
REASON_ANNOTATION = "migplan.io/reconcile.reason"
EVENT_NAMESPACE = "default"  # cluster-scoped objects: Events must live here (events.json, 422 otherwise)
COMPONENT = "migplan-controller"


def event_body(intent: EventIntent, *, now: datetime, instance: str) -> dict[str, Any]:
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{intent.regarding.name}.{secrets.token_hex(8)}",
            "namespace": EVENT_NAMESPACE,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
        },
        "involvedObject": {
            "apiVersion": intent.regarding.api_version,
            "kind": intent.regarding.kind,
            "name": intent.regarding.name,
        },
        "reason": intent.reason.value,
        "message": redact(intent.message),  # Events are readable cluster-wide: never a URL's secret
        "type": "Warning" if intent.warning else "Normal",
        "source": {"component": COMPONENT, "host": instance},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class KubeSignals:
    """Writes Events and node marks. Failures are logged and counted, never fatal to the cycle:
    an Event that cannot be written must not stop a node from being reconciled."""

    def __init__(self, api: client.CoreV1Api, *, instance: str) -> None:
        self._api = api
        self._instance = instance
        self.failures = 0

    def emit(self, intents: Iterable[EventIntent], *, now: datetime | None = None) -> int:
        now = now or datetime.now(UTC)
        written = 0
        for intent in intents:
            try:
                body = client.CoreV1Event.from_dict(event_body(intent, now=now, instance=self._instance))
                assert body is not None
                self._api.create_namespaced_event(EVENT_NAMESPACE, body)
                written += 1
            except ApiException as exc:
                self.failures += 1
                log.warning("event not written: %s", api_error(exc, "create event").message)
        return written

    def mark(self, marks: Iterable[NodeMark]) -> int:
        written = 0
        for m in marks:
            reason = redact(m.reason)
            metadata = {"annotations": {STATE_ANNOTATION: m.state.value, REASON_ANNOTATION: reason}}
            try:
                patch_node_metadata(self._api, m.node, metadata)
                written += 1
            except MigplanError as err:
                self.failures += 1
                log.warning("node mark not written: %s", err.message)
        return written

    def read_marks(self, *, page_size: int = 500) -> dict[str, NodeMark]:
        """The marks already on the nodes (one paginated list), so a new leader does not rewrite them."""
        out: dict[str, NodeMark] = {}
        cont: str | None = None
        while True:
            try:
                page = self._api.list_node(limit=page_size, _continue=cont)
            except ApiException as exc:
                raise api_error(exc, "list nodes") from exc
            for node in page.items:
                meta: Any = node.metadata
                ann = meta.annotations or {}
                state = ann.get(STATE_ANNOTATION)
                if state in {s.value for s in MarkState}:
                    out[str(meta.name)] = NodeMark(str(meta.name), MarkState(state), ann.get(REASON_ANNOTATION, ""))
            cont = page.metadata._continue if page.metadata else None
            if not cont:
                return out
