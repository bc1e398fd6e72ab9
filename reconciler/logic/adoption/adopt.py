"""Adoption: tell each GPU's cut from what a running cluster shows (`migplan import`).

Pure: values read by the kube adapter in (nodes, their pods, the decoded observed layouts, the mig-parted
configs of the ConfigMap the ClusterPolicy names), one cut per GPU out, with the source it came from and the
problems found; reconciler.logic.adoption.adoptfiles writes them as inventory files. No I/O, no clock: the same
cluster gives the same files, so an import can be diffed against the last one.

Per GPU the best source wins, and the node file says which one it was:
1. the layout a migplan observer published in the Node annotation `migplan.io/mig-observed` (decoded by
   the adapter with its strict decoder): MIG mode, profiles and exact placements, as NVML reports them;
2. the mig-parted config named by the node's `nvidia.com/mig.config` label, from the ConfigMap the
   ClusterPolicy points at (device filters resolved against the GPU model GFD names): profile counts per
   GPU; mig-parted has no placements, so they are left to the solver;
3. the node's advertised `nvidia.com/mig-*` resources and GFD labels: profile counts per node only; which
   GPU holds which partition is a first-fit guess, said so in a comment.
On a node NVIDIA's DRA driver publishes devices for, its ResourceSlices come second, after the observed layout
(reconciler.logic.adoption.draimport): the exact MIG devices under static MIG; under DynamicMIG the GPUs only,
written with `layoutWriter: dra-dynamic-mig` and no partitions (the driver cuts them). Slices that cannot be read
whole (MP958-MP961) leave the node out: a wrong reading would have migplan re-cut GPUs in use.

A GPU whose model or cut is doubtful is still written, with the problem in a comment above it, so
`migplan validate` reports it with file and line (an unknown model is MP301, a cut that does not fit
MP302-MP308). Owners are never guessed into `owner:`: the pods holding partitions (their `app` labels)
are listed as suggestions in a comment.

IMPORT_CODES is this family's view of the one registry, reconciler.model.codes (documented in docs/reference/codes.md).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.catalog import Catalog, GpuModel
from reconciler.logic.adoption import draimport
from reconciler.logic.codecs.migparted import ConfigEntry, MigPartedFormatError, parse_strict
from reconciler.logic.inventory.placement import PlacementUnknown, Request, solve
from reconciler.logic.planning.agentplan import ObservedGpu
from reconciler.model import codes
from reconciler.model.dra import NodeDra, Regime
from reconciler.model.observed import (
    GPU_COUNT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_RESOURCE_PREFIX,
    MigConfigState,
    ObservedNode,
    ObservedPod,
)
from reconciler.model.printable import one_line

# The import family of the one registry (reconciler.model.codes): code -> meaning.
IMPORT_CODES: Mapping[str, str] = {c.code: c.meaning for c in codes.family(codes.Family.IMPORT)}

SOURCE_OBSERVED = "observed"
SOURCE_CONFIG = "mig-parted"
SOURCE_RESOURCES = "resources"
_APP_LABELS = ("app.kubernetes.io/name", "app")
_UNKNOWN_MODEL = codes.with_trait(codes.Trait.UNKNOWN_MODEL)
# A Kubernetes node name (DNS-1123 subdomain), the same rule as schemas/node.schema.json: it becomes a file
# name, so a name from a hostile API server ("../x", "a/b") never reaches the file system.
_NODE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True, slots=True)
class Problem:
    """One import problem. The message is made one line of printable text here, once for every source: it quotes
    what the cluster holds (a YAML error of a ConfigMap, a key of a mig-parted config), and a newline in it would
    forge a `warning MPxxx:` line in the command's output."""

    code: str
    message: str
    node: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", one_line(self.message))

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What cluster.yaml says, read from the ClusterPolicy and the cluster."""

    name: str
    strategy: str  # none | single | mixed
    namespace: str
    cluster_policy: str
    device_plugin_daemonset: str
    mig_config_map: str
    notes: tuple[str, ...] = ()  # where each value came from, for the comment at the top of cluster.yaml


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """One GPU node as the adapter read it."""

    node: ObservedNode
    pods: tuple[ObservedPod, ...] = ()
    observed: tuple[ObservedGpu, ...] | None = None  # decoded `migplan.io/mig-observed`
    observed_error: str | None = None  # why the annotation could not be decoded
    dra: NodeDra | None = None  # what NVIDIA's DRA driver publishes for the node (None: no slice names it)


@dataclass(frozen=True, slots=True)
class ConfigSource:
    """The mig-parted configs a node's `nvidia.com/mig.config` label can name."""

    where: str  # "ConfigMap gpu-operator/default-mig-parted-config"
    configs: Mapping[str, tuple[ConfigEntry, ...]] | None
    error: str | None = None  # why there are none


@dataclass(frozen=True, slots=True)
class Note:
    """A comment written above an imported GPU: a problem with its import code, or a remark (no code)."""

    text: str
    code: str | None = None

    def __str__(self) -> str:
        return f"{self.code} {self.text}" if self.code is not None else self.text


@dataclass(frozen=True, slots=True)
class GpuCut:
    index: int
    model: str  # catalog key, or the name as the cluster gave it when unknown
    mig_enabled: bool
    partitions: tuple[tuple[str, int | None], ...] = ()  # (profile, placement or None)
    source: str = SOURCE_RESOURCES
    notes: tuple[Note, ...] = ()  # problems and remarks, written as comments above the GPU


@dataclass(frozen=True, slots=True)
class NodeImport:
    name: str
    gpus: tuple[GpuCut, ...]
    sources: tuple[str, ...]  # one line per source used, for the node's header comment
    owners: tuple[str, ...] = ()  # suggestion lines
    layout_writer: str | None = None  # spec.layoutWriter when migplan is not the writer (DynamicMIG)


@dataclass(frozen=True, slots=True)
class Imported:
    nodes: tuple[NodeImport, ...]
    problems: tuple[Problem, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------------------------------------- reading


def parse_configs(where: str, text: str | None) -> ConfigSource:
    """The configs of a ConfigMap's `config.yaml`, read as strictly as mig-parted reads them."""
    if text is None:
        return ConfigSource(where, None, f"{where} not found or without key config.yaml")
    try:
        return ConfigSource(where, parse_strict(text))
    except MigPartedFormatError as exc:
        return ConfigSource(where, None, f"{where}: {exc}")


def _physical_count(labels: Mapping[str, str]) -> int | None:
    """GFD's GPU count when it counts physical GPUs (not under `single` on a MIG node, stack-facts §2)."""
    count = labels.get(GPU_COUNT_LABEL)
    if count is None or not (count.isascii() and count.isdigit() and len(count) < 4):
        return None
    if "-MIG-" in labels.get(GPU_PRODUCT_LABEL, ""):
        return None
    return int(count)


def _filter_matches(entry: ConfigEntry, model: GpuModel | None) -> bool:
    """mig-parted's device filter (`0x<device><vendor>[:<subsystem>]`) against the model's PCI ids."""
    if not entry.device_filter:
        return True
    if model is None:
        return False
    ids = {p.lower() for p in model.pci_device_ids}
    return any(f.split(":", 1)[0].strip().lower() in ids for f in entry.device_filter)


_FIT_MEMO_LIMIT = 4096
_FitMemo = dict[tuple[str, tuple[tuple[str, int | None], ...]], str | None]


def cut_problem(
    model: GpuModel, partitions: Sequence[tuple[str, int | None]], memo: _FitMemo | None = None
) -> str | None:
    """Why this cut cannot be on this model (None when it fits, or cannot be checked beyond slice counts).
    `memo` (one per import) keeps the verdicts of cuts already seen: a fleet repeats a few cuts many times."""
    if memo is None:
        return _fit_now(model, partitions)
    key = (model.key, tuple(partitions))
    if key not in memo:
        verdict = _fit_now(model, partitions)
        if len(memo) >= _FIT_MEMO_LIMIT:
            return verdict
        memo[key] = verdict
    return memo[key]


def _fit_now(model: GpuModel, partitions: Sequence[tuple[str, int | None]]) -> str | None:
    unknown = sorted({p for p, _ in partitions if model.profile(p) is None})
    if unknown:
        return f"{', '.join(unknown)} not offered by {model.key}"
    counts = Counter(p for p, _ in partitions)
    for p, n in counts.items():
        prof = model.profiles[p]
        if n > prof.max_instances:
            return f"{n} x {p} but {model.key} allows {prof.max_instances}"
    compute = sum(model.profiles[p].compute_slices for p, _ in partitions)
    memory = sum(model.profiles[p].memory_slices for p, _ in partitions)
    if compute > model.compute_slices or memory > model.memory_slices:
        have = f"{model.compute_slices} / {model.memory_slices}"
        return f"{compute} compute / {memory} memory slices, {model.key} has {have}"
    try:
        if solve(model, [Request(p, s) for p, s in partitions]) is None:
            return f"no placement of these partitions exists on {model.key}"
    except PlacementUnknown:
        return None
    return None


def _model_of(catalog: Catalog, labels: Mapping[str, str]) -> tuple[GpuModel | None, str | None]:
    product = labels.get(GPU_PRODUCT_LABEL)
    if product is None:
        return None, None
    return catalog.resolve(product), product


# ---------------------------------------------------------------------------------------------- sources


def _from_observed(facts: NodeFacts, catalog: Catalog, memo: _FitMemo) -> dict[int, GpuCut]:
    out: dict[int, GpuCut] = {}
    for g in facts.observed or ():
        model = catalog.resolve(g.name)
        notes: list[Note] = []
        key = model.key if model else g.name
        if model is None:
            notes.append(Note(f"NVML names this GPU {g.name!r}, not a model of the catalog", "MP583"))
        if g.mig_pending != g.mig_current:
            notes.append(
                Note(
                    f"MIG mode is {'on' if g.mig_current else 'off'} with {'on' if g.mig_pending else 'off'} pending "
                    "(a GPU reset is due): written as it is now"
                )
            )
        parts = tuple(sorted(((i.profile, i.placement.start) for i in g.instances), key=lambda pp: (pp[1], pp[0])))
        if model is not None and g.mig_current and parts:
            why = cut_problem(model, parts, memo)
            if why:
                notes.append(Note(f"the observed cut does not fit the catalog: {why}", "MP585"))
        out[g.index] = GpuCut(g.index, key, g.mig_current, parts, SOURCE_OBSERVED, tuple(notes))
    return out


def _from_config(
    facts: NodeFacts, source: ConfigSource, n: int, model: GpuModel | None, product: str | None, memo: _FitMemo
) -> tuple[dict[int, GpuCut], str | None]:
    name = facts.node.labels.get(MIG_CONFIG_LABEL)
    if not name:
        return {}, None
    if source.configs is None:
        return {}, f"MP584 config {name!r} named by {MIG_CONFIG_LABEL}: {source.error}"
    entries = source.configs.get(name)
    if entries is None:
        return {}, f"MP584 config {name!r} named by {MIG_CONFIG_LABEL} is not in {source.where}"
    state = facts.node.labels.get(MIG_CONFIG_STATE_LABEL)
    if state != MigConfigState.SUCCESS.value:
        # The label names the config mig-manager is asked to apply; only `success` says the GPUs have it.
        return {}, f"MP584 config {name!r} is not applied yet ({MIG_CONFIG_STATE_LABEL}={state or 'absent'})"
    key = model.key if model else (product or "unknown")
    out: dict[int, GpuCut] = {}
    n = n or _gpus_under_single(facts.node.labels, entries, model)
    indexes = range(n) if n else sorted({d for e in entries for d in (e.devices or ())})
    for i in indexes:
        entry = next((e for e in entries if (e.devices is None or i in e.devices) and _filter_matches(e, model)), None)
        if entry is None:
            continue
        parts = tuple((p, None) for p, c in sorted(entry.mig_devices.items()) for _ in range(c))
        notes: list[Note] = []
        if model is not None and entry.mig_enabled and parts:
            why = cut_problem(model, parts, memo)
            if why:
                notes.append(Note(f"config {name!r} does not fit this GPU: {why}", "MP585"))
        out[i] = GpuCut(i, key, entry.mig_enabled, parts if entry.mig_enabled else (), SOURCE_CONFIG, tuple(notes))
    if not out:
        return {}, f"MP584 config {name!r} in {source.where} has no entry for this node's GPUs"
    return out, None


def _mig_device_count(labels: Mapping[str, str]) -> int | None:
    """Under `single` on a MIG node GFD's gpu.count is the number of MIG devices (stack-facts §2), else None."""
    count = labels.get(GPU_COUNT_LABEL)
    if "-MIG-" not in labels.get(GPU_PRODUCT_LABEL, "") or count is None:
        return None
    return int(count) if count.isascii() and count.isdigit() and len(count) < 4 else None


def _gpus_under_single(labels: Mapping[str, str], entries: Sequence[ConfigEntry], model: GpuModel | None) -> int:
    """How many GPUs a `devices: all` config covers on a `single` node: MIG devices / devices per GPU, when the
    config gives every GPU the same cut and the division is exact; 0 when it cannot be told."""
    devices = _mig_device_count(labels)
    matching = [e for e in entries if e.devices is None and _filter_matches(e, model) and e.mig_enabled]
    if devices is None or not matching:
        return 0
    per_gpu = sum(matching[0].mig_devices.values())
    return devices // per_gpu if per_gpu and devices % per_gpu == 0 else 0


def _profile_of_resource(resource: str, model: GpuModel) -> str | None:
    if not resource.startswith(MIG_RESOURCE_PREFIX):
        return None
    return _node_profile(resource[len(MIG_RESOURCE_PREFIX) :], model)


def _node_profile(spelled: str, model: GpuModel) -> str | None:
    """The profile a node names `spelled` (as GFD labels and resources spell it, `+` as `.`), in the naming the node
    uses: a model with two documented namings (GB200) keeps the node's, so the adopted plan says what the node says."""
    for naming in model.namings():
        for name in sorted(naming):
            if spelled in (name, name.replace("+", ".")):
                return name
    return None


def _from_resources(
    facts: NodeFacts, n: int, model: GpuModel | None, product: str | None, missing: Sequence[int], memo: _FitMemo
) -> tuple[dict[int, GpuCut], list[Note]]:
    """Counts only: partitions of the advertised MIG resources spread over the GPUs not covered yet."""
    key = model.key if model else (product or "unknown")
    notes: list[Note] = []
    advertised = facts.node.advertised_resources
    whole = advertised.get(GPU_RESOURCE, 0)
    labels = facts.node.labels
    parts: list[str] = []
    if "-MIG-" in labels.get(GPU_PRODUCT_LABEL, "") and model is not None:
        # single: every MIG device is one type, counted by nvidia.com/gpu (stack-facts §2)
        name = labels[GPU_PRODUCT_LABEL].rsplit("-MIG-", 1)[1]
        node_name = _node_profile(name, model)
        if node_name is None:
            notes.append(Note(f"GFD names the MIG devices {name!r}, not a profile of {key}", "MP585"))
            return {}, notes
        parts = [node_name] * whole
        whole = 0
    else:
        for res, count in sorted(advertised.items()):
            if not res.startswith(MIG_RESOURCE_PREFIX) or count <= 0:
                continue
            prof_name = _profile_of_resource(res, model) if model is not None else None
            if prof_name is None:
                notes.append(Note(f"{res} is not a profile of {key}", "MP585"))
                continue
            parts.extend([prof_name] * count)
    out: dict[int, GpuCut] = {}
    targets = list(missing)
    guess = Note(
        "counts only (advertised resources): which GPU holds which partition is a guess; check with nvidia-smi"
    )
    mig_gpus = targets[: max(0, len(targets) - whole)] if parts else []
    bins: dict[int, list[str]] = {i: [] for i in mig_gpus}
    if model is not None:
        order = sorted(parts, key=lambda p: (-model.profiles[p].memory_slices, p))
        for p in order:
            home = next(
                (i for i in mig_gpus if cut_problem(model, [(q, None) for q in (*bins[i], p)], memo) is None), None
            )
            if home is None:
                notes.append(Note(f"no GPU left for a {p} the node advertises", "MP585"))
                continue
            bins[home].append(p)
    for i in targets:
        if bins.get(i):
            out[i] = GpuCut(i, key, True, tuple((p, None) for p in sorted(bins[i])), SOURCE_RESOURCES, (guess,))
        else:
            out[i] = GpuCut(i, key, False, (), SOURCE_RESOURCES)
    return out, notes


def _gpus_from_mig_devices(labels: Mapping[str, str], model: GpuModel | None) -> int:
    """Under `single` with nothing else to go by: as many GPUs as the MIG devices fill at the profile's maximum
    per GPU (rounded up). A guess, said so in the node file; 0 when the profile is unknown."""
    devices = _mig_device_count(labels)
    if devices is None or model is None:
        return 0
    name = labels[GPU_PRODUCT_LABEL].rsplit("-MIG-", 1)[1]
    prof = model.profile(name) or next((p for p in model.profiles.values() if p.name.replace("+", ".") == name), None)
    return -(-devices // prof.max_instances) if prof is not None and prof.max_instances else 0


def _owner_suggestions(pods: Iterable[ObservedPod], model: GpuModel | None) -> tuple[str, ...]:
    by_profile: dict[str, list[str]] = {}
    for pod in pods:
        if not pod.holds_devices:
            continue
        app = next((pod.labels[k] for k in _APP_LABELS if pod.labels.get(k)), None)
        who = f"{app} (pod {pod.key})" if app else f"pod {pod.key} (no app label)"
        for res, count in sorted(pod.requested().items()):
            if count <= 0:
                continue
            profile = res
            if res.startswith(MIG_RESOURCE_PREFIX) and model is not None:
                profile = _profile_of_resource(res, model) or res
            by_profile.setdefault(profile, []).append(who if count == 1 else f"{who} x{count}")
    return tuple(f"{p}: {', '.join(sorted(ws))}" for p, ws in sorted(by_profile.items()))


@dataclass(frozen=True, slots=True)
class _SliceCuts:
    """The GPUs a static-MIG node's ResourceSlices show, and the source line for the node file."""

    cuts: Mapping[int, GpuCut]
    sources: tuple[str, ...]


def _from_slices(facts: NodeFacts, catalog: Catalog) -> _SliceCuts | NodeImport | list[Problem]:
    """The node from its ResourceSlices: the GPUs of a static-MIG node, the whole node under DynamicMIG, or the
    problems that leave it out of the import."""
    assert facts.dra is not None
    name = facts.node.name
    minors = {g.index: g.minor for g in facts.observed or () if g.minor is not None}
    complete = bool(facts.observed) and len(minors) == len(facts.observed or ())
    read = draimport.read_node(
        facts.dra, catalog, minors=minors if complete else None, gpu_count=_physical_count(facts.node.labels)
    )
    if read.refused:
        return [Problem(code, f"node {name}: {text}; the node is not imported", name) for code, text in read.problems]
    inferred = " (GPU index taken for the minor number: no observer measured them)" if read.minors_inferred else ""
    cuts = {
        g.index: GpuCut(g.index, g.model, g.mig_enabled, tuple((p, s) for p, s in g.partitions), draimport.SOURCE_DRA)
        for g in read.gpus
    }
    if read.regime is Regime.DRA_DYNAMIC_MIG:
        line = (
            "ResourceSlices of NVIDIA's DRA driver (gpu.nvidia.com) in DynamicMIG: the driver cuts these GPUs per "
            f"claim, so migplan writes no layout here (layoutWriter: dra-dynamic-mig){inferred}"
        )
        if not cuts:
            return [Problem("MP958", f"node {name}: DynamicMIG slices without a GPU; the node is not imported", name)]
        return NodeImport(name, tuple(cuts[i] for i in sorted(cuts)), (line,), (), "dra-dynamic-mig")
    line = f"ResourceSlices of NVIDIA's DRA driver (gpu.nvidia.com), static MIG: MIG devices and placements{inferred}"
    return _SliceCuts(cuts, (line,))


def import_node(
    facts: NodeFacts, source: ConfigSource, catalog: Catalog, memo: _FitMemo | None = None
) -> tuple[NodeImport | None, list[Problem]]:
    """One node's GPUs from the best source each, or None (MP582) when nothing tells what the GPUs are."""
    name = facts.node.name
    labels = facts.node.labels
    problems: list[Problem] = []
    if len(name) > 253 or not _NODE_NAME_RE.fullmatch(name):
        return None, [Problem("MP582", f"node {name[:80]!r} is not a Kubernetes node name: not imported", None)]
    if facts.observed_error:
        problems.append(Problem("MP588", f"node {name}: {facts.observed_error}; the next source is used", name))
    memo = {} if memo is None else memo
    dra = _from_slices(facts, catalog) if facts.dra is not None else None
    if isinstance(dra, list):
        return None, problems + dra
    if isinstance(dra, NodeImport):
        return dra, problems  # DynamicMIG: the driver's GPUs, no partitions, nothing else consulted
    observed = _from_observed(facts, catalog, memo) if facts.observed else {}
    slices = {i: c for i, c in (dra.cuts if dra is not None else {}).items() if i not in observed}
    model, product = _model_of(catalog, labels)
    if product is None and not observed and not slices:
        problems.append(
            Problem(
                "MP582",
                f"node {name} is a GPU node without GFD labels ({GPU_PRODUCT_LABEL}) and without an observed "
                "layout: not imported; check that GPU Feature Discovery runs on it",
                name,
            )
        )
        return None, problems
    cuts = dict(observed) | slices
    n = _physical_count(labels) or (max(cuts) + 1 if cuts else 0)
    sources: list[str] = []
    if observed:
        sources.append(
            "observed layout (annotation migplan.io/mig-observed): MIG mode, profiles and placements as NVML reports"
        )
    if slices and dra is not None:
        sources.extend(dra.sources)
        unpublished = [i for i in range(n) if i not in cuts]
        if unpublished:
            gpus = ", ".join(map(str, unpublished))
            problems.append(
                Problem("MP962", f"node {name}: GPU {gpus} not in its ResourceSlices; the next source is used", name)
            )
    config_cuts: dict[int, GpuCut] = {}
    if not n or any(i not in cuts for i in range(n)):
        config_cuts, why = _from_config(facts, source, n, model, product, memo)
        if why:
            problems.append(Problem(why[:5], f"node {name}: {why[6:]}; the next source is used", name))
        used = {i: c for i, c in config_cuts.items() if i not in cuts}
        if used:
            cuts.update(used)
            sources.append(
                f"mig-parted config {labels.get(MIG_CONFIG_LABEL)!r} of {source.where}, named by the node's "
                f"{MIG_CONFIG_LABEL} label: profile counts per GPU, placements left to the solver"
            )
    n = n or (max(cuts) + 1 if cuts else 0) or _gpus_from_mig_devices(labels, model)
    missing = [i for i in range(n) if i not in cuts]
    if missing:
        res_cuts, notes = _from_resources(facts, n, model, product, missing, memo)
        problems.extend(Problem(x.code, f"node {name}: {x.text}", name) for x in notes if x.code is not None)
        cuts.update(res_cuts)
        sources.append(
            "advertised resources and GFD labels: profile counts per node only, spread over GPUs "
            + ", ".join(map(str, missing))
        )
    for i, c in list(cuts.items()):
        if catalog.get(c.model) is None and not any(x.code in _UNKNOWN_MODEL for x in c.notes):
            note = Note(f"GPU model {c.model!r} ({GPU_PRODUCT_LABEL}) is not in the catalog", "MP583")
            cuts[i] = c = GpuCut(c.index, c.model, c.mig_enabled, c.partitions, c.source, (note, *c.notes))
        problems.extend(
            Problem(x.code, f"node {name} GPU {c.index}: {x.text}", name) for x in c.notes if x.code is not None
        )
    if not cuts:
        problems.append(Problem("MP582", f"node {name}: no GPU could be told from any source: not imported", name))
        return None, problems
    owners = _owner_suggestions(facts.pods, model)
    return NodeImport(name, tuple(cuts[i] for i in sorted(cuts)), tuple(sources), owners), problems


def import_cluster(nodes: Sequence[NodeFacts], source: ConfigSource, catalog: Catalog) -> Imported:
    out: list[NodeImport] = []
    problems: list[Problem] = []
    memo: _FitMemo = {}
    for facts in sorted(nodes, key=lambda f: f.node.name):
        node, found = import_node(facts, source, catalog, memo)
        problems.extend(found)
        if node is not None:
            out.append(node)
    return Imported(tuple(out), tuple(problems))
