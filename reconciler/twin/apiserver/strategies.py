"""Registry strategy rules the twin applies to updates and deletes, with the real server's messages.

Pure. Sources, kubernetes/kubernetes:
- pkg/registry/apps/daemonset/strategy.go and pkg/registry/apps/deployment/strategy.go `ValidateUpdate`: after the
  object's own validation, `apivalidation.ValidateImmutableField(new.Spec.Selector, old.Spec.Selector,
  "spec.selector")` (the apps/v1 branch upstream marks with kubernetes issue #50791), compared with
  `equality.Semantic.DeepEqual` (nil and empty maps/lists are equal) and printed by field.Error as `%#v` of the
  dereferenced *metav1.LabelSelector;
- pkg/apis/core/validation/validation.go `ValidateConfigMapUpdate`: once `immutable: true` is stored, `immutable`,
  `data` and `binaryData` may not change (Forbidden, "field is immutable when `immutable` is set");
- staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go `BeforeDelete`: DeleteOptions.preconditions (uid, then
  resourceVersion) are checked against the stored object and a mismatch is a 409 Conflict whose qualified resource
  is the object's Kind (`Operation cannot be fulfilled on Pod "x": the UID in the precondition ...`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from .errors import ApiError, FieldError, GoLiteral, bad_request
from .kinds import MSG_LABEL_KEY, MSG_LABEL_VALUE, valid_label_value, valid_qualified_name
from .quantity import milli_value, unmarshal

IMMUTABLE = "field is immutable"
CONFIGMAP_IMMUTABLE = "field is immutable when `immutable` is set"


def _go_string(value: Any) -> str:
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def go_label_selector(selector: Any) -> Any:
    """field.Error's rendering of a *metav1.LabelSelector: "null" for nil, else Go's %#v of the struct."""
    if not isinstance(selector, dict):
        return "null"
    labels = selector.get("matchLabels")
    if isinstance(labels, dict):
        pairs = ", ".join(f"{_go_string(k)}:{_go_string(labels[k])}" for k in sorted(labels))
        labels_text = "map[string]string{" + pairs + "}"
    else:
        labels_text = "map[string]string(nil)"
    exprs = selector.get("matchExpressions")
    if isinstance(exprs, list):
        items = []
        for e in exprs:
            e = e if isinstance(e, dict) else {}
            values = e.get("values")
            values_text = (
                "[]string{" + ", ".join(_go_string(v) for v in values) + "}"
                if isinstance(values, list)
                else "[]string(nil)"
            )
            items.append(
                f"v1.LabelSelectorRequirement{{Key:{_go_string(e.get('key', ''))}, "
                f"Operator:{_go_string(e.get('operator', ''))}, Values:{values_text}}}"
            )
        exprs_text = "[]v1.LabelSelectorRequirement{" + ", ".join(items) + "}"
    else:
        exprs_text = "[]v1.LabelSelectorRequirement(nil)"
    return GoLiteral(f"v1.LabelSelector{{MatchLabels:{labels_text}, MatchExpressions:{exprs_text}}}")


def _semantic(value: Any) -> Any:
    """equality.Semantic.DeepEqual's view: nil and empty maps and slices are the same."""
    if isinstance(value, dict):
        return {k: _semantic(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def selector_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """DaemonSet / Deployment (apps/v1): spec.selector is immutable."""
    new_sel = (new.get("spec") or {}).get("selector")
    old_sel = (old.get("spec") or {}).get("selector")
    if _semantic(new_sel or None) == _semantic(old_sel or None):
        return []
    return [FieldError("Invalid", "spec.selector", go_label_selector(new_sel), IMMUTABLE)]


def configmap_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """ValidateConfigMapUpdate's immutability rules (the data-key rules run after, in kinds.validate_configmap)."""
    if old.get("immutable") is not True:
        return []
    errs: list[FieldError] = []
    if new.get("immutable") is not True:
        errs.append(FieldError("Forbidden", "immutable", detail=CONFIGMAP_IMMUTABLE))
    # reflect.DeepEqual on the decoded maps: absent and null are nil; data is defaulted to an empty map
    if (new.get("data") or {}) != (old.get("data") or {}):
        errs.append(FieldError("Forbidden", "data", detail=CONFIGMAP_IMMUTABLE))
    if new.get("binaryData") != old.get("binaryData"):
        errs.append(FieldError("Forbidden", "binaryData", detail=CONFIGMAP_IMMUTABLE))
    return errs


def check_delete_preconditions(kind: str, group: str, obj: Mapping[str, Any], preconditions: Any) -> None:
    """rest.BeforeDelete: 409 when DeleteOptions.preconditions do not match the stored object."""
    if preconditions is None:
        return
    if not isinstance(preconditions, dict) or any(
        v is not None and not isinstance(v, str) for v in preconditions.values()
    ):
        raise bad_request("error decoding delete options: preconditions must hold a uid and a resourceVersion string")
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    uid, rv = preconditions.get("uid"), preconditions.get("resourceVersion")
    reason = None
    if uid is not None and uid != meta.get("uid", ""):
        reason = (
            f"the UID in the precondition ({uid}) does not match the UID in record ({meta.get('uid', '')}). "
            "The object might have been deleted and then recreated"
        )
    elif rv is not None and rv != meta.get("resourceVersion", ""):
        reason = (
            f"the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record "
            f"({meta.get('resourceVersion', '')}). The object might have been modified"
        )
    if reason is None:
        return
    qualified = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": {reason}', details)


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _integer_resource(name: str) -> bool:
    """helper.IsIntegerResourceName: the standard integer resources and every extended resource."""
    if name in ("pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps"):
        return True
    if name.startswith("count/"):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


_RESOURCE_MEMO: dict[bytes, tuple[FieldError, ...]] = {}
_RESOURCE_MEMO_SIZE = 1024


def node_resources(obj: Mapping[str, Any]) -> list[FieldError]:
    """ValidateNodeResources: capacity and allocatable are non-negative, integer resources whole (sorted by name;
    Go walks the maps in random order).

    Remembered by the exact JSON of the two lists (types included: "1", 1 and true differ): a fleet's nodes
    report a handful of distinct capacities, and every node write validates them again."""
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        return _node_resources(status)
    try:
        key = orjson.dumps([status.get("capacity"), status.get("allocatable")])
    except (orjson.JSONEncodeError, TypeError):
        return _node_resources(status)
    hit = _RESOURCE_MEMO.get(key)
    if hit is None:
        hit = tuple(_node_resources(status))
        if len(_RESOURCE_MEMO) >= _RESOURCE_MEMO_SIZE:
            _RESOURCE_MEMO.clear()
        _RESOURCE_MEMO[key] = hit
    return list(hit)


def _node_resources(status: Any) -> list[FieldError]:
    errs: list[FieldError] = []
    for field in ("capacity", "allocatable"):
        values = status.get(field)
        if not isinstance(values, Mapping):
            continue
        for name in sorted(values):
            try:
                amount = unmarshal(values[name])
            except ValueError:
                continue  # refused by the decoder already
            path = f"status.{field}.{name}"
            if amount.unscaled < 0:
                errs.append(FieldError("Invalid", path, str(values[name]), "must be greater than or equal to 0"))
            if _integer_resource(name) and milli_value(amount) % 1000 != 0:
                errs.append(FieldError("Invalid", path, str(values[name]), "must be an integer"))
    return errs


def node_taints(obj: Mapping[str, Any]) -> list[FieldError]:
    """validateNodeTaints as ValidateNode calls it (with the `metadata` path it is given upstream)."""
    errs: list[FieldError] = []
    seen: dict[str, set[str]] = {}
    for i, taint in enumerate((obj.get("spec") or {}).get("taints") or []):
        if not isinstance(taint, Mapping):
            continue
        path = f"metadata.taints[{i}]"
        key, value, effect = taint.get("key") or "", taint.get("value") or "", taint.get("effect") or ""
        if not valid_qualified_name(str(key)):
            errs.append(FieldError("Invalid", f"{path}.key", key, MSG_LABEL_KEY))
        if not valid_label_value(str(value)):
            errs.append(FieldError("Invalid", f"{path}.value", value, MSG_LABEL_VALUE))
        if not effect:
            errs.append(FieldError("Required", f"{path}.effect"))
        elif effect not in _TAINT_EFFECTS:
            errs.append(FieldError("NotSupported", f"{path}.effect", effect, supported=_TAINT_EFFECTS))
        if key in seen.get(effect, set()):
            errs.append(
                FieldError(
                    "Duplicate", path, GoLiteral(_go_taint(taint)), "taints must be unique by key and effect pair"
                )
            )
            continue
        seen.setdefault(effect, set()).add(key)
    return errs


def _go_taint(taint: Mapping[str, Any]) -> str:
    # %#v prints a *metav1.Time as its pointer: nil, or an address the twin cannot know (0xc000000000 stands in)
    time_text = "(*v1.Time)(nil)" if not taint.get("timeAdded") else "(*v1.Time)(0xc000000000)"
    return (
        f"core.Taint{{Key:{_go_string(taint.get('key') or '')}, Value:{_go_string(taint.get('value') or '')}, "
        f"Effect:{_go_string(taint.get('effect') or '')}, TimeAdded:{time_text}}}"
    )


def validate_node(obj: Mapping[str, Any], old: Mapping[str, Any] | None, subresource: str | None) -> list[FieldError]:
    """The node strategies: create runs ValidateNode; an update of the node ValidateNode and ValidateNodeUpdate
    (resources reported twice); a /status update ValidateNodeUpdate only."""
    if old is None:
        return node_taints(obj) + node_resources(obj)
    if subresource == "status":
        return node_resources(obj)
    resources = node_resources(obj)  # pure: the second report is the same list
    return node_taints(obj) + resources + resources
