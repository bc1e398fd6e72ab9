"""The twin scheduler's DRA allocator: a ResourceClaim's requests against a node's ResourceSlices.

Structured parameters as the scheduler's allocator applies them (k8s.io/dynamic-resource-allocation/structured;
the rules are the resource/v1 types.go comments of `ExactDeviceRequest`, `DeviceSelector`, `CELDeviceSelector`):
- a request names a DeviceClass; a device matches when every selector of the class and of the request is true;
- selectors are CEL, evaluated here with a maintained CEL library (cel-python), on an object `device` with
  `driver`, `attributes` and `capacity` grouped by domain (an unqualified name is in the driver's domain);
- a selector that evaluates to anything but a boolean, or fails at run time, aborts the allocation;
- `allocationMode` ExactCount (the default, `count` 1) or All;
- a device already allocated to another claim is not a candidate; nor, under DynamicMIG, one that consumes a
  counter (memory slice) an allocated device of the same counter set consumes: the partitions would overlap.
An unknown domain looked up in `device.attributes` or `device.capacity` is an empty map (types.go), emulated by
adding an empty map for every domain the expression spells out. Not modelled: constraints (matchAttribute),
firstAvailable, admin access, tolerations, consumable capacity, scoring.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import celpy
from celpy.adapter import json_to_cel

_DOMAIN_LOOKUP = re.compile(r"device\.(?:attributes|capacity)\[\s*['\"]([^'\"]+)['\"]\s*\]")


class AllocationError(Exception):
    """The claim cannot be allocated; the message is the scheduler's reason."""


def _attribute_value(attr: Mapping[str, Any]) -> Any:
    for kind in ("bool", "int", "string", "version"):
        if kind in attr:
            return attr[kind]
    return None


def _grouped(values: Mapping[str, Any], driver: str, domains: Iterable[str], *, capacity: bool) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {d: {} for d in domains}
    for name, raw in values.items():
        domain, _, short = name.rpartition("/")
        value = (raw.get("value") if capacity else _attribute_value(raw)) if isinstance(raw, Mapping) else None
        out.setdefault(domain or driver, {})[short] = value
    return out


class Selector:
    """One compiled CEL selector expression."""

    _env = celpy.Environment()

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self._program = self._env.program(self._env.compile(expression))
        except Exception as exc:  # celpy's parse errors have no common base beyond Exception
            raise AllocationError(f"selector {expression!r} does not compile: {exc}") from exc
        self.domains = tuple(_DOMAIN_LOOKUP.findall(expression))

    def matches(self, driver: str, device: Mapping[str, Any]) -> bool:
        subject = {
            "driver": driver,
            "attributes": _grouped(device.get("attributes") or {}, driver, self.domains, capacity=False),
            "capacity": _grouped(device.get("capacity") or {}, driver, self.domains, capacity=True),
        }
        try:
            result = self._program.evaluate({"device": json_to_cel(subject)})
        except Exception as exc:
            raise AllocationError(f"CEL runtime error in {self.expression!r}: {exc}") from exc
        if not isinstance(result, celpy.celtypes.BoolType):
            raise AllocationError(f"selector {self.expression!r} returned {type(result).__name__}, not a boolean")
        return bool(result)


def _selectors(raw: Any) -> list[Selector]:
    out = []
    for sel in raw or ():
        expression = ((sel or {}).get("cel") or {}).get("expression") if isinstance(sel, Mapping) else None
        if isinstance(expression, str):
            out.append(Selector(expression))
    return out


def _counters(device: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {
        (c.get("counterSet", ""), name)
        for c in device.get("consumesCounters") or ()
        if isinstance(c, Mapping)
        for name in (c.get("counters") or {})
    }


def allocate(
    claim: Mapping[str, Any],
    *,
    node: str,
    slices: Sequence[Mapping[str, Any]],
    classes: Mapping[str, Mapping[str, Any]],
    allocated: Iterable[tuple[str, str, str]],
) -> list[dict[str, str]]:
    """The allocation results (`status.allocation.devices.results`) for `claim` on `node`; AllocationError when
    the claim cannot be satisfied there. `allocated`: (driver, pool, device) of every device already allocated."""
    taken = set(allocated)
    devices: list[tuple[str, str, Mapping[str, Any]]] = [
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d)
        for s in slices
        if s.get("spec", {}).get("nodeName") == node
        for d in s["spec"].get("devices") or ()
    ]
    used = set().union(*(_counters(d) for drv, pool, d in devices if (drv, pool, d["name"]) in taken))
    results: list[dict[str, str]] = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
        exactly = request.get("exactly")
        if not isinstance(exactly, Mapping):
            raise AllocationError(f"request {request.get('name')}: only `exactly` requests are modelled")
        cls = classes.get(exactly.get("deviceClassName", ""))
        if cls is None:
            raise AllocationError(
                f"request {request.get('name')}: device class {exactly.get('deviceClassName')} not found"
            )
        selectors = _selectors((cls.get("spec") or {}).get("selectors")) + _selectors(exactly.get("selectors"))
        mode = exactly.get("allocationMode", "ExactCount")
        want = exactly.get("count", 1) if mode == "ExactCount" else None
        got: list[dict[str, str]] = []
        for driver, pool, device in devices:
            key = (driver, pool, device["name"])
            counters = _counters(device)
            if key in taken or counters & used:
                continue
            if all(s.matches(driver, device) for s in selectors):
                got.append({"request": request["name"], "driver": driver, "pool": pool, "device": device["name"]})
                taken.add(key)
                used |= counters
                if want is not None and len(got) == want:
                    break
        if want is not None and len(got) < want:
            raise AllocationError(f"cannot allocate all claims: request {request['name']} found {len(got)} of {want}")
        results.extend(got)
    return results
