"""Server-side printing (`meta.k8s.io/v1` Table) for `kubectl get`, with the real server's default columns.

Pure apart from reading the clock for the AGE column. Columns follow kubernetes/pkg/printers/internalversion for the
built-in kinds the twin serves, a CRD's additionalPrinterColumns for custom resources, and Name/Created At otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .resources import ResourceType

Row = Callable[[dict[str, Any]], list[Any]]


def human_duration(since: str | None) -> str:
    """kubectl's HumanDuration for a creationTimestamp (e.g. 45s, 5m, 3h12m, 2d)."""
    if not since:
        return "<unknown>"
    try:
        then = datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    secs = int((datetime.now(UTC) - then).total_seconds())
    if secs < 0:
        return "<invalid>"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        return f"{minutes}m{secs % 60}s" if secs % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    return f"{days}d" if days < 365 * 2 else f"{days // 365}y"


def _age(obj: dict[str, Any]) -> str:
    return human_duration((obj.get("metadata") or {}).get("creationTimestamp"))


def _node_row(obj: dict[str, Any]) -> list[Any]:
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if (obj.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = (obj.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        obj["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        _age(obj),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _pod_row(obj: dict[str, Any]) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for s in statuses:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    gates = ",".join(g.get("conditionType", "") for g in spec.get("readinessGates") or []) or "<none>"
    return [
        obj["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        restarts,
        _age(obj),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates,
    ]


def _ds_row(obj: dict[str, Any]) -> list[Any]:
    status = obj.get("status") or {}
    selector = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector") or {}
    return [
        obj["metadata"]["name"],
        status.get("desiredNumberScheduled", 0),
        status.get("currentNumberScheduled", 0),
        status.get("numberReady", 0),
        status.get("updatedNumberScheduled", 0),
        status.get("numberAvailable", 0),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
        _age(obj),
    ]


# (name, type[, priority]): priority 1 columns are what `kubectl get -o wide` adds
Column = tuple[str, str] | tuple[str, str, int]
_BUILTIN: dict[str, tuple[list[Column], Row]] = {
    "nodes": (
        [
            ("Name", "string"),
            ("Status", "string"),
            ("Roles", "string"),
            ("Age", "string"),
            ("Version", "string"),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        _node_row,
    ),
    "pods": (
        [
            ("Name", "string"),
            ("Ready", "string"),
            ("Status", "string"),
            ("Restarts", "string"),
            ("Age", "string"),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        _pod_row,
    ),
    "daemonsets.apps": (
        [
            ("Name", "string"),
            ("Desired", "integer"),
            ("Current", "integer"),
            ("Ready", "integer"),
            ("Up-to-date", "integer"),
            ("Available", "integer"),
            ("Node Selector", "string"),
            ("Age", "string"),
        ],
        _ds_row,
    ),
    "configmaps": (
        [("Name", "string"), ("Data", "string"), ("Age", "string")],
        lambda o: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age(o)],
    ),
    "resourcequotas": (
        [("Name", "string"), ("Age", "string"), ("Request", "string"), ("Limit", "string")],
        lambda o: [o["metadata"]["name"], _age(o), *_quota_columns(o)],
    ),
    "namespaces": (
        [("Name", "string"), ("Status", "string"), ("Age", "string")],
        lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), _age(o)],
    ),
    "leases.coordination.k8s.io": (
        [("Name", "string"), ("Holder", "string"), ("Age", "string")],
        lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity", ""), _age(o)],
    ),
    "events": (
        [
            ("Last Seen", "string"),
            ("Type", "string"),
            ("Reason", "string"),
            ("Object", "string"),
            ("Message", "string"),
        ],
        lambda o: [
            human_duration(o.get("lastTimestamp") or o["metadata"].get("creationTimestamp")),
            o.get("type", ""),
            o.get("reason", ""),
            f"{(o.get('involvedObject') or {}).get('kind', '').lower()}/"
            f"{(o.get('involvedObject') or {}).get('name', '')}",
            o.get("message", ""),
        ],
    ),
}


def _quota_columns(obj: Any) -> list[str]:
    """printResourceQuota: `name: used/hard` per spec.hard resource, sorted; limits.* in the Limit column."""
    status = obj.get("status") or {}
    used, hard = status.get("used") or {}, status.get("hard") or {}
    request: list[str] = []
    limit: list[str] = []
    for name in sorted((obj.get("spec") or {}).get("hard") or {}):
        cell = f"{name}: {used.get(name, '0')}/{hard.get(name, '0')}"
        (limit if name.split(".")[0] == "limits" and "." in name else request).append(cell)
    return [", ".join(request), ", ".join(limit)]


def _json_path(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def table(
    rt: ResourceType, objs: list[dict[str, Any]], rv: str, *, single: bool, headers: bool = True
) -> dict[str, Any]:
    """A Table of objs; rows carry PartialObjectMetadata as the real server's default includeObject=Metadata."""
    columns: list[Column]
    if rt.key in _BUILTIN:
        columns, row = _BUILTIN[rt.key]
    elif rt.printer_columns:
        cols = [(c["name"], c.get("type", "string")) for c in rt.printer_columns]
        columns = [("Name", "string"), *cols]

        def row(o: dict[str, Any]) -> list[Any]:
            cells: list[Any] = [o["metadata"]["name"]]
            for c in rt.printer_columns:
                value = _json_path(o, c["jsonPath"])
                if c["jsonPath"] == ".metadata.creationTimestamp":
                    value = human_duration(value)
                cells.append("" if value is None else value)
            return cells
    else:
        columns = [("Name", "string"), ("Created At", "date")]

        def row(o: dict[str, Any]) -> list[Any]:
            return [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")]

    defs = [
        {
            "name": col[0],
            "type": "string" if col[1] == "date" else col[1],
            "format": "name" if i == 0 else "",
            "description": "",
            "priority": col[2] if len(col) > 2 else 0,
        }
        for i, col in enumerate(columns)
    ]
    rows = [
        {
            "cells": row(o),
            "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]},
        }
        for o in objs
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        # in a watch only the first table carries the column definitions, as the real server sends them
        "columnDefinitions": defs if headers else None,
        "rows": rows,
    }
