"""The DeviceClasses migplan keeps, against what the cluster has: which nodes they are for, and what stands in their
way (MP596, MP597). Pure.

A class migplan renders (reconciler.logic.inventory.deviceclasses) is for the MIG profiles planned on DRA-static nodes:
nodes migplan writes the layout of whose ResourceSlices publish static MIG devices (reconciler.logic.drift.draregime).
In the way, and reported, never overwritten:
- MP596 a class of the same name that migplan did not create (no `app.kubernetes.io/managed-by: migplan` label);
- MP597 a class migplan does not keep that maps the same extended resource name: the scheduler serves a name from
  one class only (the newer, resource/v1 `DeviceClassSpec.ExtendedResourceName`), so pods asking it may get devices
  another class selects.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.logic.drift import draregime
from reconciler.logic.inventory import deviceclasses
from reconciler.model.dra import Regime
from reconciler.model.drift import Finding, finding
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import ObservedState


def dra_static_nodes(desired: DesiredState, observed: ObservedState) -> tuple[str, ...]:
    """The nodes of the plan migplan writes the layout of where NVIDIA's DRA driver publishes static MIG devices."""
    return tuple(
        name
        for name in sorted(desired.nodes)
        if desired.layout_writer(name) == "migplan" and draregime.regime(observed.dra.get(name)) is Regime.DRA_STATIC
    )


def findings(desired: DesiredState, observed: ObservedState) -> Iterable[Finding]:
    """MP596 and MP597 for the classes this cycle renders; nothing when the classes were not listed."""
    if observed.device_classes is None:
        return
    wanted = deviceclasses.wanted(desired, dra_nodes=dra_static_nodes(desired, observed), owner_uuids={})
    names = {c.name for c in wanted}
    by_name = {c.name: c for c in observed.device_classes}
    for want in wanted:
        have = by_name.get(want.name)
        if have is not None and not have.managed:
            yield finding(
                "MP596",
                f"DeviceClass {want.name} exists and migplan did not create it (no label "
                f"app.kubernetes.io/managed-by: migplan): left as it is, so the {want.purpose} class is not kept; "
                "delete or rename that class, or name migplan's otherwise in cluster.yaml spec.deviceClasses",
                observed=have.extended_resource_name,
            )
    mapped = {c.extended_resource_name: c.name for c in wanted if c.extended_resource_name}
    for have in observed.device_classes:
        ours = mapped.get(have.extended_resource_name) if have.extended_resource_name else None
        if ours is None or have.managed or have.name in names:
            continue
        yield finding(
            "MP597",
            f"DeviceClass {have.name} (not migplan's) maps {have.extended_resource_name} like migplan's {ours}: the "
            "scheduler serves that name from the newer class only, so pods asking it may get the other class's "
            f"devices; remove its extendedResourceName or list it in cluster.yaml spec.deviceClasses.declared",
            observed=have.name,
        )
