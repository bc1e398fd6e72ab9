"""The LimitRanger admission plugin for pods, from kubernetes/kubernetes plugin/pkg/admission/limitranger/admission.go.

Pure. Runs on pod create only (`SupportsAttributes`: containers cannot change on update), once per LimitRange of the
pod's namespace, in storage order:
- mutating (`PodMutateLimitFunc`): every container and init container gets the Container-type items' `default`
  limits and `defaultRequest` requests it does not set, and the pod the `kubernetes.io/limit-ranger` annotation
  listing them (`mergePodResourceRequirements`);
- validating (`PodValidateLimitFunc`): Container-type min / max / maxLimitRequestRatio per container and init
  container, Pod-type ones against the pod's total requests and limits; the first LimitRange with a violation is the
  403 `pods "x" is forbidden: <messages>` (`minConstraint`, `maxConstraint`, `limitRequestRatioConstraint`).
Go iterates the min/max maps in random order; the twin reports violations sorted by resource name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .quantity import Quantity, add, compare, parse

ANNOTATION = "kubernetes.io/limit-ranger"


def _items(limit_range: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    limits = (limit_range.get("spec") or {}).get("limits") or []
    return [item for item in limits if isinstance(item, Mapping) and item.get("type") == kind]


def _containers(spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for field, label in (("containers", "container"), ("initContainers", "init container")):
        out.extend((label, c) for c in spec.get(field) or [] if isinstance(c, dict))
    return out


def mutate(limit_range: Mapping[str, Any], pod: dict[str, Any]) -> None:
    """PodMutateLimitFunc for one LimitRange."""
    default_limits: dict[str, Any] = {}
    default_requests: dict[str, Any] = {}
    for item in _items(limit_range, "Container"):
        default_requests.update(item.get("defaultRequest") or {})
        default_limits.update(item.get("default") or {})
    notes: list[str] = []
    for label, container in _containers(pod.get("spec") or {}):
        res = container.get("resources")
        if not isinstance(res, dict):
            res = container["resources"] = {}
        set_requests: list[str] = []
        set_limits: list[str] = []
        for field, defaults, record in (
            ("limits", default_limits, set_limits),
            ("requests", default_requests, set_requests),
        ):
            found = res.get(field)
            current: dict[str, Any] = found if isinstance(found, dict) else {}
            for name, value in defaults.items():
                if name not in current:
                    current[name] = value
                    record.append(name)
            if current:
                res[field] = current
        name = container.get("name", "")
        if set_requests:
            notes.append(", ".join(sorted(set_requests)) + f" request for {label} {name}")
        if set_limits:
            notes.append(", ".join(sorted(set_limits)) + f" limit for {label} {name}")
    if notes:
        meta = pod["metadata"]
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _q(values: Any, name: str) -> Quantity | None:
    raw = values.get(name) if isinstance(values, Mapping) else None
    if raw is None:
        return None
    try:
        return parse(str(raw))
    except ValueError:
        return None


def _min(kind: str, name: str, enforced: Any, requests: Any, limits: Any) -> str | None:
    want, req, lim = parse(str(enforced)), _q(requests, name), _q(limits, name)
    if req is None:
        return f"minimum {name} usage per {kind} is {want}.  No request is specified"
    if compare(req, want) < 0:
        return f"minimum {name} usage per {kind} is {want}, but request is {req}"
    if lim is not None and compare(lim, want) < 0:
        return f"minimum {name} usage per {kind} is {want}, but limit is {lim}"
    return None


def _max(kind: str, name: str, enforced: Any, requests: Any, limits: Any) -> str | None:
    want, req, lim = parse(str(enforced)), _q(requests, name), _q(limits, name)
    if lim is None:
        return f"maximum {name} usage per {kind} is {want}.  No limit is specified"
    if compare(lim, want) > 0:
        return f"maximum {name} usage per {kind} is {want}, but limit is {lim}"
    if req is not None and compare(req, want) > 0:
        return f"maximum {name} usage per {kind} is {want}, but request is {req}"
    return None


def _ratio(kind: str, name: str, enforced: Any, requests: Any, limits: Any) -> str | None:
    want, req, lim = parse(str(enforced)), _q(requests, name), _q(limits, name)
    if req is None or req.unscaled == 0:
        return f"{name} max limit to request ratio per {kind} is {want}, but no request is specified or request is 0"
    if lim is None or lim.unscaled == 0:
        return f"{name} max limit to request ratio per {kind} is {want}, but no limit is specified or limit is 0"
    observed = lim.as_decimal() / req.as_decimal()
    if observed > want.as_decimal():
        return f"{name} max limit to request ratio per {kind} is {want}, but provided ratio is {float(observed):f}"
    return None


def _check(kind: str, item: Mapping[str, Any], requests: Any, limits: Any) -> list[str]:
    errs: list[str] = []
    for field, rule in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        bounds = item.get(field) or {}
        for name in sorted(bounds):
            msg = rule(kind, name, bounds[name], requests, limits)
            if msg is not None:
                errs.append(msg)
    return errs


def _total(spec: Mapping[str, Any], field: str) -> dict[str, Quantity]:
    """resourcehelper.PodRequests / PodLimits: containers summed, the init containers' peak, then overhead."""
    total: dict[str, Quantity] = {}
    sidecars: dict[str, Quantity] = {}
    peak: dict[str, Quantity] = {}

    def values(c: Mapping[str, Any]) -> dict[str, Quantity]:
        out: dict[str, Quantity] = {}
        raw = (c.get("resources") or {}).get(field) or {}
        for name in raw:
            q = _q(raw, name)
            if q is not None:
                out[name] = q
        return out

    def plus(a: dict[str, Quantity], b: dict[str, Quantity]) -> dict[str, Quantity]:
        out = dict(a)
        for k, v in b.items():
            out[k] = add(out[k], v) if k in out else v
        return out

    def at_least(a: dict[str, Quantity], b: dict[str, Quantity]) -> dict[str, Quantity]:
        out = dict(a)
        for k, v in b.items():
            if k not in out or compare(v, out[k]) > 0:
                out[k] = v
        return out

    for c in spec.get("containers") or []:
        if isinstance(c, Mapping):
            total = plus(total, values(c))
    for c in spec.get("initContainers") or []:
        if not isinstance(c, Mapping):
            continue
        own = values(c)
        if c.get("restartPolicy") == "Always":  # a sidecar runs alongside everything after it
            total = plus(total, own)
            sidecars = plus(sidecars, own)
            own = dict(sidecars)
        else:
            own = plus(own, sidecars)
        peak = at_least(peak, own)
    total = at_least(total, peak)
    overhead = spec.get("overhead")
    if isinstance(overhead, Mapping):
        total = plus(total, {k: q for k in overhead if (q := _q(overhead, k)) is not None})
    return total


def pod_totals(spec: Mapping[str, Any]) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """(requests, limits) of the whole pod, as the scheduler and quota count them."""
    return _total(spec, "requests"), _total(spec, "limits")


def validate(limit_range: Mapping[str, Any], pod: Mapping[str, Any]) -> list[str]:
    """PodValidateLimitFunc for one LimitRange: the violation messages, in order."""
    spec = pod.get("spec") or {}
    errs: list[str] = []
    for item in (i for i in (limit_range.get("spec") or {}).get("limits") or [] if isinstance(i, Mapping)):
        if item.get("type") == "Container":
            for _, container in _containers(spec):
                res = container.get("resources") or {}
                errs += _check("Container", item, res.get("requests") or {}, res.get("limits") or {})
        elif item.get("type") == "Pod":
            requests, limits = pod_totals(spec)
            errs += _check(
                "Pod", item, {k: str(v) for k, v in requests.items()}, {k: str(v) for k, v in limits.items()}
            )
    return errs


def admit(limit_ranges: Iterable[Mapping[str, Any]], pod: dict[str, Any]) -> None:
    """The mutating half for every LimitRange of the namespace."""
    for limit_range in limit_ranges:
        mutate(limit_range, pod)
