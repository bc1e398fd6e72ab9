"""The pods/eviction subresource (policy/v1 Eviction), after kubernetes pkg/registry/core/pod/storage/eviction.go.

`evict(store, namespace, name, eviction, dry_run)` is `EvictionREST.Create`:
- the name in the URL must be the Eviction's (`name in URL does not match name in Eviction object`, 400);
  `propagateDryRun`: dryRun of the request and of the Eviction's deleteOptions must agree;
- `canIgnorePDB`: a pod that is Succeeded, Failed, Pending or already terminating is deleted at once, without
  looking at PodDisruptionBudgets ("Evicting a terminal pod should result in direct deletion");
- `getPodDisruptionBudgets`: the PDBs of the pod's namespace whose selector is valid, non-empty and matches
  the pod's labels; more than one is a 500 Status ("This pod has more than one PodDisruptionBudget, which the
  eviction subresource does not support."); none: the pod is deleted;
- a pod that is not Ready is deleted without spending the budget when the PDB's
  `unhealthyPodEvictionPolicy` is AlwaysAllow, or (default IfHealthyBudget) when currentHealthy >=
  desiredHealthy > 0;
- `checkAndDecrement`: status.observedGeneration behind metadata.generation is a 429 ("The disruption budget
  X is still being processed by the server."); disruptionsAllowed < 0 a 403; more than MaxDisruptedPodSize
  disruptedPods a 403; disruptionsAllowed == 0 the 429 "Cannot evict pod as it would violate the pod's
  disruption budget." with details.causes [{reason: DisruptionBudget, message: "The disruption budget X
  needs N healthy pods and has M currently"}]; else disruptionsAllowed is decremented and the pod is
  recorded in status.disruptedPods (not on a dry run) through the PDB's status subresource (retried on
  conflict), then the pod is deleted with the Eviction's DeleteOptions (its gracePeriodSeconds; a bound
  pod is only marked terminating and the twin's kubelet finishes it).
The real handler pins the pod's resourceVersion as a delete precondition; the twin's store has no delete
preconditions (ASSUMPTIONS.md). The PDB status write carries the resourceVersion read, so a concurrent
eviction conflicts and is retried against the fresh PDB, as the real one is.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from .errors import ApiError, bad_request, conflict
from .store import Store

MAX_DISRUPTED_POD_SIZE = 2000
PDB = "poddisruptionbudgets.policy"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def selector_matches(selector: Any, labels: dict[str, str], *, empty_matches: bool) -> bool | None:
    """metav1.LabelSelectorAsSelector(selector).Matches(labels); None when the selector is invalid.
    `empty_matches`: whether an empty selector selects everything (the disruption controller) or nothing
    (the eviction subresource's `selector.Empty()` check). A nil selector selects nothing (labels.Nothing)."""
    if selector is None:
        return False
    if not isinstance(selector, dict):
        return None
    match_labels = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(exprs, list):
        return None
    if not match_labels and not exprs:
        return empty_matches
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for e in exprs:
        if not isinstance(e, dict):
            return None
        key, op, values = str(e.get("key", "")), e.get("operator"), e.get("values") or []
        present = key in labels
        if op == "In":
            ok = present and labels[key] in values
        elif op == "NotIn":
            ok = not present or labels[key] not in values
        elif op == "Exists":
            ok = present
        elif op == "DoesNotExist":
            ok = not present
        else:
            return None
        if not ok:
            return False
    return True


def pod_ready(pod: dict[str, Any]) -> bool:
    """podutil.IsPodReady: the Ready condition is True."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _too_many(message: str, cause: str) -> ApiError:
    return ApiError(429, "TooManyRequests", message, {"causes": [{"reason": "DisruptionBudget", "message": cause}]})


def _forbidden(pdb: str, why: str) -> ApiError:
    details = {"name": pdb, "group": "policy", "kind": "poddisruptionbudget"}
    return ApiError(403, "Forbidden", f'poddisruptionbudget.policy "{pdb}" is forbidden: {why}', details)


def _dry_run(eviction: dict[str, Any], query_dry_run: bool) -> tuple[bool, dict[str, Any]]:
    """propagateDryRun: (dry run?, the DeleteOptions to delete with)."""
    options = dict(eviction.get("deleteOptions") or {})
    body = options.get("dryRun") or []
    if body and query_dry_run and body != ["All"]:
        raise ApiError(
            500,
            "InternalError",
            f"Internal error occurred: Non-matching dry-run options in request and content: [All] and {body}",
        )
    return bool(query_dry_run or body == ["All"]), options


def evict(store: Store, namespace: str, name: str, eviction: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    """EvictionREST.Create. Returns the Status of a successful eviction; raises ApiError otherwise."""
    if eviction.get("kind") != "Eviction" or eviction.get("apiVersion") not in ("policy/v1", "policy/v1beta1"):
        # AcceptsGroupVersion: policy/v1 and policy/v1beta1 Evictions only
        raise bad_request("the object provided is unrecognized (must be of type Eviction)")
    if not isinstance(eviction.get("metadata") or {}, dict) or not isinstance(
        eviction.get("deleteOptions") or {}, dict
    ):
        raise bad_request("the object provided is unrecognized (must be of type Eviction)")
    if (eviction.get("metadata") or {}).get("name") != name:
        raise bad_request("name in URL does not match name in Eviction object")
    dry, options = _dry_run(eviction, dry_run)
    grace = options.get("gracePeriodSeconds")
    grace_s = int(grace) if isinstance(grace, int) and not isinstance(grace, bool) else None
    pod = store.get("pods", name, namespace)
    meta = pod["metadata"]
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if phase in ("Succeeded", "Failed", "Pending") or meta.get("deletionTimestamp"):  # canIgnorePDB
        store.delete("pods", name, namespace, grace_period_seconds=grace_s, dry_run=dry)
        return _success()
    labels = meta.get("labels") or {}
    pdbs = [
        b
        for b in store.list(PDB, namespace)
        if selector_matches((b.get("spec") or {}).get("selector"), labels, empty_matches=False)
    ]
    if len(pdbs) > 1:
        raise ApiError(500, "", MULTIPLE)
    if pdbs:
        _guard(store, pdbs[0], pod, dry=dry)
    store.delete("pods", name, namespace, grace_period_seconds=grace_s, dry_run=dry)
    return _success()


def _guard(store: Store, pdb: dict[str, Any], pod: dict[str, Any], *, dry: bool) -> None:
    """The PDB part of Create: the unhealthy-pod shortcut, then checkAndDecrement (retried on conflict)."""
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    if not pod_ready(pod):
        if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return
        if int(status.get("currentHealthy", 0)) >= int(status.get("desiredHealthy", 0)) > 0:
            return
    for _ in range(20):  # EvictionsRetry: 20 steps
        name = pdb["metadata"]["name"]
        status = dict(pdb.get("status") or {})
        if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
            raise _too_many(VIOLATION, f"The disruption budget {name} is still being processed by the server.")
        allowed = int(status.get("disruptionsAllowed", 0))
        if allowed < 0:
            raise _forbidden(name, "pdb disruptions allowed is negative")
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
            raise _forbidden(name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
        if allowed == 0:
            raise _too_many(
                VIOLATION,
                f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods and has "
                f"{status.get('currentHealthy', 0)} currently",
            )
        if dry:
            return
        status["disruptionsAllowed"] = allowed - 1
        if allowed - 1 == 0:
            status["conditions"] = disruption_allowed_condition(
                status.get("conditions") or [], False, "InsufficientPods", generation=int(status["observedGeneration"])
            )
        status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod["metadata"]["name"]: _now()}
        body = {**pdb, "status": status}
        try:
            store.update(PDB, body, pdb["metadata"]["namespace"], subresource="status")
            return
        except ApiError as exc:
            if exc.code != 409:
                raise
            with contextlib.suppress(ApiError):
                pdb = store.get(PDB, name, pdb["metadata"]["namespace"])
    raise conflict("poddisruptionbudgets", "policy", pdb["metadata"]["name"])


def disruption_allowed_condition(
    conditions: list[dict[str, Any]], allowed: bool, reason: str, message: str = "", *, generation: int = 0
) -> list[dict[str, Any]]:
    """component-helpers pdbhelper.UpdateDisruptionAllowedCondition / apimeta.SetStatusCondition: the
    DisruptionAllowed condition, its lastTransitionTime kept unless its status changes."""
    status = "True" if allowed else "False"
    old = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else _now()
    new = {
        "type": "DisruptionAllowed",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
    return [c for c in conditions if c.get("type") != "DisruptionAllowed"] + [new]


def _success() -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
