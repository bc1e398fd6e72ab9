"""Agent mode on the Kubernetes API: the migplan-owned Node annotations and label the controller and the
node agents talk through.

Keys (all owned by migplan; nothing else on the Node is written):
- annotation `migplan.io/mig-desired`  — written by the controller: the node's desired layout with an
  exact placement per partition, JSON (see `encode_desired`).
- annotation `migplan.io/mig-observed` — written by the agent (observer, every apply mode): the node's
  observation, v2 (reconciler.logic.codecs.observedcodec): per GPU, MIG mode current/pending and the instances
  with profile, placement, GPU-instance id, MIG UUID, PIDs and holders, the state of each source. Written
  when it changed or when the published one is a heartbeat old (`observedAt` must stay fresh).
- label `migplan.io/mig.state` — written by the agent: pending | success | failed (mig-manager's words).
- annotation `migplan.io/mig.state.reason` — why, in one line; `migplan.io/mig.state.revision` — the
  inventory revision the state refers to.

All writes are JSON merge patches of only these keys, and only when the value changed (an agent in sync
writes nothing). The JSON is compact with sorted keys so equal states give equal strings.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.cluster import api_error
from reconciler.adapters.kube.nodemeta import patch_node_metadata
from reconciler.logic.codecs import observedcodec
from reconciler.logic.planning import agentdrain, desiredcodec
from reconciler.logic.planning.agentplan import (
    DesiredNode,
    MigState,
    ObservedGpu,
)
from reconciler.model import strict
from reconciler.model.errors import MigplanError
from reconciler.model.nodeobservation import NodeObservation
from reconciler.model.observed import OBSERVED_ANNOTATION

if TYPE_CHECKING:
    from reconciler.agent import NodeStatePort

log = logging.getLogger("migplan.agent")

DESIRED = desiredcodec.ANNOTATION
OBSERVED = OBSERVED_ANNOTATION  # "migplan.io/mig-observed"; the controller reads it too
STATE = agentdrain.STATE_LABEL  # "migplan.io/mig.state"
STATE_REASON = "migplan.io/mig.state.reason"
STATE_REVISION = agentdrain.STATE_REVISION_ANNOTATION  # "migplan.io/mig.state.revision"
_MAX_REASON = 1024  # annotations are small by convention; the full story is in the log


encode_desired = desiredcodec.encode


def decode_desired(node: str, text: str) -> DesiredNode:
    """Parse the desired annotation (reconciler.logic.planning.desiredcodec); a malformed one is MP910, never a
    guess."""
    try:
        return desiredcodec.decode(node, text)
    except strict.StrictValueError as exc:
        raise MigplanError(f"node {node}: annotation {DESIRED} is malformed: {exc}", code="MP910") from exc


def decode_observed(text: str) -> tuple[ObservedGpu, ...]:
    """The GPUs of an observed annotation (v1 or v2), as strictly as decode_desired."""
    return decode_observation(text).gpus


def decode_observation(text: str) -> NodeObservation:
    """Parse the observed annotation an agent or observer wrote (reconciler.logic.codecs.observedcodec)."""
    try:
        return observedcodec.decode(text)
    except strict.StrictValueError as exc:
        raise MigplanError(f"annotation {OBSERVED} is malformed: {exc}", code="MP911") from exc


def _annotations(node_obj: Any) -> dict[str, str]:
    return dict(node_obj.metadata.annotations or {})


def _labels(node_obj: Any) -> dict[str, str]:
    return dict(node_obj.metadata.labels or {})


class KubeNodeState:
    """The agent's view of its own Node (implements reconciler.agent.NodeStatePort)."""

    def __init__(self, api: client.CoreV1Api, *, heartbeat_seconds: float = observedcodec.HEARTBEAT_SECONDS) -> None:
        self._api = api
        self._heartbeat = heartbeat_seconds
        self._seen: dict[str, dict[str, dict[str, str]]] = {}  # node -> last annotations/labels read or written

    def _read(self, node: str) -> Any:
        try:
            obj = self._api.read_node(node)
        except ApiException as exc:
            raise api_error(exc, f"read node {node}") from exc
        self._seen[node] = {"annotations": _annotations(obj), "labels": _labels(obj)}
        return obj

    def _patch(
        self, node: str, *, annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None
    ) -> None:
        meta: dict[str, Any] = {}
        if annotations:
            meta["annotations"] = dict(annotations)
        if labels:
            meta["labels"] = dict(labels)
        if not meta:
            return
        patch_node_metadata(self._api, node, meta)
        seen = self._seen.setdefault(node, {"annotations": {}, "labels": {}})
        seen["annotations"].update(annotations or {})
        seen["labels"].update(labels or {})

    def _current(self, node: str) -> dict[str, dict[str, str]]:
        if node not in self._seen:
            self._read(node)
        return self._seen[node]

    def read_desired(self, node: str) -> DesiredNode | None:
        text = _annotations(self._read(node)).get(DESIRED)
        return decode_desired(node, text) if text else None

    def publish_observed(self, node: str, observed: NodeObservation) -> None:
        """Write the observation when it changed (its time aside) or the published one is a heartbeat old.

        The comparison is against what this process last read or wrote; the first pass reads the Node."""
        text = observedcodec.encode(observed)
        if not observedcodec.publish_due(
            self._current(node)["annotations"].get(OBSERVED), observed, heartbeat_seconds=self._heartbeat
        ):
            return
        if not observed.truncated and observedcodec.decode(text).truncated:
            log.warning(
                "observation over the annotation cap: published without its detail",
                extra={"code": "MP938", "node": node, "bytes": len(text)},
            )
        self._patch(node, annotations={OBSERVED: text})

    def publish_state(self, node: str, state: MigState, reason: str, *, revision: str) -> None:
        cur = self._current(node)
        reason = reason[:_MAX_REASON]
        annotations = {STATE_REASON: reason, STATE_REVISION: revision}
        changed = {k: v for k, v in annotations.items() if cur["annotations"].get(k) != v}
        labels = {STATE: str(state)} if cur["labels"].get(STATE) != str(state) else {}
        self._patch(node, annotations=changed, labels=labels)


# --- the controller's side ----------------------------------------------------------------------------


def read_agent_state(node_obj: Any) -> tuple[MigState | None, str, tuple[ObservedGpu, ...] | None]:
    """What the agent on a node reported: (state, reason, observed GPUs) from a listed Node object."""
    labels, annotations = _labels(node_obj), _annotations(node_obj)
    raw = labels.get(STATE)
    state = MigState(raw) if raw in {s.value for s in MigState} else None
    text = annotations.get(OBSERVED)
    return state, annotations.get(STATE_REASON, ""), (decode_observed(text) if text else None)


if TYPE_CHECKING:

    def _conforms(x: KubeNodeState) -> NodeStatePort:
        return x
