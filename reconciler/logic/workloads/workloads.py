"""Workloads against the plan: will the pods these manifests ask for fit the MIG cut in the inventory?

Pure: manifests (reconciler.logic.workloads.manifests) and the desired state in, Diagnostics out, each with the
manifest's file and line and the fix. The checks, in the article's words and the scheduler's:

- a MIG profile no node of the plan offers stays Pending forever (MP606, with the closest profiles);
- per container, the rules of reconciler.logic.observe.podrules (one MIG device, requests equal to limits);
- `nvidia.com/gpu` where the plan offers no whole GPU, or only on nodes the selectors exclude (MP611);
- pinning a node or a card instead of naming a profile (MP612): nodeName, a hostname selector or
  affinity, a GPU UUID, NVIDIA_VISIBLE_DEVICES set by hand;
- demand above capacity: replicas x devices per pod against what the nodes the pod may run on offer
  in the plan (MP613, an error: it can never all run), against what is free now when the last report
  or the live cluster says (MP614, a warning naming where a scheduler could still place pods), and
  against what the plan reserves for the workload's owner (MP615);
- node selectors, required node affinity and (with live nodes) taints that leave no node (MP616).

A pod is placed whole: all its devices come from one node, so capacity is counted in pods per node
(min over its resources of offered // asked), as the scheduler's NodeResourcesFit filter does.
Node labels the plan knows are the inventory's `metadata.labels`, `kubernetes.io/hostname` and the
labels GPU Feature Discovery derives from the plan; a selector on any other key is not judged from
the plan alone (MP617) — with `--kubeconfig` the nodes' real labels and taints are used.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.catalog import Catalog, load_catalog
from reconciler.logic.codecs import dpsharing
from reconciler.logic.inventory.rules import Rule
from reconciler.logic.observe import podrules
from reconciler.logic.observe.occupancy import expected_resources, resource_of
from reconciler.logic.workloads import draclaimfit, draclaims
from reconciler.logic.workloads.manifests import Manifest
from reconciler.model import codes, yamlbudget
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.inventory import DesiredState, MigStrategy, NodeSpec
from reconciler.model.observed import GPU_RESOURCE, MIG_RESOURCE_PREFIX, is_gpu_resource, is_mig_resource
from reconciler.model.printable import one_line
from reconciler.model.quantities import QuantityError, parse_count

# The workload family of the one registry (reconciler.model.codes), as SARIF and the checks read it.
CODES: Mapping[str, Rule] = {
    c.code: Rule(c.code, Severity(c.severity.value), c.meaning) for c in codes.family(codes.Family.WORKLOAD)
}

_PROBLEM_CODES = {
    podrules.ProblemKind.COUNT_ABOVE_ONE: "MP607",
    podrules.ProblemKind.SEVERAL_DEVICES: "MP608",
    podrules.ProblemKind.REQUESTS_DIFFER: "MP609",
    podrules.ProblemKind.LIMITS_MISSING: "MP610",
}

HOSTNAME = podrules.HOSTNAME_LABEL
_GPU_UUID = re.compile(r"\b(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_PROFILE = re.compile(r"(?:(\d+)c\.)?(\d+)g\.(\d+)gb")
# Labels GPU Feature Discovery puts on a GPU node that migplan can derive from the plan.
_GFD_DERIVED = (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.product",
    "nvidia.com/mig.strategy",
    "nvidia.com/mig.capable",
)
WORKLOAD_KINDS = (
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "ReplicationController",
    "Job",
    "CronJob",
)


# --- what a manifest asks for -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerAsk:
    name: str
    requests: Mapping[str, int]
    limits: Mapping[str, int]
    line: int
    init: bool = False
    # An init container with restartPolicy: Always is a sidecar: it starts before the app and keeps running beside
    # it, so the scheduler adds its requests to the app's (KEP-753) instead of taking the larger of the two.
    restartable: bool = False


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement (matchExpressions item; matchFields on metadata.name as `field`)."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()
    field: bool = False


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None
    operator: str  # Equal | Exists
    value: str
    effect: str | None


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Workload:
    """One object that creates pods, reduced to what scheduling GPU pods depends on."""

    manifest: Manifest
    kind: str
    replicas: int | None  # pods at once; None for a DaemonSet (one per eligible node)
    containers: tuple[ContainerAsk, ...]
    labels: Mapping[str, str]  # of the pod template (owner identity)
    node_name: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[tuple[Requirement, ...], ...] = ()  # OR of ANDs; empty: no required affinity
    tolerations: tuple[Toleration, ...] = ()
    pinned_env: tuple[tuple[str, str], ...] = ()  # (container, NVIDIA_VISIBLE_DEVICES value)
    spec_path: tuple[str | int, ...] = ()  # where the pod spec sits in the manifest
    overhead: Mapping[str, int] = field(default_factory=dict)  # spec.overhead's GPU resources (RuntimeClass)

    @property
    def title(self) -> str:
        return f"{self.kind} {self.manifest.namespace}/{self.manifest.name}"

    def per_pod(self) -> dict[str, int]:
        """Devices one pod needs, exactly as kube-scheduler counts them: k8s.io/component-helpers/resource
        helpers.go PodRequests -> AggregateContainerRequests (aggregateContainerResourcesByFn), which the
        NodeResourcesFit plugin calls (pkg/scheduler/framework/plugins/noderesources/fit.go):
        - the app containers' requests add up;
        - a sidecar (init container with restartPolicy: Always) adds to that sum too, and stays counted for every
          init container after it: InitContainerUse(i) = sum(sidecars before i) + init container i;
        - the result is the larger, per resource, of that sum and the largest InitContainerUse;
        - spec.overhead is added on top (PodRequests without ExcludeOverhead).
        Pod-level `spec.resources` change nothing here: applyPodLevelResources takes only cpu, memory and
        hugepages-* (IsSupportedPodLevelResource), never an extended resource such as a MIG device."""
        run: dict[str, int] = {}
        for c in self.containers:
            if not c.init:
                for k, v in podrules.effective(c).items():
                    run[k] = run.get(k, 0) + v
        sidecars: dict[str, int] = {}
        init_use: dict[str, int] = {}
        for c in self.containers:
            if not c.init:
                continue
            ask = podrules.effective(c)
            if c.restartable:
                for k, v in ask.items():
                    run[k] = run.get(k, 0) + v
                    sidecars[k] = sidecars.get(k, 0) + v
                use = dict(sidecars)
            else:
                use = {k: ask.get(k, 0) + sidecars.get(k, 0) for k in set(ask) | set(sidecars)}
            for k, v in use.items():
                init_use[k] = max(init_use.get(k, 0), v)
        for k, v in init_use.items():
            run[k] = max(run.get(k, 0), v)
        for k, v in self.overhead.items():
            run[k] = run.get(k, 0) + v
        return {k: v for k, v in run.items() if v > 0}

    def identities(self) -> frozenset[str]:
        """Names that may be a plan owner, as occupancy matches running pods to owners."""
        ids = {self.manifest.namespace, self.manifest.name}
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app"):
            if key in self.labels:
                ids.add(self.labels[key])
        return frozenset(ids)


def _get(doc: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(p)
    return doc


def _spec_path(kind: str) -> tuple[str, ...]:
    if kind == "Pod":
        return ("spec",)
    if kind == "CronJob":
        return ("spec", "jobTemplate", "spec", "template", "spec")
    return ("spec", "template", "spec")


def extract_workload(m: Manifest) -> tuple[Workload | None, list[Diagnostic]]:
    """The workload of a manifest, or None for an object that runs no pods (with MP603 if it asks
    for GPU resources anyway)."""
    diags: list[Diagnostic] = []
    if m.kind not in WORKLOAD_KINDS:
        if _mentions_gpu(m.body):
            diags.append(
                _d(
                    "MP603",
                    f"{m.kind} {m.namespace}/{m.name} asks for GPU resources but migplan does not know how "
                    "many pods it runs: not checked",
                    m,
                    m.line,
                )
            )
        return None, diags
    path = _spec_path(m.kind)
    spec = _get(m.body, *path)
    if not isinstance(spec, Mapping):
        return None, [_d("MP619", f"{m.kind} {m.name}: no pod spec at {'.'.join(path)}", m, m.line)]
    replicas = _replicas(m, diags)
    containers: list[ContainerAsk] = []
    pinned: list[tuple[str, str]] = []
    for section, init in (("containers", False), ("initContainers", True)):
        raw = spec.get(section)
        for i, c in enumerate(raw if isinstance(raw, list) else []):
            if not isinstance(c, Mapping):
                continue
            cpath: tuple[str | int, ...] = (*path, section, i)
            name = str(c.get("name", f"#{i}"))
            containers.append(
                ContainerAsk(
                    name=name,
                    requests=_quantities(m, _get(c, "resources", "requests"), (*cpath, "resources", "requests"), diags),
                    limits=_quantities(m, _get(c, "resources", "limits"), (*cpath, "resources", "limits"), diags),
                    line=m.line_of(*cpath),
                    init=init,
                    restartable=init and c.get("restartPolicy") == "Always",
                )
            )
            for e in c.get("env") or [] if isinstance(c.get("env"), list) else []:
                if isinstance(e, Mapping) and e.get("name") == "NVIDIA_VISIBLE_DEVICES" and "value" in e:
                    pinned.append((name, str(e.get("value"))))
    tmpl_meta = _get(m.body, *path[:-1], "metadata") if m.kind != "Pod" else m.body.get("metadata")
    labels = _get(tmpl_meta, "labels")
    node_name = spec.get("nodeName")
    return (
        Workload(
            manifest=m,
            kind=m.kind,
            replicas=replicas,
            containers=tuple(containers),
            labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {},
            node_name=str(node_name) if node_name else None,
            node_selector=_str_map(spec.get("nodeSelector")),
            affinity=_affinity(spec),
            tolerations=_tolerations(spec),
            pinned_env=tuple(pinned),
            spec_path=path,
            overhead=_quantities(m, spec.get("overhead"), (*path, "overhead"), diags),
        ),
        diags,
    )


def _mentions_gpu(doc: Any, depth: int = 0) -> bool:
    if depth > 40:
        return False
    if isinstance(doc, Mapping):
        return any((isinstance(k, str) and is_gpu_resource(k)) or _mentions_gpu(v, depth + 1) for k, v in doc.items())
    if isinstance(doc, list):
        return any(_mentions_gpu(v, depth + 1) for v in doc)
    return False


def _str_map(raw: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def _replicas(m: Manifest, diags: list[Diagnostic]) -> int | None:
    """Pods the object runs at once (DaemonSet: None, one per eligible node)."""
    if m.kind == "DaemonSet":
        return None
    if m.kind == "Pod":
        return 1
    if m.kind in ("Job", "CronJob"):
        base = ("spec",) if m.kind == "Job" else ("spec", "jobTemplate", "spec")
        par = _count_field(m, (*base, "parallelism"), diags)
        comp = _count_field(m, (*base, "completions"), diags)
        # batch/v1 defaults: parallelism 1; at most `completions` pods run at once when it is set.
        par = 1 if par is None else par
        return min(par, comp) if comp is not None else par
    n = _count_field(m, ("spec", "replicas"), diags)
    return 1 if n is None else n


def _count_field(m: Manifest, path: tuple[str, ...], diags: list[Diagnostic]) -> int | None:
    raw = _get(m.body, *path)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        diags.append(
            _d("MP619", f"{'.'.join(path)} must be a non-negative integer, not {str(raw)[:40]!r}", m, m.line_of(*path))
        )
        return None
    return raw


def _quantities(m: Manifest, raw: Any, path: tuple[str | int, ...], diags: list[Diagnostic]) -> dict[str, int]:
    """GPU resources of a requests/limits map as whole counts, parsed as resource.Quantity is."""
    out: dict[str, int] = {}
    if not isinstance(raw, Mapping):
        return out
    for k, v in raw.items():
        key = str(k)
        if not is_gpu_resource(key):
            continue
        try:
            out[key] = parse_count(v)
        except QuantityError as exc:
            diags.append(
                _d("MP605", f"{key}: {exc}: the API server refuses it (must be an integer)", m, m.line_of(*path, key))
            )
    return out


def _affinity(spec: Mapping[str, Any]) -> tuple[tuple[Requirement, ...], ...]:
    terms = _get(
        spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"
    )
    out: list[tuple[Requirement, ...]] = []
    for term in terms if isinstance(terms, list) else []:
        reqs: list[Requirement] = []
        for section, is_field in (("matchExpressions", False), ("matchFields", True)):
            for e in _get(term, section) or [] if isinstance(_get(term, section), list) else []:
                if isinstance(e, Mapping) and e.get("key"):
                    vals = e.get("values")
                    reqs.append(
                        Requirement(
                            str(e["key"]),
                            str(e.get("operator", "In")),
                            tuple(str(v) for v in vals) if isinstance(vals, list) else (),
                            is_field,
                        )
                    )
        out.append(tuple(reqs))
    return tuple(out)


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    raw = spec.get("tolerations")
    out = []
    for t in raw if isinstance(raw, list) else []:
        if isinstance(t, Mapping):
            out.append(
                Toleration(
                    key=str(t["key"]) if t.get("key") else None,
                    operator=str(t.get("operator") or "Equal"),
                    value=str(t.get("value") or ""),
                    effect=str(t["effect"]) if t.get("effect") else None,
                )
            )
    return tuple(out)


# --- what the plan offers ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """One node as the check sees it: labels, taints, what the plan offers and what is free now."""

    name: str
    labels: Mapping[str, str]
    offers: Mapping[str, int]  # resource -> devices the plan gives the node
    owners: Mapping[str, Mapping[str | None, int]]  # resource -> owner (None: unowned) -> devices
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    free: Mapping[str, int] | None = None  # resource -> free devices now; None when nobody said
    live: bool = False  # labels and taints are the cluster's own, not derived from the plan


def derived_labels(node: NodeSpec, strategy: MigStrategy, catalog: Catalog) -> dict[str, str]:
    """The labels a node of the plan carries: inventory labels, hostname, and GFD's from the plan."""
    labels = dict(node.labels)
    labels[HOSTNAME] = node.name
    if node.gpus:
        labels["nvidia.com/gpu.present"] = "true"
        labels["nvidia.com/gpu.count"] = str(len(node.gpus))
        labels["nvidia.com/mig.strategy"] = strategy.value
        model = catalog.get(node.gpus[0].model)
        if model is not None:
            labels["nvidia.com/mig.capable"] = "true"
            if model.gfd_products:
                product = model.gfd_products[0]
                profiles = {p.profile for g in node.gpus if g.mig_enabled for p in g.partitions}
                if strategy is MigStrategy.SINGLE and len(profiles) == 1:
                    product = f"{product}-MIG-{profiles.pop().replace('+', '.')}"
                labels["nvidia.com/gpu.product"] = product
    return labels


def plan_nodes(desired: DesiredState, catalog: Catalog) -> tuple[NodeFacts, ...]:
    strategy = desired.cluster.mig_strategy
    out = []
    for name in sorted(desired.nodes):
        node = desired.nodes[name]
        owners: dict[str, dict[str | None, int]] = {}
        for g in node.gpus:
            if g.mig_enabled and strategy is not MigStrategy.NONE:
                for p in g.partitions:
                    res = resource_of(p.profile) if strategy is MigStrategy.MIXED else GPU_RESOURCE
                    owners.setdefault(res, {})
                    owners[res][p.owner] = owners[res].get(p.owner, 0) + 1
            else:
                owners.setdefault(GPU_RESOURCE, {})
                owners[GPU_RESOURCE][None] = owners[GPU_RESOURCE].get(None, 0) + 1
        out.append(
            NodeFacts(
                name=name,
                labels=derived_labels(node, strategy, catalog),
                offers={k: v for k, v in expected_resources(node, strategy).items() if v > 0},
                owners=owners,
            )
        )
    return tuple(out)


def with_cluster_facts(
    nodes: Sequence[NodeFacts],
    *,
    free: Mapping[str, Mapping[str, int]] | None = None,
    labels: Mapping[str, Mapping[str, str]] | None = None,
    taints: Mapping[str, tuple[Taint, ...]] | None = None,
    unschedulable: Iterable[str] = (),
    sharing: Mapping[str, dpsharing.Sharing] | None = None,
) -> tuple[NodeFacts, ...]:
    """The plan's nodes with what the last report or the live cluster says: free devices per node,
    and (live only) the nodes' real labels, taints and cordons, and the device-plugin config's sharing of their
    devices (what they offer is then the plan's replicas under the names the plugin advertises)."""
    cordoned = set(unschedulable)
    out = []
    for n in nodes:
        live_labels = (labels or {}).get(n.name)
        shared = (sharing or {}).get(n.name)
        out.append(
            NodeFacts(
                name=n.name,
                labels={**n.labels, **live_labels} if live_labels is not None else n.labels,
                offers=dpsharing.fold(n.offers, shared) if shared is not None else n.offers,
                owners=_shared_owners(n.owners, shared) if shared is not None else n.owners,
                taints=(taints or {}).get(n.name, n.taints),
                unschedulable=n.name in cordoned,
                free=dict(free[n.name]) if free is not None and n.name in free else (None if free is None else {}),
                live=live_labels is not None,
            )
        )
    return tuple(out)


def _shared_owners(
    owners: Mapping[str, Mapping[str | None, int]], shared: dpsharing.Sharing
) -> dict[str, dict[str | None, int]]:
    """Each owner's partitions of a shared resource become its replicas, under the advertised name."""
    out: dict[str, dict[str | None, int]] = {}
    for res, per_owner in owners.items():
        replicas = shared.replicas.get(res, 1)
        target = out.setdefault(shared.advertised_name(res), {})
        for owner, k in per_owner.items():
            target[owner] = target.get(owner, 0) + k * replicas
    return out


# --- the check --------------------------------------------------------------------------------


def _d(code: str, message: str, m: Manifest, line: int | None, **extra: Any) -> Diagnostic:
    # The message quotes the manifest (names, resources, selectors) before any API server validated them: one
    # printable line, or a name holding a newline forges a `file:line: error ...` line of its own.
    return Diagnostic(code, one_line(message), file=m.file, line=line, severity=CODES[code].severity, extra=extra)


def _matches(req: Requirement, node: NodeFacts, known: frozenset[str]) -> bool | None:
    """Whether a node satisfies one requirement; None when the plan cannot say (a label it never names)."""
    if req.field:
        have: str | None = node.name if req.key == "metadata.name" else None
    else:
        have = node.labels.get(req.key)
        if have is None and not node.live and req.key not in known:
            return None
    op = req.operator
    if op == "In":
        return have is not None and have in req.values
    if op == "NotIn":
        return have is None or have not in req.values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and req.values:
        try:
            a, b = int(have), int(req.values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def _tolerates(w: Workload, taint: Taint) -> bool:
    if taint.effect == "PreferNoSchedule":
        return True
    for t in w.tolerations:
        if t.effect is not None and t.effect != taint.effect:
            continue
        if t.key is None and t.operator == "Exists":
            return True
        if t.key == taint.key and (t.operator == "Exists" or t.value == taint.value):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Eligibility:
    nodes: tuple[NodeFacts, ...]
    unknown_keys: tuple[str, ...]  # selector keys the plan cannot judge (nodes kept)
    excluded: Mapping[str, str]  # node -> why not


def eligible_nodes(w: Workload, nodes: Sequence[NodeFacts]) -> Eligibility:
    """The nodes a pod of the workload may be scheduled on, before counting devices."""
    unknown: set[str] = set()
    keep: list[NodeFacts] = []
    why: dict[str, str] = {}
    # A label key some node of the plan carries (or GFD derives) is known: a node without it lacks it.
    known = frozenset({HOSTNAME, *_GFD_DERIVED, *(k for n in nodes for k in n.labels)})
    for n in nodes:
        if w.node_name is not None and w.node_name != n.name:
            why[n.name] = f"nodeName is {w.node_name}"
            continue
        bad = None
        for k, v in w.node_selector.items():
            if k not in n.labels and not n.live and k not in known:
                unknown.add(k)
                continue
            if n.labels.get(k) != v:
                bad = f"nodeSelector {k}={v}"
                break
        if bad is None and w.affinity:
            ok_any = False
            for term in w.affinity:
                results = [_matches(r, n, known) for r in term]
                unknown.update(r.key for r, ok in zip(term, results, strict=True) if ok is None)
                if all(ok is not False for ok in results):
                    ok_any = True
                    break
            if not ok_any:
                bad = "required node affinity"
        if bad is None:
            for t in n.taints:
                if t.effect in ("NoSchedule", "NoExecute") and not _tolerates(w, t):
                    bad = f"taint {t.key}={t.value}:{t.effect} not tolerated"
                    break
        if bad is None and n.unschedulable:
            bad = "cordoned"
        if bad is not None:
            why[n.name] = bad
            continue
        keep.append(n)
    return Eligibility(tuple(keep), tuple(sorted(unknown)), why)


def _pods_fit(per_pod: Mapping[str, int], nodes: Iterable[NodeFacts], *, free: bool) -> dict[str, int]:
    """node -> pods of this shape that fit on it (by the plan's offers, or by what is free now)."""
    out: dict[str, int] = {}
    for n in nodes:
        have = (n.free or {}) if free else n.offers
        fits = min((have.get(r, 0) // k for r, k in per_pod.items()), default=0)
        if fits > 0:
            out[n.name] = fits
    return out


def _place(
    per_pod: Mapping[str, int], nodes: Sequence[NodeFacts], wanted: int, free_left: dict[str, dict[str, int]]
) -> dict[str, int]:
    """Place up to `wanted` pods on the nodes' free devices, most room first, taking what they use."""
    placed: dict[str, int] = {}
    room = sorted(
        ((min((free_left[n.name].get(r, 0) // k for r, k in per_pod.items()), default=0), n.name) for n in nodes),
        key=lambda t: (-t[0], t[1]),
    )
    left = wanted
    for fits, name in room:
        take = min(fits, left)
        if take <= 0:
            continue
        for r, k in per_pod.items():
            free_left[name][r] -= k * take
        placed[name] = take
        left -= take
    return placed


def _where(fit: Mapping[str, int], limit: int = 5) -> str:
    items = sorted(fit.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{n} ({k})" for n, k in items[:limit])
    return text + (f" and {len(items) - limit} more nodes" if len(items) > limit else "")


def _closest(resource: str, offered: Iterable[str]) -> list[str]:
    """Offered MIG profiles nearest to the one asked: same compute, then nearest memory; else by spelling."""
    want = _PROFILE.fullmatch(resource.removeprefix(MIG_RESOURCE_PREFIX))
    names = sorted({r.removeprefix(MIG_RESOURCE_PREFIX) for r in offered if is_mig_resource(r)})
    if want is None:
        return difflib.get_close_matches(resource.removeprefix(MIG_RESOURCE_PREFIX), names, n=3, cutoff=0.3)
    wc, wm = int(want.group(2)), int(want.group(3))

    def distance(name: str) -> tuple[int, int, str]:
        m = _PROFILE.match(name)
        if m is None:
            return (99, 9999, name)
        return (abs(int(m.group(2)) - wc), abs(int(m.group(3)) - wm), name)

    return sorted(names, key=distance)[:3]


@dataclass
class _Fleet:
    """The plan's nodes, and what the manifests read so far ask of them (manifests share the cluster)."""

    nodes: Sequence[NodeFacts]
    strategy: MigStrategy
    free_source: str | None
    offered_anywhere: set[str]
    capacity_total: dict[str, int]
    demand_total: dict[str, int] = field(default_factory=dict)
    crossed: set[str] = field(default_factory=set)  # resources already said to be over the cluster's capacity
    free_left: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> free partitions not yet taken
    dra: draclaimfit.DraFleet | None = None  # the DRA objects of the manifests and the plan's DRA devices

    @classmethod
    def of(cls, desired: DesiredState, nodes: Sequence[NodeFacts], free_source: str | None) -> _Fleet:
        capacity: dict[str, int] = {}
        for n in nodes:
            for r, k in n.offers.items():
                capacity[r] = capacity.get(r, 0) + k
        return cls(
            nodes=nodes,
            strategy=desired.cluster.mig_strategy,
            free_source=free_source,
            offered_anywhere={r for n in nodes for r, k in n.offers.items() if k > 0},
            capacity_total=capacity,
            free_left={n.name: dict(n.free or {}) for n in nodes},
        )


def check_workloads(
    manifests: Sequence[Manifest],
    *,
    desired: DesiredState,
    nodes: Sequence[NodeFacts],
    free_source: str | None = None,
    catalog: Catalog | None = None,
    device_classes: Iterable[Mapping[str, Any]] = (),
) -> tuple[list[Diagnostic], list[dict[str, Any]]]:
    """Diagnostics for every manifest, and a per-workload summary (for -o json). `device_classes`: the DeviceClass
    objects migplan renders from the plan (claims may name them without the manifests defining them)."""
    fleet = _Fleet.of(desired, nodes, free_source)
    diags: list[Diagnostic] = []
    summaries: list[dict[str, Any]] = []
    if any(draclaims.is_dra(m, m.kind) for m in manifests) or any(_has_claims(m) for m in manifests):
        fleet.dra, found = draclaimfit.collect(manifests, desired, catalog or load_catalog(), device_classes)
        diags.extend(found)
    for m in manifests:
        found, summary = _check_manifest(m, fleet)
        diags.extend(found)
        if summary is not None:
            summaries.append(summary)
    return diags, summaries


def _has_claims(m: Manifest) -> bool:
    if m.kind not in WORKLOAD_KINDS:
        return False
    return _get(m.body, *_spec_path(m.kind), "resourceClaims") is not None


def _check_manifest(m: Manifest, fleet: _Fleet) -> tuple[list[Diagnostic], dict[str, Any] | None]:
    """One manifest's diagnostics, and its summary when it asks for GPU resources."""
    w, found = extract_workload(m)
    diags = list(found)
    if w is None:
        return diags, None
    spec_line = m.line_of(*w.spec_path)
    for c in w.containers:
        for p in podrules.container_problems(c):
            diags.append(_d(_PROBLEM_CODES[p.kind], f"{w.title}: {p.message}", m, c.line, resource=p.resource))
    diags.extend(_pinning(w, spec_line))
    per_pod = w.per_pod()
    refs, claim_diags = draclaims.pod_claims(m, w.spec_path)
    diags.extend(claim_diags)
    if not per_pod and not refs:
        return diags, None
    elig = eligible_nodes(w, fleet.nodes)
    diags.extend(_unknown_label_findings(w, m, elig, spec_line))
    summary: dict[str, Any] = {
        "kind": w.kind,
        "namespace": m.namespace,
        "name": m.name,
        "file": m.file,
        "line": m.line,
        "replicas": w.replicas,
        "perPod": dict(sorted(per_pod.items())),
        "eligibleNodes": len(elig.nodes),
    }
    if refs and fleet.dra is not None:
        found, summary["claims"] = draclaimfit.check_pod_claims(
            fleet.dra,
            manifest=m,
            title=w.title,
            refs=refs,
            replicas=w.replicas,
            eligible=[n.name for n in elig.nodes],
            line=spec_line,
        )
        diags.extend(found)
        if not per_pod:
            if not elig.nodes:
                diags.extend(_unplaceable(w, m, per_pod, elig, fleet, spec_line))
            return diags, summary
    unplaceable = _unplaceable(w, m, per_pod, elig, fleet, spec_line)
    if unplaceable:
        return diags + unplaceable, summary
    wanted = len(elig.nodes) if w.replicas is None else w.replicas
    diags.extend(_fit_findings(w, m, per_pod, elig, wanted, summary, spec_line))
    diags.extend(_demand_findings(w, m, per_pod, wanted, fleet, spec_line))
    if fleet.free_source is not None:
        diags.extend(_free_findings(w, m, per_pod, elig, wanted, fleet, summary, spec_line))
    diags.extend(_owner_findings(w, per_pod, elig.nodes, wanted, spec_line))
    return diags, summary


def _unknown_label_findings(w: Workload, m: Manifest, elig: Eligibility, spec_line: int) -> list[Diagnostic]:
    """MP617: a selector on a label the plan does not know (the node is kept; only the cluster can judge it)."""
    return [
        _d(
            "MP617",
            f"{w.title}: selects nodes on label {key}, which the plan does not know; run with "
            "--kubeconfig to judge it against the nodes' real labels",
            m,
            spec_line,
            label=key,
        )
        for key in elig.unknown_keys
    ]


def _unplaceable(
    w: Workload, m: Manifest, per_pod: Mapping[str, int], elig: Eligibility, fleet: _Fleet, spec_line: int
) -> list[Diagnostic]:
    """Why no pod of the workload can ever run: a resource no node offers, no eligible node (MP616), or a whole
    GPU asked of nodes that are all cut into MIG partitions (MP611). Empty when pods can be placed at all."""
    missing = sorted(r for r in per_pod if r not in fleet.offered_anywhere)
    if missing:
        out = []
        for r in missing:
            line = next((c.line for c in w.containers if podrules.effective(c).get(r)), spec_line)
            out.append(_missing_resource(w, r, fleet.strategy, fleet.offered_anywhere, line))
        return out
    if not elig.nodes:
        reasons = sorted(set(elig.excluded.values()))
        return [
            _d(
                "MP616",
                f"{w.title}: no node of the plan can run it ({'; '.join(reasons[:4])})",
                m,
                spec_line,
                excluded=dict(sorted(elig.excluded.items())[:50]),
            )
        ]
    if GPU_RESOURCE in per_pod and not any(n.offers.get(GPU_RESOURCE, 0) for n in elig.nodes):
        return [
            _d(
                "MP611",
                f"{w.title} asks for {GPU_RESOURCE}, but the nodes it may run on offer none (their GPUs are"
                " all cut into MIG partitions); the whole GPUs of the plan are only on nodes its selectors "
                f"exclude: ask for a nvidia.com/mig-<profile> instead",
                m,
                spec_line,
            )
        ]
    return []


def _fit_findings(
    w: Workload,
    m: Manifest,
    per_pod: Mapping[str, int],
    elig: Eligibility,
    wanted: int,
    summary: dict[str, Any],
    spec_line: int,
) -> list[Diagnostic]:
    """MP613: more pods than the plan has room for on the nodes the workload may run on."""
    fit = _pods_fit(per_pod, elig.nodes, free=False)
    summary["planFits"] = sum(fit.values())
    if w.replicas is None:  # a DaemonSet runs one pod on every eligible node
        short = sorted(n.name for n in elig.nodes if n.name not in fit)
        if not short:
            return []
        return [
            _d(
                "MP613",
                f"{w.title} runs a pod on every node it selects, but {len(short)} of them "
                f"({', '.join(short[:5])}) cannot hold {_ask(per_pod)}: those pods stay Pending",
                m,
                spec_line,
            )
        ]
    if wanted <= sum(fit.values()):
        return []
    return [
        _d(
            "MP613",
            f"{w.title}: {wanted} replicas x {_ask(per_pod)}, but the plan has room for "
            f"{sum(fit.values())} such pods on the nodes it may run on"
            + (f" ({_where(fit)})" if fit else "")
            + "; the rest stay Pending forever",
            m,
            spec_line,
        )
    ]


def _demand_findings(
    w: Workload, m: Manifest, per_pod: Mapping[str, int], wanted: int, fleet: _Fleet, spec_line: int
) -> list[Diagnostic]:
    """MP613 across manifests: together they ask for more of a resource than the whole plan offers. Said once per
    resource, and only when several manifests share the blame (one alone over capacity is said by _fit_findings)."""
    out = []
    for r, k in per_pod.items():
        earlier = fleet.demand_total.get(r, 0)
        fleet.demand_total[r] = earlier + k * wanted
        if earlier and fleet.demand_total[r] > fleet.capacity_total.get(r, 0) and r not in fleet.crossed:
            fleet.crossed.add(r)
            out.append(
                _d(
                    "MP613",
                    f"together, the manifests up to {w.title} ask for {fleet.demand_total[r]} {r}; the plan "
                    f"offers {fleet.capacity_total.get(r, 0)} in the whole cluster",
                    m,
                    spec_line,
                    resource=r,
                )
            )
    return out


def _free_findings(
    w: Workload,
    m: Manifest,
    per_pod: Mapping[str, int],
    elig: Eligibility,
    wanted: int,
    fleet: _Fleet,
    summary: dict[str, Any],
    spec_line: int,
) -> list[Diagnostic]:
    """MP614: fewer pods can be placed now, on the free partitions, than the workload wants. Earlier manifests
    take their free partitions first: the pods of this one get what is left."""
    placed_on = _place(per_pod, elig.nodes, wanted, fleet.free_left)
    placed = sum(placed_on.values())
    summary["freeFits"] = placed
    if wanted <= placed:
        return []
    return [
        _d(
            "MP614",
            f"{w.title}: {wanted} pods x {_ask(per_pod)}, but only {placed} can be placed now "
            f"(free per {fleet.free_source})"
            + (f": {_where(placed_on)}" if placed_on else "")
            + "; the others wait for partitions to free up",
            m,
            spec_line,
        )
    ]


def _ask(per_pod: Mapping[str, int]) -> str:
    return " + ".join(f"{k} {r}" for r, k in sorted(per_pod.items()))


def _missing_resource(w: Workload, r: str, strategy: MigStrategy, offered: set[str], line: int) -> Diagnostic:
    m = w.manifest
    if r == GPU_RESOURCE:
        return _d(
            "MP611",
            f"{w.title} asks for {GPU_RESOURCE}, but every GPU of the plan is cut into MIG partitions "
            "(nvidia.com/gpu is 0 on every node): it stays Pending forever; ask for a nvidia.com/mig-<profile>",
            m,
            line,
        )
    if strategy is MigStrategy.SINGLE:
        fix = "the cluster's migStrategy is single: MIG devices are advertised as nvidia.com/gpu, ask for that"
    elif strategy is MigStrategy.NONE:
        fix = "the cluster's migStrategy is none: no MIG resource is advertised"
    elif r.endswith(dpsharing.SHARED_SUFFIX) and dpsharing.profile_of(r) in offered:
        # The name a device-plugin config with renameByDefault gives shared replicas of a planned profile: only the
        # cluster's config says whether any node advertises it.
        base = dpsharing.profile_of(r).removeprefix(MIG_RESOURCE_PREFIX)
        return _d(
            "MP606",
            f"{w.title} asks for {r}, which only a node whose device-plugin config shares {base} with "
            "renameByDefault advertises; no node of the plan is known to (the plan alone cannot tell: run with "
            "--kubeconfig to read the cluster's device-plugin config): otherwise it stays Pending forever",
            m,
            line,
            resource=r,
        )
    else:
        near = _closest(r, offered)
        fix = ("closest offered: " + ", ".join(near)) if near else "no MIG profile is offered at all"
    return _d(
        "MP606",
        f"{w.title} asks for {r}, which no node of the plan offers: it stays Pending forever; {fix}",
        m,
        line,
        resource=r,
    )


def _pinning(w: Workload, line: int) -> list[Diagnostic]:
    m = w.manifest
    out = []
    fix = "name a MIG profile (nvidia.com/mig-<profile>) and let the scheduler choose the node and the partition"
    if w.node_name is not None:
        out.append(
            _d(
                "MP612",
                f"{w.title} pins node {w.node_name} (spec.nodeName bypasses the scheduler and its "
                f"device accounting); {fix}",
                m,
                m.line_of(*w.spec_path, "nodeName"),
            )
        )
    # The same rule as the drift report's on running pods (MP548): podrules.selector_pins.
    for k, v in podrules.selector_pins(w.node_selector):
        out.append(
            _d(
                "MP612",
                f"{w.title} pins a node or card with nodeSelector {k}={v}; {fix}",
                m,
                m.line_of(*w.spec_path, "nodeSelector", k),
            )
        )
    for term in w.affinity:
        for r in term:
            if (r.key == HOSTNAME or (r.field and r.key == "metadata.name")) and r.operator == "In":
                out.append(
                    _d(
                        "MP612",
                        f"{w.title} pins nodes by {r.key} in node affinity ({', '.join(r.values)[:80]}); {fix}",
                        m,
                        line,
                    )
                )
            elif any(_GPU_UUID.search(v) for v in r.values):
                out.append(_d("MP612", f"{w.title} selects a GPU by UUID in node affinity ({r.key}); {fix}", m, line))
    for container, value in w.pinned_env:
        if value.strip().lower() not in ("void", "none", ""):
            out.append(
                _d(
                    "MP612",
                    f"{w.title}: container {container} sets NVIDIA_VISIBLE_DEVICES={value[:60]} by hand, "
                    f"which picks devices behind the device plugin's back; {fix}",
                    m,
                    line,
                )
            )
    return out


def _owner_findings(
    w: Workload, per_pod: Mapping[str, int], nodes: Sequence[NodeFacts], wanted: int, line: int
) -> list[Diagnostic]:
    """Demand beyond what the plan reserves for this workload's owner (plus unowned partitions)."""
    ids = w.identities()
    out = []
    for r, k in sorted(per_pod.items()):
        if not is_mig_resource(r):
            continue
        mine = unowned = others = 0
        other_names: set[str] = set()
        for n in nodes:
            for owner, count in n.owners.get(r, {}).items():
                if owner is None:
                    unowned += count
                elif owner in ids:
                    mine += count
                else:
                    others += count
                    other_names.add(owner)
        need = k * wanted
        if need > mine + unowned and others:
            who = (
                f"reserved for {', '.join(sorted(ids & {o for n in nodes for o in n.owners.get(r, {}) if o}))}"
                if mine
                else "reserved for it (no partition names it as owner)"
            )
            out.append(
                _d(
                    "MP615",
                    f"{w.title} needs {need} {r}; the plan has {mine} {who} and {unowned} unowned on the "
                    f"nodes it may run on, so {need - mine - unowned} would take partitions reserved for "
                    f"{', '.join(sorted(other_names)[:5])}; name this workload's owner on enough partitions",
                    w.manifest,
                    line,
                    resource=r,
                )
            )
    return out


# --- free devices from the last committed report ----------------------------------------------

MAX_REPORT_BYTES = 256 * 1024 * 1024
# Occupancy rows read from one report, all nodes together: a 5,000-node fleet of 8 GPUs writes under 300k. The
# bound is on rows, not bytes: YAML aliases let a few KB name the same node and row lists millions of times.
MAX_REPORT_ROWS = 1_000_000
MAX_REPORT_NODES = 4_000_000  # YAML nodes once aliases are expanded: a 5,000-node report holds far fewer


class ReportUnreadable(ValueError):
    """The drift report cannot be read as migplan writes it; the message says why."""


def free_from_drift_report(data: bytes) -> tuple[str, dict[str, dict[str, int]]]:
    """(the revision the report was computed against, node -> resource -> free devices) from drift.yaml.

    The report is on a branch people can push to, so it is read defensively: YAML's safe loader (the C
    one), bounded size, and every field it uses of the exact type."""
    import yaml

    if len(data) > MAX_REPORT_BYTES:
        raise ReportUnreadable(f"drift.yaml of {len(data)} bytes is larger than {MAX_REPORT_BYTES}")
    loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if (too_much := yamlbudget.problem(data, max_nodes=MAX_REPORT_NODES)) is not None:
        raise ReportUnreadable(f"drift.yaml cannot be read: {too_much}")
    try:
        doc = yaml.load(data, Loader=loader)
    except yaml.YAMLError as exc:
        raise ReportUnreadable(f"drift.yaml is not YAML: {' '.join(str(exc).split())[:160]}") from exc
    except (ValueError, AttributeError, KeyError, TypeError) as exc:  # PyYAML: a date or a tag that does not fit
        raise ReportUnreadable(f"drift.yaml holds a value YAML cannot read ({type(exc).__name__})") from exc
    if not isinstance(doc, Mapping) or doc.get("kind") != "DriftReport" or not isinstance(doc.get("nodes"), list):
        raise ReportUnreadable("drift.yaml is not a migplan DriftReport (kind, nodes)")
    out: dict[str, dict[str, int]] = {}
    rows = 0
    for i, node in enumerate(doc["nodes"]):
        if not isinstance(node, Mapping) or not isinstance(node.get("name"), str):
            raise ReportUnreadable(f"drift.yaml nodes[{i}] has no name")
        occupancy = node.get("occupancy") or []
        if not isinstance(occupancy, list):
            raise ReportUnreadable(f"drift.yaml nodes[{i}].occupancy is not a list")
        rows += 1 + len(occupancy)
        if rows > MAX_REPORT_ROWS:
            raise ReportUnreadable(f"drift.yaml has more than {MAX_REPORT_ROWS} nodes and occupancy rows (aliases?)")
        free: dict[str, int] = {}
        for j, occ in enumerate(occupancy):
            if not isinstance(occ, Mapping):
                raise ReportUnreadable(f"drift.yaml nodes[{i}].occupancy[{j}] is not a mapping")
            profile, total, used = occ.get("profile"), occ.get("total"), occ.get("used")
            if not isinstance(profile, str) or any(
                isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in (total, used)
            ):
                raise ReportUnreadable(f"drift.yaml nodes[{i}].occupancy[{j}] needs profile, total and used")
            assert isinstance(total, int) and isinstance(used, int)
            res = GPU_RESOURCE if profile == "gpu" else resource_of(profile)
            free[res] = free.get(res, 0) + max(total - used, 0)
        out[node["name"]] = free
    return str(doc.get("revision", "?")), out
