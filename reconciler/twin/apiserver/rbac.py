"""RBAC authorization for ServiceAccount tokens minted on the twin, evaluated as the RBAC authorizer does.

Pure: `authorize(store_objects, user, request)` reads Role/ClusterRole/RoleBinding/ClusterRoleBinding objects and
answers allow/deny. The admin token (group system:masters) is never checked, as in the recording. Subjects match by
ServiceAccount (name + namespace), User `system:serviceaccount:NS:NAME`, or Group `system:serviceaccounts`,
`system:serviceaccounts:NS`, `system:authenticated`. Rules match on apiGroups, resources (`res`, `res/sub`, `*`,
`*/sub`), verbs and resourceNames (which cannot restrict create, list, watch or deletecollection of a collection).
Not modelled (ASSUMPTIONS.md): aggregated ClusterRoles, the default ClusterRoles (view/edit/admin), impersonation.
Discovery, /version and OpenAPI are allowed to every authenticated user (system:discovery, system:basic-user).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServiceAccountUser:
    namespace: str
    name: str

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        return ("system:serviceaccounts", f"system:serviceaccounts:{self.namespace}", "system:authenticated")


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


def _subject_matches(subject: Mapping[str, Any], user: ServiceAccountUser, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        return subject.get("name") == user.name and (subject.get("namespace") or binding_ns) == user.namespace
    if kind == "User":
        return subject.get("name") == user.username
    if kind == "Group":
        return subject.get("name") in user.groups
    return False


def _rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    resources = rule.get("resources") or []
    wanted = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not ("*" in resources or wanted in resources or (attrs.subresource and f"*/{attrs.subresource}" in resources)):
        return False
    names = rule.get("resourceNames") or []
    if names:
        if attrs.verb in ("create", "list", "watch", "deletecollection") and not attrs.name:
            return False
        return attrs.name in names
    return True


def authorize(
    roles: Iterable[Mapping[str, Any]],
    cluster_roles: Iterable[Mapping[str, Any]],
    role_bindings: Iterable[Mapping[str, Any]],
    cluster_role_bindings: Iterable[Mapping[str, Any]],
    user: ServiceAccountUser,
    attrs: Attributes,
) -> bool:
    """True when some binding that names the user grants a rule matching the request."""
    by_cluster_role = {r["metadata"]["name"]: r for r in cluster_roles}
    by_role = {(r["metadata"].get("namespace", ""), r["metadata"]["name"]): r for r in roles}
    for binding in cluster_role_bindings:
        if not any(_subject_matches(s, user, "") for s in binding.get("subjects") or []):
            continue
        role = by_cluster_role.get((binding.get("roleRef") or {}).get("name", ""))
        if role and any(_rule_allows(rule, attrs) for rule in role.get("rules") or []):
            return True
    if not attrs.namespace:
        return False
    for binding in role_bindings:
        ns = binding["metadata"].get("namespace", "")
        if ns != attrs.namespace or not any(_subject_matches(s, user, ns) for s in binding.get("subjects") or []):
            continue
        ref = binding.get("roleRef") or {}
        role = (
            by_cluster_role.get(ref.get("name", ""))
            if ref.get("kind") == "ClusterRole"
            else (by_role.get((ns, ref.get("name", ""))))
        )
        if role and any(_rule_allows(rule, attrs) for rule in role.get("rules") or []):
            return True
    return False
