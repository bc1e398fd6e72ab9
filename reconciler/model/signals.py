"""What the controller tells the cluster about a cycle, as values: Kubernetes Event intents and node marks.

Pure values, no behaviour. The controller computes them (reconciler.controller.signals) and the Kubernetes
adapter writes them (reconciler.adapters.kube.events); they live in the model so the adapter speaks model
words and never imports the controller.

- `EventIntent`: one core/v1 Event about a Node or the ClusterPolicy, with a PascalCase `Reason`.
- `NodeMark`: the migplan-owned node annotations `migplan.io/reconcile.state` (a `MarkState`) and
  `migplan.io/reconcile.reason`. The state words are the annotation's wire values: other processes
  (`kubectl describe node`, the controller's next start) read them back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reason(enum.StrEnum):
    DRIFT_DETECTED = "DriftDetected"
    APPLY_STARTED = "ApplyStarted"
    APPLY_SUCCEEDED = "ApplySucceeded"
    APPLY_FAILED = "ApplyFailed"
    CHANGE_HELD = "ChangeHeld"
    DRAINING = "Draining"  # Normal: pods evicted (Eviction API) so the node's change can apply
    DRAIN_BLOCKED = "DrainBlocked"  # Warning: a PDB refuses, the drain timed out, or pods cannot be drained
    WAITING = "Waiting"  # Warning: the controller cannot reconcile (reconciler/controller/waiting.py says why)


class MarkState(enum.StrEnum):
    IN_SYNC = "InSync"
    DRIFTED = "Drifted"
    APPLYING = "Applying"
    HELD = "Held"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str  # "Node" | "ClusterPolicy"
    name: str
    api_version: str = "v1"


@dataclass(frozen=True, slots=True)
class EventIntent:
    regarding: ObjectRef
    reason: Reason
    message: str
    warning: bool

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What makes two intents the same Event (the controller raises an Event on change only)."""
        return (self.regarding.kind, self.regarding.name, self.reason.value, self.message)


@dataclass(frozen=True, slots=True)
class NodeMark:
    node: str
    state: MarkState
    reason: str
