"""A node's GPUs read from what NVIDIA's DRA driver publishes for it (`migplan import` on a DRA cluster). Pure.

The driver publishes, in the node's ResourceSlices (reconciler.model.dra.NodeDra, read by the kube adapter):
- under static MIG, each MIG device that exists, named `gpu-<minor>-mig-<profile>-<GI profile id>-<start>`
  (reconciler.logic.codecs.dradevices) with the attributes `type=mig`, `profile`, `productName`, `parentUUID`
  (`CommonAttributesMig`), and each GPU without MIG whole as `gpu-<minor>` (a MIG-enabled GPU is not published
  whole): the exact cut, placements included, so the imported plan is the layout that is there;
- under DynamicMIG, counter sets and every profile x placement as a device consuming them: what could be cut, not
  what is. The driver writes that node's layout (reconciler.logic.drift.draregime), so the node is imported with
  `layoutWriter: dra-dynamic-mig` and its GPUs without partitions (MP320 refuses partitions there).

A plan written from a wrong reading would have migplan re-cut GPUs that are in use, so a slice that cannot be read
whole is no source at all: an unreadable device (MP958), attributes that contradict the name or the catalog (MP959),
a device published twice (MP960) or on a GPU the node does not list (MP961) leave the node out of the import (no
file), with the finding naming the device. The GPU index comes from the minor number through the node's observer
where it measured them; elsewhere the index is taken for the minor, and the node file says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.catalog import Catalog, GpuModel
from reconciler.logic.codecs import dradevices
from reconciler.logic.drift import draregime
from reconciler.model.dra import DraDevice, NodeDra, Regime

SOURCE_DRA = "dra-slices"
MAX_PROBLEMS = 8  # per node: enough to act on; a hostile slice of thousands of devices does not flood the output


@dataclass(frozen=True, slots=True)
class DraGpuCut:
    """One GPU as the slices show it: (profile, start) of each MIG device, or MIG off (published whole)."""

    index: int
    minor: int
    model: str  # catalog key
    mig_enabled: bool
    partitions: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class DraNodeRead:
    """What a node's slices say: its regime, the GPUs read, and the problems (code, one line) that refuse it."""

    regime: Regime
    gpus: tuple[DraGpuCut, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()
    minors_inferred: bool = False  # the GPU index was taken for the minor number (no observer measured them)

    @property
    def refused(self) -> bool:
        return bool(self.problems)


def read_node(
    published: NodeDra, catalog: Catalog, *, minors: Mapping[int, int] | None, gpu_count: int | None
) -> DraNodeRead:
    """The node's GPUs from its slices. `minors`: index -> minor as the node's observer measured them (None: no
    observer); `gpu_count`: how many GPUs GFD counts on the node (None: unknown), which bounds the minors when no
    observer maps them."""
    regime = draregime.regime(published)
    problems: list[tuple[str, str]] = [("MP958", p) for p in published.problems]
    index_of = {m: i for i, m in minors.items()} if minors is not None else None

    def index(minor: int, device: str) -> int | None:
        if index_of is not None:
            found = index_of.get(minor)
            if found is None:
                problems.append(("MP961", f"device {device}: the node's observer lists no GPU with minor {minor}"))
            return found
        if gpu_count is not None and minor >= gpu_count:
            problems.append(("MP961", f"device {device}: GPU minor {minor}, the node lists {gpu_count} GPU(s)"))
            return None
        return minor

    seen: set[str] = set()
    whole: dict[int, DraDevice] = {}
    migs: dict[int, list[tuple[dradevices.DraMig, DraDevice]]] = {}
    for d in published.devices:
        if d.name in seen:
            problems.append(("MP960", f"device {d.name} is published twice"))
            continue
        seen.add(d.name)
        parsed = dradevices.parse(d.name)
        if parsed is None:
            if d.kind != "vfio":
                problems.append(("MP958", f"device {d.name!r}: not a name NVIDIA's driver gives a GPU or MIG device"))
            continue
        if isinstance(parsed, dradevices.DraGpu):
            whole[parsed.minor] = d
        else:
            migs.setdefault(parsed.minor, []).append((parsed, d))
    gpus: list[DraGpuCut] = []
    taken: dict[int, int] = {}  # index -> minor
    for minor in sorted(set(whole) | set(migs)):
        cut = _gpu(minor, whole.get(minor), migs.get(minor, []), catalog, regime, problems)
        name = whole[minor].name if minor in whole else migs[minor][0][1].name
        at = index(minor, name)
        if cut is None or at is None:
            continue
        if at in taken:
            problems.append(("MP960", f"GPU minor {minor} and {taken[at]} are both GPU index {at}"))
            continue
        taken[at] = minor
        gpus.append(DraGpuCut(at, minor, cut[0], cut[1], cut[2]))
    uniq = tuple(dict.fromkeys(problems))[:MAX_PROBLEMS]
    return DraNodeRead(regime, tuple(sorted(gpus, key=lambda g: g.index)), uniq, minors_inferred=minors is None)


def _model(devices: list[DraDevice], what: str, catalog: Catalog, problems: list[tuple[str, str]]) -> GpuModel | None:
    products = {d.product for d in devices}
    if len(products) != 1 or None in products:
        problems.append(("MP959", f"{what}: productName is {'missing' if None in products else 'not one value'}"))
        return None
    product = next(iter(products))
    assert product is not None
    model = catalog.resolve(product)
    if model is None:
        problems.append(("MP959", f"{what}: productName {product!r} is not a model of the catalog"))
    return model


def _gpu(
    minor: int,
    whole: DraDevice | None,
    migs: list[tuple[dradevices.DraMig, DraDevice]],
    catalog: Catalog,
    regime: Regime,
    problems: list[tuple[str, str]],
) -> tuple[str, bool, tuple[tuple[str, int], ...]] | None:
    """(model key, MIG enabled, partitions) of one GPU, or None with the problems said."""
    what = f"GPU minor {minor}"
    devices = ([whole] if whole is not None else []) + [d for _, d in migs]
    model = _model(devices, what, catalog, problems)
    if model is None:
        return None
    if regime is Regime.DRA_DYNAMIC_MIG:
        return model.key, False, ()  # the driver cuts it per claim: no partitions of migplan's
    if whole is not None and migs:
        problems.append(("MP959", f"{what} is published whole and cut into MIG devices ({migs[0][1].name})"))
        return None
    if whole is not None:
        return model.key, False, ()
    parents = {d.parent_uuid for _, d in migs}
    if len(parents) != 1 or None in parents:
        problems.append(("MP959", f"{what}: its MIG devices do not name one parentUUID"))
        return None
    partitions: list[tuple[str, int]] = []
    starts: dict[int, str] = {}
    for parsed, d in sorted(migs, key=lambda m: (m[0].start, m[1].name)):
        profile = model.profile(d.profile) if d.profile is not None else None
        if d.kind != "mig" or profile is None:
            problems.append(("MP959", f"device {d.name}: type {d.kind!r}, profile {d.profile!r} not of {model.key}"))
            return None
        if dradevices.profile_token(profile.name) != parsed.profile_token:
            problems.append(("MP959", f"device {d.name}: its name says {parsed.profile_token}, profile {profile.name}"))
            return None
        if profile.profile_id is not None and profile.profile_id != parsed.profile_id:
            problems.append(
                ("MP959", f"device {d.name}: GI profile id {parsed.profile_id}, {profile.name} is {profile.profile_id}")
            )
            return None
        if parsed.start in starts:
            problems.append(
                ("MP960", f"devices {starts[parsed.start]} and {d.name} both start at slice {parsed.start}")
            )
            return None
        starts[parsed.start] = d.name
        partitions.append((profile.name, parsed.start))
    return model.key, True, tuple(partitions)
