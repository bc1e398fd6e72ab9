"""resource.k8s.io/v1 (Dynamic Resource Allocation): the validation the real API server applies. Pure.

From kubernetes/kubernetes pkg/apis/resource/validation/validation.go, the functions named beside each rule, with the
limits of staging/src/k8s.io/api/resource/v1/types.go. Reproduced: what a DRA driver or a scheduler can get wrong
in what migplan reads (the slice's driver, pool, node selection, device names, attributes with exactly one typed
value, counter sets; a claim's requests and its allocation results). Not reproduced: CEL compilation and cost of
selectors (the twin's scheduler evaluates them, reconciler/twin/dra.py), device taints, binding conditions,
consumable capacity policies, admin access.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import FieldError
from .kinds import DNS1123_LABEL, DNS1123_SUBDOMAIN, MSG_LABEL, MSG_SUBDOMAIN
from .quota import is_extended_resource_name

# staging/src/k8s.io/api/resource/v1/types.go
RESOURCE_SLICE_MAX_DEVICES = 128  # ResourceSliceMaxDevices
RESOURCE_SLICE_MAX_DEVICES_WITH_COUNTERS = 64  # ResourceSliceMaxDevicesWithTaintsOrConsumesCounters
MAX_ATTRIBUTES_AND_CAPACITIES = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
ATTRIBUTE_MAX_VALUE_LENGTH = 64  # DeviceAttributeMaxValueLength
POOL_NAME_MAX_LENGTH = 253  # PoolNameMaxLength
DRIVER_NAME_MAX_LENGTH = 63  # DriverNameMaxLength (validateDriverName = ValidateCSIDriverName)
DEVICE_REQUESTS_MAX = 32  # DeviceRequestsMaxSize
ALLOCATION_RESULTS_MAX = 32  # AllocationResultsMaxSize
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
)
_ATTRIBUTE_KINDS = ("bool", "int", "string", "version")
_NODE_SELECTION = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
MSG_NODE_SELECTION = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"


def _label(value: Any, path: str) -> list[FieldError]:
    if not isinstance(value, str) or value == "":
        return [FieldError("Required", path)]
    if len(value) > 63 or not DNS1123_LABEL.match(value):
        return [FieldError("Invalid", path, value, MSG_LABEL)]
    return []


def _subdomain(value: Any, path: str, *, max_len: int = 253) -> list[FieldError]:
    if not isinstance(value, str) or value == "":
        return [FieldError("Required", path)]
    if len(value) > max_len:
        return [FieldError("TooLong", path, value, f"must be no more than {max_len} bytes")]
    if not DNS1123_SUBDOMAIN.match(value):
        return [FieldError("Invalid", path, value, MSG_SUBDOMAIN)]
    return []


def _pool_name(value: Any, path: str) -> list[FieldError]:
    """validatePoolName: required, at most 253 bytes, every `/`-separated part a DNS subdomain."""
    if not isinstance(value, str) or value == "":
        return [FieldError("Required", path)]
    errs: list[FieldError] = []
    if len(value) > POOL_NAME_MAX_LENGTH:
        errs.append(FieldError("TooLong", path, value, f"must be no more than {POOL_NAME_MAX_LENGTH} bytes"))
    for part in value.split("/"):
        if not DNS1123_SUBDOMAIN.match(part):
            errs.append(FieldError("Invalid", path, value, MSG_SUBDOMAIN))
    return errs


def _attribute(attr: Any, path: str) -> list[FieldError]:
    """validateDeviceAttribute: exactly one of bool/int/string/version, of its type, strings bounded."""
    if not isinstance(attr, dict):
        return [FieldError("Invalid", path, attr, "exactly one value must be specified")]
    set_kinds = [k for k in _ATTRIBUTE_KINDS if attr.get(k) is not None]
    errs: list[FieldError] = []
    if len(set_kinds) != 1:
        return [FieldError("Invalid", path, "" if not set_kinds else attr, "exactly one value must be specified")]
    kind = set_kinds[0]
    value = attr[kind]
    typed = {"bool": isinstance(value, bool), "int": isinstance(value, int) and not isinstance(value, bool)}.get(
        kind, isinstance(value, str)
    )
    if not typed:
        return [FieldError("TypeInvalid", f"{path}.{kind}", value, f"must be of type {kind}")]
    if kind in ("string", "version") and len(value) > ATTRIBUTE_MAX_VALUE_LENGTH:
        errs.append(
            FieldError("TooLong", f"{path}.{kind}", value, f"must have at most {ATTRIBUTE_MAX_VALUE_LENGTH} bytes")
        )
    if kind == "version" and not _SEMVER.match(value):
        errs.append(
            FieldError("Invalid", f"{path}.version", value, "must be a string compatible with semver.org spec 2.0.0")
        )
    return errs


def _device(device: Any, path: str) -> list[FieldError]:
    """validateDevice: a DNS-label name, at most 32 attributes and capacities together, typed attributes."""
    if not isinstance(device, dict):
        return [FieldError("Invalid", path, device, "must be an object")]
    errs = _label(device.get("name"), f"{path}.name")
    attributes = device.get("attributes") or {}
    capacity = device.get("capacity") or {}
    if not isinstance(attributes, dict) or not isinstance(capacity, dict):
        return [*errs, FieldError("Invalid", path, None, "attributes and capacity must be maps")]
    total = len(attributes) + len(capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        errs.append(
            FieldError(
                "Invalid",
                path,
                total,
                f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}",
            )
        )
    for key in sorted(attributes):
        errs += _attribute(attributes[key], f"{path}.attributes[{key}]")
    return errs


def _plainly_valid(device: Any) -> bool:
    """True for a device `_device` finds nothing wrong with whose attributes are all plain strings: the devices
    a driver publishes by the hundred thousand. Checked without building a field path per device and attribute
    (a 5,000-node fleet publishes 300,000 devices, 1.5 million attributes); anything else takes `_device`."""
    if type(device) is not dict:
        return False
    name = device.get("name")
    if type(name) is not str or not 0 < len(name) <= 63 or not DNS1123_LABEL.match(name):
        return False
    attributes = device.get("attributes") or {}
    capacity = device.get("capacity") or {}
    if type(attributes) is not dict or type(capacity) is not dict:
        return False
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        return False
    for attr in attributes.values():
        if type(attr) is not dict or len(attr) != 1:
            return False
        value = attr.get("string")
        if type(value) is not str or len(value) > ATTRIBUTE_MAX_VALUE_LENGTH:
            return False
    return True


def validate_resource_slice(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """ValidateResourceSlice / ValidateResourceSliceUpdate (validateResourceSliceSpec)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("Required", "spec")]
    errs = _subdomain(spec.get("driver"), "spec.driver", max_len=DRIVER_NAME_MAX_LENGTH)
    pool = spec.get("pool")
    if not isinstance(pool, dict):
        errs.append(FieldError("Required", "spec.pool.name"))
    else:
        errs += _pool_name(pool.get("name"), "spec.pool.name")
        count = pool.get("resourceSliceCount", 0)
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            errs.append(FieldError("Invalid", "spec.pool.resourceSliceCount", count, "must be greater than zero"))
        generation = pool.get("generation", 0)
        if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
            errs.append(
                FieldError("Invalid", "spec.pool.generation", generation, "must be greater than or equal to zero")
            )
    if old is not None:
        old_spec = old.get("spec") or {}
        for path, new_value, old_value in (
            ("spec.pool.name", (spec.get("pool") or {}).get("name"), (old_spec.get("pool") or {}).get("name")),
            ("spec.driver", spec.get("driver"), old_spec.get("driver")),
            ("spec.nodeName", spec.get("nodeName"), old_spec.get("nodeName")),
        ):
            if new_value != old_value:
                errs.append(FieldError("Invalid", path, new_value, "field is immutable"))
    chosen = [f for f in _NODE_SELECTION if spec.get(f) not in (None, False, "")]
    if spec.get("nodeName") == "":
        errs.append(FieldError("Invalid", "spec.nodeName", "", "must be either unset or set to a non-empty string"))
    if not chosen:
        errs.append(FieldError("Required", "spec", detail=MSG_NODE_SELECTION))
    elif len(chosen) > 1:
        joined = ", ".join(f"`{f}`" for f in chosen)
        errs.append(
            FieldError("Invalid", "spec", f"{{{joined}}}", MSG_NODE_SELECTION + ", but multiple fields are set")
        )
    elif chosen == ["nodeName"]:
        errs += _subdomain(spec["nodeName"], "spec.nodeName")
    devices, counters = spec.get("devices"), spec.get("sharedCounters")
    if devices is not None and counters is not None:
        errs.append(FieldError("Invalid", "spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    if devices is not None:
        if not isinstance(devices, list):
            return [*errs, FieldError("Invalid", "spec.devices", devices, "must be a list")]
        limit = (
            RESOURCE_SLICE_MAX_DEVICES_WITH_COUNTERS
            if any(isinstance(d, dict) and d.get("consumesCounters") for d in devices)
            else RESOURCE_SLICE_MAX_DEVICES
        )
        if len(devices) > limit:
            errs.append(FieldError("TooMany", "spec.devices", len(devices), f"must have at most {limit} items"))
        seen: set[str] = set()
        for i, d in enumerate(devices):
            if not _plainly_valid(d):
                errs += _device(d, f"spec.devices[{i}]")
            name = d.get("name") if isinstance(d, dict) else None
            if isinstance(name, str) and name in seen:
                errs.append(FieldError("Duplicate", f"spec.devices[{i}].name", name))
            if isinstance(name, str):
                seen.add(name)
    for i, cs in enumerate(counters if isinstance(counters, list) else ()):
        if not isinstance(cs, dict):
            errs.append(FieldError("Invalid", f"spec.sharedCounters[{i}]", cs, "must be an object"))
            continue
        errs += _label(cs.get("name"), f"spec.sharedCounters[{i}].name")
        if not cs.get("counters"):
            errs.append(FieldError("Required", f"spec.sharedCounters[{i}].counters"))
    return errs


def validate_resource_claim(
    obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
) -> list[FieldError]:
    """ValidateResourceClaim (requests: DNS-label names, exactly one of `exactly`/`firstAvailable`, a device
    class), ValidateResourceClaimUpdate (the spec is immutable) and the status update's allocation results
    (validateDeviceRequestAllocationResult: request, driver, pool and device named)."""
    errs: list[FieldError] = []
    if subresource != "status":
        if old is not None and obj.get("spec") != old.get("spec"):
            return [FieldError("Invalid", "spec", None, "field is immutable")]
        errs += _claim_spec(obj.get("spec"), "spec")
    status = obj.get("status") or {}
    allocation = status.get("allocation") if isinstance(status, dict) else None
    results = ((allocation or {}).get("devices") or {}).get("results") if isinstance(allocation, dict) else None
    if isinstance(results, list):
        if len(results) > ALLOCATION_RESULTS_MAX:
            errs.append(FieldError("TooMany", "status.allocation.devices.results", len(results)))
        for i, r in enumerate(results):
            path = f"status.allocation.devices.results[{i}]"
            r = r if isinstance(r, dict) else {}
            errs += _label(
                r.get("request", "").split("/")[0] if isinstance(r.get("request"), str) else None, f"{path}.request"
            )
            errs += _subdomain(r.get("driver"), f"{path}.driver", max_len=DRIVER_NAME_MAX_LENGTH)
            errs += _pool_name(r.get("pool"), f"{path}.pool")
            errs += _label(r.get("device"), f"{path}.device")
    reserved = status.get("reservedFor") if isinstance(status, dict) else None
    if isinstance(reserved, list) and len(reserved) > RESERVED_FOR_MAX:
        errs.append(FieldError("TooMany", "status.reservedFor", len(reserved)))
    return errs


def _claim_spec(spec: Any, path: str) -> list[FieldError]:
    if not isinstance(spec, dict):
        return []
    requests = (spec.get("devices") or {}).get("requests") or []
    if not isinstance(requests, list):
        return [FieldError("Invalid", f"{path}.devices.requests", requests, "must be a list")]
    errs: list[FieldError] = []
    if len(requests) > DEVICE_REQUESTS_MAX:
        errs.append(FieldError("TooMany", f"{path}.devices.requests", len(requests)))
    for i, req in enumerate(requests):
        rp = f"{path}.devices.requests[{i}]"
        req = req if isinstance(req, dict) else {}
        errs += _label(req.get("name"), f"{rp}.name")
        exactly, first = req.get("exactly"), req.get("firstAvailable")
        if exactly is None and not first:
            errs.append(FieldError("Required", rp, detail="exactly one of `exactly` or `firstAvailable` is required"))
        elif exactly is not None and first:
            errs.append(
                FieldError(
                    "Invalid",
                    rp,
                    None,
                    "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
                )
            )
        elif isinstance(exactly, dict):
            errs += _subdomain(exactly.get("deviceClassName"), f"{rp}.exactly.deviceClassName")
    return errs


def validate_device_class(obj: dict[str, Any]) -> list[FieldError]:
    """ValidateDeviceClass: selectors carry a CEL expression (compiled by the twin's scheduler, not here)."""
    spec = obj.get("spec") or {}
    errs: list[FieldError] = []
    for i, sel in enumerate(spec.get("selectors") or []):
        expression = ((sel or {}).get("cel") or {}).get("expression") if isinstance(sel, dict) else None
        if not isinstance(expression, str) or not expression.strip():
            errs.append(FieldError("Required", f"spec.selectors[{i}].cel.expression"))
    # validateDeviceClassSpec: `must be a valid extended resource name` (helper.IsExtendedResourceName).
    ext = spec.get("extendedResourceName")
    if ext is not None and (not isinstance(ext, str) or not is_extended_resource_name(ext)):
        errs.append(FieldError("Invalid", "spec.extendedResourceName", ext, "must be a valid extended resource name"))
    return errs


def validate_claim_template(obj: dict[str, Any]) -> list[FieldError]:
    """ValidateResourceClaimTemplate: the embedded claim spec as a claim's (spec.spec)."""
    return _claim_spec((obj.get("spec") or {}).get("spec"), "spec.spec")
