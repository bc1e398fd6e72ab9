"""The resource types the twin serves: names, kinds, scope, verbs, subresources and supported field selectors.

Pure data. The built-in entries copy what the real v1.36 server advertises in discovery (discovery.json); custom
resource types are built from a CRD object by `from_crd`. A resource is addressed everywhere by its `key`:
`plural` for the core group, `plural.group` otherwise (the form kubectl accepts, e.g. `daemonsets.apps`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .fieldsets import EVENT_GETTERS, POD_ALIASES, POD_GETTERS, Getter

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
_CORE_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)
_EVENTS_V1_FIELDS = frozenset(
    {
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "type",
    }
)
_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    }
)


@dataclass(frozen=True)
class ResourceType:
    """One servable resource (a group/version/plural)."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    storage_hash: str = ""
    extra_fields: frozenset[str] = frozenset()
    # metadata.generation is maintained (bumped on spec changes) for these types, as the real server does
    tracks_generation: bool = False
    # field defaults for selectors when the field is absent (e.g. spec.unschedulable -> "false")
    field_defaults: Mapping[str, str] = field(default_factory=dict)
    # selectable fields the registry computes (fieldsets.py) and field labels it renames (spec.host)
    field_getters: Mapping[str, Getter] = field(default_factory=dict)
    field_aliases: Mapping[str, str] = field(default_factory=dict)
    schema: Mapping[str, Any] | None = None  # openAPIV3Schema for custom resources
    status_in_main: bool = True  # False: the main path ignores writes to .status (status subresource)
    printer_columns: tuple[Mapping[str, Any], ...] = ()  # a CRD's additionalPrinterColumns

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def is_custom(self) -> bool:
        return self.schema is not None

    @property
    def field_selectors(self) -> frozenset[str]:
        # DefaultMetaV1FieldSelectorConversion accepts metadata.namespace for cluster-scoped kinds too; Node and
        # Namespace have their own conversion funcs (core/v1/conversion.go) that do not, nor do custom resources
        own_conversion = self.key in ("nodes", "namespaces") or self.is_custom
        base = _META_FIELDS if (self.namespaced or not own_conversion) else frozenset({"metadata.name"})
        return base | self.extra_fields

    @functools.cached_property
    def field_order(self) -> tuple[str, ...]:
        """The selectable fields in a fixed order (the store keeps their values per object as a tuple)."""
        return tuple(sorted(self.field_selectors))

    @functools.cached_property
    def field_paths(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(path, path split on dots) for field_order, so values are read without re-splitting."""
        return tuple((p, tuple(p.split("."))) for p in self.field_order)

    @functools.cached_property
    def field_index(self) -> dict[str, int]:
        return {path: i for i, path in enumerate(self.field_order)}


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """discovery's storageVersionHash: base64 of the first 8 bytes of sha256("group/version/kind")."""
    return base64.b64encode(hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()[:8]).decode()


BUILTINS: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        False,
        ("ns",),
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        subresources=("status",),
        storage_hash="Q3oi5N2YM8M=",
        extra_fields=frozenset({"status.phase"}),
        status_in_main=False,
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        False,
        ("no",),
        subresources=("status",),
        storage_hash="XwShjMxG9Fs=",
        extra_fields=frozenset({"spec.unschedulable"}),
        field_defaults={"spec.unschedulable": "false"},
        status_in_main=False,
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        True,
        ("po",),
        ("all",),
        subresources=("binding", "eviction", "log", "status"),
        storage_hash="xPOwRZ+Yhw8=",
        extra_fields=_POD_FIELDS,
        tracks_generation=True,
        field_defaults={"spec.hostNetwork": "false"},
        field_getters=POD_GETTERS,
        field_aliases=POD_ALIASES,
        status_in_main=False,
    ),
    ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", True, ("cm",), storage_hash="qFsyl6wFWjQ="),
    # LimitRanger and ResourceQuota act on pods once such objects exist (limitranger.py, quota.py)
    ResourceType("", "v1", "limitranges", "limitrange", "LimitRange", True, ("limits",), storage_hash="EBKMFVe6cwo="),
    ResourceType(
        "",
        "v1",
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        True,
        ("quota",),
        subresources=("status",),
        storage_hash="8uhSgffRX6w=",
        status_in_main=False,
    ),
    ResourceType(
        "",
        "v1",
        "events",
        "event",
        "Event",
        True,
        ("ev",),
        storage_hash="r2yiGXH7wu8=",
        extra_fields=_CORE_EVENT_FIELDS,
        field_getters=EVENT_GETTERS,
    ),
    ResourceType(
        "", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True, ("sa",), storage_hash="pbx9ZvyFpBE="
    ),
    ResourceType(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        True,
        ("ds",),
        ("all",),
        subresources=("status",),
        storage_hash="dd7pWHUlMKQ=",
        tracks_generation=True,
        status_in_main=False,
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "lease", "Lease", True, storage_hash="gqkMMb/YqFM="),
    # policy/v1 PodDisruptionBudget: status written by the twin's disruption controller (disruption.py) and by
    # the eviction subresource (eviction.py), both through the status subresource as the real ones do.
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        ("pdb",),
        subresources=("status",),
        tracks_generation=True,
        status_in_main=False,
    ),
    # Served as plain stored objects (metadata validation, Deployment selector check and defaults) so that the
    # manifests of deploy/ can be created on the twin; no controllers act on them (RBAC objects are enforced: rbac.py).
    ResourceType(
        "",
        "v1",
        "services",
        "service",
        "Service",
        True,
        ("svc",),
        ("all",),
        subresources=("status",),
        storage_hash="0/CO1lhkEBI=",
        extra_fields=frozenset({"spec.clusterIP", "spec.type"}),  # AddFieldLabelConversionsForService
        status_in_main=False,
    ),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        True,
        ("deploy",),
        ("all",),
        subresources=("status",),
        storage_hash="8aSe+NMegvE=",
        tracks_generation=True,
        status_in_main=False,
    ),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", True, storage_hash="7FuwZcIIItM="),
    # access reviews are answered, never stored (server.py); they let `kubectl auth can-i` work
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        False,
        verbs=("create",),
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        True,
        storage_hash="eGsCzGH6b1g=",
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        False,
        storage_hash="bYE5ZWDrJ44=",
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        False,
        storage_hash="48tpQ8gZHFc=",
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        True,
        ("ev",),
        storage_hash="r2yiGXH7wu8=",
        extra_fields=_EVENTS_V1_FIELDS,
    ),
    # resource.k8s.io/v1 (Dynamic Resource Allocation, GA since 1.34): validation in dra.py; the ResourceSlice
    # field selectors are resource.ResourceSliceSelectorNodeName / ResourceSliceSelectorDriver
    # (pkg/registry/resource/resourceslice/strategy.go `toSelectableFields`).
    ResourceType(
        "resource.k8s.io",
        "v1",
        "deviceclasses",
        "deviceclass",
        "DeviceClass",
        False,
        storage_hash=storage_version_hash("resource.k8s.io", "v1", "DeviceClass"),
        tracks_generation=True,
    ),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "resourceslice",
        "ResourceSlice",
        False,
        storage_hash=storage_version_hash("resource.k8s.io", "v1", "ResourceSlice"),
        extra_fields=frozenset({"spec.nodeName", "spec.driver"}),
        tracks_generation=True,
    ),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "resourceclaim",
        "ResourceClaim",
        True,
        subresources=("status",),
        storage_hash=storage_version_hash("resource.k8s.io", "v1", "ResourceClaim"),
        status_in_main=False,
    ),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "resourceclaimtemplates",
        "resourceclaimtemplate",
        "ResourceClaimTemplate",
        True,
        storage_hash=storage_version_hash("resource.k8s.io", "v1", "ResourceClaimTemplate"),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        ("api-extensions",),
        subresources=("status",),
        storage_hash="jfWCUB31mvA=",
        tracks_generation=True,
        status_in_main=False,
    ),
)


def from_crd(crd: Mapping[str, Any]) -> list[ResourceType]:
    """Resource types (one per served version) for a CustomResourceDefinition object."""
    spec = crd["spec"]
    names = spec["names"]
    out: list[ResourceType] = []
    for ver in spec.get("versions", []):
        if not ver.get("served", True):
            continue
        subs = ver.get("subresources") or {}
        schema = (ver.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
        out.append(
            ResourceType(
                spec["group"],
                ver["name"],
                names["plural"],
                names.get("singular", names["kind"].lower()),
                names["kind"],
                spec.get("scope", "Namespaced") == "Namespaced",
                tuple(names.get("shortNames", ())),
                tuple(names.get("categories", ())),
                verbs=("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"),
                subresources=("status",) if "status" in subs else (),
                tracks_generation=True,
                schema=schema,
                status_in_main="status" not in subs,
                printer_columns=tuple(ver.get("additionalPrinterColumns") or ()),
                storage_hash=storage_version_hash(spec["group"], ver["name"], names["kind"])
                if ver.get("storage")
                else "",
            )
        )
    return out
