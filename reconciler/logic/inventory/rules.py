"""Hardware and strategy rules, and the one registry of every diagnostic code migplan validate emits.

Pure. The hardware rules check one GPU's MIG partitions against the GPU catalog and the exact
placement solver (reconciler.logic.inventory.placement); the strategy rules check a whole node against the
cluster's device-plugin MIG strategy. Both return Diagnostics and never raise.

Codes are stable: a code is never reused for another meaning. They are declared once, with every other
family's, in reconciler.model.codes; CODES below is this family's view. The table repeats them for the reader.

| code  | sev     | meaning |
|-------|---------|---------|
| MP101 | error   | file larger than the size limit (1 MiB) |
| MP102 | error   | empty file (no YAML document) |
| MP103 | error   | binary file (NUL bytes) |
| MP104 | error   | not UTF-8 (invalid bytes, UTF-16/32) |
| MP105 | error   | UTF-8 byte-order mark |
| MP106 | error   | tab in indentation |
| MP107 | error   | YAML syntax error |
| MP108 | error   | more than one YAML document in a file |
| MP109 | error   | YAML alias or merge key (anchors reused; billion laughs) |
| MP110 | error   | unsupported YAML tag (!!binary, !custom, ...) |
| MP111 | error   | duplicate mapping key |
| MP112 | error   | mapping key that is not a string (`on:`, `1:`, `[a]:`) |
| MP113 | error   | document is not a mapping |
| MP114 | error   | nesting too deep |
| MP115 | error   | number too large to read |
| MP116 | error   | number form YAML 1.1 and 1.2 read differently (010, 0b100, 0x10, +4, 1_000, 1:20; 09, 1e3) |
| MP200 | error   | other schema violation |
| MP201 | error   | required field missing |
| MP202 | error   | unknown field |
| MP203 | error   | wrong type (e.g. a string where a mapping or integer belongs, null) |
| MP204 | error   | value not allowed (apiVersion, kind, enum) |
| MP205 | error   | malformed value (names: node, owner, layout, label; profile syntax) |
| MP206 | error   | number out of range (placement 0..7, index 0..63, ...) |
| MP207 | error   | too many / too few items |
| MP301 | error   | unknown GPU model |
| MP302 | error   | profile not offered by the GPU model |
| MP303 | error   | more instances of a profile than the model allows |
| MP304 | error   | compute slices exceeded |
| MP305 | error   | memory slices exceeded |
| MP306 | error   | placement not allowed for the profile |
| MP307 | error   | placement overlaps another partition |
| MP308 | error   | no feasible placement for the GPU's partitions (exact search) |
| MP309 | error   | MIG enabled but no partitions |
| MP310 | error   | partitions on a GPU with MIG disabled |
| MP311 | error   | compute-instance profile (C != G, e.g. 1c.3g.20gb): not advertised by the device plugin |
| MP312 | warning | model's placements unknown: checked on slice counts and instance limits only |
| MP313 | error   | a GPU needs exactly one of `mig:` or `layout:` |
| MP314 | error   | layout restricted to another GPU model |
| MP315 | error   | a node's GPU indexes are not 0..n-1 (a gap, or an index past the GPUs listed) |
| MP320 | error   | MIG partitions on a node whose MIG layout another component writes (`layoutWriter`) |
| MP401 | error   | migStrategy single with more than one MIG device type on a node |
| MP402 | error   | migStrategy single with MIG-enabled and MIG-disabled GPUs on one node |
| MP403 | warning | MIG partitions under migStrategy none (not schedulable) |
| MP404 | error   | node name differs from its file name |
| MP405 | error   | the same node name in two files |
| MP406 | error   | duplicate GPU index on a node |
| MP407 | error   | layout reference that does not resolve |
| MP408 | error   | layout name differs from its file name |
| MP409 | error   | cluster.yaml missing |
| MP410 | warning | unexpected YAML file in the inventory root (ignored) |
| MP411 | error   | invalid inventory path (path-like or nested node/layout file name) |
| MP412 | error   | reports.path would make report commits touch the inventory, or escape the repository |
| MP413 | error   | no inventory named, and none where the command stands (exit 2, never the example) |
| MP414 | warning | placement-only change under apply.mode gpu-operator: mig-parted will not apply it |
| MP415 | error   | two DeviceClasses (rendered, per-owner or declared) for one extended resource name |
| MP416 | error   | a DeviceClass would map `nvidia.com/gpu` to MIG devices |
| MP417 | error   | a DeviceClass Kubernetes would refuse (`extendedResourceName`, a CEL selector that does not parse) |
| MP418 | warning | a per-owner DeviceClass for an owner no partition has |
| MP419 | error   | two DeviceClasses with one name |
| MP420 | error   | part of the inventory cannot be read (permission, symlink, FIFO, odd name, nesting) |
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.catalog import GpuModel
from reconciler.logic.inventory.placement import Request, solve
from reconciler.model import codes
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.inventory import GpuSpec, MigStrategy, NodeSpec, Partition, Placement, SourceRef


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    severity: Severity
    title: str


# The validation family of the one registry (reconciler.model.codes), as the Rules SARIF and `diag` read.
CODES: Mapping[str, Rule] = {
    c.code: Rule(c.code, Severity(c.severity.value), c.meaning) for c in codes.family(codes.Family.VALIDATION)
}

# The device plugin's own words (k8s-device-plugin internal/rm/device_map.go
# buildDeviceMapFromConfigResources and assertAllMigDevicesAreValid; tests/reference/stack-facts.md
# section 1.4); quoted so that a person who later greps the plugin's log finds us. Under `single` the
# plugin checks, in this order: a MIG-enabled GPU without MIG devices, more than one MIG device type,
# then MIG-enabled and -disabled GPUs together, and stops at the first, so it logs only one of them.
PLUGIN_MIXED_TYPES = "more than one MIG device type present on node"
PLUGIN_MIXED_MODES = "all devices on the node must be configured with the same migEnabled value"
PLUGIN_EMPTY_GPU = "has no MIG devices configured"  # after "device <NVML index> "
PLUGIN_UNMATCHED = "MIG profile '{profile}' does not match any resource patterns"

_CI_PROFILE = re.compile(r"^(\d+)c\.(\d+)g\.")


def diag(code: str, message: str, source: SourceRef | None, **extra: object) -> Diagnostic:
    """A Diagnostic with the severity the registry gives `code`."""
    rule = CODES[code]
    return Diagnostic(
        code,
        message,
        source.file if source else None,
        source.line if source else None,
        rule.severity,
        extra=dict(extra),
    )


@dataclass(frozen=True, slots=True)
class GpuCheck:
    """What the hardware rules found for one GPU: its diagnostics and, when a placement table is
    known and the partitions fit, one Placement per partition (aligned with the partitions)."""

    diagnostics: tuple[Diagnostic, ...]
    placements: tuple[Placement, ...] = ()


def check_gpu(
    model: GpuModel,
    *,
    mig_enabled: bool,
    partitions: Sequence[Partition],
    source: SourceRef | None,
    context: str,
) -> GpuCheck:
    """Check one GPU's partitions against its model. `context` names the GPU in messages
    ("node gpu-h200-01 GPU 0", "layout a100-balanced on A100-40GB").

    In order, each step only when the ones before found nothing that makes it meaningless: MIG enabled with
    partitions; every profile known to the model; instance limits and slice totals; a placement table for every
    profile; the written placements; then the exact search for the rest."""
    if not mig_enabled or not partitions:
        return GpuCheck(tuple(_enablement(mig_enabled, partitions, source, context)))
    out = _profile_problems(model, partitions, context)
    if out:
        return GpuCheck(tuple(out))
    out = _capacity_problems(model, partitions, source, context)
    unpublished = _unpublished_placements(model, partitions, source, context)
    if unpublished is not None:
        return GpuCheck((*out, unpublished))
    if any(d.is_error for d in out):
        return GpuCheck(tuple(out))
    out += _written_placement_problems(model, partitions, context)
    if out:
        return GpuCheck(tuple(out))
    return _solved(model, partitions, source, context)


def _enablement(
    mig_enabled: bool, partitions: Sequence[Partition], source: SourceRef | None, context: str
) -> list[Diagnostic]:
    """MP310: partitions listed on a GPU whose MIG is disabled; MP309: MIG enabled and no partition."""
    if not mig_enabled:
        if not partitions:
            return []
        return [
            diag(
                "MP310",
                f"{context}: MIG is disabled (enabled: false) but {len(partitions)} partition(s) are listed; "
                "set enabled: true or remove the partitions",
                partitions[0].source or source,
            )
        ]
    return [
        diag(
            "MP309",
            f"{context}: MIG is enabled but no partitions are listed; the GPU would be unusable (under "
            f"migStrategy single the device plugin exits with 'device <index> {PLUGIN_EMPTY_GPU}' "
            "and advertises nothing for the node; under mixed it only warns). List partitions or set enabled: "
            "false",
            source,
        )
    ]


def _profile_problems(model: GpuModel, partitions: Sequence[Partition], context: str) -> list[Diagnostic]:
    """MP311: a compute-instance subdivision (C != G); MP302: a profile the model does not offer."""
    out: list[Diagnostic] = []
    for p in partitions:
        ci = _CI_PROFILE.match(p.profile)
        if ci and ci.group(1) != ci.group(2):
            out.append(
                diag(
                    "MP311",
                    f"{context}: profile {p.profile} is a compute-instance subdivision (C != G); under migStrategy "
                    "mixed the device plugin has resources only for profiles with C == G and exits with "
                    f"'{PLUGIN_UNMATCHED.format(profile=p.profile)}', advertising nothing for the node (under "
                    "single it would be a plain nvidia.com/gpu). Use a GPU-instance profile such as "
                    f"{ci.group(2)}g.* instead",
                    p.source,
                )
            )
        elif p.profile not in model.profiles:
            offered = ", ".join(model.profiles)
            out.append(
                diag(
                    "MP302",
                    f"{context}: profile {p.profile} is not offered by {model.key} (offered: {offered})",
                    p.source,
                )
            )
    return out


def _capacity_problems(
    model: GpuModel, partitions: Sequence[Partition], source: SourceRef | None, context: str
) -> list[Diagnostic]:
    """MP303: more instances of a profile than the model allows; MP304/MP305: compute or memory slices over."""
    out: list[Diagnostic] = []
    counts = Counter(p.profile for p in partitions)
    seen: Counter[str] = Counter()
    for p in partitions:
        seen[p.profile] += 1
        limit = model.profiles[p.profile].max_instances
        if seen[p.profile] == limit + 1:
            out.append(
                diag(
                    "MP303",
                    f"{context}: {counts[p.profile]} x {p.profile} listed, but {model.key} allows at most {limit}",
                    p.source,
                )
            )
    compute = sum(model.profiles[p.profile].compute_slices for p in partitions)
    memory = sum(model.profiles[p.profile].memory_slices for p in partitions)
    if compute > model.compute_slices:
        out.append(
            diag(
                "MP304",
                f"{context}: the partitions need {compute} compute slices, {model.key} has {model.compute_slices}",
                source,
            )
        )
    if memory > model.memory_slices:
        out.append(
            diag(
                "MP305",
                f"{context}: the partitions need {memory} memory slices, {model.key} has {model.memory_slices}",
                source,
            )
        )
    return out


def _unpublished_placements(
    model: GpuModel, partitions: Sequence[Partition], source: SourceRef | None, context: str
) -> Diagnostic | None:
    """MP312: a profile without a published placement table. Only counts can be checked then; say so instead of
    pretending the layout is proven to fit (the agent asks NVML on the node)."""
    unknown = sorted({p.profile for p in partitions if model.profiles[p.profile].placements is None})
    if not unknown:
        return None
    return diag(
        "MP312",
        f"{context}: placements of {', '.join(unknown)} on {model.key} are not published; checked on slice "
        "counts and instance limits only (NVML decides on the node)",
        source,
    )


def _written_placement_problems(model: GpuModel, partitions: Sequence[Partition], context: str) -> list[Diagnostic]:
    """MP306: a written start the profile cannot take; MP307: two written placements overlapping."""
    out: list[Diagnostic] = []
    fixed: list[tuple[Partition, Placement]] = []
    for p in partitions:
        if p.placement is None:
            continue
        rule = model.profiles[p.profile].placements
        assert rule is not None  # checked before: every profile here has a table
        if p.placement not in rule.starts:
            starts = ", ".join(str(s) for s in rule.starts)
            out.append(
                diag(
                    "MP306",
                    f"{context}: {p.profile} cannot start at memory slice {p.placement} on {model.key}; "
                    f"allowed starts: {starts}",
                    p.source,
                )
            )
            continue
        here = Placement(p.placement, rule.size)
        for other, where in fixed:
            if here.overlaps(where):
                other_line = f" (line {other.source.line})" if other.source and other.source.line else ""
                out.append(
                    diag(
                        "MP307",
                        f"{context}: {p.profile} at {here.start} (slices {here.start}-{here.end - 1}) overlaps "
                        f"{other.profile} at {where.start}{other_line}",
                        p.source,
                    )
                )
                break
        else:
            fixed.append((p, here))
    return out


def _solved(model: GpuModel, partitions: Sequence[Partition], source: SourceRef | None, context: str) -> GpuCheck:
    """The exact search over the placement table (MP308 when nothing fits)."""
    found = solve(model, [Request(p.profile, p.placement) for p in partitions])
    if found is not None:
        return GpuCheck((), found)
    what = " + ".join(p.profile + (f"@{p.placement}" if p.placement is not None else "") for p in partitions)
    hint = (
        "; the fixed placements leave no room: remove `placement:` to let the solver search"
        if any(p.placement is not None for p in partitions)
        else ""
    )
    return GpuCheck(
        (
            diag(
                "MP308",
                f"{context}: no feasible placement for {what} on {model.key} (exact search over the placement "
                f"table){hint}",
                source,
            ),
        )
    )


def check_layout_writer(node: NodeSpec, cluster_writer: str) -> tuple[Diagnostic, ...]:
    """MP320: a node whose MIG layout another component writes (its spec.layoutWriter, else the cluster's) and that
    plans MIG partitions for migplan to write: two writers for one GPU, a plan that contradicts itself. Such a node
    lists its GPUs with `mig: {enabled: false}`: migplan plans nothing there (the other writer sets MIG mode)."""
    writer = node.layout_writer if node.layout_writer is not None else cluster_writer
    if writer == "migplan":
        return ()
    planned = [g.index for g in node.gpus if g.mig_enabled and g.partitions]
    if not planned:
        return ()
    whose = "its spec.layoutWriter" if node.layout_writer is not None else "the cluster's spec.layoutWriter"
    return (
        diag(
            "MP320",
            f"node {node.name}: {whose} says {writer} writes its MIG layout, yet GPU(s) "
            f"{', '.join(map(str, planned))} plan MIG partitions for migplan: two writers for one GPU; remove the "
            "partitions (mig: {enabled: false}: migplan plans nothing there) or set layoutWriter: migplan",
            node.source,
            node=node.name,
        ),
    )


def check_strategy(
    strategy: MigStrategy, node: NodeSpec, *, gpu_lines: Mapping[int, SourceRef | None]
) -> tuple[Diagnostic, ...]:
    """The device-plugin strategy rules for one node whose layouts are resolved.

    `gpu_lines` maps a GPU index to where that GPU is written in the node file (a layout's
    partitions live in another file, but the node is what the strategy breaks)."""
    mig_gpus = [g for g in node.gpus if g.mig_enabled]
    if not mig_gpus:
        return ()
    if strategy is MigStrategy.MIXED:
        return ()
    first = gpu_lines.get(mig_gpus[0].index) or node.source
    if strategy is MigStrategy.NONE:
        if any(g.partitions for g in mig_gpus):
            return (
                diag(
                    "MP403",
                    f"node {node.name} has MIG partitions but migStrategy is none: the device plugin advertises "
                    "MIG GPUs as whole nvidia.com/gpu and no partition can be requested; set migStrategy: mixed",
                    first,
                    node=node.name,
                ),
            )
        return ()
    out: list[Diagnostic] = []
    types = _ordered_profiles(mig_gpus)
    if len(types) > 1:
        second = next(g for g in mig_gpus if any(p.profile != types[0] for p in g.partitions))
        out.append(
            diag(
                "MP401",
                f"node {node.name} would carry {len(types)} MIG device types ({', '.join(types)}) under migStrategy "
                f"single; the device plugin fails on that with '{PLUGIN_MIXED_TYPES}' and advertises no GPU "
                "resource for the node. Set migStrategy: mixed in cluster.yaml (or cut every GPU of the node into "
                "one profile)",
                gpu_lines.get(second.index) or node.source,
                node=node.name,
            )
        )
    if len(mig_gpus) != len(node.gpus):
        off = next(g for g in node.gpus if not g.mig_enabled)
        # The plugin reaches the migEnabled check only when every MIG device check passed; otherwise its
        # log carries the earlier refusal (MP401 / MP309) and this one shows after that is fixed.
        first_error = "" if len(types) <= 1 else f" (its log shows '{PLUGIN_MIXED_TYPES}' first)"
        out.append(
            diag(
                "MP402",
                f"node {node.name} mixes MIG-enabled and MIG-disabled GPUs under migStrategy single; the device "
                f"plugin refuses that with '{PLUGIN_MIXED_MODES}'{first_error}. Set migStrategy: mixed in "
                "cluster.yaml",
                gpu_lines.get(off.index) or node.source,
                node=node.name,
            )
        )
    return tuple(out)


def _ordered_profiles(gpus: Iterable[GpuSpec]) -> list[str]:
    seen: dict[str, None] = {}
    for g in gpus:
        for p in g.partitions:
            seen.setdefault(p.profile, None)
    return list(seen)
