"""What the committed drift report records of a DRA node, so a plan without a cluster can name its devices. Pure.

A merge request's plan in CI reads the report the controller committed (reconciler.logic.review.reportoccupancy),
not the cluster. To show the DRA table the live plan shows (reconciler.logic.review.dradevices), it needs, per node
NVIDIA's DRA driver publishes devices for: the regime and any other writer of the layout
(reconciler.logic.drift.draregime), the GPUs' minor numbers the node observer measured, the published device names
and the claims allocated them with the pods reserving them. Nodes of the device-plugin path get nothing: the report
of a cluster without DRA does not change. Every list is capped (reconciler.model.drift DRA_*_CAP) and what is left
out is counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.logic.drift import draregime
from reconciler.model.dra import ObservedClaim, Regime
from reconciler.model.drift import (
    DRA_CLAIM_ITEMS_CAP,
    DRA_CLAIMS_CAP,
    DRA_DEVICES_CAP,
    DraClaimRecord,
    NodeDraRecord,
)
from reconciler.model.observed import ObservedState


def claims_by_pool(claims: Iterable[ObservedClaim]) -> dict[str, list[ObservedClaim]]:
    """node (the driver's pool) -> the claims allocated a device there (a claim spanning nodes is under each)."""
    out: dict[str, list[ObservedClaim]] = {}
    for c in claims:
        for pool in sorted({d.pool for d in c.devices}):
            out.setdefault(pool, []).append(c)
    return out


def node_record(
    name: str, observed: ObservedState, gpu_cluster: str | None, claimed: Mapping[str, list[ObservedClaim]]
) -> NodeDraRecord | None:
    """The node's DRA record, or None when the driver publishes nothing for it (device-plugin path).
    `gpu_cluster`: draregime.cluster_dynamic_mig of the cluster; `claimed`: claims_by_pool of its claims."""
    published = observed.dra.get(name)
    regime = draregime.regime(published)
    if published is None or regime is Regime.DEVICE_PLUGIN:
        return None
    writer = draregime.other_writer(published, gpu_cluster, draregime.driver_dynamic_mig(observed.dra_drivers, name))
    seen = observed.nodes.get(name)
    obs = seen.observation if seen is not None else None
    minors = tuple(sorted((g.index, g.minor) for g in obs.gpus if g.minor is not None)) if obs is not None else ()
    devices = sorted({d.name for d in published.devices})
    claims = sorted(claimed.get(name, ()), key=lambda c: c.key)
    return NodeDraRecord(
        regime=regime.value,
        writer=writer,
        minors=minors,
        devices=tuple(devices[:DRA_DEVICES_CAP]),
        devices_more=max(len(devices) - DRA_DEVICES_CAP, 0),
        claims=tuple(_claim(c, name) for c in claims[:DRA_CLAIMS_CAP]),
        claims_more=max(len(claims) - DRA_CLAIMS_CAP, 0),
    )


def _claim(c: ObservedClaim, node: str) -> DraClaimRecord:
    devices = sorted({d.device for d in c.devices if d.pool == node})
    return DraClaimRecord(
        claim=c.key,
        devices=tuple(devices[:DRA_CLAIM_ITEMS_CAP]),
        pods=tuple(sorted(c.reserved_for)[:DRA_CLAIM_ITEMS_CAP]),
    )
