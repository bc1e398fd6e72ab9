"""How server-side apply sees the shape of an object: which maps and lists are granular, and list keys.

structured-merge-diff walks objects with a schema built from the OpenAPI extensions `x-kubernetes-list-type`,
`x-kubernetes-list-map-keys` and `x-kubernetes-map-type` (k8s.io/kube-openapi pkg/schemaconv, which falls back to
`patchStrategy`/`patchMergeKey` when no list type is declared, and to an atomic list when there is neither).

- Custom resources: the CRD's structural schema is walked as is (`CrdShape`).
- Built-in kinds: the twin has no full OpenAPI documents of the built-ins, so `BuiltinShape` knows the markers of the
  fields migplan, kubectl and the GPU Operator simulator touch, by field name, from k8s.io/api (core/v1/types.go,
  apps/v1/types.go, meta/v1/types.go). Unknown fields are granular maps when they hold objects and atomic when they
  hold lists (schemaconv's default for a list without markers).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

# `+listType=map` lists and their `+listMapKey`s, by field name (k8s.io/api core/v1, apps/v1, meta/v1 types.go).
# `ports` is keyed by containerPort+protocol in containers and by port+protocol in a Service (see _ports_keys).
LIST_MAP_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "hostAliases": ("ip",),
    "conditions": ("type",),  # NodeStatus, PodStatus, DaemonSetStatus, DeploymentStatus, CRD status
    "addresses": ("type",),  # NodeStatus.Addresses: +listType=map +listMapKey=type
    "ownerReferences": ("uid",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
    "resourceClaims": ("name",),
    "resizePolicy": ("resourceName",),
}
# `+listType=set` lists of scalars (metadata.finalizers, NodeSpec.podCIDRs, PodStatus.podIPs is a map - not here).
LIST_SETS = frozenset({"finalizers", "podCIDRs"})
# `+structType=atomic` / `+mapType=atomic` fields: owned as a whole (LabelSelector, ObjectReference,
# NodeSelector maps, key selectors).
ATOMIC_FIELDS = frozenset(
    {
        "selector",
        "nodeSelector",
        "involvedObject",
        "regarding",
        "related",
        "fieldRef",
        "resourceFieldRef",
        "secretKeyRef",
        "configMapKeyRef",
        "matchLabels",
    }
)


class Shape(Protocol):
    """A node of the schema: how to descend into, and own, the value found there."""

    def field(self, name: str) -> Shape: ...

    def item(self) -> Shape: ...

    def atomic(self) -> bool:
        """True when a map or struct here is owned as a whole (a leaf for ownership)."""
        ...

    def list_type(self) -> str:
        """'atomic', 'map' (associative, keyed) or 'set'."""
        ...

    def list_keys(self, item: Mapping[str, Any]) -> tuple[str, ...]: ...


class BuiltinShape:
    """The built-ins' markers, by field name (see the module docstring)."""

    __slots__ = ("_name",)

    def __init__(self, name: str = "") -> None:
        self._name = name

    def field(self, name: str) -> Shape:
        return BuiltinShape(name)

    def item(self) -> Shape:
        return BuiltinShape("")

    def atomic(self) -> bool:
        return self._name in ATOMIC_FIELDS

    def list_type(self) -> str:
        if self._name in LIST_MAP_KEYS or self._name == "ports":
            return "map"
        if self._name in LIST_SETS:
            return "set"
        return "atomic"

    def list_keys(self, item: Mapping[str, Any]) -> tuple[str, ...]:
        if self._name == "ports":
            return ("containerPort", "protocol") if "containerPort" in item else ("port", "protocol")
        return LIST_MAP_KEYS.get(self._name, ())


class CrdShape:
    """A custom resource's structural schema (apiextensions structural schema, as schemaconv reads it)."""

    __slots__ = ("_node", "_root")

    def __init__(self, node: Mapping[str, Any] | None, *, root: bool = False) -> None:
        self._node: Mapping[str, Any] = node if isinstance(node, Mapping) else {}
        self._root = root

    def field(self, name: str) -> Shape:
        if self._root and name == "metadata":
            return BuiltinShape("metadata")  # ObjectMeta is the built-in one for every kind
        props = self._node.get("properties")
        if isinstance(props, Mapping) and name in props:
            return CrdShape(props[name])
        extra = self._node.get("additionalProperties")
        return CrdShape(extra if isinstance(extra, Mapping) else None)

    def item(self) -> Shape:
        items = self._node.get("items")
        return CrdShape(items if isinstance(items, Mapping) else None)

    def atomic(self) -> bool:
        return self._node.get("x-kubernetes-map-type") == "atomic"

    def list_type(self) -> str:
        kind = self._node.get("x-kubernetes-list-type")
        return kind if kind in ("map", "set") else "atomic"

    def list_keys(self, item: Mapping[str, Any]) -> tuple[str, ...]:
        keys = self._node.get("x-kubernetes-list-map-keys")
        return tuple(str(k) for k in keys) if isinstance(keys, list) else ()


def root_shape(schema: Mapping[str, Any] | None) -> Shape:
    """The shape of a whole object: its CRD schema for custom resources, the built-in markers otherwise."""
    return CrdShape(schema, root=True) if schema is not None else BuiltinShape()
