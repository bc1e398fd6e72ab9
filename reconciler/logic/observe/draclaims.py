"""Who holds a node's GPUs through ResourceClaims, from the claims alone. Pure.

Where a node's observer reports, the kubelet's `dynamic_resources` name the holders
(reconciler.logic.observe.observejoin). Where none does, a ResourceClaim says it as well:
`status.allocation.devices.results[]` names the device (driver, pool = the node for NVIDIA's driver, device name)
and `status.reservedFor[]` the pods using it (the scheduler reserves a claim for a pod before binding it;
resource/v1 types.go `ResourceClaimStatus`). The device name is read as NVIDIA's driver writes it
(reconciler.logic.codecs.dradevices) to find the GPU; a name that does not parse is taken as held on every GPU of
the node, so the guard errs on the side of the pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.logic.codecs import dradevices
from reconciler.model.dra import ObservedClaim

# (GPU index, or None when the device name does not say which GPU; the pod key)
ClaimHold = tuple[int | None, str]


def by_node(claims: Iterable[ObservedClaim]) -> dict[str, list[tuple[str, str]]]:
    """node (pool) -> [(device name, pod key)] for every pod reserving a claim allocated a device there."""
    out: dict[str, list[tuple[str, str]]] = {}
    for c in claims:
        for d in c.devices:
            for pod in c.reserved_for:
                out.setdefault(d.pool, []).append((d.device, pod))
    return out


def holds(devices: Iterable[tuple[str, str]], minors: Mapping[int, int]) -> list[ClaimHold]:
    """Which GPU each claimed device is on: the GPU whose minor number the name carries (`minors`: index -> minor,
    as the node's observer measured them; the index is taken for the minor where it did not)."""
    index_of = {minor: index for index, minor in minors.items()}
    out: list[ClaimHold] = []
    for device, pod in devices:
        parsed = dradevices.parse(device)
        out.append((None if parsed is None else index_of.get(parsed.minor, parsed.minor), pod))
    return out


def holders_on(held: Iterable[ClaimHold], gpus: frozenset[int] | None) -> tuple[str, ...]:
    """The pods holding a device of `gpus` (None: every GPU) through a claim, sorted."""
    return tuple(sorted({pod for index, pod in held if gpus is None or index is None or index in gpus}))


def unknown_pools(claims: Iterable[ObservedClaim], nodes: Iterable[str]) -> list[tuple[str, str]]:
    """(claim key, pool) of every device allocated on a node the cluster does not list."""
    known = set(nodes)
    return sorted({(c.key, d.pool) for c in claims for d in c.devices if d.pool not in known})
