"""What DRA objects in the manifests ask for: DeviceClasses, ResourceClaims, ResourceClaimTemplates, pods' claims. Pure.

Read in the resource.k8s.io/v1 shape (Kubernetes v1.36, staging/src/k8s.io/api/resource/v1/types.go):
- a DeviceClass: `spec.selectors[].cel.expression`;
- a ResourceClaim: `spec.devices.requests[]`, each either `exactly` {deviceClassName, selectors, allocationMode
  (ExactCount, the default, with `count` >= 1, default 1; or All), ...} or `firstAvailable[]` (1..8 subrequests of
  the same shape, tried in order), and `spec.devices.constraints[]` {requests (empty: all), matchAttribute};
  a ResourceClaimTemplate holds the same under `spec.spec`;
- a pod spec's `resourceClaims[]` {name, resourceClaimName | resourceClaimTemplateName} (exactly one of the two).
What the API server refuses (pkg/apis/resource/validation `validateDeviceRequest`, `validateDeviceConstraint`) is
MP626 at the line it is written on, and the object is not judged further; a selector it refuses (too long, does not
compile, too costly) is MP629. Bounds: resource/v1 `DeviceRequestsMaxSize` 32 requests,
`FirstAvailableDeviceRequestMaxSize` 8 subrequests, `DeviceSelectorsMaxSize` 32 selectors,
`DeviceConstraintsMaxSize` 32 constraints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.logic.workloads import dracel
from reconciler.logic.workloads.manifests import Manifest
from reconciler.model import codes
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.printable import one_line

API_GROUP = "resource.k8s.io"
MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_SELECTORS = 32
MAX_CONSTRAINTS = 32
MAX_POD_CLAIMS = 128  # a pod's resourceClaims (core/v1 validation: names unique; migplan's bound)
CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


def diag_at(code: str, message: str, file: str, line: int | None, **extra: Any) -> Diagnostic:
    """A finding with the registry's severity; the message quotes manifests, so it is made one printable line."""
    return Diagnostic(
        code, one_line(message), file=file, line=line, severity=Severity(codes.severity(code).value), extra=extra
    )


def diag(code: str, message: str, m: Manifest, line: int | None, **extra: Any) -> Diagnostic:
    return diag_at(code, message, m.file, line, **extra)


@dataclass(frozen=True, slots=True)
class CelSelector:
    expression: str
    file: str
    line: int
    selector: dracel.Selector


@dataclass(frozen=True, slots=True)
class Alternative:
    """One way to satisfy a request: `exactly`, or one subrequest of `firstAvailable`."""

    name: str  # "gpu", or "gpu/big" for a subrequest
    device_class: str
    selectors: tuple[CelSelector, ...]
    all_devices: bool  # allocationMode: All
    count: int
    line: int


@dataclass(frozen=True, slots=True)
class Request:
    name: str
    alternatives: tuple[Alternative, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]  # empty: every request
    attribute: str  # fully qualified
    line: int

    def applies(self, request: str, alternative: str) -> bool:
        return not self.requests or request in self.requests or alternative in self.requests


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    kind: str  # ResourceClaim | ResourceClaimTemplate
    namespace: str
    name: str
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...]
    manifest: Manifest
    line: int

    @property
    def title(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DeviceClassSpec:
    name: str
    selectors: tuple[CelSelector, ...]
    origin: str  # "file:line", "migplan's rendered classes", "NVIDIA's DRA driver chart"


@dataclass(frozen=True, slots=True)
class PodClaim:
    name: str
    claim: str | None  # resourceClaimName: one claim shared by every pod that names it
    template: str | None  # resourceClaimTemplateName: one claim per pod
    line: int


class Compiled:
    """The selectors compiled in one run, by expression, within a budget: a stream of manifests can hold millions of
    distinct expressions, and compiling one costs up to a few milliseconds."""

    MAX_SELECTORS = 20_000
    MAX_CHARACTERS = 4 * 1024 * 1024

    def __init__(self) -> None:
        self.by_expression: dict[str, dracel.Selector | dracel.Problem] = {}
        self.characters = 0

    def get(self, expression: str) -> dracel.Selector | dracel.Problem | None:
        """The compiled selector (or why it is refused); None when the run's budget is spent."""
        hit = self.by_expression.get(expression)
        if hit is not None:
            return hit
        if len(self.by_expression) >= self.MAX_SELECTORS or self.characters + len(expression) > self.MAX_CHARACTERS:
            return None
        self.characters += len(expression)
        hit = self.by_expression[expression] = dracel.compile_selector(expression)
        return hit


def _get(doc: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(p)
    return doc


class _Reader:
    """Reads one manifest's selectors and requests, collecting what is refused."""

    def __init__(self, m: Manifest, compiled: Compiled) -> None:
        self.m = m
        self.compiled = compiled
        self.diags: list[Diagnostic] = []
        self.valid = True

    def bad(self, message: str, *path: str | int) -> None:
        self.diags.append(diag("MP626", f"{self.title}: {message}", self.m, self.m.line_of(*path)))
        self.valid = False

    @property
    def title(self) -> str:
        return f"{self.m.kind} {self.m.namespace}/{self.m.name}"

    def selectors(self, raw: Any, path: tuple[str | int, ...]) -> tuple[CelSelector, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.bad("selectors must be a list", *path)
            return ()
        if len(raw) > MAX_SELECTORS:
            self.bad(f"{len(raw)} selectors, more than the API server's {MAX_SELECTORS}", *path)
            return ()
        out = []
        for i, sel in enumerate(raw):
            expression = _get(sel, "cel", "expression")
            line = self.m.line_of(*path, i, "cel", "expression")
            if not isinstance(expression, str):
                self.bad("a selector without cel.expression (the only kind of selector)", *path, i)
                continue
            compiled = self.compiled.get(expression)
            if compiled is None:
                self.diags.append(
                    diag(
                        "MP635",
                        f"{self.title}: the manifests hold more than {Compiled.MAX_SELECTORS} distinct selectors or "
                        f"{Compiled.MAX_CHARACTERS} characters of them: not judged",
                        self.m,
                        line,
                    )
                )
                self.valid = False
                return ()
            if isinstance(compiled, dracel.Problem):
                self.diags.append(
                    diag(
                        "MP629",
                        f"{self.title}: {compiled.message}; the API server refuses it",
                        self.m,
                        line,
                        expression=expression[:200],
                    )
                )
                self.valid = False
                continue
            out.append(CelSelector(expression, self.m.file, line, compiled))
        return tuple(out)

    def alternative(self, raw: Any, name: str, path: tuple[str | int, ...]) -> Alternative | None:
        if not isinstance(raw, Mapping):
            self.bad(f"request {name} is not a mapping", *path)
            return None
        cls = raw.get("deviceClassName")
        if not isinstance(cls, str) or not cls:
            self.bad(f"request {name} names no deviceClassName", *path)
            return None
        mode = raw.get("allocationMode", "ExactCount")
        count = raw.get("count")
        if mode not in ("ExactCount", "All"):
            self.bad(f"request {name}: allocationMode {str(mode)[:40]!r} is neither ExactCount nor All", *path)
            return None
        if mode == "All" and count is not None:
            self.bad(f"request {name}: count is set with allocationMode All", *path, "count")
            return None
        if mode == "ExactCount":
            count = 1 if count is None else count
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                self.bad(f"request {name}: count must be a positive integer, not {str(count)[:40]!r}", *path, "count")
                return None
        selectors = self.selectors(raw.get("selectors"), (*path, "selectors"))
        return Alternative(
            name=name,
            device_class=cls,
            selectors=selectors,
            all_devices=mode == "All",
            count=int(count or 0),
            line=self.m.line_of(*path),
        )

    def request(self, raw: Any, path: tuple[str | int, ...]) -> Request | None:
        name = _get(raw, "name")
        if not isinstance(name, str) or not name:
            self.bad("a request without a name", *path)
            return None
        exactly, first = raw.get("exactly"), raw.get("firstAvailable")
        if (exactly is None) == (first is None):
            self.bad(f"request {name} must set exactly one of exactly and firstAvailable", *path)
            return None
        if exactly is not None:
            alt = self.alternative(exactly, name, (*path, "exactly"))
            return Request(name, (alt,), self.m.line_of(*path)) if alt is not None else None
        if not isinstance(first, list) or not 1 <= len(first) <= MAX_SUBREQUESTS:
            self.bad(f"request {name}: firstAvailable must list 1 to {MAX_SUBREQUESTS} subrequests", *path)
            return None
        alts = []
        for i, sub in enumerate(first):
            sub_name = _get(sub, "name")
            if not isinstance(sub_name, str) or not sub_name:
                self.bad(f"request {name}: a subrequest without a name", *path, "firstAvailable", i)
                return None
            alt = self.alternative(sub, f"{name}/{sub_name}", (*path, "firstAvailable", i))
            if alt is None:
                return None
            alts.append(alt)
        return Request(name, tuple(alts), self.m.line_of(*path))


def read_claim(m: Manifest, compiled: Compiled) -> tuple[ClaimSpec | None, list[Diagnostic]]:
    """A ResourceClaim or ResourceClaimTemplate, or None (with MP626/MP629) when the API server would refuse it."""
    r = _Reader(m, compiled)
    base: tuple[str, ...] = ("spec", "spec") if m.kind == "ResourceClaimTemplate" else ("spec",)
    devices = _get(m.body, *base, "devices")
    if devices is None:
        return ClaimSpec(m.kind, m.namespace, m.name, (), (), m, m.line), []
    if not isinstance(devices, Mapping):
        r.bad("spec.devices is not a mapping", *base, "devices")
        return None, r.diags
    raw_requests = devices.get("requests") or []
    if not isinstance(raw_requests, list) or len(raw_requests) > MAX_REQUESTS:
        r.bad(f"devices.requests must be a list of at most {MAX_REQUESTS} requests", *base, "devices", "requests")
        return None, r.diags
    requests: list[Request] = []
    for i, raw in enumerate(raw_requests):
        req = r.request(raw, (*base, "devices", "requests", i))
        if req is not None:
            requests.append(req)
    names = [q.name for q in requests]
    if len(set(names)) != len(names):
        r.bad("two requests share a name", *base, "devices", "requests")
    constraints: list[Constraint] = []
    raw_constraints = devices.get("constraints") or []
    if not isinstance(raw_constraints, list) or len(raw_constraints) > MAX_CONSTRAINTS:
        r.bad(f"devices.constraints must be a list of at most {MAX_CONSTRAINTS}", *base, "devices", "constraints")
        raw_constraints = []
    known = set(names) | {a.name for q in requests for a in q.alternatives}
    for i, raw in enumerate(raw_constraints):
        path: tuple[str | int, ...] = (*base, "devices", "constraints", i)
        attribute = _get(raw, "matchAttribute")
        listed = _get(raw, "requests") or []
        if _get(raw, "distinctAttribute") is not None and attribute is None:
            r.diags.append(
                diag(
                    "MP631",
                    f"{r.title}: distinctAttribute (alpha) is not judged: assumed to be met",
                    m,
                    m.line_of(*path),
                )
            )
            continue
        if not isinstance(attribute, str) or "/" not in attribute:
            r.bad("matchAttribute must be a fully qualified attribute name (domain/name)", *path)
            continue
        if not isinstance(listed, list) or any(not isinstance(x, str) or x not in known for x in listed):
            r.bad(f"constraint on {attribute[:80]} lists a request the claim does not have", *path, "requests")
            continue
        constraints.append(Constraint(tuple(listed), attribute, m.line_of(*path)))
    if not r.valid:
        return None, r.diags
    return ClaimSpec(m.kind, m.namespace, m.name, tuple(requests), tuple(constraints), m, m.line), r.diags


def read_device_class(m: Manifest, compiled: Compiled) -> tuple[DeviceClassSpec | None, list[Diagnostic]]:
    r = _Reader(m, compiled)
    selectors = r.selectors(_get(m.body, "spec", "selectors"), ("spec", "selectors"))
    if not r.valid:
        return None, r.diags
    return DeviceClassSpec(m.name, selectors, f"{m.file}:{m.line}"), r.diags


def device_class_of(body: Mapping[str, Any], origin: str, compiled: Compiled) -> DeviceClassSpec | None:
    """A DeviceClass given as an object (migplan's rendered classes, NVIDIA's chart's); None when it is unusable."""
    name = _get(body, "metadata", "name")
    raw = _get(body, "spec", "selectors") or []
    if not isinstance(name, str) or not isinstance(raw, list):
        return None
    out = []
    for sel in raw:
        expression = _get(sel, "cel", "expression")
        compiled_sel = compiled.get(expression) if isinstance(expression, str) else None
        if not isinstance(compiled_sel, dracel.Selector):
            return None
        out.append(CelSelector(str(expression), origin, 0, compiled_sel))
    return DeviceClassSpec(name, tuple(out), origin)


def pod_claims(m: Manifest, spec_path: tuple[str | int, ...]) -> tuple[tuple[PodClaim, ...], list[Diagnostic]]:
    """A pod template's `spec.resourceClaims`."""
    raw = _get(m.body, *(str(p) for p in spec_path), "resourceClaims")
    if raw is None:
        return (), []
    title = f"{m.kind} {m.namespace}/{m.name}"
    where = (*spec_path, "resourceClaims")
    if not isinstance(raw, list) or len(raw) > MAX_POD_CLAIMS:
        return (), [
            diag("MP626", f"{title}: resourceClaims must be a list of at most {MAX_POD_CLAIMS}", m, m.line_of(*where))
        ]
    out: list[PodClaim] = []
    diags: list[Diagnostic] = []
    for i, c in enumerate(raw):
        line = m.line_of(*where, i)
        name = _get(c, "name")
        claim, template = _get(c, "resourceClaimName"), _get(c, "resourceClaimTemplateName")
        if not isinstance(name, str) or not name:
            diags.append(diag("MP626", f"{title}: a resourceClaims entry without a name", m, line))
            continue
        if _get(c, "source") is not None and claim is None and template is None:
            diags.append(
                diag(
                    "MP626",
                    f"{title}: resourceClaims[{name}] uses the pre-1.31 `source:` shape; resource.k8s.io/v1 takes "
                    "resourceClaimName or resourceClaimTemplateName directly",
                    m,
                    line,
                )
            )
            continue
        if (claim is None) == (template is None) or not isinstance(claim or template, str):
            diags.append(
                diag(
                    "MP626",
                    f"{title}: resourceClaims[{name}] must set exactly one of resourceClaimName and "
                    "resourceClaimTemplateName",
                    m,
                    line,
                )
            )
            continue
        out.append(
            PodClaim(
                name, claim if isinstance(claim, str) else None, template if isinstance(template, str) else None, line
            )
        )
    if len({c.name for c in out}) != len(out):
        diags.append(diag("MP626", f"{title}: two resourceClaims entries share a name", m, m.line_of(*where)))
        return (), diags
    return tuple(out), diags


def is_dra(m: Manifest, kind: str) -> bool:
    return m.kind == kind and str(m.body.get("apiVersion", "")).split("/")[0] == API_GROUP
