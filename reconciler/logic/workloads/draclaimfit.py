"""Pods with ResourceClaims against the devices the plan will publish: can they be allocated, how many, where. Pure.

The allocation follows the scheduler's structured allocator (k8s.io/dynamic-resource-allocation/structured,
resource/v1 types.go comments), on one node at a time (a claim's devices all come from the node the pod runs on):
- a request's candidates are the node's free devices for which every selector of its DeviceClass and of the
  request is true; a selector that fails to evaluate fails the allocation (MP630); one whose result depends on a
  value only the node knows is taken as true and said (MP631);
- `allocationMode: ExactCount` takes `count` devices; `All` takes every matching device of the node, and fails
  when one of them is already allocated or when there is none;
- `firstAvailable`: the subrequests in order, the first that can be satisfied (with what the later requests need);
- `matchAttribute`: every device the constraint covers has the attribute, with one value (a device without it
  cannot be taken);
- the search backtracks over subrequests and attribute values, bounded by MAX_STEPS per claim and node (beyond it
  the claim is not judged, MP635).
A claim from a template is allocated once per pod; a ResourceClaim (resourceClaimName) once, on one node, for every
pod that names it: those pods all run on that node, and at most 256 may reserve it (resource/v1
`ResourceClaimReservedForMaxSize`). Manifests share the plan's devices in the order given, as they share partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.catalog import Catalog
from reconciler.logic.workloads import dracel, draplandevices
from reconciler.logic.workloads.draclaims import (
    Alternative,
    CelSelector,
    ClaimSpec,
    Compiled,
    DeviceClassSpec,
    PodClaim,
    device_class_of,
    diag,
    diag_at,
    is_dra,
    read_claim,
    read_device_class,
)
from reconciler.logic.workloads.draplandevices import PlanDevice
from reconciler.logic.workloads.manifests import Manifest
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.inventory import DesiredState

MAX_STEPS = 20_000
MAX_RESERVED_FOR = 256  # resource/v1 ResourceClaimReservedForMaxSize
DYNAMIC_MIG_WRITER = "dra-dynamic-mig"

# The DeviceClasses NVIDIA's DRA driver's Helm chart installs (project fact sheet, dra-facts.md): in every cluster the
# driver runs in, so a claim naming them is judged without the class in the manifests.
_CHART_TYPES = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig", "vfio.gpu.nvidia.com": "vfio"}
CHART_CLASSES: tuple[Mapping[str, Any], ...] = tuple(
    {
        "metadata": {"name": name},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == 'gpu.nvidia.com' && "
                        f"device.attributes['gpu.nvidia.com'].type == '{kind}'"
                    }
                }
            ]
        },
    }
    for name, kind in _CHART_TYPES.items()
)


class _Fails(Exception):
    """A selector fails to evaluate on a device: the scheduler fails the allocation."""

    def __init__(self, selector: CelSelector, message: str) -> None:
        super().__init__(message)
        self.selector = selector
        self.message = message


class _NotJudged(Exception):
    """Judging the claim would cost more than migplan's bounds allow (MP635); the message says which."""


@dataclass
class DraFleet:
    """The DRA objects of all manifests and the plan's devices, with what earlier manifests already took."""

    classes: dict[str, DeviceClassSpec]
    claims: dict[tuple[str, str], ClaimSpec]
    templates: dict[tuple[str, str], ClaimSpec]
    devices: dict[str, tuple[PlanDevice, ...]]  # node -> what the driver publishes once the plan is applied
    possible_of: Callable[[str], tuple[PlanDevice, ...]]  # node -> what DynamicMIG could create there
    models: dict[str, tuple[str, ...]]  # node -> its GPUs' models (nodes alike give DynamicMIG the same devices)
    taken: dict[str, set[str]] = field(default_factory=dict)  # node -> device names allocated by earlier manifests
    shared_at: dict[tuple[str, str], str | None] = field(default_factory=dict)  # claim -> node it was allocated on
    reserved: dict[tuple[str, str], int] = field(default_factory=dict)  # claim -> pods reserving it so far
    refused: set[tuple[str, str, str]] = field(default_factory=set)  # (kind, namespace, name) said MP626/MP629
    budget: int = dracel.EVAL_BUDGET  # cost units of CEL evaluation left for this run
    allocators: dict[tuple[str, str], _Allocator] = field(default_factory=dict)  # (which devices, node) -> allocator
    said: set[tuple[str, int, str]] = field(default_factory=set)  # (file, line, code) of selector findings said
    unknown: dict[tuple[str, int, str], set[str]] = field(default_factory=dict)  # selector -> unknown values it read


def collect(
    manifests: Sequence[Manifest],
    desired: DesiredState,
    catalog: Catalog,
    device_classes: Iterable[Mapping[str, Any]] = (),
) -> tuple[DraFleet, list[Diagnostic]]:
    """The DRA objects in the manifests (with MP626/MP629 for those the API server refuses) and the plan's devices.
    `device_classes`: classes migplan renders from the plan (objects, as they are applied); the manifests' own
    classes win over them, and both over NVIDIA's chart's."""
    compiled = Compiled()
    classes: dict[str, DeviceClassSpec] = {}
    for origin, bodies in (
        ("NVIDIA's DRA driver chart", CHART_CLASSES),
        ("migplan's rendered classes", device_classes),
    ):
        for body in bodies:
            spec = device_class_of(body, origin, compiled)
            if spec is not None:
                classes[spec.name] = spec
    claims: dict[tuple[str, str], ClaimSpec] = {}
    templates: dict[tuple[str, str], ClaimSpec] = {}
    diags: list[Diagnostic] = []
    refused: set[tuple[str, str, str]] = set()
    for m in manifests:
        if is_dra(m, "DeviceClass"):
            cls, found = read_device_class(m, compiled)
            diags.extend(found)
            if cls is not None:
                classes[cls.name] = cls
        elif any(is_dra(m, k) for k in ("ResourceClaim", "ResourceClaimTemplate")):
            claim, found = read_claim(m, compiled)
            diags.extend(found)
            if claim is None:
                refused.add((m.kind, m.namespace, m.name))
            if claim is not None:
                (claims if m.kind == "ResourceClaim" else templates)[(m.namespace, m.name)] = claim
    possible: dict[str, tuple[PlanDevice, ...]] = {}

    def possible_of(name: str) -> tuple[PlanDevice, ...]:
        if name not in possible:
            spec = desired.nodes.get(name)
            possible[name] = draplandevices.possible_devices(spec, catalog) if spec is not None else ()
        return possible[name]

    devices: dict[str, tuple[PlanDevice, ...]] = {}
    for name in sorted(desired.nodes):
        planned = draplandevices.planned_devices(desired.nodes[name], catalog)
        # Under DynamicMIG the driver publishes the whole GPUs and every profile at every placement (counters keep
        # overlapping ones from being allocated together).
        devices[name] = planned + possible_of(name) if desired.layout_writer(name) == DYNAMIC_MIG_WRITER else planned
    models = {name: tuple(g.model for g in spec.gpus) for name, spec in desired.nodes.items()}
    fleet = DraFleet(classes, claims, templates, devices, possible_of, models)
    fleet.refused = refused
    return fleet, diags


# --- allocation on one node ----------------------------------------------------------------------


def _allocator(fleet: DraFleet, node: str, *, possible: bool = False) -> _Allocator:
    """The allocator of a node's devices (or of what DynamicMIG could cut there), kept for the run: what a selector
    matches and which devices overlap are worked out once per node."""
    key = ("possible" if possible else "plan", node)
    alloc = fleet.allocators.get(key)
    if alloc is None:
        devices = fleet.possible_of(node) if possible else fleet.devices.get(node, ())
        alloc = fleet.allocators[key] = _Allocator(fleet, devices)
    return alloc


class _Allocator:
    def __init__(self, fleet: DraFleet, devices: Sequence[PlanDevice]) -> None:
        self.fleet = fleet
        self.devices = devices
        self.steps = 0
        self._matching: dict[int, tuple[Alternative, list[PlanDevice]]] = {}
        self._blocks: dict[str, frozenset[str]] | None = None

    def matching(self, alt: Alternative) -> list[PlanDevice]:
        """The node's devices `alt` selects (evaluated once per alternative and node)."""
        hit = self._matching.get(id(alt))
        if hit is None or hit[0] is not alt:
            hit = self._matching[id(alt)] = (alt, [d for d in self.devices if self.matches(alt, d)])
        return hit[1]

    def matches(self, alt: Alternative, device: PlanDevice) -> bool:
        cls = self.fleet.classes[alt.device_class]
        for sel in (*cls.selectors, *alt.selectors):
            if not sel.selector.knows(device.cel):
                if sel.selector.cost > dracel.MAX_EVAL_COST:
                    raise _NotJudged(
                        f"selector {sel.expression[:80]!r} has an estimated cost of {sel.selector.cost}, above the "
                        f"{dracel.MAX_EVAL_COST} migplan evaluates"
                    )
                self.fleet.budget -= sel.selector.cost
                if self.fleet.budget < 0:
                    raise _NotJudged(f"the selectors of the manifests cost more than {dracel.EVAL_BUDGET} to evaluate")
            out = sel.selector.evaluate(device.cel)
            if out.verdict is dracel.Verdict.ERROR:
                raise _Fails(sel, out.message)
            if out.verdict is dracel.Verdict.UNKNOWN:
                self.fleet.unknown.setdefault((sel.file, sel.line, sel.expression), set()).update(out.unknown)
            elif out.verdict is dracel.Verdict.NO_MATCH:
                return False
        return True

    def blocks(self, device: PlanDevice) -> frozenset[str]:
        """The node's devices that allocating `device` makes unavailable (itself, and those sharing a memory slice)."""
        if self._blocks is None:
            self._blocks = {
                d.name: frozenset(o.name for o in self.devices if o.overlaps(d)) | {d.name} for d in self.devices
            }
        return self._blocks.get(device.name, frozenset({device.name}))

    def allocate(self, claim: ClaimSpec, taken: set[str]) -> list[PlanDevice] | None:
        """The devices of one allocation of `claim` among the free ones, or None when it cannot be allocated."""
        requests = claim.requests
        self.steps = 0

        def search(
            i: int, chosen: list[PlanDevice], blocked: frozenset[str], fixed: dict[int, Any]
        ) -> list[PlanDevice] | None:
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise _NotJudged(
                    f"its claims need a search of more than {MAX_STEPS} steps (requests x subrequests x attribute "
                    "values)"
                )
            if i == len(requests):
                return chosen
            req = requests[i]
            for alt in req.alternatives:
                # Each constraint holds its own value: two constraints on one attribute over different requests may
                # each pick a different value (keyed by the constraint, not by the attribute).
                attrs = [(k, c.attribute) for k, c in enumerate(claim.constraints) if c.applies(req.name, alt.name)]
                for group, fixes in _groups(self.matching(alt), attrs, fixed):
                    now = blocked
                    picked: list[PlanDevice] = []
                    if alt.all_devices:
                        if not group or any(d.name in blocked for d in group):
                            continue
                        picked = list(group)
                        now = now.union(*(self.blocks(d) for d in group))
                    else:
                        for d in group:
                            if d.name not in now:
                                picked.append(d)
                                now = now | self.blocks(d)
                                if len(picked) == alt.count:
                                    break
                        if len(picked) < alt.count:
                            continue
                    found = search(i + 1, [*chosen, *picked], now, {**fixed, **fixes})
                    if found is not None:
                        return found
            return None

        return search(0, [], frozenset(taken), {})


def _groups(
    devices: Sequence[PlanDevice], attrs: Sequence[tuple[int, str]], fixed: Mapping[int, Any]
) -> Iterable[tuple[list[PlanDevice], dict[int, Any]]]:
    """Devices grouped by the values of the constrained attributes (consistent with values fixed earlier)."""
    if not attrs:
        yield list(devices), {}
        return
    groups: dict[tuple[Any, ...], list[PlanDevice]] = {}
    for d in devices:
        values = tuple(d.match_value(a) for _, a in attrs)
        if any(v is None for v in values):
            continue
        if any(k in fixed and fixed[k] != v for (k, _), v in zip(attrs, values, strict=True)):
            continue
        groups.setdefault(values, []).append(d)
    for values, group in groups.items():
        yield group, {k: v for (k, _), v in zip(attrs, values, strict=True)}


# --- a workload's pods ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Placed:
    per_node: dict[str, int]
    shared_at: dict[tuple[str, str], str]  # shared claims allocated for this placement: claim -> node
    used: dict[str, set[str]]  # node -> devices taken


def _place(
    fleet: DraFleet,
    templates: Sequence[ClaimSpec],
    shared: Sequence[ClaimSpec],
    nodes: Sequence[str],
    wanted: int,
    taken: Mapping[str, set[str]],
    shared_at: Mapping[tuple[str, str], str | None],
    *,
    per_node_cap: int | None = None,
) -> _Placed:
    """Place up to `wanted` pods (each with its own allocation of every template claim, all sharing the shared
    claims), node by node in name order, on the devices not yet taken."""
    used: dict[str, set[str]] = {n: set(taken.get(n, set())) for n in nodes}
    fixed: dict[tuple[str, str], str] = {}
    for c in shared:
        at = shared_at.get((c.namespace, c.name))
        if at is not None:
            fixed[(c.namespace, c.name)] = at
    if len(set(fixed.values())) > 1:
        return _Placed({}, {}, used)  # shared claims allocated on different nodes: no pod can have both
    per_node: dict[str, int] = {}
    new_shared: dict[tuple[str, str], str] = {}
    left = wanted
    for node in nodes:
        if left <= 0:
            break
        if fixed and node not in fixed.values():
            continue
        if new_shared and node not in new_shared.values():
            continue
        alloc = _allocator(fleet, node)
        trial = set(used[node])
        pending = [c for c in shared if (c.namespace, c.name) not in fixed and (c.namespace, c.name) not in new_shared]
        shared_ok = True
        for c in pending:
            got = alloc.allocate(c, trial)
            if got is None:
                shared_ok = False
                break
            trial = trial.union(*(alloc.blocks(d) for d in got))
        if not shared_ok:
            continue
        cap = left if per_node_cap is None else min(left, per_node_cap)
        count = 0 if templates else cap  # nothing allocated per pod: every pod fits where the shared claims are
        while count < cap:
            pod: set[str] = set()
            for c in templates:
                got = alloc.allocate(c, trial | pod)
                if got is None:
                    break
                pod = pod.union(*(alloc.blocks(d) for d in got))
            else:
                trial |= pod
                count += 1
                continue
            break
        if count == 0:
            continue
        for c in pending:
            new_shared[(c.namespace, c.name)] = node
        used[node] = trial
        per_node[node] = count
        left -= count
    return _Placed(per_node, new_shared, used)


def _where(fit: Mapping[str, int], limit: int = 5) -> str:
    items = sorted(fit.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{n} ({k})" for n, k in items[:limit])
    return text + (f" and {len(items) - limit} more nodes" if len(items) > limit else "")


def _ask(templates: Sequence[ClaimSpec], shared: Sequence[ClaimSpec]) -> str:
    parts = [f"a claim from {c.title} per pod" for c in templates] + [f"the shared {c.title}" for c in shared]
    return ", ".join(parts)


def _why_none(fleet: DraFleet, claims: Sequence[ClaimSpec], nodes: Sequence[str]) -> str:
    """Which request of which claim no eligible node can satisfy, even with every device free."""
    for c in claims:
        for req in c.requests:
            alone = ClaimSpec(c.kind, c.namespace, c.name, (req,), (), c.manifest, c.line)
            if any(_allocator(fleet, n).allocate(alone, set()) for n in nodes):
                continue
            most = max(
                (len(_allocator(fleet, n).matching(a)) for n in nodes for a in req.alternatives),
                default=0,
            )
            alts = "; ".join(_describe(a) for a in req.alternatives)
            if most == 0:
                return f"request {req.name} of {c.title} ({alts}) matches no device the plan publishes there"
            return f"request {req.name} of {c.title} ({alts}): at most {most} matching device(s) on one node"
        if c.constraints:
            attrs = ", ".join(sorted({k.attribute for k in c.constraints}))
            return f"{c.title}: no node has devices for all its requests with one value of {attrs}"
    return "the claims together need more devices than any one node of the plan publishes"


def _describe(alt: Alternative) -> str:
    how = "all devices" if alt.all_devices else f"{alt.count} device(s)"
    sel = f" where {' && '.join(s.expression for s in alt.selectors)[:160]}" if alt.selectors else ""
    return f"{how} of class {alt.device_class}{sel}"


def _dynamic_only(fleet: DraFleet, claims: Sequence[ClaimSpec], nodes: Sequence[str]) -> list[str]:
    """The profiles DynamicMIG could cut for the claims on the eligible nodes, when the plan's devices cannot serve
    them; empty when even DynamicMIG could not."""
    tried: set[tuple[str, ...]] = set()
    for node in nodes:
        if fleet.models.get(node, ()) in tried:
            continue
        tried.add(fleet.models.get(node, ()))
        alloc = _allocator(fleet, node, possible=True)
        if not alloc.devices:
            continue
        taken: set[str] = set()
        got_all: list[PlanDevice] = []
        ok = True
        for c in claims:
            got = alloc.allocate(c, taken)
            if got is None:
                ok = False
                break
            got_all.extend(got)
            taken = taken.union(*(alloc.blocks(d) for d in got))
        if ok and got_all:
            return sorted({d.profile for d in got_all if d.profile})
    return []


def check_pod_claims(
    fleet: DraFleet,
    *,
    manifest: Manifest,
    title: str,
    refs: Sequence[PodClaim],
    replicas: int | None,
    eligible: Sequence[str],
    line: int,
) -> tuple[list[Diagnostic], dict[str, Any]]:
    """Findings for one workload's pod claims, and its summary's `claims` part."""
    m = manifest
    ns = m.namespace
    diags: list[Diagnostic] = []
    templates: list[ClaimSpec] = []
    shared: list[ClaimSpec] = []
    for ref in refs:
        key = (ns, ref.template or ref.claim or "")
        found = (fleet.templates if ref.template else fleet.claims).get(key)
        kind = "ResourceClaimTemplate" if ref.template else "ResourceClaim"
        if found is None and (kind, *key) in fleet.refused:
            continue  # refused where it is written (MP626, MP629)
        if found is None:
            diags.append(
                diag(
                    "MP627",
                    f"{title}: resourceClaims[{ref.name}] names {kind} {ns}/{key[1]}, which is not among the manifests "
                    "given: its devices are not judged (give its manifest too)",
                    m,
                    ref.line,
                )
            )
            continue
        (templates if ref.template else shared).append(found)
    summary: dict[str, Any] = {
        "perPod": [c.title for c in templates],
        "shared": [c.title for c in shared],
    }
    claims = [*templates, *shared]
    if not claims:
        return diags, summary
    unknown_classes = sorted(
        {a.device_class for c in claims for q in c.requests for a in q.alternatives} - set(fleet.classes)
    )
    if unknown_classes:
        for cls in unknown_classes:
            owner, alt = next(
                (c, a) for c in claims for q in c.requests for a in q.alternatives if a.device_class == cls
            )
            diags.append(
                diag(
                    "MP628",
                    f"{title}: {owner.title} asks for DeviceClass {cls}, which neither the manifests nor migplan's "
                    "classes define: not judged (give the class's manifest; without it the pods stay Pending)",
                    owner.manifest,
                    alt.line,
                    deviceClass=cls,
                )
            )
        return diags, summary
    wanted = len(eligible) if replicas is None else replicas
    for c in shared:
        key = (c.namespace, c.name)
        before = fleet.reserved.get(key, 0)
        fleet.reserved[key] = before + wanted
        if before + wanted > MAX_RESERVED_FOR >= before:
            diags.append(
                diag(
                    "MP634",
                    f"{title}: {c.title} is shared by {before + wanted} pods (with the manifests before it), more than "
                    f"the {MAX_RESERVED_FOR} a claim can be reserved for: the others stay Pending; use a "
                    "ResourceClaimTemplate for one claim per pod",
                    m,
                    line,
                )
            )
    try:
        # `replicas: 0` still says whether a pod could ever run (as a missing resource is said for it).
        probe = max(wanted, 1)
        alone = _place(fleet, templates, shared, eligible, probe, {}, {}, per_node_cap=1 if replicas is None else None)
        fits = sum(alone.per_node.values())
        summary["planFits"] = fits
        if fits == 0:
            diags.extend(_none_fit(fleet, m, title, claims, eligible, line))
        elif replicas is None and fits < len(eligible):
            short = sorted(n for n in eligible if n not in alone.per_node)
            diags.append(
                diag(
                    "MP613",
                    f"{title} runs a pod on every node it selects, but {len(short)} of them ({', '.join(short[:5])}) "
                    f"publish no devices for {_ask(templates, shared)}: those pods stay Pending",
                    m,
                    line,
                )
            )
        elif fits < wanted:
            diags.append(
                diag(
                    "MP613",
                    f"{title}: {wanted} pods with {_ask(templates, shared)}, but the devices the plan publishes "
                    f"hold {fits} such pods on the nodes it may run on ({_where(alone.per_node)}); the rest stay "
                    "Pending forever",
                    m,
                    line,
                )
            )
        if fits and wanted:
            together = _place(
                fleet,
                templates,
                shared,
                eligible,
                wanted,
                fleet.taken,
                fleet.shared_at,
                per_node_cap=1 if replicas is None else None,
            )
            placed = sum(together.per_node.values())
            summary["fleetFits"] = placed
            for node, names in together.used.items():
                fleet.taken[node] = names
            for key, node in together.shared_at.items():
                fleet.shared_at[key] = node
            if placed < min(fits, wanted):
                diags.append(
                    diag(
                        "MP613",
                        f"{title}: with the devices the manifests before it take, {placed} of its {wanted} pods "
                        f"with {_ask(templates, shared)} can be allocated"
                        + (f" ({_where(together.per_node)})" if together.per_node else "")
                        + "; the plan publishes too few devices for them all",
                        m,
                        line,
                    )
                )
    except _Fails as exc:
        sel = exc.selector
        # A class that is not in the manifests (migplan's, the chart's) has no line: the workload's is named.
        file, at = (sel.file, sel.line) if sel.line else (m.file, line)
        if (file, at, "MP630") not in fleet.said:
            fleet.said.add((file, at, "MP630"))
            diags.append(
                diag_at(
                    "MP630",
                    f"{exc.message} in selector {sel.expression[:120]!r} on a device the plan publishes: the "
                    f"scheduler fails the allocation of {title}'s claims",
                    file,
                    at,
                )
            )
    except _NotJudged as exc:
        diags.append(diag("MP635", f"{title}: {exc}: not judged", m, line))
    diags.extend(_unknown_findings(fleet, m, claims))
    return diags, summary


def _none_fit(
    fleet: DraFleet, m: Manifest, title: str, claims: Sequence[ClaimSpec], eligible: Sequence[str], line: int
) -> list[Diagnostic]:
    if not eligible:
        return []  # said by the node findings (MP616)
    dynamic = _dynamic_only(fleet, claims, eligible)
    if dynamic:
        return [
            diag(
                "MP633",
                f"{title}: only DynamicMIG could satisfy its claims ({_ask(claims, ())}): they select "
                f"{', '.join(dynamic)}, which the plan's GPUs support but the plan never cuts on the nodes it may "
                "run on; plan such partitions, or change the selectors to a profile the plan offers",
                m,
                line,
                profiles=dynamic,
            )
        ]
    return [
        diag(
            "MP632",
            f"{title}: no node it may run on can allocate its claims: {_why_none(fleet, claims, eligible)}; "
            "the pods stay Pending forever",
            m,
            line,
        )
    ]


def _unknown_findings(fleet: DraFleet, m: Manifest, claims: Sequence[ClaimSpec]) -> list[Diagnostic]:
    out = []
    selectors = [
        s
        for c in claims
        for q in c.requests
        for a in q.alternatives
        for s in (*fleet.classes[a.device_class].selectors, *a.selectors)
    ]
    for s in selectors:
        names = fleet.unknown.get((s.file, s.line, s.expression))
        key = (s.file if s.line else s.expression, s.line, "MP631")
        if not names or key in fleet.said:
            continue
        fleet.said.add(key)
        out.append(
            diag_at(
                "MP631",
                f"selector {s.expression[:120]!r} reads {', '.join(sorted(names))}, known only on the node: "
                "assumed to match",
                s.file if s.line else m.file,
                s.line or m.line,
                unknown=sorted(names),
            )
        )
    return out
