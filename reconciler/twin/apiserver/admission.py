"""The default admission chain of a v1.36 kube-apiserver, as far as it touches the kinds the twin serves.

Pure (random suffixes come from the caller's `random.Random`). Mutating plugins run in the real order
(pkg/kubeapiserver/options/plugins.go AllOrderedPlugins) after decoding and defaulting, before validation:
NamespaceLifecycle (in the store: 404 for a missing namespace, 403 while it terminates), LimitRanger
(limitranger.py), ServiceAccount, TaintNodesByCondition, Priority, DefaultTolerationSeconds; the validating
LimitRanger and ResourceQuota (quota.py) run after validation, in the store. Sources, kubernetes/kubernetes
plugin/pkg/admission/:
- serviceaccount/admission.go: the `default` account when none is named, 403 when it does not exist, the
  kube-api-access projected volume and its mounts (create only);
- nodetaint/admission.go `addNotReadyTaint`: a new Node gets node.kubernetes.io/not-ready:NoSchedule unless a
  taint with that key and effect is there (create only);
- priority/admission.go `admitPod`: on create the priority comes from the named PriorityClass (the built-in
  system-node-critical and system-cluster-critical; no other PriorityClass exists in the twin), 0 without a name
  (no globalDefault class), preemptionPolicy PreemptLowerPriority; a pod that sets another value is refused with the
  real 403; on update the stored values are kept when the new object leaves them out;
- defaulttolerationseconds/admission.go: the not-ready and unreachable NoExecute tolerations (300 s) unless the pod
  already tolerates them (an empty key tolerates every taint), on create and update of the pod itself.
Plugins that cannot act on the twin's objects are listed in ASSUMPTIONS.md with the reason.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from . import limitranger
from .errors import ApiError
from .kinds import qos_class, random_suffix

# scheduling/types.go SystemPriorityClasses (created by the apiserver's bootstrap post-start hook)
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"
_DEFAULT_TOLERATION_SECONDS = 300
_TOLERATED_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
# namespace/lifecycle/admission.go: NewLifecycle(sets.NewString(NamespaceDefault, NamespaceSystem, NamespacePublic))
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


def check_namespace_delete(name: str) -> None:
    """NamespaceLifecycle: the immortal namespaces may not be deleted (403)."""
    if name in IMMORTAL_NAMESPACES:
        raise ApiError(
            403,
            "Forbidden",
            f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            {"name": name, "kind": "namespaces"},
        )


def forbidden(resource: str, meta: dict[str, Any], reason: str) -> ApiError:
    """admission.NewForbidden: the name, or before name generation the generateName, in the message."""
    name = meta.get("name") or meta.get("generateName") or "Unknown"
    return ApiError(
        403,
        "Forbidden",
        f'{resource} "{name}" is forbidden: {reason}',
        {"name": name, "kind": resource},
    )


def service_account(obj: dict[str, Any], namespace: str, sa_exists: bool, rng: random.Random) -> None:
    """ServiceAccount plugin on pod create."""
    meta = obj["metadata"]
    spec = obj["spec"]
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    if not sa_exists:
        raise forbidden(
            "pods", meta, f'error looking up service account {namespace}/{sa}: serviceaccount "{sa}" not found'
        )
    spec["serviceAccountName"] = sa
    spec["serviceAccount"] = sa
    if spec.get("automountServiceAccountToken", True) is False:
        return
    vol = f"kube-api-access-{random_suffix(rng)}"
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        volumes = spec["volumes"] = []
    volumes.append(
        {
            "name": vol,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                }
                            ]
                        }
                    },
                ],
                "defaultMode": 420,
            },
        }
    )
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            if isinstance(container, dict):
                mounts = container.get("volumeMounts")
                if not isinstance(mounts, list):
                    mounts = container["volumeMounts"] = []
                mounts.append(
                    {"name": vol, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
                )


def priority_on_create(obj: dict[str, Any]) -> None:
    """Priority plugin `admitPod` on create."""
    meta, spec = obj["metadata"], obj["spec"]
    class_name = spec.get("priorityClassName") or ""
    if not class_name:
        priority = 0  # scheduling.DefaultPriorityWhenNoDefaultClassExists: no globalDefault class in the twin
    elif class_name in SYSTEM_PRIORITY_CLASSES:
        priority = SYSTEM_PRIORITY_CLASSES[class_name]
    else:
        raise forbidden("pods", meta, f"no PriorityClass with name {class_name} was found")
    given = spec.get("priority")
    if given is not None and given != priority:
        raise forbidden(
            "pods",
            meta,
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {priority} from the given PriorityClass name",
        )
    spec["priority"] = priority
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy != DEFAULT_PREEMPTION_POLICY:
        raise forbidden(
            "pods",
            meta,
            f"the string value of PreemptionPolicy ({policy}) must not be provided in pod spec; priority admission "
            f"controller computed {DEFAULT_PREEMPTION_POLICY} from the given PriorityClass name",
        )
    spec["preemptionPolicy"] = DEFAULT_PREEMPTION_POLICY


def priority_on_update(obj: dict[str, Any], old: dict[str, Any]) -> None:
    """Priority plugin on update: the stored priority and preemptionPolicy stay when the new object omits them."""
    spec, old_spec = obj.get("spec"), old.get("spec") or {}
    if not isinstance(spec, dict):
        return
    for key in ("priority", "preemptionPolicy"):
        if spec.get(key) is None and old_spec.get(key) is not None:
            spec[key] = old_spec[key]


def default_toleration_seconds(obj: dict[str, Any]) -> None:
    """DefaultTolerationSeconds: tolerate not-ready and unreachable for 300 s unless already tolerated."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    tolerated = {key: False for key in _TOLERATED_TAINTS}
    for t in tolerations:
        if not isinstance(t, dict):
            continue
        key, effect = t.get("key") or "", t.get("effect") or ""
        if effect in ("NoExecute", ""):
            for wanted in _TOLERATED_TAINTS:
                if key in (wanted, ""):
                    tolerated[wanted] = True
    added = [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": _DEFAULT_TOLERATION_SECONDS}
        for key, ok in tolerated.items()
        if not ok
    ]
    if added:
        spec["tolerations"] = tolerations + added


def taint_new_node(obj: dict[str, Any]) -> None:
    """TaintNodesByCondition `addNotReadyTaint` on node create."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    taints = spec.get("taints")
    if not isinstance(taints, list):
        taints = []
    if not any(
        isinstance(t, dict) and t.get("key") == NOT_READY_TAINT["key"] and t.get("effect") == NOT_READY_TAINT["effect"]
        for t in taints
    ):
        taints = [*taints, dict(NOT_READY_TAINT)]
    spec["taints"] = taints


def admit_pod_create(
    obj: dict[str, Any],
    namespace: str,
    sa_exists: bool,
    rng: random.Random,
    limit_ranges: Iterable[Mapping[str, Any]] = (),
) -> None:
    """The mutating chain for a new pod, then the pod strategy's PrepareForCreate status (Pending, QoS class)."""
    if not isinstance(obj.get("spec"), dict):
        obj["spec"] = {}
    limitranger.admit(limit_ranges, obj)
    service_account(obj, namespace, sa_exists, rng)
    priority_on_create(obj)
    default_toleration_seconds(obj)
    obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj["spec"])}


def admit_pod_update(obj: dict[str, Any], old: dict[str, Any]) -> None:
    """The mutating chain for an update of the pod itself (not its subresources)."""
    priority_on_update(obj, old)
    default_toleration_seconds(obj)
