"""ResourceQuota: the admission plugin's check and the quota controller's usage, for the kinds the twin serves.

Pure. Sources, kubernetes/kubernetes:
- pkg/quota/v1/evaluator/core/pods.go: `PodUsageFunc` / `podComputeUsageHelper` (count/pods always; pods, cpu,
  memory, ephemeral-storage, requests.*, limits.*, hugepages and `requests.<extended resource>` while the pod is not
  terminal and not past its deletion grace period, `QuotaV1Pod`), `Constraints` (a quota on cpu or memory makes
  every container state it: "must specify ..."), the scopes BestEffort / NotBestEffort / Terminating /
  NotTerminating and the PriorityClass scope selector;
- pkg/quota/v1/evaluator/core/services.go and the generic object-count evaluator: `services` and
  `count/<resource>[.<group>]` (plus the legacy `configmaps`) count objects; quotas with scopes never match them;
- plugin/pkg/admission/resourcequota/controller.go `checkRequest`: only `status.hard` counts (a quota the controller
  has not seen yet limits nothing), "status unknown for quota" when used is missing for a limited resource, the 403
  "exceeded quota: NAME, requested: ..., used: ..., limited: ..." with `prettyPrint`, and on success the new
  `status.used` written to the quota;
- pkg/controller/resourcequota/resource_quota_controller.go `syncResourceQuota`: status.hard = spec.hard and
  status.used recomputed from every object (zero for the unused), run by the embedded (non-bare) twin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from .kinds import qos_class, valid_qualified_name
from .limitranger import pod_totals
from .quantity import ZERO, Quantity, add, compare, parse

_POD_RESOURCES = frozenset(
    {
        "count/pods",
        "pods",
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
    }
)
_VALIDATION_SET = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_ONE = parse("1")


def is_extended_resource_name(name: str) -> bool:
    """helper.IsExtendedResourceName (DeviceClass spec.extendedResourceName is validated with it too)."""
    return _is_extended(name)


def _is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: not native (no `/`, or a kubernetes.io domain), not requests.*, and
    `requests.<name>` is a qualified name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return valid_qualified_name(f"requests.{name}")


def object_count_name(plural: str, group: str) -> str:
    return f"count/{plural}.{group}" if group else f"count/{plural}"


def _compute_usage(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> dict[str, Quantity]:
    """podComputeUsageHelper."""
    out: dict[str, Quantity] = {"pods": _ONE}
    for res in ("cpu", "memory", "ephemeral-storage"):
        if res in requests:
            out[res] = requests[res]
            out[f"requests.{res}"] = requests[res]
        if res in limits:
            out[f"limits.{res}"] = limits[res]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            out[name] = value
            out[f"requests.{name}"] = value
        if _is_extended(name):
            out[f"requests.{name}"] = value
    return out


def _counts(pod: Mapping[str, Any], now: datetime) -> bool:
    """QuotaV1Pod: not terminal, and not stuck past its deletion grace period."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    stamp, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if stamp and grace is not None:
        try:
            expired = now > datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) + timedelta(
                seconds=int(grace)
            )
        except (ValueError, TypeError, OverflowError):
            return True
        if expired:
            return False
    return True


def usage(resource: str, group: str, obj: Mapping[str, Any], now: datetime) -> dict[str, Quantity]:
    """What one object charges: its object count, and for pods and services their evaluator's resources."""
    out: dict[str, Quantity] = {object_count_name(resource.split(".", 1)[0], group): _ONE}
    if resource == "configmaps":
        out["configmaps"] = _ONE
    elif resource == "services":
        out["services"] = _ONE
    elif resource == "pods" and _counts(obj, now):
        out.update(_compute_usage(*pod_totals(obj.get("spec") or {})))
    return out


def _scope_matches(scope: str, pod: Mapping[str, Any], operator: str = "Exists", values: Iterable[str] = ()) -> bool:
    spec = pod.get("spec") or {}
    if scope == "BestEffort":
        return qos_class(spec) == "BestEffort"
    if scope == "NotBestEffort":
        return qos_class(spec) != "BestEffort"
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None
    if scope == "PriorityClass":
        name = spec.get("priorityClassName") or ""
        if operator == "Exists":
            return bool(name)
        if operator == "DoesNotExist":
            return not name
        if operator == "In":
            return name in set(values)
        if operator == "NotIn":
            return name not in set(values)
    return False  # CrossNamespacePodAffinity and unknown scopes: not modelled, never matched


def matches(quota: Mapping[str, Any], resource: str, obj: Mapping[str, Any]) -> bool:
    """The evaluator's Matches: every scope of the quota must select the object (only pods have scopes)."""
    spec = quota.get("spec") or {}
    scopes = [s for s in spec.get("scopes") or [] if isinstance(s, str)]
    selector = [e for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or [] if isinstance(e, Mapping)]
    if not scopes and not selector:
        return True
    if resource != "pods":
        return False
    return all(_scope_matches(s, obj) for s in scopes) and all(
        _scope_matches(str(e.get("scopeName")), obj, str(e.get("operator")), e.get("values") or []) for e in selector
    )


def limited_resources(resource: str, names: Iterable[str]) -> list[str]:
    """MatchingResources: the hard resources an object of this kind (`plural[.group]`) can charge."""
    out = []
    for name in names:
        own_count = name == f"count/{resource}"
        legacy = name == resource and resource in ("configmaps", "services")
        pod_resource = resource == "pods" and (
            name in _POD_RESOURCES
            or name.startswith(("hugepages-", "requests.hugepages-"))
            or (name.startswith("requests.") and _is_extended(name[len("requests.") :]))
        )
        if own_count or legacy or pod_resource:
            out.append(name)
    return out


def _list(values: Mapping[str, Any]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for name, raw in values.items():
        try:
            out[name] = parse(str(raw))
        except ValueError:
            continue
    return out


def _pretty(values: Mapping[str, Quantity]) -> str:
    return ",".join(f"{k}={values[k]}" for k in sorted(values))


def _constraints(required: Iterable[str], pod: Mapping[str, Any]) -> str | None:
    """podEvaluator.Constraints: containers must state the cpu/memory resources a quota limits."""
    wanted = set(required) & _VALIDATION_SET
    if not wanted:
        return None
    missing: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or []:
            if not isinstance(c, Mapping):
                continue
            res = c.get("resources") or {}
            have = set(_compute_usage(_list(res.get("requests") or {}), _list(res.get("limits") or {})))
            for name in wanted - have:
                missing.setdefault(name, set()).add(str(c.get("name", "")))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))


class QuotaRefusal(Exception):
    """The reason checkRequest refuses the object (the caller wraps it in admission's 403)."""


def admit(
    quotas: Iterable[Mapping[str, Any]],
    resource: str,
    group: str,
    obj: Mapping[str, Any],
    now: datetime,
    pending: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, str]]:
    """checkRequest for a create: {quota name: new status.used} for every quota it charges, or QuotaRefusal.

    `pending` overrides the stored status.used of some quotas (objects admitted earlier in the same batch)."""
    charged: dict[str, dict[str, str]] = {}
    delta = usage(resource, group, obj, now)
    for quota in quotas:
        name = (quota.get("metadata") or {}).get("name", "")
        if not matches(quota, resource, obj):
            continue
        status = quota.get("status") or {}
        hard = _list(status.get("hard") or {})
        used_raw = (pending or {}).get(name, status.get("used") or {})
        limited = limited_resources(resource, hard)
        if not limited:
            continue
        if resource == "pods":
            problem = _constraints(limited, obj)
            if problem is not None:
                raise QuotaRefusal(f"failed quota: {name}: {problem}")
        if any(r not in used_raw for r in limited):
            raise QuotaRefusal(f"status unknown for quota: {name}, resources: {','.join(sorted(limited))}")
        used = _list(used_raw)
        requested = {k: v for k, v in delta.items() if k in hard}
        if not requested:
            continue
        new_used = dict(used)
        for k, v in requested.items():
            new_used[k] = add(new_used.get(k, ZERO), v)
        exceeded = sorted(k for k in requested if compare(new_used[k], hard[k]) > 0)
        if exceeded:
            raise QuotaRefusal(
                f"exceeded quota: {name}, requested: {_pretty({k: requested[k] for k in exceeded})}, "
                f"used: {_pretty({k: used.get(k, ZERO) for k in exceeded if k in used})}, "
                f"limited: {_pretty({k: hard[k] for k in exceeded})}"
            )
        charged[name] = {k: str(v) for k, v in new_used.items()}
    return charged


def recompute(
    quota: Mapping[str, Any], objects: Iterable[tuple[str, str, Mapping[str, Any]]], now: datetime
) -> dict[str, Any]:
    """syncResourceQuota: the status the quota controller writes (hard from spec, used from every object)."""
    hard_raw = (quota.get("spec") or {}).get("hard") or {}
    hard = _list(hard_raw)
    used: dict[str, Quantity] = dict.fromkeys(hard, ZERO)
    for resource, group, obj in objects:
        if not matches(quota, resource, obj):
            continue
        for k, v in usage(resource, group, obj, now).items():
            if k in used:
                used[k] = add(used[k], v)
    return {"hard": {k: str(v) for k, v in hard.items()}, "used": {k: str(v) for k, v in used.items()}}
