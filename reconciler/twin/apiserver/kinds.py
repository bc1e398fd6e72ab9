"""Per-kind admission, defaulting and validation of the built-in types, with the real server's messages.

Pure (the random suffixes come from the caller's `random.Random`). Each function works on a JSON dict the store
owns. What is reproduced and from where:
- object metadata: name required / RFC 1123 subdomain (label for namespaces), label keys and values (nodes.json);
- Node: the status structs every Node serialises (the not-ready taint is admission.py's);
- Namespace: `kubernetes.io/metadata.name` label, `kubernetes` finalizer, phase Active (configmaps.json);
- Pod: QoS class, extended-resource rules (requests == limits, integers only) and immutable spec (pods.json);
  admission is admission.py's and defaults are defaults.py's;
- DaemonSet: selector must match template labels (daemonset.json);
- Lease: MicroTime with exactly 6 fractional digits, normalised to UTC; leaseDurationSeconds > 0 (leases.json);
- Event: core involvedObject namespace rule and events.k8s.io required fields, plus the core <-> events.k8s.io
  conversion of the shared storage (events.json);
- ConfigMap: data keys (configmaps.json).
"""

from __future__ import annotations

import copy
import functools
import random
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from .errors import ApiError, FieldError, bad_request
from .quantity import parse_quantity

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

MSG_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
MSG_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
MSG_LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
MSG_LABEL_KEY = (
    "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
    "'example.com/MyName')"
)
MSG_CONFIG_KEY = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
MSG_POD_UPDATE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


_NOW_CACHE: list[Any] = [0, ""]


def now_rfc3339() -> str:
    """The current time as metav1.Time serialises it (seconds); formatted once per second."""
    second = int(time.time())
    if _NOW_CACHE[0] != second:
        _NOW_CACHE[0], _NOW_CACHE[1] = second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(_NOW_CACHE[1])


def random_suffix(rng: random.Random, n: int = 5) -> str:
    """A generated-name suffix from the apiserver's alphabet (no vowels, no confusable digits)."""
    return "".join(rng.choices(_SUFFIX_ALPHABET, k=n))


# ---------------------------------------------------------------- metadata


@functools.lru_cache(maxsize=65536)
def valid_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


@functools.lru_cache(maxsize=65536)
def valid_qualified_name(key: str) -> bool:
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


def validate_metadata(obj: dict[str, Any], *, label_name: bool = False, repeat: int = 1) -> list[FieldError]:
    """Name format, labels and annotation keys. `repeat` mirrors update paths that report label errors n times."""
    meta = obj.get("metadata") or {}
    errs: list[FieldError] = []
    name = meta.get("name") or ""
    if not name and not meta.get("generateName"):
        errs.append(FieldError("Required", "metadata.name", detail="name or generateName is required"))
    elif name:
        if label_name and not DNS1123_LABEL.match(name):
            errs.append(FieldError("Invalid", "metadata.name", name, MSG_LABEL))
        elif not label_name and (len(name) > 253 or not DNS1123_SUBDOMAIN.match(name)):
            errs.append(FieldError("Invalid", "metadata.name", name, MSG_SUBDOMAIN))
    label_errs: list[FieldError] = []
    for key, value in (meta.get("labels") or {}).items():
        if not valid_qualified_name(key):
            label_errs.append(FieldError("Invalid", "metadata.labels", key, MSG_LABEL_KEY))
        if not isinstance(value, str) or not valid_label_value(value):
            label_errs.append(FieldError("Invalid", "metadata.labels", value, MSG_LABEL_VALUE))
    errs.extend(label_errs * repeat)
    for key in meta.get("annotations") or {}:
        if not valid_qualified_name(key):
            errs.append(FieldError("Invalid", "metadata.annotations", key, MSG_LABEL_KEY))
    return errs


# ---------------------------------------------------------------- nodes and namespaces


# NodeSystemInfo's fields (k8s.io/api core/v1 types.go): strings without omitempty, so always serialised.
NODE_INFO_FIELDS = (
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
)


def default_node(obj: dict[str, Any]) -> None:
    """The NodeStatus members that are structs, not pointers: always serialised, empty when not sent."""
    obj.setdefault("spec", {})
    status = obj.setdefault("status", {})
    status.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 0}})
    info = status.setdefault("nodeInfo", {})
    for key in NODE_INFO_FIELDS:
        info.setdefault(key, "")


def default_namespace(obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj["status"] = {"phase": "Active"}


def validate_configmap(obj: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    for field in ("data", "binaryData"):
        for key in obj.get(field) or {}:
            if len(key) > 253 or not _CONFIG_KEY.match(key):
                errs.append(FieldError("Invalid", f"{field}[{key}]", key, MSG_CONFIG_KEY))
    return errs


# ---------------------------------------------------------------- pods


def _all_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for f in ("initContainers", "containers") for c in (spec.get(f) or []) if isinstance(c, dict)]


def qos_class(spec: dict[str, Any]) -> str:
    """BestEffort / Burstable / Guaranteed from cpu and memory only (extended resources do not count)."""
    containers = spec.get("containers") or []
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for r in ("cpu", "memory"):
            if r in req or r in lim:
                any_set = True
            if r not in lim or (r in req and parse_quantity(req[r]) != parse_quantity(lim[r])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _is_extended(name: str) -> bool:
    return "/" in name and not name.split("/", 1)[0].endswith("kubernetes.io") and not name.startswith("requests.")


def validate_pod_spec(spec: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    containers = spec.get("containers")
    if not containers:
        errs.append(FieldError("Required", f"{path}.containers"))
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            cpath = f"{path}.{field}[{i}]"
            if not c.get("name"):
                errs.append(FieldError("Required", f"{cpath}.name"))
            if not c.get("image"):
                errs.append(FieldError("Required", f"{cpath}.image"))
            errs.extend(_validate_resources(c.get("resources") or {}, f"{cpath}.resources"))
    return errs


def _validate_resources(res: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    for field, values in (("limits", limits), ("requests", requests)):
        for name in sorted(values):
            fpath = f"{path}.{field}[{name}]"
            if "/" not in name and name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
                errs.append(FieldError("Invalid", fpath, name, "must be a standard resource type or fully qualified"))
                errs.append(FieldError("Invalid", fpath, name, "must be a standard resource for containers"))
                continue
            if "/" in name and not valid_qualified_name(name):
                errs.append(FieldError("Invalid", fpath, name, "must be a standard resource type or fully qualified"))
                continue
            value = parse_quantity(values[name])
            if value < 0:
                errs.append(FieldError("Invalid", fpath, str(values[name]), "must be greater than or equal to 0"))
            if _is_extended(name) and value != value.to_integral_value():
                errs.append(FieldError("Invalid", fpath, str(values[name]), "must be an integer"))
    for name in sorted(requests):
        if "/" not in name and name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            continue
        req = parse_quantity(requests[name])
        if name in limits:
            lim = parse_quantity(limits[name])
            if _is_extended(name) or name.startswith("hugepages-"):
                if req != lim:
                    errs.append(
                        FieldError(
                            "Invalid",
                            f"{path}.requests",
                            str(requests[name]),
                            f"must be equal to {name} limit of {limits[name]}",
                        )
                    )
            elif req > lim:
                errs.append(
                    FieldError(
                        "Invalid",
                        f"{path}.requests",
                        str(requests[name]),
                        f"must be less than or equal to {name} limit of {limits[name]}",
                    )
                )
        elif _is_extended(name):
            errs.append(
                FieldError("Required", f"{path}.limits", detail="Limit must be set for non overcommitable resources")
            )
    return errs


def validate_pod_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """Pod spec is immutable except images, activeDeadlineSeconds, tolerations additions, grace period."""
    a, b = copy.deepcopy(new.get("spec") or {}), copy.deepcopy(old.get("spec") or {})
    for spec in (a, b):
        for c in _all_containers(spec):
            c.pop("image", None)
        spec.pop("activeDeadlineSeconds", None)
        spec.pop("tolerations", None)
        spec.pop("terminationGracePeriodSeconds", None)
    errs: list[FieldError] = []
    if a != b:
        errs.append(FieldError("Forbidden", "spec", detail=MSG_POD_UPDATE))
    old_tol = (old.get("spec") or {}).get("tolerations") or []
    new_tol = (new.get("spec") or {}).get("tolerations") or []
    if any(t not in new_tol for t in old_tol) and not errs:
        errs.append(FieldError("Forbidden", "spec", detail=MSG_POD_UPDATE))
    return errs


def graceful_delete(obj: dict[str, Any], grace: int) -> None:
    meta = obj["metadata"]
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=grace)
    meta["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    meta["deletionGracePeriodSeconds"] = grace


# ---------------------------------------------------------------- daemonsets


def daemonset_initial_status() -> dict[str, Any]:
    return {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}


def validate_daemonset(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errs: list[FieldError] = []
    selector = spec.get("selector")
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not selector:
        errs.append(FieldError("Required", "spec.selector"))
    else:
        match = selector.get("matchLabels") or {}
        if any(labels.get(k) != v for k, v in match.items()):
            errs.append(
                FieldError(
                    "Invalid", "spec.template.metadata.labels", labels, "`selector` does not match template `labels`"
                )
            )
    errs.extend(validate_pod_spec((spec.get("template") or {}).get("spec") or {}, "spec.template.spec"))
    return errs


# ---------------------------------------------------------------- leases


_MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"


def normalize_micro_time(value: str, kind: str) -> str:
    """metav1.MicroTime: exactly 6 fractional digits; returned in UTC 'Z' form (leases.json)."""

    def fail(rest: str, elem: str) -> ApiError:
        return bad_request(
            f'{kind} in version "v1" cannot be handled as a {kind}: parsing time "{value}" as '
            f'"{_MICRO_LAYOUT}": cannot parse "{rest}" as "{elem}"'
        )

    m = re.match(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})", value)
    if not m:
        raise fail(value, "2006")
    rest = value[m.end() :]
    frac = re.match(r"^\.(\d+)", rest)
    if not frac or len(frac.group(1)) < 6:
        raise fail(rest, ".000000")
    digits = frac.group(1)[:6]
    tail = rest[7:]
    zone = re.match(r"^(Z|[+-]\d{2}:\d{2})$", tail)
    if not zone:
        raise fail(tail, "Z07:00")
    parsed = datetime.strptime(value[: m.end()] + "." + digits + tail.replace("Z", "+00:00"), "%Y-%m-%dT%H:%M:%S.%f%z")
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def decode_lease(obj: dict[str, Any]) -> None:
    spec = obj.get("spec") or {}
    for field in ("acquireTime", "renewTime"):
        if isinstance(spec.get(field), str):
            spec[field] = normalize_micro_time(spec[field], "Lease")


def validate_lease(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errs: list[FieldError] = []
    if (
        "leaseDurationSeconds" in spec
        and spec["leaseDurationSeconds"] is not None
        and spec["leaseDurationSeconds"] <= 0
    ):
        errs.append(
            FieldError("Invalid", "spec.leaseDurationSeconds", spec["leaseDurationSeconds"], "must be greater than 0")
        )
    if spec.get("leaseTransitions") is not None and spec["leaseTransitions"] < 0:
        errs.append(
            FieldError(
                "Invalid", "spec.leaseTransitions", spec["leaseTransitions"], "must be greater than or equal to 0"
            )
        )
    return errs


# ---------------------------------------------------------------- events (shared storage, two API shapes)


def default_core_event(obj: dict[str, Any]) -> None:
    obj.setdefault("eventTime", None)
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")


def validate_event(core: dict[str, Any], namespace: str, *, via_events_api: bool, create: bool) -> list[FieldError]:
    """legacyValidateEvent, plus the strict create rules of events.k8s.io/v1 (core/validation/events.go).

    `core` is the stored (core/v1) form; via_events_api names fields as events.k8s.io does."""
    errs: list[FieldError] = []
    inv = core.get("involvedObject") or {}
    inv_ns = inv.get("namespace", "")
    controller_field = "reportingController" if via_events_api else "reportingComponent"
    if not core.get("eventTime"):
        if inv_ns == "":
            if namespace not in ("", "default"):
                errs.append(FieldError("Invalid", "involvedObject.namespace", inv_ns, "does not match event.namespace"))
        elif namespace != inv_ns:
            errs.append(FieldError("Invalid", "involvedObject.namespace", inv_ns, "does not match event.namespace"))
    else:
        if inv_ns == "" and namespace not in ("default", "kube-system"):
            errs.append(FieldError("Invalid", "involvedObject.namespace", inv_ns, "does not match event.namespace"))
        if not core.get("reportingComponent"):
            errs.append(FieldError("Required", controller_field))
        elif not valid_qualified_name(core["reportingComponent"]):
            errs.append(FieldError("Invalid", controller_field, core["reportingComponent"], MSG_LABEL_KEY))
        if not core.get("reportingInstance"):
            errs.append(FieldError("Required", "reportingInstance"))
        if not core.get("action"):
            errs.append(FieldError("Required", "action"))
        if not core.get("reason"):
            errs.append(FieldError("Required", "reason"))
    if via_events_api and create:
        if not core.get("eventTime"):
            errs.append(FieldError("Required", "eventTime"))
        if core.get("type") not in ("Normal", "Warning"):
            errs.append(FieldError("Invalid", "type", "", f"has invalid value: {core.get('type', '')}"))
        for field, label in (
            ("firstTimestamp", "deprecatedFirstTimestamp"),
            ("lastTimestamp", "deprecatedLastTimestamp"),
        ):
            if core.get(field):
                errs.append(FieldError("Invalid", label, "", "needs to be unset"))
        if core.get("count"):
            errs.append(FieldError("Invalid", "deprecatedCount", "", "needs to be unset"))
        if core.get("source"):
            errs.append(FieldError("Invalid", "deprecatedSource", "", "needs to be unset"))
    return errs


def event_core_to_v1(core: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": core["metadata"]}
    out["eventTime"] = core.get("eventTime")
    if core.get("series"):
        out["series"] = core["series"]
    if core.get("reportingComponent"):
        out["reportingController"] = core["reportingComponent"]
    if core.get("reportingInstance"):
        out["reportingInstance"] = core["reportingInstance"]
    for key in ("action", "reason"):
        if core.get(key):
            out[key] = core[key]
    out["regarding"] = core.get("involvedObject") or {}
    if core.get("related"):
        out["related"] = core["related"]
    if core.get("message"):
        out["note"] = core["message"]
    if core.get("type"):
        out["type"] = core["type"]
    out["deprecatedSource"] = core.get("source") or {}
    out["deprecatedFirstTimestamp"] = core.get("firstTimestamp")
    out["deprecatedLastTimestamp"] = core.get("lastTimestamp")
    if core.get("count"):
        out["deprecatedCount"] = core["count"]
    return out


def event_v1_to_core(ev: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "v1", "metadata": ev.get("metadata") or {}}
    out["involvedObject"] = ev.get("regarding") or {}
    for src, dst in (("reason", "reason"), ("note", "message")):
        if ev.get(src):
            out[dst] = ev[src]
    out["source"] = ev.get("deprecatedSource") or {}
    out["firstTimestamp"] = ev.get("deprecatedFirstTimestamp")
    out["lastTimestamp"] = ev.get("deprecatedLastTimestamp")
    if ev.get("deprecatedCount"):
        out["count"] = ev["deprecatedCount"]
    if ev.get("type"):
        out["type"] = ev["type"]
    out["eventTime"] = ev.get("eventTime")
    if ev.get("series"):
        out["series"] = ev["series"]
    if ev.get("action"):
        out["action"] = ev["action"]
    if ev.get("related"):
        out["related"] = ev["related"]
    out["reportingComponent"] = ev.get("reportingController", "")
    out["reportingInstance"] = ev.get("reportingInstance", "")
    return out


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON documents (1 and 1.0 differ, key order does not matter)."""
    return bool(orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(b, option=orjson.OPT_SORT_KEYS))


# ---------------------------------------------------------------- poddisruptionbudgets (policy/v1)


def default_pdb(obj: dict[str, Any]) -> None:
    """pkg/registry/policy/poddisruptionbudget/strategy.go PrepareForCreate: the status a client sends is
    dropped; the int32 counters are not omitempty, so an unsynced PDB reads all zeros."""
    obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


def validate_pdb(obj: dict[str, Any]) -> list[FieldError]:
    """pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec: minAvailable and maxUnavailable are
    exclusive; unhealthyPodEvictionPolicy is IfHealthyBudget or AlwaysAllow."""
    spec = obj.get("spec") or {}
    errors: list[FieldError] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errors.append(FieldError("Invalid", "spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("IfHealthyBudget", "AlwaysAllow"):
        errors.append(
            FieldError(
                "NotSupported", "spec.unhealthyPodEvictionPolicy", policy, supported=("AlwaysAllow", "IfHealthyBudget")
            )
        )
    return errors
