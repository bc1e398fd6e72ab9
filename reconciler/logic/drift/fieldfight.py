"""Fights over the ClusterPolicy fields migplan patches (issue 28 item 7, MP590).

A GPU Operator installed by Helm or synced by Argo CD has another field manager writing spec.mig.strategy,
spec.migManager.config.name and spec.devicePlugin.config: every `helm upgrade` or Argo CD sync puts its value back.
A controller that patches whatever differs would then patch every cycle, forever (and each strategy patch rolls the
device plugin). So migplan overwrites a given manager's value of a field at most once: it records, in
FIELDS_SET_ANNOTATION, the value it set and the managers that owned the field when it did (metadata.managedFields).
When the field differs again and one of those managers owns it again, that manager put its value back: a fight.
migplan reports it, naming the manager, and leaves the field alone until that manager no longer owns it or the
inventory asks for another value. A manager migplan has not overwritten yet (a one-off `kubectl edit`) gets its
one repair, as any drift does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.logic.drift.nodestate import STRATEGY_SET_ANNOTATION
from reconciler.model.observed import CLUSTER_POLICY_FIELDS, FIELD_MANAGER, ClusterPolicyState

# On the ClusterPolicy: {field path: {"value": what migplan last set (null: removed), "over": [the managers that
# owned the field then, whose value migplan overwrote]}}.
FIELDS_SET_ANNOTATION = "migplan.io/cluster-policy-set"
STRATEGY = "spec.mig.strategy"
MIG_MANAGER_CONFIG = "spec.migManager.config.name"
DEVICE_PLUGIN_CONFIG = "spec.devicePlugin.config"
# A record longer than this is not migplan's (three short fields, a few managers each): it is ignored, and migplan
# patches once more. A field keeps at most _MAX_OVER managers (the latest ones), so the record stays under it.
_MAX_RECORD_CHARS = 8192
_MAX_OVER = 8
_MAX_NAME = 128  # the apiserver's own limit on a field manager's name
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


@dataclass(frozen=True, slots=True)
class Record:
    """What migplan set on one field, and over whose value."""

    value: str | None
    over: tuple[str, ...] = ()


def recorded(annotations: Mapping[str, str]) -> dict[str, Record]:
    """What migplan set on the ClusterPolicy, from its annotations; anything malformed counts as nothing set (the
    worst it costs is one more patch). The older strategy-only annotation counts for spec.mig.strategy, over
    nobody."""
    out: dict[str, Record] = {}
    strategy = annotations.get(STRATEGY_SET_ANNOTATION)
    if isinstance(strategy, str) and strategy:
        out[STRATEGY] = Record(strategy)
    raw = annotations.get(FIELDS_SET_ANNOTATION)
    if not isinstance(raw, str) or len(raw) > _MAX_RECORD_CHARS:
        return out
    try:
        value = json.loads(raw)
    except ValueError:
        return out
    if not isinstance(value, dict):
        return out
    for key, entry in value.items():
        if key not in CLUSTER_POLICY_FIELDS or not isinstance(entry, dict):
            continue
        v, over = entry.get("value"), entry.get("over", [])
        if (v is None or isinstance(v, str)) and isinstance(over, list) and all(isinstance(m, str) for m in over):
            out[key] = Record(v, tuple(m[:_MAX_NAME] for m in over[-_MAX_OVER:]))
    return out


def _others(cp: ClusterPolicyState, field: str) -> tuple[str, ...]:
    return tuple(m for m in cp.field_owners.get(field, ()) if m != FIELD_MANAGER)


def record_text(cp: ClusterPolicyState, wrote: Mapping[str, str | None]) -> str:
    """The annotation's new value: the previous record with the fields this patch writes, each over the managers
    that own it now (added to those of the same value before)."""
    merged = recorded(cp.annotations)
    for field, value in wrote.items():
        before = merged.get(field)
        over = list(before.over) if before is not None and before.value == value else []
        over += [m for m in _others(cp, field) if m not in over]
        merged[field] = Record(value, tuple(over[-_MAX_OVER:]))
    doc = {k: {"value": r.value, "over": list(r.over)} for k, r in merged.items()}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def fight(cp: ClusterPolicyState, field: str, desired: str | None, observed: str | None) -> Fight | None:
    """The fight over `field`, whose live value differs from `desired`: a manager whose value migplan already
    overwrote with `desired` owns the field again. None when migplan has not set `desired` there yet, or no such
    manager owns it now (migplan then patches, once per manager)."""
    record = recorded(cp.annotations).get(field)
    if record is None or record.value != desired:
        return None
    again = tuple(m for m in _others(cp, field) if m[:_MAX_NAME] in record.over)
    if not again:
        return None
    return Fight(field, again, desired, observed)
