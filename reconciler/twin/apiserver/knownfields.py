"""Shallow field lists of the built-in types, so unknown fields are treated as the real decoder treats them.

Pure data and one function. The real server decodes built-in objects into Go structs: an unknown JSON field is
dropped with a `Warning: unknown field "..."` header, or refused (400, strict decoding error) with
fieldValidation=Strict. The twin has no full schemas of the built-ins; it checks the top level, `metadata` and the
Node `spec` (field names from k8s.io/api v1.36), which catches misspelt top-level sections and metadata keys.
Deeper levels are kept as sent (ASSUMPTIONS.md).
"""

from __future__ import annotations

from typing import Any

_META = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
_OBJECT = frozenset({"apiVersion", "kind", "metadata"})
_SPEC_STATUS = _OBJECT | {"spec", "status"}

TOP_LEVEL: dict[str, frozenset[str]] = {
    "namespaces": _SPEC_STATUS,
    "nodes": _SPEC_STATUS,
    "pods": _SPEC_STATUS,
    "daemonsets.apps": _SPEC_STATUS,
    "deployments.apps": _SPEC_STATUS,
    "services": _SPEC_STATUS,
    "limitranges": _OBJECT | {"spec"},
    "resourcequotas": _SPEC_STATUS,
    "roles.rbac.authorization.k8s.io": _OBJECT | {"rules"},
    "clusterroles.rbac.authorization.k8s.io": _OBJECT | {"rules", "aggregationRule"},
    "rolebindings.rbac.authorization.k8s.io": _OBJECT | {"subjects", "roleRef"},
    "clusterrolebindings.rbac.authorization.k8s.io": _OBJECT | {"subjects", "roleRef"},
    "leases.coordination.k8s.io": _OBJECT | {"spec"},
    "customresourcedefinitions.apiextensions.k8s.io": _SPEC_STATUS,
    "configmaps": _OBJECT | {"data", "binaryData", "immutable"},
    "serviceaccounts": _OBJECT | {"secrets", "imagePullSecrets", "automountServiceAccountToken"},
    "events": _OBJECT
    | {
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "type",
        "eventTime",
        "series",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    },
    "events.events.k8s.io": _OBJECT
    | {
        "eventTime",
        "series",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
        "regarding",
        "related",
        "note",
        "type",
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
    },
}
_NESTED: dict[str, dict[str, frozenset[str]]] = {
    "nodes": {
        "spec": frozenset(
            {"podCIDR", "podCIDRs", "providerID", "unschedulable", "taints", "configSource", "externalID"}
        )
    },
}


def prune_unknown(resource: str, obj: dict[str, Any]) -> list[str]:
    """Remove unknown fields (top level, metadata, known nested sections) in place; return their paths."""
    known = TOP_LEVEL.get(resource)
    if known is None:
        return []
    unknown: list[str] = []
    for key in [k for k in obj if k not in known]:
        unknown.append(key)
        del obj[key]
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in [k for k in meta if k not in _META]:
            unknown.append(f"metadata.{key}")
            del meta[key]
    for section, fields in _NESTED.get(resource, {}).items():
        part = obj.get(section)
        if isinstance(part, dict):
            for key in [k for k in part if k not in fields]:
                unknown.append(f"{section}.{key}")
                del part[key]
    return unknown
