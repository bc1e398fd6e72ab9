"""The DeviceClasses an inventory asks for on DRA nodes, and validate's rules about them (MP415-MP419). Pure.

Pods and quotas written for NVIDIA's device plugin ask for `nvidia.com/mig-<profile>`. On a node where NVIDIA's DRA
driver (`gpu.nvidia.com`) allocates the MIG devices, the device plugin advertises nothing; a DeviceClass whose
`spec.extendedResourceName` names that resource lets the scheduler serve the same request from DRA (KEP-5004,
`DRAExtendedResource`, beta and on in Kubernetes v1.36: kubernetes pkg/scheduler/framework/plugins/dynamicresources
`extendeddynamicresources.go`). So, for every MIG profile the plan offers on DRA nodes, migplan renders one class:

- name `migplan-mig-<profile>` (the profile made a DNS subdomain), extendedResourceName `nvidia.com/mig-<profile>`
  with `+` turned into `.` exactly as the device plugin names the resource (so the pod specs are unchanged);
- one CEL selector on the driver's attributes, the way the driver's own `mig.nvidia.com` class selects MIG devices
  (`device.driver == 'gpu.nvidia.com'` and attribute `type == 'mig'`), narrowed to the profile by the `profile`
  attribute the driver publishes for each MIG device (cmd/gpu-kubelet-plugin `mig.go` `CommonAttributesMig`).

Per-owner classes (`spec.deviceClasses.owners`) select exactly the owner's planned partitions: the driver publishes
no node, GPU index or placement attribute a selector could use (a CEL selector sees `device.driver`, `attributes`
and `capacity` only), so the class lists the `uuid` attribute of the device the driver publishes for each of the
owner's partitions, and migplan rewrites it when a re-cut gives new uuids. Hand-written classes
(`spec.deviceClasses.declared`) are kept as written.

validate refuses (file:line):
- MP415 two classes for one extended resource name (a rendered, owner or declared class; the scheduler would serve
  the name from only one of them: the newer, per resource/v1 `DeviceClassSpec.ExtendedResourceName`);
- MP416 a class that would map `nvidia.com/gpu` (whole GPUs for every pod spec written for the device plugin) to
  MIG devices: an owner class with that name, or a declared one whose selectors do not provably pin `type == 'gpu'`;
- MP417 an extended resource name Kubernetes would refuse (`IsExtendedResourceName`), a declared selector that
  does not parse as CEL, or an owner class whose uuid list would exceed the API's 10 KiB selector limit (the API
  server would refuse the class, and its dry run would stop every write of the cycle);
- MP418 an owner class for an owner no partition has (warning: the class selects nothing);
- MP419 two classes with one name.
At validate time the regime of a node is unknown, so the rules take every profile planned on a node migplan writes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.logic.inventory.rules import diag
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.dra import DEVICE_CLASS_PURPOSE_ANNOTATION
from reconciler.model.inventory import DesiredState, SourceRef

DRIVER = "gpu.nvidia.com"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PROFILE_PREFIX = "migplan-mig-"
OWNER_PREFIX = "migplan-owner-"
PURPOSE_ANNOTATION = DEVICE_CLASS_PURPOSE_ANNOTATION

_MAX_NAME = 253
# resource/v1 types.go CELSelectorExpressionMaxLength: the API server refuses a longer selector.
CEL_MAX_LENGTH = 10 * 1024
_MIG_UUID_LENGTH = 40  # NVML's MIG device uuid: "MIG-" and a 36-character uuid
_NOT_DNS = re.compile(r"[^a-z0-9.-]+")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
# A uuid the driver publishes (NVML's `MIG-<uuid>`, lower-cased by newer drivers); anything else is never put
# in a CEL string literal.
_UUID = re.compile(r"[A-Za-z0-9-]{1,64}")
_MIG_TYPE = f"device.attributes['{DRIVER}'].type == 'mig'"
_GPU_PINS = frozenset({f"device.attributes['{DRIVER}'].type=='gpu'", f'device.attributes["{DRIVER}"].type=="gpu"'})


@dataclass(frozen=True, slots=True)
class WantedClass:
    """A DeviceClass migplan wants in the cluster, as it will write it."""

    name: str
    extended_resource_name: str | None
    selectors: tuple[str, ...]
    purpose: str  # PURPOSE_ANNOTATION's value: "profile 1g.18gb", "owner embeddings", "declared"
    source: SourceRef | None = None


def _dns(text: str) -> str:
    """A DNS subdomain made of `text`; a short digest of the original is added when anything had to change, so
    two owners that differ only in characters a name cannot hold still get two names."""
    made = _NOT_DNS.sub("-", text.lower())
    made = re.sub(r"\.{2,}", ".", made)
    made = re.sub(r"-*\.-*", ".", made).strip(".-")
    if made == text and made:
        return made
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{made[:40]}-{digest}".strip(".-") if made else digest


def profile_class_name(profile: str) -> str:
    """The class rendered for a profile: `migplan-mig-1g.18gb`, `migplan-mig-1g.18gb-me` for `1g.18gb+me`."""
    return PROFILE_PREFIX + _dns(profile.replace("+", "-"))[: _MAX_NAME - len(PROFILE_PREFIX)]


def owner_class_name(owner: str) -> str:
    """The default name of an owner's class (spec.deviceClasses.owners[].name overrides it)."""
    return OWNER_PREFIX + _dns(owner)[: _MAX_NAME - len(OWNER_PREFIX)]


def extended_resource(profile: str) -> str:
    """The device plugin's resource for a profile (`1g.18gb+me` -> `nvidia.com/mig-1g.18gb.me`)."""
    return MIG_RESOURCE_PREFIX + profile.replace("+", ".")


def profile_selector(profile: str) -> str:
    """The CEL selector of a profile's class (the profile comes from the catalog: [0-9a-z.+] only)."""
    return f"device.driver == '{DRIVER}' && {_MIG_TYPE} && device.attributes['{DRIVER}'].profile == '{profile}'"


def uuid_selector(uuids: Iterable[str]) -> str:
    """The CEL selector of an owner's class: MIG devices with one of these uuids (none: selects nothing)."""
    safe = sorted({u for u in uuids if _UUID.fullmatch(u)})
    listed = ", ".join(f"'{u}'" for u in safe)
    return f"device.driver == '{DRIVER}' && {_MIG_TYPE} && device.attributes['{DRIVER}'].uuid in [{listed}]"


def max_owner_partitions() -> int:
    """How many MIG uuids an owner class's selector can list within CEL_MAX_LENGTH."""
    base = len(uuid_selector(()))
    return (CEL_MAX_LENGTH - base + 2) // (_MIG_UUID_LENGTH + 4)  # each: quotes and ", " (but the last)


def is_extended_resource_name(name: str) -> bool:
    """Kubernetes' helper.IsExtendedResourceName: not a native resource (it has a `/`, not in a kubernetes.io
    domain), not `requests.*`, and `requests.<name>` is a qualified name (a DNS-subdomain prefix of at most 253,
    a name of at most 63)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, rest = f"requests.{name}".partition("/")
    return (
        0 < len(prefix) <= _MAX_NAME
        and _DNS_SUBDOMAIN.fullmatch(prefix) is not None
        and 0 < len(rest) <= 63
        and _QUALIFIED_NAME.fullmatch(rest) is not None
    )


def planned_profiles(desired: DesiredState, nodes: Iterable[str]) -> tuple[str, ...]:
    """The MIG profiles the plan places on `nodes` (those migplan writes the layout of), sorted."""
    out: set[str] = set()
    seen: set[int] = set()  # partition tuples already counted (a layout's is shared by every GPU that uses it)
    for name in nodes:
        node = desired.nodes.get(name)
        if node is None or desired.layout_writer(name) != "migplan":
            continue
        for g in node.gpus:
            if g.mig_enabled and id(g.partitions) not in seen:
                seen.add(id(g.partitions))
                out.update({p.profile for p in g.partitions})
    return tuple(sorted(out))


def wanted(
    desired: DesiredState, *, dra_nodes: Collection[str], owner_uuids: Mapping[str, Sequence[str]]
) -> tuple[WantedClass, ...]:
    """The classes migplan keeps: one per profile planned on `dra_nodes` (when enabled), the owners' classes
    (`owner_uuids`: owner -> the published uuids of its planned partitions), the declared ones; sorted by name."""
    settings = desired.cluster.device_classes
    out: list[WantedClass] = []
    if settings.enabled:
        for p in planned_profiles(desired, sorted(dra_nodes)):
            out.append(WantedClass(profile_class_name(p), extended_resource(p), (profile_selector(p),), f"profile {p}"))
    for o in settings.owners:
        selector = uuid_selector(owner_uuids.get(o.owner, ()))
        out.append(WantedClass(o.name, o.extended_resource_name, (selector,), f"owner {o.owner}", o.source))
    for d in settings.declared:
        out.append(WantedClass(d.name, d.extended_resource_name, d.selectors, "declared", d.source))
    return tuple(sorted(out, key=lambda c: c.name))


def offline_objects(desired: DesiredState) -> tuple[dict[str, Any], ...]:
    """The DeviceClass objects a claim in application CI may name without a cluster (`migplan check-workloads`):
    the profile classes of every node migplan lays out (which nodes are DRA only the cluster says, so all of them)
    and the declared ones. Owner classes are left out: their selectors list device uuids only the cluster knows."""
    rendered = wanted(desired, dra_nodes=tuple(desired.nodes), owner_uuids={})
    return tuple(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": c.name},
            "spec": {
                "selectors": [{"cel": {"expression": e}} for e in c.selectors],
                **({"extendedResourceName": c.extended_resource_name} if c.extended_resource_name else {}),
            },
        }
        for c in rendered
        if not c.purpose.startswith("owner ")
    )


def pins_whole_gpus(selectors: Sequence[str]) -> bool:
    """True when one selector is a plain conjunction with `type == 'gpu'` as a term: every selector of a class must
    hold, so no MIG device (type `mig`) can match. Anything else (no selector, `||`, negation, a conditional) is
    not proven and counts as possibly matching MIG devices."""
    for s in selectors:
        compact = re.sub(r"\s+", "", s)
        if any(op in compact for op in ("||", "!", "?")):
            continue
        if any(term.strip("()") in _GPU_PINS for term in compact.split("&&")):
            return True
    return False


def check(desired: DesiredState) -> list[Diagnostic]:
    """MP415-MP419 over every class the inventory may render (profiles of every node migplan writes)."""
    settings = desired.cluster.device_classes
    if not settings.owners and not settings.declared:
        return []  # the per-profile classes alone cannot collide (one per profile): no pass over the nodes
    cluster_src = desired.cluster.source
    classes: list[WantedClass] = []
    if settings.enabled:
        src = settings.source or cluster_src
        for p in planned_profiles(desired, desired.nodes):
            classes.append(
                WantedClass(profile_class_name(p), extended_resource(p), (profile_selector(p),), f"profile {p}", src)
            )
    owned: dict[str, int] = {}
    for name, n in desired.nodes.items():
        if desired.layout_writer(name) == "migplan":
            for g in n.gpus:
                for part in g.partitions if g.mig_enabled else ():
                    if part.owner:
                        owned[part.owner] = owned.get(part.owner, 0) + 1
    out: list[Diagnostic] = []
    most = max_owner_partitions()
    for o in settings.owners:
        classes.append(WantedClass(o.name, o.extended_resource_name, (), f"owner {o.owner}", o.source))
        if o.owner not in owned:
            out.append(
                diag("MP418", f"device class {o.name}: no partition of the plan is owned by {o.owner!r}", o.source)
            )
        elif owned[o.owner] > most:
            out.append(
                diag(
                    "MP417",
                    f"device class {o.name} would list the uuids of {owned[o.owner]} partitions of {o.owner!r}: a "
                    f"selector longer than the API server's {CEL_MAX_LENGTH} characters (at most {most} partitions "
                    "per owner class); split the owner, or let its pods use the per-profile classes",
                    o.source,
                )
            )
        if o.extended_resource_name == GPU_RESOURCE:
            out.append(
                diag(
                    "MP416",
                    f"device class {o.name} would serve {GPU_RESOURCE} (whole GPUs for every pod written for the "
                    f"device plugin) with {o.owner}'s MIG partitions; give it another extendedResourceName",
                    o.source,
                )
            )
    for d in settings.declared:
        classes.append(WantedClass(d.name, d.extended_resource_name, d.selectors, "declared", d.source))
        out.extend(
            diag("MP417", f"device class {d.name}: selector {i + 1} is not CEL: {why}", d.source)
            for i, why in _unparsable(d.selectors)
        )
        if d.extended_resource_name == GPU_RESOURCE and not pins_whole_gpus(d.selectors):
            out.append(
                diag(
                    "MP416",
                    f"device class {d.name} maps {GPU_RESOURCE} but its selectors do not limit it to whole GPUs: add "
                    f"a selector such as \"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == "
                    "'gpu'\" (without ||, ! or ?: migplan must be able to prove it)",
                    d.source,
                )
            )
    out.extend(_names(classes))
    out.extend(_extended_names(classes))
    return out


def _unparsable(selectors: Sequence[str]) -> list[tuple[int, str]]:
    """(index, why) of each selector that does not parse as CEL. cel-python (the CEL library the twin's allocator and
    check-workloads use) is imported only when a class is declared by hand: validate of a plain inventory stays
    light. Parsing is what is checked; the API server also type-checks against the device's fields."""
    if not selectors:
        return []
    import celpy

    env = celpy.Environment()
    out: list[tuple[int, str]] = []
    for i, s in enumerate(selectors):
        try:
            env.compile(s)
        except Exception as exc:  # celpy's parse errors share no base class beyond Exception
            out.append((i, str(exc).splitlines()[0][:200] or type(exc).__name__))
    return out


def _names(classes: Sequence[WantedClass]) -> Iterable[Diagnostic]:
    seen: dict[str, WantedClass] = {}
    for c in classes:
        first = seen.setdefault(c.name, c)
        if first is not c:
            yield diag("MP419", f"two device classes named {c.name}: {_what(first)} and {_what(c)}", c.source)


def _extended_names(classes: Sequence[WantedClass]) -> Iterable[Diagnostic]:
    seen: dict[str, WantedClass] = {}
    for c in classes:
        ext = c.extended_resource_name
        if ext is None:
            continue
        if not is_extended_resource_name(ext):
            yield diag(
                "MP417",
                f"device class {c.name}: {ext!r} is not an extended resource name Kubernetes accepts "
                "(<domain>/<name>, no kubernetes.io domain, a name of at most 63 letters, digits, '-', '_', '.')",
                c.source,
            )
            continue
        first = seen.setdefault(ext, c)
        if first is not c and first.name != c.name:
            yield diag(
                "MP415",
                f"two device classes for {ext}: {_what(first)} and {_what(c)}; the scheduler would serve it from "
                "one only (the newer): keep one",
                c.source,
            )


def _what(c: WantedClass) -> str:
    where = f" ({c.source.file}:{c.source.line})" if c.source is not None and c.source.line else ""
    return f"{c.name} [{c.purpose}]{where}"
