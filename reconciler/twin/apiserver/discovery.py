"""Discovery documents (/version, /api, /apis, group and group-version lists, aggregated discovery v2).

Pure: builds JSON values from the served ResourceTypes. The shapes and the version values are those of the real
v1.36.2 server in discovery.json; only the groups and resources the twin really serves are listed, so that kubectl
and client discovery never offer a resource that would then 404 (ASSUMPTIONS.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .resources import ResourceType

VERSION_INFO: dict[str, str] = {
    "major": "1",
    "minor": "36",
    "emulationMajor": "1",
    "emulationMinor": "36",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "35",
    "gitVersion": "v1.36.2",
    "gitCommit": "98b35193b2ac7a23a673325f5e9b830ecd5ba406",
    "gitTreeState": "clean",
    "buildDate": "1970-01-01T00:00:00Z",
    "goVersion": "go1.26.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
# Group order of the real server's /apis (built-in groups by priority, then CRD groups alphabetically).
_GROUP_ORDER = (
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "resource.k8s.io",
    "flowcontrol.apiserver.k8s.io",
)


def _group_rank(group: str) -> tuple[int, str]:
    return (_GROUP_ORDER.index(group), "") if group in _GROUP_ORDER else (len(_GROUP_ORDER), group)


def groups(types: Iterable[ResourceType]) -> list[str]:
    return sorted({t.group for t in types if t.group}, key=_group_rank)


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_entry(group: str, version: str) -> dict[str, Any]:
    gv = {"groupVersion": f"{group}/{version}", "version": version}
    return {"name": group, "versions": [gv], "preferredVersion": gv}


def api_group_list(types: list[ResourceType]) -> dict[str, Any]:
    versions = {t.group: t.version for t in types if t.group}
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group_entry(g, versions[g]) for g in groups(types)]}


def api_group(types: list[ResourceType], group: str) -> dict[str, Any] | None:
    for t in types:
        if t.group == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, t.version)}
    return None


# subresource -> (kind, verbs) where they differ from status-like subresources
_SUBRESOURCE_SHAPES = {
    "log": ("Pod", ["get"]),
    "binding": ("Binding", ["create"]),
    "eviction": ("Eviction", ["create"]),
}
# subresources whose kind lives in another group (discovery.json: pods/eviction is policy/v1 Eviction)
_SUBRESOURCE_GROUPS = {"eviction": ("policy", "v1")}


def _resource_entries(t: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": list(t.verbs),
    }
    if t.short_names:
        main["shortNames"] = list(t.short_names)
    if t.categories:
        main["categories"] = list(t.categories)
    if t.storage_hash:
        main["storageVersionHash"] = t.storage_hash
    out = [main]
    for sub in t.subresources:
        kind, verbs = _SUBRESOURCE_SHAPES.get(sub, (t.kind, ["get", "patch", "update"]))
        entry: dict[str, Any] = {"name": f"{t.plural}/{sub}", "singularName": "", "namespaced": t.namespaced}
        if sub in _SUBRESOURCE_GROUPS:
            entry["group"], entry["version"] = _SUBRESOURCE_GROUPS[sub]
        out.append({**entry, "kind": kind, "verbs": verbs})
    return out


def api_resource_list(types: list[ResourceType], group: str, version: str) -> dict[str, Any] | None:
    selected = sorted((t for t in types if t.group == group and t.version == version), key=lambda t: t.plural)
    if not selected and group:
        return None
    body: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        body["apiVersion"] = "v1"
    body["groupVersion"] = f"{group}/{version}" if group else version
    body["resources"] = [e for t in selected for e in _resource_entries(t)]
    return body


def _aggregated_resource(t: ResourceType) -> dict[str, Any]:
    kind = {"group": t.group if t.is_custom else "", "version": t.version if t.is_custom else "", "kind": t.kind}
    entry: dict[str, Any] = {
        "resource": t.plural,
        "responseKind": kind,
        "scope": "Namespaced" if t.namespaced else "Cluster",
        "singularResource": t.singular,
        "verbs": list(t.verbs),
    }
    if t.short_names:
        entry["shortNames"] = list(t.short_names)
    if t.categories:
        entry["categories"] = list(t.categories)
    if t.subresources:
        entry["subresources"] = [
            {
                "subresource": sub,
                "responseKind": {
                    **kind,
                    **dict(zip(("group", "version"), _SUBRESOURCE_GROUPS.get(sub, ()), strict=False)),
                    "kind": _SUBRESOURCE_SHAPES.get(sub, (t.kind, []))[0],
                },
                "verbs": list(_SUBRESOURCE_SHAPES.get(sub, ("", ["get", "patch", "update"]))[1]),
            }
            for sub in sorted(t.subresources)
        ]
    return entry


def aggregated(types: list[ResourceType], core: bool) -> dict[str, Any]:
    """APIGroupDiscoveryList for /api (core=True) or /apis."""
    items: list[dict[str, Any]] = []
    names = [""] if core else groups(types)
    for g in names:
        selected = sorted((t for t in types if t.group == g), key=lambda t: t.plural)
        version = selected[0].version if selected else "v1"
        items.append(
            {
                "metadata": {"name": g} if g else {},
                "versions": [
                    {
                        "version": version,
                        "resources": [_aggregated_resource(t) for t in selected],
                        "freshness": "Current",
                    }
                ],
            }
        )
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}
