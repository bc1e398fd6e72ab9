"""Fleets for the cluster twin: what nodes, GPUs, MIG cuts and GPU-holding pods a twin cluster starts with.

A `Fleet` is built either from an inventory directory (`Fleet.from_inventory`) or synthetically for benchmarks
(`Fleet.synthetic`). It is plain in-memory state: `TwinNode`s with their `TwinGpu`s already cut, the pods
that hold partitions, the mig-parted v1 config that describes the current layout of every node, and the drift
cases to inject. Writing it into the API server twin is the job of reconciler/twin/cluster.py.

The inventory is read here with PyYAML's safe loader (fleetyaml.py; cluster.yaml, nodes/*.yaml, layouts/*.yaml)
and is assumed valid: the twin must not share migplan's loader, validator or placement solver (import-linter forbids
reconciler.logic), so it has its own small placement search for partitions written without a placement.
Layout documents are read as `spec.mig.{enabled,partitions}` or `spec.{enabled,partitions}` [assumption: the
Layout schema was not published when this was written].

Drift cases (stable names, also accepted by `migplan twin --drift`):
  gpu-recut:<node>[:<gpu>]        that GPU (default 0) is cut differently from the plan (all of its
                                  smallest profile, or one full-GPU instance if it was cut into small ones)
  node-missing:<node>             the node is not in the cluster
  undocumented-node[:<name>]      a GPU node (2 x H100-80GB, MIG disabled) that no inventory file describes
  wrong-strategy[:<strategy>]     the ClusterPolicy carries another spec.mig.strategy than cluster.yaml
  stale-device-plugin-config[:<name>]  spec.devicePlugin.config names a ConfigMap whose flags.migStrategy
                                  contradicts the inventory's strategy
  mig-config-failed:<node>        nvidia.com/mig.config points at a config that mig-manager failed to apply
                                  (state `failed`, GPUs unchanged)
  mig-config-pending:<node>       nvidia.com/mig.config.state stuck at `pending`
  mig-manager-wedged:<node>       the node's device-plugin pod cannot terminate during a mig-manager run: its
                                  client wait times out and leaves state `pending` with the
                                  nvidia.com/gpu.deploy.* labels `paused-for-mig-change` (reconfigure.go)
  pod-wants-gpu[:<node>]          a pod asks for `nvidia.com/gpu` on a MIG node and stays Pending
  foreign-holder:<node>[:<gpu>]   (build time) the pod holding that GPU's first owned partition belongs to
                                  another owner of the fleet (its name and app label), not the plan's owner
  driver-placed:<node>[:<gpu>]    (build time) that GPU was cut by hand in the plan's partition order
                                  without placements (`nvidia-smi mig -cgi ... -C`: the driver chooses), so
                                  its placements may differ from the plan's while mig-parted's assert
                                  (counts only) passes; its pods hold the instances of their profile there
Not pure (TwinGpu is mutable), but performs no I/O except reading the inventory files.
"""

from __future__ import annotations

import gc
import hashlib
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reconciler.catalog import GpuModel, load_catalog
from reconciler.twin.fleetyaml import BlockMemo, load_document
from reconciler.twin.gpus import GiProfile, TwinGpu, gi_profiles

__all__ = [
    "DRIFT_KINDS",
    "ClusterSettings",
    "DriftCase",
    "Fleet",
    "PartitionSeed",
    "PodSeed",
    "TwinNode",
    "parse_drift",
    "render_mig_config",
]

DRIFT_KINDS = (
    "gpu-recut",
    "node-missing",
    "undocumented-node",
    "wrong-strategy",
    "stale-device-plugin-config",
    "mig-config-failed",
    "mig-config-pending",
    "pod-wants-gpu",
    "foreign-holder",
    "driver-placed",
    "mig-manager-wedged",
    "dra-dynamic-mig",
)
BUILD_ONLY = ("foreign-holder", "driver-placed")
STRATEGIES = ("none", "single", "mixed")
UNDOCUMENTED_NODE = "gpu-undocumented-01"
STALE_DP_CONFIG = "device-plugin-config"
POD_NAMESPACE = "default"  # [assumption] pods holding partitions run in `default`, labelled app=<owner>


def _load(path: Path, memo: BlockMemo | None = None) -> Any:
    return load_document(path.read_bytes(), {} if memo is None else memo)


@dataclass(frozen=True, slots=True)
class DriftCase:
    kind: str
    arg: str | None = None
    extra: str | None = None

    def __str__(self) -> str:
        return ":".join(x for x in (self.kind, self.arg, self.extra) if x is not None)


def parse_drift(text: str | DriftCase) -> DriftCase:
    """'gpu-recut:node-a:1' → DriftCase('gpu-recut', 'node-a', '1'); ValueError for an unknown kind."""
    if isinstance(text, DriftCase):
        return text
    kind, _, rest = text.partition(":")
    if kind not in DRIFT_KINDS:
        raise ValueError(f"unknown drift case {text!r}; known: {', '.join(DRIFT_KINDS)}")
    arg, _, extra = rest.partition(":")
    needs_node = (
        "gpu-recut",
        "node-missing",
        "mig-config-failed",
        "mig-config-pending",
        "mig-manager-wedged",
        "dra-dynamic-mig",
        *BUILD_ONLY,
    )
    if kind in needs_node and not arg:
        raise ValueError(f"drift case {kind} needs a node: {kind}:<node>")
    if kind == "wrong-strategy" and arg and arg not in STRATEGIES:
        raise ValueError(f"wrong-strategy:{arg}: strategy must be one of {', '.join(STRATEGIES)}")
    return DriftCase(kind, arg or None, extra or None)


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    name: str = "twin"
    mig_strategy: str = "single"
    namespace: str = "gpu-operator"
    cluster_policy: str = "cluster-policy"
    device_plugin_daemonset: str = "nvidia-device-plugin-daemonset"
    mig_config_map: str = "migplan-mig-parted-config"


@dataclass(frozen=True, slots=True)
class PartitionSeed:
    profile: str
    placement: int | None
    owner: str | None


@dataclass(frozen=True, slots=True)
class GpuSeed:
    index: int
    model: GpuModel
    mig_enabled: bool
    partitions: tuple[PartitionSeed, ...]


@dataclass(frozen=True, slots=True)
class PodSeed:
    """A running pod that holds one MIG device (or whole GPU) from the start."""

    namespace: str
    name: str
    node: str
    gpu_index: int
    gi_id: int | None  # None: the whole GPU
    ci_id: int | None
    resource: str  # the extended resource it requests (requests == limits == 1)
    owner: str


@dataclass(slots=True)
class TwinNode:
    name: str
    gpus: list[TwinGpu]
    labels: dict[str, str] = field(default_factory=dict)  # inventory labels (rack, ...)
    lock: threading.RLock = field(default_factory=threading.RLock)
    seeds: tuple[GpuSeed, ...] = ()  # the plan it was built from (heal restores it)


# ---------------------------------------------------------------------------------------------- placement
_ARRANGED: dict[tuple[str, tuple[tuple[str, int | None], ...]], list[int] | None] = {}


def _arrange_cached(gpu: TwinGpu, parts: Sequence[PartitionSeed]) -> list[int] | None:
    key = (gpu.model.key, tuple((p.profile, p.placement) for p in parts))
    if key not in _ARRANGED:
        _ARRANGED[key] = _arrange(gpu.profiles, parts, gpu.model.compute_slices)
    return _ARRANGED[key]


def _arrange(profiles: Mapping[int, GiProfile], parts: Sequence[PartitionSeed], compute: int) -> list[int] | None:
    """Starts for `parts` (fixed ones kept), by exhaustive search; None if no arrangement exists."""
    by_name = {p.name: p for p in profiles.values()}
    profs = [by_name[p.profile] for p in parts]
    if sum(p.compute_slices for p in profs) > compute:
        return None
    order = sorted(range(len(parts)), key=lambda i: (parts[i].placement is None, -profs[i].memory_slices))
    starts: list[int] = [-1] * len(parts)
    taken: list[tuple[int, int]] = []

    def free(s: int, size: int) -> bool:
        return all(not (a < s + size and s < a + b) for a, b in taken)

    def place(k: int) -> bool:
        if k == len(order):
            return True
        i = order[k]
        prof = profs[i]
        cands = [parts[i].placement] if parts[i].placement is not None else list(prof.starts)
        for s in cands:
            if s is None or not free(s, prof.memory_slices):
                continue
            taken.append((s, prof.memory_slices))
            starts[i] = s
            if place(k + 1):
                return True
            taken.pop()
        return False

    return starts if place(0) else None


_CUTS: dict[tuple[str, tuple[tuple[str, int | None], ...]], list[tuple[int, int, int, int]]] = {}


def _cut(gpu: TwinGpu, parts: Sequence[PartitionSeed]) -> list[tuple[PartitionSeed, int, int]]:
    """Cut `gpu` as planned; returns (partition, gi id, ci id).

    The first GPU of a given (model, plan) goes through the checked NVML path (add_partition); later ones replay
    its result (start → GI id, CI id), which is what the checked path would do again on an empty GPU — a 5,000-node
    fleet has a handful of distinct plans and 40,000 GPUs."""
    starts = _arrange_cached(gpu, parts)
    if starts is None:
        raise ValueError(f"{gpu.node} GPU {gpu.index}: no arrangement of {[p.profile for p in parts]} fits")
    order = sorted(range(len(parts)), key=lambda i: starts[i])
    key = (gpu.model.key, tuple((p.profile, p.placement) for p in parts))
    recorded = _CUTS.get(key)
    if recorded is not None and not gpu.gpu_instances:
        out = []
        for i, (start, gi_id, ci_id, ci_profile) in zip(order, recorded, strict=True):
            gpu.replay_partition(parts[i].profile, start, gi_id, ci_id, ci_profile)
            out.append((parts[i], gi_id, ci_id))
        return out
    out = []
    rec = []
    # Create in start order so instance ids are stable and readable (1, 2, ... from slice 0 upwards).
    for i in order:
        gi, ci = gpu.add_partition(parts[i].profile, starts[i])
        out.append((parts[i], gi.id, ci.id))
        rec.append((starts[i], gi.id, ci.id, ci.profile_enum))
    if len(rec) == len(parts):
        _CUTS[key] = rec
    return out


# ---------------------------------------------------------------------------------------------- mig-parted
def render_mig_config(gpus: Sequence[TwinGpu]) -> list[dict[str, Any]]:
    """The mig-parted v1 entries (devices: [i]) describing the current geometry of `gpus`."""
    groups: dict[str, dict[str, Any]] = {}
    for gpu in gpus:
        if gpu.mig_current:
            entry: dict[str, Any] = {"mig-enabled": True, "mig-devices": dict(sorted(gpu.geometry().items()))}
        else:
            entry = {"mig-enabled": False}
        key = repr(sorted(entry.items()))
        if key in groups:
            groups[key]["devices"].append(gpu.index)
        else:
            groups[key] = {"devices": [gpu.index], **entry}
    return list(groups.values())


def config_name(entries: Sequence[Mapping[str, Any]]) -> str:
    digest = hashlib.sha1(repr(entries).encode()).hexdigest()[:10]
    return f"migplan-{digest}"


def _pod_name(owner: str, node: str, gpu: int, k: int) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", owner.lower()).strip("-")[:30] or "pod"
    return f"{base}-{node}-g{gpu}-{k}"[:63].rstrip("-")


# ---------------------------------------------------------------------------------------------- the fleet
class Fleet:
    """The nodes of a twin cluster, their GPUs (cut), the pods holding partitions and the initial config."""

    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings
        self.nodes: dict[str, TwinNode] = {}
        self.pods: list[PodSeed] = []
        self.configs: dict[str, list[dict[str, Any]]] = {}  # mig-parted config name → entries
        self.node_config: dict[str, str] = {}  # node → its nvidia.com/mig.config value
        self.absent: set[str] = set()  # nodes of the inventory that are not in the cluster (node-missing)

    # ------------------------------------------------------------------ building blocks
    def add_node(self, name: str, seeds: Sequence[GpuSeed], labels: Mapping[str, str] | None = None) -> TwinNode:
        lock = threading.RLock()
        gpus = [TwinGpu(node=name, index=s.index, model=s.model, mig_enabled=s.mig_enabled, lock=lock) for s in seeds]
        node = TwinNode(name=name, gpus=gpus, labels=dict(labels or {}), lock=lock, seeds=tuple(seeds))
        self.nodes[name] = node
        self._cut_node(node, with_pods=True)
        return node

    def _cut_node(self, node: TwinNode, *, with_pods: bool) -> None:
        for gpu, seed in zip(node.gpus, node.seeds, strict=True):
            if not seed.mig_enabled or not seed.partitions:
                continue
            cut = _cut(gpu, seed.partitions)
            if not with_pods:
                continue
            for k, (part, gi_id, ci_id) in enumerate(cut):
                if part.owner:
                    self.pods.append(
                        PodSeed(
                            namespace=POD_NAMESPACE,
                            name=_pod_name(part.owner, node.name, gpu.index, k),
                            node=node.name,
                            gpu_index=gpu.index,
                            gi_id=gi_id,
                            ci_id=ci_id,
                            resource=self._resource_for(part.profile),
                            owner=part.owner,
                        )
                    )
        self.refresh_config(node.name)

    def _resource_for(self, profile: str) -> str:
        # Pods were deployed against the inventory's strategy: MIG resources under mixed, nvidia.com/gpu otherwise.
        if self.settings.mig_strategy == "mixed":
            return "nvidia.com/mig-" + profile.replace("+", ".")
        return "nvidia.com/gpu"

    def refresh_config(self, node: str) -> str:
        """(Re)compute the mig-parted config that matches the node's current geometry; returns its name."""
        entries = render_mig_config(self.nodes[node].gpus)
        name = config_name(entries)
        self.configs[name] = entries
        self.node_config[node] = name
        return name

    def mig_parted_config(self) -> dict[str, Any]:
        """The whole mig-parted v1 document (ConfigMap key config.yaml)."""
        return {"version": "v1", "mig-configs": {k: self.configs[k] for k in sorted(self.configs)}}

    def holders(self) -> dict[str, PodSeed]:
        return {f"{p.namespace}/{p.name}": p for p in self.pods}

    def attach_holders(self) -> None:
        """Mark every seeded pod as holding its device (called once the pods exist)."""
        for p in self.pods:
            node = self.nodes.get(p.node)
            if node is None:
                continue
            gpu = node.gpus[p.gpu_index]
            key = f"{p.namespace}/{p.name}"
            if p.gi_id is None:
                gpu.holder = key
                continue
            gi = gpu.gpu_instances.get(p.gi_id)
            if gi is not None and p.ci_id is not None and p.ci_id in gi.compute_instances:
                gi.compute_instances[p.ci_id].holder = key

    # ------------------------------------------------------------------ from an inventory directory
    @classmethod
    def from_inventory(cls, path: str | Path, *, strategy: str | None = None) -> Fleet:
        root = Path(path)
        catalog = load_catalog()
        cluster = _load(root / "cluster.yaml") or {}
        spec = cluster.get("spec") or {}
        op = spec.get("gpuOperator") or {}
        defaults = ClusterSettings()
        settings = ClusterSettings(
            name=str((cluster.get("metadata") or {}).get("name", defaults.name)),
            mig_strategy=strategy or str(spec.get("migStrategy", defaults.mig_strategy)),
            namespace=str(op.get("namespace", defaults.namespace)),
            cluster_policy=str(op.get("clusterPolicy", defaults.cluster_policy)),
            device_plugin_daemonset=str(op.get("devicePluginDaemonSet", defaults.device_plugin_daemonset)),
            mig_config_map=str(op.get("migConfigMap", defaults.mig_config_map)),
        )
        if settings.mig_strategy not in STRATEGIES:
            raise ValueError(f"unknown MIG strategy {settings.mig_strategy!r}")
        layouts: dict[str, Mapping[str, Any]] = {}
        for f in sorted((root / "layouts").glob("*.y*ml")) if (root / "layouts").is_dir() else []:
            doc = _load(f) or {}
            layouts[str((doc.get("metadata") or {}).get("name", f.stem))] = doc.get("spec") or {}
        fleet = cls(settings)
        memo: BlockMemo = {}  # node files repeat their spec blocks (fleetyaml.py)
        gc_was_enabled = gc.isenabled()
        gc.disable()  # hundreds of thousands of small objects that all stay alive
        try:
            for f in sorted((root / "nodes").glob("*.y*ml")):
                doc = _load(f, memo) or {}
                meta = doc.get("metadata") or {}
                name = str(meta.get("name", f.stem))
                seeds = [_gpu_seed(g, layouts, catalog) for g in ((doc.get("spec") or {}).get("gpus") or [])]
                fleet.add_node(name, seeds, {str(k): str(v) for k, v in (meta.get("labels") or {}).items()})
        finally:
            if gc_was_enabled:
                gc.enable()
        return fleet

    # ------------------------------------------------------------------ synthetic
    @classmethod
    def synthetic(
        cls,
        nodes: int,
        *,
        gpus_per_node: int = 8,
        strategy: str = "mixed",
        owned_fraction: float = 0.0,
        model: str = "H200-141GB",
    ) -> Fleet:
        """N nodes x `gpus_per_node` GPUs with a deterministic mix of layouts (benchmarks).

        `owned_fraction` of the partitions get an owner and hence a running pod (0 keeps the store small).
        """
        catalog = load_catalog()
        gm = catalog.get(model)
        if gm is None:
            raise ValueError(f"unknown GPU model {model}")
        small = min((p for p in gm.profiles.values()), key=lambda p: (p.memory_slices, p.name))
        mid = [p for p in gm.profiles.values() if p.compute_slices == 2]
        big = [p for p in gm.profiles.values() if p.compute_slices == 3]
        full = max(gm.profiles.values(), key=lambda p: p.compute_slices)
        layouts: list[tuple[str, ...]] = [
            (full.name,),
            (small.name,) * small.max_instances,
            tuple(x.name for x in (big[:1] * 2)) if big else (full.name,),
            tuple(x.name for x in (big[:1] + mid[:1] + [small, small])) if big and mid else (full.name,),
            (),  # MIG disabled
        ]
        fleet = cls(ClusterSettings(name="synthetic", mig_strategy=strategy))
        gc_was_enabled = gc.isenabled()
        gc.disable()  # hundreds of thousands of small objects that all stay alive
        try:
            fleet._synthesize(nodes, gpus_per_node, gm, layouts, owned_fraction)
        finally:
            if gc_was_enabled:
                gc.enable()
        return fleet

    def _synthesize(
        self, nodes: int, gpus_per_node: int, gm: GpuModel, layouts: list[tuple[str, ...]], owned_fraction: float
    ) -> None:
        fleet = self
        counter = 0
        step = int(1 / owned_fraction) if owned_fraction > 0 else 0
        for n in range(nodes):
            seeds = []
            for i in range(gpus_per_node):
                layout = layouts[(n + i) % len(layouts)]
                parts = []
                for prof in layout:
                    counter += 1
                    owner = f"svc-{counter % 97}" if step and counter % step == 0 else None
                    parts.append(PartitionSeed(prof, None, owner))
                seeds.append(GpuSeed(i, gm, bool(layout), tuple(parts)))
            fleet.add_node(f"gpu-node-{n:05d}", seeds, {"rack": f"r{n // 40:03d}"})

    # ------------------------------------------------------------------ drift applied to the fleet itself
    def recut(self, node: str, gpu_index: int = 0) -> None:
        """gpu-recut: destroy the GPU's instances (dropping the pods' hold) and cut it differently."""
        twin = self.nodes[node]
        gpu = twin.gpus[gpu_index]
        with twin.lock:
            before = gpu.geometry()
            for _, ci in gpu.iter_cis():
                ci.holder = None
            gpu.mig_pending = True
            gpu.reset()
            gpu.clear()
            profs = sorted(gpu.profiles.values(), key=lambda p: (p.memory_slices, p.name))
            small, full = profs[0], max(profs, key=lambda p: p.compute_slices)
            if before == {small.name: small.max_instances}:
                gpu.add_partition(full.name)
            else:
                for _ in range(small.max_instances):
                    gpu.add_partition(small.name)

    def give_to_other_owner(self, node: str, gpu_index: int = 0) -> PodSeed:
        """foreign-holder: the first owned partition of the GPU is held by a pod of another owner."""
        owners = sorted({p.owner for p in self.pods})
        for k, p in enumerate(self.pods):
            if p.node != node or p.gpu_index != gpu_index:
                continue
            other = next((o for o in owners if o != p.owner), "someone-else")
            base = re.sub(r"[^a-z0-9-]+", "-", other.lower()).strip("-")[:30] or "pod"
            name = f"{base}-borrowed-{node}-g{gpu_index}"[:63].rstrip("-")
            self.pods[k] = replace(p, name=name, owner=other)
            return self.pods[k]
        raise ValueError(f"foreign-holder:{node}:{gpu_index}: no owned partition on that GPU")

    def restore(self, node: str) -> None:
        """Heal a recut: put the node's GPUs back as planned (no pod re-attached)."""
        twin = self.nodes[node]
        with twin.lock:
            for gpu, seed in zip(twin.gpus, twin.seeds, strict=True):
                for _, ci in gpu.iter_cis():
                    ci.holder = None
                gpu.mig_pending = seed.mig_enabled
                gpu.reset()
                gpu.clear()
                if seed.mig_enabled and seed.partitions:
                    _cut(gpu, seed.partitions)


def _gpu_seed(raw: Mapping[str, Any], layouts: Mapping[str, Mapping[str, Any]], catalog: Any) -> GpuSeed:
    model = catalog.resolve(str(raw["model"]))
    if model is None:
        raise ValueError(f"unknown GPU model {raw['model']!r}")
    mig = raw.get("mig")
    if mig is None and raw.get("layout"):
        lay = layouts[str(raw["layout"])]
        mig = lay.get("mig", lay)
    mig = mig or {}
    enabled = bool(mig.get("enabled", bool(mig.get("partitions"))))
    parts = tuple(
        PartitionSeed(
            profile=str(p["profile"]),
            placement=int(p["placement"]) if p.get("placement") is not None else None,
            owner=str(p["owner"]) if p.get("owner") else None,
        )
        for p in (mig.get("partitions") or [])
    )
    if any(model.profile(p.profile) is None for p in parts):
        raise ValueError(f"{model.key}: profile not offered in {[p.profile for p in parts]}")
    gi_profiles(model)
    return GpuSeed(int(raw["index"]), model, enabled, parts)


def undocumented_seeds() -> tuple[GpuSeed, ...]:
    model = load_catalog().get("H100-80GB")
    assert model is not None
    return tuple(GpuSeed(i, model, False, ()) for i in range(2))


def iter_drift(cases: Iterable[str | DriftCase]) -> list[DriftCase]:
    return [parse_drift(c) for c in cases]
