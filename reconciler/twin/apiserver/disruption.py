"""The twin's disruption controller: PodDisruptionBudget status, after kubernetes
pkg/controller/disruption/disruption.go (`trySync`, `getExpectedPodCount`, `getExpectedScale`,
`buildDisruptedPodMap`, `countHealthyPods`, `updatePdbStatus`, `failSafe`).

For each PDB of a namespace where a pod or a PDB changed:
- pods: those of the namespace the selector matches (`getPodsForPdb`: a nil selector matches nothing, an empty
  one everything);
- expectedPods / desiredHealthy (`getExpectedPodCount`): minAvailable as a number: desiredHealthy = it,
  expectedPods = the number of pods; maxUnavailable (number or percent) or minAvailable as a percent: expectedPods
  is the sum of the scales of the pods' controllers (`getExpectedScale`, each controller once), the percent
  rounded up, desiredHealthy = expected - maxUnavailable (not below 0) or the scaled minAvailable. The twin serves
  the scale of Deployments only (`getScaleController` on apps/v1 deployments); a pod whose controller it cannot
  find fails the sync: `failSafe` sets disruptionsAllowed 0 and DisruptionAllowed=False/SyncFailed ("found no
  controllers for pod ...") and leaves observedGeneration, so evictions get 429 until it syncs;
  pods without a controller are left out of that sum (UnmanagedPods);
- disruptedPods (`buildDisruptedPodMap`): the entries the eviction subresource wrote, dropped once the pod is
  terminating, gone, or older than DeletionTimeout (2 min);
- currentHealthy (`countHealthyPods`): Ready pods not terminating and not in disruptedPods;
- disruptionsAllowed = currentHealthy - desiredHealthy, 0 when that or expectedPods is not positive;
  observedGeneration = metadata.generation; condition DisruptionAllowed True/SufficientPods or
  False/InsufficientPods (`pdbhelper.UpdateDisruptionAllowedCondition`). Unchanged status: no write.
The real controller is asynchronous (informers and a work queue); the twin's runs in the store's notification
of the write that changed the pods (so a status is current as soon as the write returns), and expires
disruptedPods entries only when something in the namespace changes (ASSUMPTIONS.md).
"""

from __future__ import annotations

import contextlib
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import ApiError
from .eviction import PDB, disruption_allowed_condition, pod_ready, selector_matches
from .store import Store

DELETION_TIMEOUT = timedelta(minutes=2)
_WATCHED = ("Pod", "PodDisruptionBudget", "Deployment")  # the kinds the controller acts on


class _SyncFailed(Exception):
    pass


def _int_or_percent(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return math.ceil(int(value[:-1]) * total / 100)
    raise _SyncFailed(f"invalid value for IntOrString: invalid value {value!r}")


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return dict(ref)
    return None


def _expected_scale(store: Store, namespace: str, pods: list[dict[str, Any]]) -> int:
    """getExpectedScale: the sum of the scale of each controller of the pods, counted once."""
    scales: dict[str, int] = {}
    for pod in pods:
        ref = _controller(pod)
        if ref is None:
            continue  # unmanaged pod: left out (the real controller warns with an UnmanagedPods event)
        if ref.get("kind") != "Deployment" or str(ref.get("apiVersion", "")).split("/")[0] != "apps":
            raise _SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        try:
            dep = store.get("deployments.apps", str(ref.get("name", "")), namespace)
        except ApiError as exc:
            raise _SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"') from exc
        scales[str(dep["metadata"].get("uid", ref.get("name")))] = int((dep.get("spec") or {}).get("replicas", 1))
    return sum(scales.values())


def _parse(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def desired_status(store: Store, pdb: dict[str, Any], pods: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """trySync + updatePdbStatus for one PDB (raises _SyncFailed where the real one calls failSafe)."""
    spec, old = pdb.get("spec") or {}, pdb.get("status") or {}
    namespace = pdb["metadata"]["namespace"]
    selected = [
        p
        for p in pods
        if selector_matches(spec.get("selector"), (p.get("metadata") or {}).get("labels") or {}, empty_matches=True)
    ]
    if spec.get("maxUnavailable") is not None:
        expected = _expected_scale(store, namespace, selected)
        desired = max(expected - _int_or_percent(spec["maxUnavailable"], expected), 0)
    elif isinstance(spec.get("minAvailable"), int):
        desired, expected = int(spec["minAvailable"]), len(selected)
    elif spec.get("minAvailable") is not None:
        expected = _expected_scale(store, namespace, selected)
        desired = _int_or_percent(spec["minAvailable"], expected)
    else:
        desired, expected = 0, 0
    disrupted: dict[str, str] = {}
    for p in selected:
        name = p["metadata"]["name"]
        when = _parse((old.get("disruptedPods") or {}).get(name))
        if p["metadata"].get("deletionTimestamp") or when is None or when + DELETION_TIMEOUT < now:
            continue
        disrupted[name] = (old.get("disruptedPods") or {})[name]
    healthy = sum(
        1
        for p in selected
        if not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] not in disrupted and pod_ready(p)
    )
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    generation = int(pdb["metadata"].get("generation", 1))
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
    status["conditions"] = disruption_allowed_condition(
        old.get("conditions") or [], allowed > 0, reason, generation=generation
    )
    return status


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Status equal but for the condition's lastTransitionTime (kept when the status does not change)."""

    def strip(s: dict[str, Any]) -> dict[str, Any]:
        conds = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in s.get("conditions") or []]
        return {**s, "conditions": conds}

    return strip(a) == strip(b)


class DisruptionController:
    """Keeps every PodDisruptionBudget's status current (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # namespace -> PDB names in it: a pod write elsewhere costs a dict lookup (fleets of 40,000 pods).
        self._pdbs: dict[str, set[str]] = {}
        self._unsubscribe = store.subscribe(self._on_event, kinds=_WATCHED, wants=self._wants)

    def stop(self) -> None:
        self._unsubscribe()

    def _wants(self, obj: dict[str, Any]) -> bool:
        """What `_on_event` acts on: a PodDisruptionBudget, or a pod in a namespace that has one."""
        namespace = (obj.get("metadata") or {}).get("namespace")
        return obj.get("kind") == "PodDisruptionBudget" or bool(namespace and self._pdbs.get(namespace))

    def _on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        if kind not in _WATCHED:
            return
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")
        if not namespace:
            return
        if kind == "PodDisruptionBudget":
            names = self._pdbs.setdefault(namespace, set())
            if event_type == "DELETED":
                names.discard(meta.get("name", ""))
            else:
                names.add(meta.get("name", ""))
        if self._pdbs.get(namespace):
            self.sync_namespace(namespace)

    def sync_namespace(self, namespace: str, now: datetime | None = None) -> None:
        pdbs = self.store.list(PDB, namespace)
        if not pdbs:
            return
        now = now or datetime.now(UTC)
        pods = self.store.list("pods", namespace)
        for pdb in pdbs:
            old = pdb.get("status") or {}
            try:
                status = desired_status(self.store, pdb, pods, now)
            except _SyncFailed as exc:  # failSafe
                status = {
                    **old,
                    "disruptionsAllowed": 0,
                    "conditions": disruption_allowed_condition(
                        old.get("conditions") or [],
                        False,
                        "SyncFailed",
                        str(exc),
                        generation=int(old.get("observedGeneration", 0)),
                    ),
                }
            if _same(status, old):
                continue
            with contextlib.suppress(ApiError):  # a concurrent write: the event it makes syncs again
                self.store.update(PDB, {**pdb, "status": status}, namespace, subresource="status")
