"""Fights over the ClusterPolicy fields migplan patches (issue 28 item 7, MP590).

A GPU Operator installed by Helm or synced by Argo CD has another field manager writing spec.mig.strategy,
spec.migManager.config.name and spec.devicePlugin.config: every `helm upgrade` or Argo CD sync puts its value back.
A controller that patches whatever differs would then patch every cycle, forever (and each strategy patch rolls the
device plugin). So migplan writes each field at most once per value: it records what it set in
FIELDS_SET_ANNOTATION, and when the field differs again while that record says migplan already set this value and
another manager owns the field now (metadata.managedFields), that is a fight. migplan reports it, naming the manager,
and leaves the field alone until that manager stops owning it or the inventory asks for another value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.logic.drift.nodestate import STRATEGY_SET_ANNOTATION
from reconciler.model.observed import CLUSTER_POLICY_FIELDS, FIELD_MANAGER, ClusterPolicyState

# On the ClusterPolicy: {field path: the value migplan last set there} (null: migplan removed the field).
FIELDS_SET_ANNOTATION = "migplan.io/cluster-policy-set"
STRATEGY = "spec.mig.strategy"
MIG_MANAGER_CONFIG = "spec.migManager.config.name"
DEVICE_PLUGIN_CONFIG = "spec.devicePlugin.config"
# A record longer than this is not migplan's (three short fields): it is ignored, and migplan patches once more.
_MAX_RECORD_CHARS = 2048
_MAX_NAMED = 3  # managers named in one message


@dataclass(frozen=True, slots=True)
class Fight:
    """Another field manager put back a value of `field` after migplan had set `desired` there."""

    field: str
    managers: tuple[str, ...]  # the other owners of the field now, sorted
    desired: str | None
    observed: str | None

    def message(self, policy: str) -> str:
        named = ", ".join(self.managers[:_MAX_NAMED]) + (" and others" if len(self.managers) > _MAX_NAMED else "")
        plural = "s" if len(self.managers) > 1 else ""
        return (
            f"ClusterPolicy {policy} {self.field}: field manager{plural} {named} put back "
            f"{_shown(self.observed)} after migplan set {_shown(self.desired)}; migplan no longer patches it "
            f"(it would every cycle): set it where {named} takes it from (Helm values, Argo CD ignoreDifferences, "
            "see docs/how-to/gitops-coexistence.md)"
        )


def _shown(value: str | None) -> str:
    return "(unset)" if value is None else value[:63]


def recorded(annotations: Mapping[str, str]) -> dict[str, str | None]:
    """What migplan set on the ClusterPolicy, from its annotations; anything malformed counts as nothing set (the
    worst it costs is one more patch). The older strategy-only annotation counts for spec.mig.strategy."""
    out: dict[str, str | None] = {}
    strategy = annotations.get(STRATEGY_SET_ANNOTATION)
    if isinstance(strategy, str) and strategy:
        out[STRATEGY] = strategy
    raw = annotations.get(FIELDS_SET_ANNOTATION)
    if not isinstance(raw, str) or len(raw) > _MAX_RECORD_CHARS:
        return out
    try:
        value = json.loads(raw)
    except ValueError:
        return out
    if isinstance(value, dict):
        for key, v in value.items():
            if key in CLUSTER_POLICY_FIELDS and (v is None or isinstance(v, str)):
                out[key] = v
    return out


def record_text(cp: ClusterPolicyState, wrote: Mapping[str, str | None]) -> str:
    """The annotation's new value: the previous record with the fields this patch writes."""
    merged = {**recorded(cp.annotations), **wrote}
    return json.dumps(merged, sort_keys=True, separators=(",", ":"))


def fight(cp: ClusterPolicyState, field: str, desired: str | None, observed: str | None) -> Fight | None:
    """The fight over `field`, whose live value differs from `desired`; None when migplan has not set `desired`
    there yet (it patches once) or no other field manager owns the field now (the fight is over)."""
    record = recorded(cp.annotations)
    if field not in record or record[field] != desired:
        return None
    others = tuple(m for m in cp.field_owners.get(field, ()) if m != FIELD_MANAGER)
    if not others:
        return None
    return Fight(field, others, desired, observed)
