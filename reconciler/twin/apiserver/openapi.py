"""A minimal OpenAPI v3 surface: enough for kubectl to learn that the server validates fields itself.

Pure. kubectl create/replace/apply validate by default (--validate=strict): kubectl looks up, in /openapi/v3, the
PATCH operation of each kind and whether it accepts the `fieldValidation` query parameter; if so, it lets the server
validate (sends fieldValidation=Strict) and needs no schema. The twin therefore publishes, per group-version, one
PATCH operation per kind with that parameter and its x-kubernetes-group-version-kind, and no schemas
(ASSUMPTIONS.md: `kubectl explain` and client-side apply merge metadata are not available).
"""

from __future__ import annotations

import hashlib
from typing import Any

from .resources import ResourceType


def _gv_path(rt: ResourceType) -> str:
    return f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}"


def root(types: list[ResourceType]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for gv in sorted({_gv_path(t) for t in types}):
        digest = hashlib.sha256(gv.encode()).hexdigest()[:32].upper()
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": paths}


def group_version(types: list[ResourceType], gv: str) -> dict[str, Any] | None:
    selected = [t for t in types if _gv_path(t) == gv]
    if not selected:
        return None
    paths: dict[str, Any] = {}
    for t in selected:
        base = f"/{gv}/namespaces/{{namespace}}/{t.plural}/{{name}}" if t.namespaced else f"/{gv}/{t.plural}/{{name}}"
        gvk = {"group": t.group, "version": t.version, "kind": t.kind}
        op = {
            "operationId": f"patch{t.kind}",
            "parameters": [
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
            ],
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        paths[base] = {"patch": op}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.36.2"},
        "paths": paths,
        "components": {"schemas": {}},
    }
