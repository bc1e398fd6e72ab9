"""What a merge does to the devices of DRA nodes, by the names NVIDIA's DRA driver publishes them under. Pure.

On a node where NVIDIA's DRA driver publishes static MIG devices (regime `dra-static`,
reconciler.logic.drift.draregime), pods do not ask for `nvidia.com/mig-*`: their ResourceClaims name devices such
as `gpu-0-mig-3g71gb-9-4` (reconciler.logic.codecs.dradevices). A reviewer of such a node wants the partition
changes in those words: each device the merge destroys and creates, and the claims allocated a device it destroys
with the pods reserving them. migplan's agent applies there (minimal change: only what is destroyed or moved goes),
so the devices are those of the partition diff (reconciler.logic.review.revdiff), plus the whole GPU `gpu-<minor>`
when MIG is switched on (it goes) or off (it comes).

A device name needs the GPU's minor number and the GI profile id. The minor comes from the node's observer; where
it did not measure it, the index is taken for it (MP749, per node). The GI profile id comes from the catalog, else
from the device the driver publishes at that placement; where neither says, the device is shown by profile and
placement (MP748). The regime and the claims come from the cluster (`--kubeconfig`); without it nothing is said.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.catalog import Catalog
from reconciler.logic.codecs import dradevices
from reconciler.logic.drift import draregime
from reconciler.logic.review.revdiff import ChangeKind, RevisionDiff
from reconciler.model.dra import ObservedClaim, Regime
from reconciler.model.inventory import DesiredState, GpuSpec, Placement
from reconciler.model.observed import ObservedState

DESTROY, CREATE = "destroy", "create"
# (minor, profile token, start) of a MIG device, or (minor, "", -1) of a whole GPU: how claims are matched
_Key = tuple[int, str, int]


@dataclass(frozen=True, slots=True)
class DraDeviceChange:
    """One device of a DRA node the merge destroys or creates."""

    node: str
    gpu: int
    action: str  # DESTROY | CREATE
    profile: str  # "3g.71gb"; "gpu" for a whole GPU
    start: int | None  # placement start; None for a whole GPU or a partition the solver could not place
    device: str | None  # the driver's name; None when it cannot be told (MP748)
    claims: tuple[str, ...] = ()  # "<namespace>/<name>" of each claim allocated this device now (destroy only)
    pods: tuple[str, ...] = ()  # the pods reserving those claims

    @property
    def shown(self) -> str:
        """The device as a reviewer reads it: its name, else profile and placement."""
        if self.device is not None:
            return self.device
        return f"{self.profile}@{self.start if self.start is not None else '?'} (name unknown)"


@dataclass(frozen=True, slots=True)
class DraNote:
    code: str  # MP748 | MP749
    node: str
    message: str


@dataclass(frozen=True, slots=True)
class DraReview:
    """The DRA-static nodes the merge touches, their device changes and what could not be named."""

    nodes: tuple[str, ...]
    devices: tuple[DraDeviceChange, ...]
    notes: tuple[DraNote, ...] = ()

    @property
    def claims(self) -> tuple[str, ...]:
        return tuple(sorted({c for d in self.devices for c in d.claims}))

    @property
    def pods(self) -> tuple[str, ...]:
        return tuple(sorted({p for d in self.devices for p in d.pods}))

    def on(self, node: str) -> tuple[DraDeviceChange, ...]:
        return tuple(d for d in self.devices if d.node == node)


def static_nodes(observed: ObservedState) -> frozenset[str]:
    """Nodes on which NVIDIA's DRA driver publishes static MIG devices and no other writer is known."""
    gpu_cluster = draregime.cluster_dynamic_mig(observed.gpu_clusters)
    return frozenset(
        name
        for name, published in observed.dra.items()
        if draregime.regime(published) is Regime.DRA_STATIC
        and draregime.other_writer(published, gpu_cluster, draregime.driver_dynamic_mig(observed.dra_drivers, name))
        is None
    )


def _minors(observed: ObservedState, node: str) -> dict[int, int] | None:
    """index -> minor as the node's observer measured them; None when it measured none."""
    seen = observed.nodes.get(node)
    obs = seen.observation if seen is not None else None
    found = {g.index: g.minor for g in obs.gpus if g.minor is not None} if obs is not None else {}
    return found or None


def _claimed(claims: Iterable[ObservedClaim], node: str) -> dict[_Key, list[ObservedClaim]]:
    """Key of each device of `node` a claim is allocated -> those claims."""
    out: dict[_Key, list[ObservedClaim]] = {}
    for c in claims:
        for d in c.devices:
            if d.pool != node:
                continue
            parsed = dradevices.parse(d.device)
            if isinstance(parsed, dradevices.DraMig):
                out.setdefault((parsed.minor, parsed.profile_token, parsed.start), []).append(c)
            elif isinstance(parsed, dradevices.DraGpu):
                out.setdefault((parsed.minor, "", -1), []).append(c)
    return out


class _Namer:
    """Device names on one node: minor from the observer (else the index), GI profile id from the catalog (else
    the published device at that placement)."""

    def __init__(self, node: str, observed: ObservedState, catalog: Catalog, models: Mapping[int, str]) -> None:
        self.minors = _minors(observed, node) or {}
        self.catalog = catalog
        self.models = models
        published = observed.dra.get(node)
        self.published, _bad = draregime.published_devices(published) if published is not None else ({}, [])
        self.unnamed: list[str] = []

    def minor(self, gpu: int) -> int:
        return self.minors.get(gpu, gpu)

    def mig(self, gpu: int, profile: str, start: int | None) -> tuple[_Key | None, str | None]:
        if start is None:
            self.unnamed.append(f"GPU {gpu} {profile}: no placement")
            return None, None
        key = (self.minor(gpu), dradevices.profile_token(profile), start)
        model = self.catalog.get(self.models.get(gpu, ""))
        prof = model.profile(profile) if model is not None else None
        if prof is not None and prof.profile_id is not None:
            return key, dradevices.mig_name(key[0], profile, prof.profile_id, start)
        if key in self.published:
            return key, self.published[key]
        self.unnamed.append(f"GPU {gpu} {profile}@{start}: GI profile id unknown")
        return key, None


def _start(p: Placement | None) -> int | None:
    return None if p is None else p.start


def dra_review(
    diff: RevisionDiff, base: DesiredState, target: DesiredState, observed: ObservedState | None, catalog: Catalog
) -> DraReview | None:
    """The device changes on the DRA-static nodes the merge touches; None when no cluster was asked."""
    if observed is None:
        return None
    dra_nodes = static_nodes(observed)
    touched = sorted({c.node for c in diff.changes} | {n.node for n in diff.notes})
    nodes = [n for n in touched if n in dra_nodes and n in base.nodes and n in target.nodes]
    devices: list[DraDeviceChange] = []
    notes: list[DraNote] = []
    for node in nodes:
        old, new = base.nodes[node], target.nodes[node]
        models = {g.index: g.model for g in old.gpus} | {g.index: g.model for g in new.gpus}
        namer = _Namer(node, observed, catalog, models)
        claimed = _claimed(observed.claims, node)
        found: list[DraDeviceChange] = []
        for c in diff.changes:
            if c.node != node or c.kind is ChangeKind.OWNER:
                continue
            if c.kind in (ChangeKind.DESTROY, ChangeKind.MOVE):
                key, name = namer.mig(c.gpu, c.profile, _start(c.before))
                found.append(_change(node, c.gpu, DESTROY, c.profile, _start(c.before), key, name, claimed))
            if c.kind in (ChangeKind.CREATE, ChangeKind.MOVE):
                key, name = namer.mig(c.gpu, c.profile, _start(c.after))
                found.append(_change(node, c.gpu, CREATE, c.profile, _start(c.after), key, name, claimed))
        for index in sorted({g.index for g in old.gpus} & {g.index for g in new.gpus}):
            switched = _mig_switch(old.gpu(index), new.gpu(index))
            if switched is not None:  # the whole GPU goes (MIG on) or comes (MIG off)
                minor = namer.minor(index)
                whole = (minor, "", -1)
                found.append(_change(node, index, switched, "gpu", None, whole, f"gpu-{minor}", claimed))
        if namer.unnamed:
            notes.append(DraNote("MP748", node, "device name not told for " + "; ".join(namer.unnamed[:5])))
        if _minors(observed, node) is None and found:
            notes.append(DraNote("MP749", node, "no observer measured the GPUs' minor numbers: index taken"))
        devices += sorted(found, key=lambda d: (d.gpu, d.action != DESTROY, d.start if d.start is not None else -1))
    return DraReview(tuple(nodes), tuple(devices), tuple(notes))


def _change(
    node: str,
    gpu: int,
    action: str,
    profile: str,
    start: int | None,
    key: _Key | None,
    name: str | None,
    claimed: Mapping[_Key, list[ObservedClaim]],
) -> DraDeviceChange:
    """One device change; a destroyed device names the claims allocated it and the pods reserving them."""
    holders = claimed.get(key, []) if key is not None and action == DESTROY else []
    claims = tuple(sorted({c.key for c in holders}))
    pods = tuple(sorted({p for c in holders for p in c.reserved_for}))
    return DraDeviceChange(node, gpu, action, profile, start, name, claims, pods)


def _mig_switch(before: GpuSpec | None, after: GpuSpec | None) -> str | None:
    """DESTROY when MIG is switched on (the whole GPU is no longer published), CREATE when off, else None."""
    if before is None or after is None or before.model != after.model or before.mig_enabled == after.mig_enabled:
        return None
    return DESTROY if after.mig_enabled else CREATE
