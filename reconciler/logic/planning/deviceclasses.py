"""The DeviceClass writes of a cycle: keep the classes the plan renders (logic/inventory/deviceclasses.py). Pure.

Which classes: one per profile the plan places on a DRA node (a node migplan writes the layout of, whose
ResourceSlices publish static MIG devices: reconciler.logic.drift.draregime), the per-owner classes (the uuid of the
device the driver publishes for each of the owner's planned partitions) and the declared ones.

How, never touching what migplan did not create:
- a class that does not exist is created, labelled `app.kubernetes.io/managed-by: migplan` (and annotated with what
  it is for), under migplan's field manager;
- a class migplan created whose extendedResourceName, selectors or purpose differ is merge-patched, the patch
  carrying the resourceVersion migplan read (a class changed since is a 409 the next cycle re-reads);
- a class of that name that migplan did not create is left as it is (the drift report says so: MP596);
- a class migplan created that nothing asks for any more is retired, never deleted (migplan's RBAC has no `delete`,
  deploy/): patched to select nothing (`false`), without extendedResourceName, annotated `retired`; a person may
  delete it. A profile class is kept while the profile is planned on any node migplan writes, DRA or not yet: a
  node's slices vanish for a moment while the driver's kubelet plugin restarts after a re-cut, and the class must not
  flap with them. An owner class whose owner has nothing published right now keeps the uuids it selects.
Nothing is planned when the classes were not listed (ObservedState.device_classes is None).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from reconciler.logic.codecs import dradevices
from reconciler.logic.drift.draclasses import dra_static_nodes
from reconciler.logic.inventory import deviceclasses
from reconciler.logic.inventory.deviceclasses import WantedClass
from reconciler.model.dra import DEVICE_CLASS_PURPOSE_ANNOTATION, NodeDra, ObservedDeviceClass
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE, ObservedState
from reconciler.model.plans import Action, Change, Kind

SUBJECT_PREFIX = "deviceclass/"
# What a class migplan created and no longer wants becomes: it selects nothing and maps no resource.
RETIRED = WantedClass("", None, ("false",), "retired")
API_VERSION = "resource.k8s.io/v1"


def owner_uuids(desired: DesiredState, observed: ObservedState, nodes: Iterable[str]) -> dict[str, list[str]]:
    """owner -> the uuids of the published devices that are its planned partitions on `nodes` (a GPU's minor number
    taken for its index, as the drift report infers it where no observer measured it)."""
    wanted = {o.owner for o in desired.cluster.device_classes.owners}
    out: dict[str, list[str]] = {}
    if not wanted:
        return out
    unowned: set[int] = set()  # partition tuples without such an owner (a layout's is shared by many GPUs)
    for name in nodes:
        plan, published = desired.nodes[name], observed.dra.get(name)
        owned = []
        for g in plan.gpus:
            if not g.mig_enabled or id(g.partitions) in unowned:
                continue
            found = [
                (part.owner, (g.index, dradevices.profile_token(part.profile), placement.start))
                for part, placement in zip(g.partitions, g.placements, strict=False)
                if part.owner in wanted
            ]
            if not found:
                unowned.add(id(g.partitions))
            owned.extend(found)
        if published is None or not owned:
            continue  # the devices' names are parsed only on nodes where an owner with a class has partitions
        uuids = _published_uuids(published)
        for owner, key in owned:
            uuid = uuids.get(key)
            if uuid is not None and owner is not None:
                out.setdefault(owner, []).append(uuid)
    return out


def _published_uuids(published: NodeDra) -> dict[tuple[int, str, int], str]:
    out: dict[tuple[int, str, int], str] = {}
    for d in published.devices:
        parsed = dradevices.parse(d.name)
        if isinstance(parsed, dradevices.DraMig) and d.uuid:
            out[(parsed.minor, parsed.profile_token, parsed.start)] = d.uuid
    return out


def changes(desired: DesiredState, observed: ObservedState) -> list[Change]:
    """The DeviceClass writes of this cycle, by class name (see the module docstring)."""
    if observed.device_classes is None:
        return []
    existing = {c.name: c for c in observed.device_classes}
    nodes = dra_static_nodes(desired, observed)
    settings = desired.cluster.device_classes
    if not nodes and not settings.owners and not settings.declared and not any(c.managed for c in existing.values()):
        return []  # a device-plugin cluster that never had migplan's classes: no pass over the plan
    uuids = owner_uuids(desired, observed, nodes)
    wanted = {c.name: c for c in deviceclasses.wanted(desired, dra_nodes=nodes, owner_uuids=uuids)}
    # Kept while planned anywhere (no flapping while a node's slices are republished), even when not wanted now.
    everywhere = deviceclasses.planned_profiles(desired, desired.nodes) if settings.enabled else ()
    keep = {deviceclasses.profile_class_name(p) for p in everywhere}
    keep |= {o.name for o in settings.owners}
    out: list[Change] = []
    for name in sorted(set(wanted) | set(existing)):
        want, have = wanted.get(name), existing.get(name)
        if want is not None and any(len(s) > deviceclasses.CEL_MAX_LENGTH for s in want.selectors):
            continue  # the API server would refuse it (and the dry run stop every write): validate's MP417 bounds it
        if want is not None and have is None:
            out.append(_create(want))
        elif want is not None and have is not None and have.managed:
            if want.purpose.startswith("owner ") and not uuids.get(want.purpose.removeprefix("owner ")):
                continue  # nothing of the owner published right now: keep what it selects
            if _differs(want, have):
                out.append(_configure(want, have))
        elif want is None and have is not None and have.managed and name not in keep and _differs(RETIRED, have):
            out.append(_configure(WantedClass(name, None, RETIRED.selectors, RETIRED.purpose), have))
    return out


def _differs(want: WantedClass, have: ObservedDeviceClass) -> bool:
    return (
        want.extended_resource_name != have.extended_resource_name
        or want.selectors != have.selectors
        or want.purpose != have.purpose
    )


def _spec(want: WantedClass) -> dict[str, object]:
    return {
        "selectors": [{"cel": {"expression": s}} for s in want.selectors],
        "extendedResourceName": want.extended_resource_name,
    }


def _view(ext: str | None, selectors: Sequence[str], purpose: str | None) -> Mapping[str, object]:
    return {"extendedResourceName": ext, "selectors": list(selectors), "purpose": purpose}


def _create(want: WantedClass) -> Change:
    spec = {k: v for k, v in _spec(want).items() if v is not None}
    body = {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {
            "name": want.name,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
            "annotations": {DEVICE_CLASS_PURPOSE_ANNOTATION: want.purpose},
        },
        "spec": spec,
    }
    return Change(
        subject=SUBJECT_PREFIX + want.name,
        action=Action.CREATE,
        kind=Kind.DEVICE_CLASS,
        after=_view(want.extended_resource_name, want.selectors, want.purpose),
        reason=_reason(want),
        patch=body,
    )


def _configure(want: WantedClass, have: ObservedDeviceClass) -> Change:
    patch = {
        "metadata": {
            "resourceVersion": have.resource_version,
            "annotations": {DEVICE_CLASS_PURPOSE_ANNOTATION: want.purpose},
        },
        "spec": _spec(want),  # a null extendedResourceName removes it (JSON merge patch)
    }
    return Change(
        subject=SUBJECT_PREFIX + want.name,
        action=Action.CONFIGURE,
        kind=Kind.DEVICE_CLASS,
        before=_before(have),
        after=_view(want.extended_resource_name, want.selectors, want.purpose),
        reason=_reason(want),
        patch=patch,
    )


def _before(have: ObservedDeviceClass) -> Mapping[str, object]:
    view = _view(have.extended_resource_name, have.selectors, have.purpose)
    return {**view, "resourceVersion": have.resource_version}


def _reason(want: WantedClass) -> str:
    ext = f" as {want.extended_resource_name}" if want.extended_resource_name else ""
    return f"DeviceClass for {want.purpose}{ext} on driver {deviceclasses.DRIVER}"
