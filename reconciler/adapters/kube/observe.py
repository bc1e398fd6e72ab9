"""Turn Kubernetes API objects (plain JSON dicts) into migplan's observed values.

Pure functions, no client import: the kube adapter lists with the official client, asks for the raw
JSON (`_preload_content=False`, parsed with orjson) and hands each item here. Skipping the client's
model deserialisation is what keeps a 5,000-node observation within a small factor of the raw
list floor. Only GPU-relevant fields are kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from reconciler.adapters.kube.rebootpods import RebootTally, tally_entry
from reconciler.logic.codecs import featuregates
from reconciler.logic.observe.observation import read_observation
from reconciler.model.dra import (
    ClaimedDevice,
    DraDevice,
    DraDriverConfig,
    DraPluginPod,
    GpuClusterState,
    NodeDra,
    ObservedClaim,
)
from reconciler.model.inventory import GpuOperatorSettings
from reconciler.model.observed import (
    CLIENT_WAIT_FAILED,
    CLUSTER_POLICY_FIELDS,
    CORDONED_ANNOTATION,
    FIELD_MANAGER,
    GPU_COUNT_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_APP_LABEL,
    MIRROR_POD_ANNOTATION,
    REQUESTED_AT_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
    ClusterPolicyState,
    ConfigMapState,
    ContainerResources,
    DevicePluginPod,
    DevicePluginState,
    Malformed,
    MigConfigState,
    ObservedNode,
    ObservedPdb,
    ObservedPod,
    ObservedState,
    OwnerRef,
    SelectorRequirement,
    is_gpu_resource,
)
from reconciler.model.quantities import QuantityError, parse_count
from reconciler.model.strict import StrictValueError, parse_timestamp, short

RUN_STARTED = "Updating to MIG config: "  # mig-parted cmd/nvidia-mig-manager/main.go start, once per run
DEVICE_PLUGIN_CONTAINER = "nvidia-device-plugin"  # gpu-operator assets/state-device-plugin/0500_daemonset.yaml

_MIG_STATES = frozenset(s.value for s in MigConfigState)


def _gpu_counts(
    raw: Mapping[str, Any] | None, where: str, bad: list[Malformed], *, unreadable_as: int | None = None
) -> dict[str, int]:
    """GPU resources of a capacity/allocatable/requests/limits map, parsed as apimachinery does.

    A value that is not a whole, non-negative quantity is recorded in `bad` and left out (or, with
    `unreadable_as`, counted as that: a pod asking for an unreadable number of GPUs still holds some)."""
    if not raw:
        return {}
    out: dict[str, int] = {}
    for k, v in raw.items():
        if not is_gpu_resource(k):
            continue
        try:
            out[k] = parse_count(v)
        except QuantityError as exc:
            bad.append(Malformed(f"{where}[{k}]", short(v), str(exc)))
            if unreadable_as is not None:
                out[k] = unreadable_as
    return out


def _check_marks(labels: Mapping[str, Any], annotations: Mapping[str, Any], bad: list[Malformed]) -> None:
    """The labels and annotations migplan acts on must hold one of the values it knows."""
    state = labels.get(MIG_CONFIG_STATE_LABEL)
    if state is not None and state not in _MIG_STATES:
        bad.append(
            Malformed(
                f"label {MIG_CONFIG_STATE_LABEL}",
                short(state),
                f"not a state mig-manager writes ({', '.join(sorted(_MIG_STATES))})",
            )
        )
    count = labels.get(GPU_COUNT_LABEL)
    if count is not None and not (isinstance(count, str) and count.isascii() and count.isdigit() and len(count) < 6):
        bad.append(
            Malformed(f"label {GPU_COUNT_LABEL}", short(count), "not a GPU count (GFD writes a decimal integer)")
        )
    requested = annotations.get(REQUESTED_AT_ANNOTATION)
    if requested is not None:
        try:
            parse_timestamp(requested)
        except StrictValueError as exc:
            bad.append(Malformed(f"annotation {REQUESTED_AT_ANNOTATION}", short(requested), str(exc)))
    cordoned = annotations.get(CORDONED_ANNOTATION)
    if cordoned is not None and cordoned != "true":
        bad.append(Malformed(f"annotation {CORDONED_ANNOTATION}", short(cordoned), "migplan only writes 'true'"))


def unschedulable_owned_by_migplan(meta: Mapping[str, Any]) -> bool | None:
    """Whether spec.unschedulable is migplan's alone: an entry of migplan's field manager (main resource, any
    operation) holds `f:spec.f:unschedulable` in metadata.managedFields and no other manager's entry does
    (FieldsV1, the structured-merge-diff encoding the apiserver writes).

    A cordon someone else also claims (a server-side apply of the same value shares the field) is not migplan's
    to lift. None when the server sent no managedFields (an old server, or the feature off): migplan then cannot
    tell who cordoned last. Entries that are not what a server writes are skipped, never trusted for True."""
    entries = meta.get("managedFields")
    if not isinstance(entries, list) or not entries:
        return None
    mine = others = False
    for entry in entries:
        if not isinstance(entry, Mapping) or entry.get("subresource"):
            continue
        fields = entry.get("fieldsV1")
        spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
        if isinstance(spec, Mapping) and isinstance(spec.get("f:unschedulable"), Mapping):
            if entry.get("manager") == FIELD_MANAGER:
                mine = True
            else:
                others = True
    return mine and not others


def node_from_json(obj: Mapping[str, Any]) -> ObservedNode:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    bad: list[Malformed] = []
    capacity = _gpu_counts(status.get("capacity"), "status.capacity", bad)
    allocatable = _gpu_counts(status.get("allocatable"), "status.allocatable", bad)
    _check_marks(labels, annotations, bad)
    # The node observer's report: decoded once here (strict, bounded); unreadable is MP547, not MP530.
    observation, observation_error = read_observation(annotations)
    return ObservedNode(
        name=meta["name"],
        labels=labels,
        annotations=annotations,
        capacity=capacity,
        allocatable=allocatable,
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable", False)),
        unschedulable_owned_by_migplan=unschedulable_owned_by_migplan(meta),
        resource_version=meta.get("resourceVersion", ""),
        taints=_taints((obj.get("spec") or {}).get("taints")),
        malformed=tuple(bad),
        observation=observation,
        observation_error=observation_error,
    )


def _taints(raw: Any) -> tuple[tuple[str, str, str], ...]:
    """spec.taints as (key, value, effect); entries that are not taints are skipped (the API refuses them)."""
    out = []
    for t in raw if isinstance(raw, list) else []:
        if isinstance(t, Mapping) and isinstance(t.get("key"), str) and isinstance(t.get("effect"), str):
            value = t.get("value")
            out.append((t["key"][:316], value[:63] if isinstance(value, str) else "", t["effect"][:32]))
    return tuple(out)


def _containers(spec: Mapping[str, Any], bad: list[Malformed]) -> tuple[ContainerResources, ...]:
    out = []
    for c in spec.get("containers") or ():
        res = c.get("resources") or {}
        where = f"container {c.get('name', '')} resources"
        req = _gpu_counts(res.get("requests"), f"{where}.requests", bad, unreadable_as=1)
        lim = _gpu_counts(res.get("limits"), f"{where}.limits", bad, unreadable_as=1)
        if req or lim:
            out.append(ContainerResources(name=c.get("name", ""), requests=req, limits=lim))
    return tuple(out)


def _resource_items(raw: Any) -> tuple[tuple[str, str], ...] | None:
    """A requests or limits map as a key: its (name, quantity) pairs in order, or None unless every one is a pair
    of plain strings (what a server sends). Only strings: 1, 1.0 and True are equal keys but not equal quantities."""
    if not raw:
        return ()  # read as {} by _gpu_counts, whatever the falsy value
    if not isinstance(raw, dict):
        return None
    items = tuple(raw.items())
    for k, v in items:
        if type(k) is not str or type(v) is not str:
            return None
    return items


def _containers_key(spec: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """Everything `_containers` reads of spec.containers, as a key (None when something is not of the plain types a
    server sends: such a pod is parsed on its own). Pods of one Deployment share their containers, so a fleet's
    100,000 pods have a handful of keys, each parsed once (Shared.containers_of)."""
    raw = spec.get("containers")
    if not raw:
        return ()
    if not isinstance(raw, list):
        return None
    key: list[Any] = []
    for c in raw:
        if not isinstance(c, dict):
            return None
        name = c.get("name", "")
        res = c.get("resources") or {}
        if type(name) is not str or not isinstance(res, dict):
            return None
        requests, limits = _resource_items(res.get("requests")), _resource_items(res.get("limits"))
        if requests is None or limits is None:
            return None
        key.append((name, requests, limits))
    return tuple(key)


def controller_of(meta: Mapping[str, Any]) -> OwnerRef | None:
    refs = [r for r in meta.get("ownerReferences") or () if isinstance(r, Mapping)]
    for r in refs:
        if r.get("controller") is True:
            return OwnerRef(kind=str(r.get("kind", "")), name=str(r.get("name", "")))
    if not refs:
        return None
    return OwnerRef(kind=str(refs[0].get("kind", "")), name=str(refs[0].get("name", "")), controller=False)


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 253 else None


def pod_claims(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The ResourceClaims a pod uses, "<namespace>/<name>": `spec.resourceClaims[].resourceClaimName`, or for
    a template the claim the controller generated, from `status.resourceClaimStatuses` (core/v1 types.go
    `PodResourceClaimStatus`; until it is written the claim is unknown and left out). Entries of the wrong
    type are skipped: this reads what the API server already validated, and a hostile value names nothing."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    namespace = _name((obj.get("metadata") or {}).get("namespace")) or ""
    raw_claims, raw_statuses = spec.get("resourceClaims"), status.get("resourceClaimStatuses")
    generated = {
        s.get("name"): _name(s.get("resourceClaimName"))
        for s in (raw_statuses if isinstance(raw_statuses, list) else ())
        if isinstance(s, Mapping)
    }
    out: set[str] = set()
    for rc in raw_claims if isinstance(raw_claims, list) else ():
        if not isinstance(rc, Mapping):
            continue
        name = _name(rc.get("resourceClaimName")) or generated.get(rc.get("name"))
        if name is not None:
            out.add(f"{namespace}/{name}")
    return tuple(sorted(out))


# How many entries each table of Shared keeps before it starts again (cleared, then filled by the pods that follow).
# `migplan run`'s pod cache keeps one Shared between full lists, and a churning cluster brings values that never come
# back (each Job's labels, owner and container names; short-lived namespaces and nodes): without a bound these stay
# forever. Clearing only loses sharing, never a value: every entry is an equal of what the caller passed. The text
# table holds every node name and namespace of a fleet at once (Kubernetes' tested limits: 5,000 nodes, 10,000
# namespaces), so it must hold more than those or a single list would restart it again and again.
SHARED_TEXTS_LIMIT = 32_768
SHARED_TABLE_LIMIT = 4_096


class Shared:
    """Equal parts of one observation's pods kept once: a fleet's pods repeat the same few namespaces, phases,
    node names, label sets (one per ReplicaSet), GPU requests and owners, and each parsed pod otherwise holds its
    own copy of every one of them (at 5,000 nodes, some 130,000 pods: most of an observation's memory).

    Values are only ever read (frozen dataclasses of read-only mappings), so one object can stand for all its
    equals. A value that cannot be a key (a hostile label value that is a list) is kept as it is, unshared.
    The kube adapter begins a fresh table every observation (`begin`); the watch-fed pod cache keeps one until its
    next full list, so each table is also cleared when full (SHARED_TEXTS_LIMIT, SHARED_TABLE_LIMIT)."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._maps: dict[tuple[tuple[Any, Any], ...], Mapping[str, Any]] = {}
        self._containers: dict[tuple[Any, ...], tuple[ContainerResources, ...]] = {}
        self._owners: dict[tuple[str, str, bool], OwnerRef] = {}
        # spec.containers as read (_containers_key) -> what _containers made of it: the same raw shape is parsed once
        self._parsed: dict[tuple[Any, ...], tuple[tuple[ContainerResources, ...], tuple[Malformed, ...]]] = {}

    def begin(self) -> None:
        self._texts.clear()
        self._maps.clear()
        self._containers.clear()
        self._owners.clear()
        self._parsed.clear()

    # Each table is checked for room before a new key goes in (the `in` test only once it is full: the common
    # case stays one setdefault).

    def text(self, value: T) -> T:
        if not isinstance(value, str):
            return value
        texts = self._texts
        if len(texts) >= SHARED_TEXTS_LIMIT and value not in texts:
            texts.clear()
        return texts.setdefault(value, value)  # type: ignore[return-value]

    def mapping(self, value: Mapping[str, Any]) -> Mapping[str, Any]:
        maps = self._maps
        try:
            key = tuple(value.items())
            if len(maps) >= SHARED_TABLE_LIMIT and key not in maps:
                maps.clear()
            return maps.setdefault(key, value)
        except TypeError:  # an unhashable value: kept as it is
            return value

    def containers(self, value: tuple[ContainerResources, ...]) -> tuple[ContainerResources, ...]:
        key = tuple((c.name, tuple(c.requests.items()), tuple(c.limits.items())) for c in value)
        table = self._containers
        if len(table) >= SHARED_TABLE_LIMIT and key not in table:
            table.clear()
        return table.setdefault(key, value)

    def containers_of(self, spec: Mapping[str, Any]) -> tuple[tuple[ContainerResources, ...], tuple[Malformed, ...]]:
        """`_containers(spec)` and what it found unreadable, the containers kept once (`containers`); parsed once per
        distinct raw shape (_containers_key: only plain strings, so equal keys are equal inputs)."""
        key = _containers_key(spec)
        known = self._parsed.get(key) if key is not None else None
        if known is None:
            bad: list[Malformed] = []
            known = (self.containers(_containers(spec, bad)), tuple(bad))
            if key is not None:
                if len(self._parsed) >= SHARED_TABLE_LIMIT:
                    self._parsed.clear()
                self._parsed[key] = known
        return known

    def owner(self, value: OwnerRef | None) -> OwnerRef | None:
        if value is None:
            return None
        key = (value.kind, value.name, value.controller)
        owners = self._owners
        if len(owners) >= SHARED_TABLE_LIMIT and key not in owners:
            owners.clear()
        return owners.setdefault(key, value)


def gpu_pod_from_json(obj: Mapping[str, Any], shared: Shared | None = None) -> ObservedPod | None:
    """The pod if any container asks for a GPU or MIG resource or it uses ResourceClaims, else None (not kept).

    Pods with claims are kept whatever the driver: which claim holds a GPU is known from the node observer (and
    the claims' allocations), and drain must be able to evict a DRA holder the guard names. With `shared`, the
    parts it has seen equal in this observation's other pods are taken from it (the same values, kept once)."""
    spec = obj.get("spec") or {}
    if shared is not None:
        containers, malformed = shared.containers_of(spec)
    else:
        bad: list[Malformed] = []
        containers = _containers(spec, bad)
        malformed = tuple(bad)
    claims = pod_claims(obj) if spec.get("resourceClaims") else ()
    if not containers and not claims:
        return None
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace", "")
    node = spec.get("nodeName") or None
    status = obj.get("status")
    # type() first: a decoded pod's status is a dict, and the ABC check alone costs ~0.1 us a pod
    phase = status.get("phase") if type(status) is dict or isinstance(status, Mapping) else None
    if type(phase) is not str or not phase:
        # Missing, or what no API server sends (a list, a map, a number; a status that is not an object): read as a
        # missing phase is. Never kept as it came: the phase is compared with strings and looked up in sets.
        phase = "Pending"
    labels = meta.get("labels") or {}
    node_selector = spec.get("nodeSelector") or {}
    owner = controller_of(meta)
    if shared is not None:
        namespace, node, phase = shared.text(namespace), shared.text(node), shared.text(phase)
        labels, node_selector = shared.mapping(labels), shared.mapping(node_selector)
        owner = shared.owner(owner)
    return ObservedPod(
        namespace=namespace,
        name=meta.get("name", ""),
        node=node,
        phase=phase,
        containers=containers,
        labels=labels,
        owner=owner,
        node_selector=node_selector,
        malformed=malformed,
        terminating=bool(meta.get("deletionTimestamp")),
        mirror=MIRROR_POD_ANNOTATION in (meta.get("annotations") or {}),
        claims=claims,
    )


_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def _count(value: Any) -> int:
    """A PDB status count: an int32 the controller wrote; anything else reads as 0 (allows nothing)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31 else 0


def pdb_from_json(obj: Mapping[str, Any]) -> ObservedPdb:
    """A policy/v1 PodDisruptionBudget. A selector that cannot be read (not a mapping, an unknown operator,
    non-string values) is kept as invalid: the eviction subresource skips such a PDB (eviction.go
    getPodDisruptionBudgets), and so does migplan when it names the PDBs blocking a drain."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    selector = (obj.get("spec") or {}).get("selector")
    valid = True
    labels: dict[str, str] | None = None
    exprs: list[SelectorRequirement] = []
    if isinstance(selector, Mapping):
        raw_labels = selector.get("matchLabels") or {}
        if isinstance(raw_labels, Mapping) and all(isinstance(v, str) for v in raw_labels.values()):
            labels = {str(k): v for k, v in raw_labels.items()}
        else:
            valid, labels = False, {}
        for e in selector.get("matchExpressions") or ():
            values = e.get("values") or () if isinstance(e, Mapping) else ()
            if (
                not isinstance(e, Mapping)
                or e.get("operator") not in _SELECTOR_OPERATORS
                or not isinstance(values, list | tuple)
                or not all(isinstance(v, str) for v in values)
            ):
                valid = False
                continue
            exprs.append(SelectorRequirement(str(e.get("key", "")), str(e["operator"]), tuple(values)))
    elif selector is not None:
        valid = False
    return ObservedPdb(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        match_labels=labels,
        match_expressions=tuple(exprs),
        selector_valid=valid,
        disruptions_allowed=_count(status.get("disruptionsAllowed")),
        current_healthy=_count(status.get("currentHealthy")),
        desired_healthy=_count(status.get("desiredHealthy")),
        expected_pods=_count(status.get("expectedPods")),
    )


def pod_ready(obj: Mapping[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def owned_by_daemonset(obj: Mapping[str, Any], *, namespace: str, name: str) -> bool:
    meta = obj.get("metadata") or {}
    if meta.get("namespace") != namespace:
        return False
    return any(r.get("kind") == "DaemonSet" and r.get("name") == name for r in meta.get("ownerReferences") or ())


def pod_ready_since(obj: Mapping[str, Any]) -> datetime | None:
    """When the pod's Ready condition last turned True; None when it is not Ready or the time is unreadable."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready" and cond.get("status") == "True":
            text = cond.get("lastTransitionTime")
            if not isinstance(text, str):
                return None
            try:
                return parse_timestamp(text)
            except StrictValueError:
                return None
    return None


def device_plugin_pod_from_json(
    obj: Mapping[str, Any], log_line: str | None = None, *, log_read: bool = True
) -> DevicePluginPod:
    return DevicePluginPod(
        name=(obj.get("metadata") or {}).get("name", ""),
        node=(obj.get("spec") or {}).get("nodeName") or None,
        ready=pod_ready(obj),
        log_line=log_line,
        log_read=log_read,
        ready_since=pod_ready_since(obj),
    )


def device_plugin_from_json(obj: Mapping[str, Any], pods: tuple[DevicePluginPod, ...]) -> DevicePluginState:
    meta = obj.get("metadata") or {}
    template = (obj.get("spec") or {}).get("template") or {}
    template_meta = template.get("metadata") or {}
    return DevicePluginState(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        restarted_at=(template_meta.get("annotations") or {}).get(RESTARTED_AT_ANNOTATION),
        generation=int(meta.get("generation", 0) or 0),
        pods=pods,
        annotations=meta.get("annotations") or {},
        controller_kind=_controller_kind(meta),
        template_mig_strategy=_template_env(template, DEVICE_PLUGIN_CONTAINER, "MIG_STRATEGY"),
    )


def _controller_kind(meta: Mapping[str, Any]) -> str | None:
    """The kind of the controlling ownerReference (controller: true), if one is well formed."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True and isinstance(ref.get("kind"), str):
            return str(ref["kind"])
    return None


def _template_env(template: Mapping[str, Any], container: str, name: str) -> str | None:
    """A literal env value of one container of a pod template (None when absent or not a plain string)."""
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for c in containers if isinstance(containers, list) else ():
        if not isinstance(c, Mapping) or c.get("name") != container:
            continue
        env = c.get("env")
        for e in env if isinstance(env, list) else ():
            if isinstance(e, Mapping) and e.get("name") == name and isinstance(e.get("value"), str):
                return str(e["value"])
    return None


def cluster_policy_from_json(obj: Mapping[str, Any]) -> ClusterPolicyState:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    dp_config = (spec.get("devicePlugin") or {}).get("config") or {}
    return ClusterPolicyState(
        name=meta.get("name", ""),
        mig_strategy=(spec.get("mig") or {}).get("strategy") or None,
        mig_manager_config_name=((spec.get("migManager") or {}).get("config") or {}).get("name") or None,
        device_plugin_config_name=dp_config.get("name") or None,
        device_plugin_config_default=dp_config.get("default") or None,
        resource_version=meta.get("resourceVersion", ""),
        annotations=meta.get("annotations") or {},
        device_plugin_env=_env_list((spec.get("devicePlugin") or {}).get("env")),
        mig_manager_env=_env_list((spec.get("migManager") or {}).get("env")),
        driver_enabled=(spec.get("driver") or {}).get("enabled") is not False,  # the CRD's default is true
        field_owners=field_owners(meta, CLUSTER_POLICY_FIELDS),
    )


def field_owners(meta: Mapping[str, Any], paths: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Per dotted field path, the field managers whose metadata.managedFields entry (main resource, FieldsV1) holds
    that field or one under it: `spec.mig.strategy` is `f:spec` / `f:mig` / `f:strategy` in the structured-merge-diff
    encoding the apiserver writes. Entries that are not what a server writes are skipped; a path nobody owns is
    absent. Names are cut to 128 characters (the apiserver's own limit) so a hostile entry cannot flood a message."""
    entries = meta.get("managedFields")
    out: dict[str, set[str]] = {}
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping) or entry.get("subresource"):
            continue
        manager, fields = entry.get("manager"), entry.get("fieldsV1")
        if not isinstance(manager, str) or not manager or not isinstance(fields, Mapping):
            continue
        for path in paths:
            node: Any = fields
            for part in path.split("."):
                node = node.get(f"f:{part}") if isinstance(node, Mapping) else None
            if isinstance(node, Mapping):
                out.setdefault(path, set()).add(manager[:128])
    return {path: tuple(sorted(names)) for path, names in out.items()}


def _env_list(raw: Any) -> dict[str, str]:
    """A ClusterPolicy `env` list as the operator applies it (setContainerEnv in order: a later entry wins); entries
    that are not {name: str, value: str} are skipped (the CRD's schema refuses them)."""
    out: dict[str, str] = {}
    for e in raw if isinstance(raw, list) else ():
        if isinstance(e, Mapping) and isinstance(e.get("name"), str):
            value = e.get("value", "")
            out[e["name"]] = value if isinstance(value, str) else str(value)
    return out


def config_map_from_json(obj: Mapping[str, Any]) -> ConfigMapState:
    meta = obj.get("metadata") or {}
    return ConfigMapState(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        data=obj.get("data") or {},
        labels=meta.get("labels") or {},
        resource_version=meta.get("resourceVersion", ""),
        annotations=meta.get("annotations") or {},
    )


def quote_log(text: str, needles: tuple[str, ...]) -> str | None:
    """The last log line containing one of `needles`, else the last non-empty line (None for an empty log)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if any(n in ln for n in needles):
            return ln.strip()
    return lines[-1].strip() if lines else None


def is_mig_manager_pod(obj: Mapping[str, Any], *, namespace: str) -> bool:
    meta = obj.get("metadata") or {}
    key, value = MIG_MANAGER_APP_LABEL
    return meta.get("namespace") == namespace and (meta.get("labels") or {}).get(key) == value


def mig_manager_source(obj: Mapping[str, Any]) -> str | None:
    """The ConfigMap a mig-manager pod reads its configs from, as gpu-operator `TransformMIGManager` renders the pod:
    the `mig-parted-config` volume's ConfigMap when its first container has `CONFIG_FILE` (mig-parted
    cmd/nvidia-mig-manager/main.go `setupMigConfig`), "" without it (generated from the hardware). None for a pod
    being deleted or one without that volume (another layout: nothing is known)."""
    meta = obj.get("metadata")
    spec = obj.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping) or meta.get("deletionTimestamp"):
        return None
    volumes = spec.get("volumes")
    containers = spec.get("containers")
    if not isinstance(volumes, list) or not isinstance(containers, list) or not containers:
        return None
    source = None
    for v in volumes:
        if isinstance(v, Mapping) and v.get("name") == "mig-parted-config" and isinstance(v.get("configMap"), Mapping):
            name = v["configMap"].get("name")
            source = name if isinstance(name, str) else None
    first = containers[0]
    if source is None or not isinstance(first, Mapping) or not isinstance(first.get("env") or [], list):
        return None
    has_config_file = any(isinstance(e, Mapping) and e.get("name") == "CONFIG_FILE" for e in first.get("env") or [])
    return source if has_config_file else ""


def mig_manager_error(text: str) -> str | None:
    """The last error line of a mig-manager log's last run, skipping its own 'Changing ... to failed' line.

    A run begins with main.go's `Updating to MIG config: <name>`; errors of earlier runs say nothing about the
    state the node is in now. A wait for GPU clients that gave up (reconfigure.go waitForPodsToBeDeleted) is a
    first cause too."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    starts = [i for i, ln in enumerate(lines) if RUN_STARTED in ln]
    if starts:
        lines = lines[starts[-1] :]
    errors = [ln for ln in lines if "rror" in ln and "nvidia.com/mig.config.state" not in ln]
    # mig-manager's own last line only says which nvidia-mig-parted step failed ("Error: failed to apply MIG
    # configuration: exit status 1", reconfigure.go Run); the reason is in the line mig-parted printed before it,
    # and the most telling of those is the first-cause line (e.g. "... In use by another client").
    causes = [ln for ln in errors if not ln.rstrip().split(":")[-1].strip().startswith("exit status")]
    telling = [ln for ln in causes if any(w in ln for w in ("In use", "not present", "unmarshal", CLIENT_WAIT_FAILED))]
    if telling:
        return telling[-1]
    if causes:
        return causes[-1]
    return errors[-1] if errors else None


Json = Mapping[str, Any]
T = TypeVar("T")
_ABSENT: Any = object()


class ParseMemo(Generic[T]):
    """What `parse` made of each listed object, remembered from one observation to the next by the object's
    (metadata.uid, metadata.resourceVersion), so an object that did not change is not parsed again.

    Why that key is exact: the API server gives every write of an object a new resourceVersion (apimachinery
    ObjectMeta: "changes on every update"), a deleted and re-created object has a new uid, and `parse` reads
    nothing but the object itself (no clock, no other object): the same key can only stand for the same JSON,
    so the same value. An object without both (not something a server sends) is parsed every time, never
    remembered. The values are frozen dataclasses (or None), so sharing one across cycles is safe.

    Bounded by the cluster: `begin()` at the start of each observation keeps only what the last one saw.
    One observation at a time (the controller observes from one thread).

    `keep=False` remembers nothing: every object is parsed. For a process that observes once
    (`reconcile --once`), where no later observation could reuse an entry and the keys alone (a uid, a
    resourceVersion and a tuple per pod) cost some 30 MB at 5,000 nodes."""

    def __init__(self, parse: Callable[[Json], T], *, keep: bool = True) -> None:
        self.parse = parse
        self.keep = keep
        self._last: dict[tuple[str, str], T] = {}
        self._current: dict[tuple[str, str], T] = {}
        self.hits = 0  # this observation's objects taken from the memo (for tests and profiling)

    def begin(self) -> None:
        """A new observation: what the last one saw is what may be reused; nothing older."""
        if self._current:
            self._last, self._current = self._current, {}
        self.hits = 0

    def __call__(self, obj: Json) -> T:
        if not self.keep:
            return self.parse(obj)
        meta = obj.get("metadata")
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        if not (isinstance(uid, str) and uid and isinstance(rv, str) and rv):
            return self.parse(obj)
        key = (uid, rv)
        value = self._current.get(key, _ABSENT)
        if value is _ABSENT:
            value = self._last.get(key, _ABSENT)
            if value is _ABSENT:
                value = self.parse(obj)
            else:
                self.hits += 1
            self._current[key] = value
        else:
            self.hits += 1
        return value  # type: ignore[no-any-return]


@dataclasses.dataclass(frozen=True, slots=True)
class PodExtras:
    """What few pods carry beyond what every pod's record holds: a mig-manager pod's or a DaemonSet's pod's fields
    (see PodRecord). Apart so a fleet's other 100,000 pods do not each hold five empty fields."""

    mig_manager: bool
    mig_manager_source: str | None
    daemonsets: tuple[Any, ...]
    device_plugin: DevicePluginPod | None
    log_ref: Json | None


# The reboot tally's entry of a pod but its key (rebootpods.tally_entry): (labels, owner kind, controlled, phase,
# terminating). A fleet's pods repeat a handful of these, so a cache keeps one tuple for all equal ones (CacheParts).
Traits = tuple[Any, str, bool, Any, bool]
TallyEntry = tuple[str, Any, str, bool, Any, bool]  # the key, then the traits (rebootpods._Entry)


@dataclasses.dataclass(frozen=True, slots=True)
class PodRecord:
    """What the PodSorter needs of one pod, whatever the GpuOperatorSettings (they may change between cycles), so a
    pod can be kept without its raw JSON (a watch-fed cache keeps one per pod: kube/informer.py).

    `key` is "namespace/name", the order a LIST returns pods in (the API server's storage key). `traits` is the
    reboot tally's entry but the key (None: a pod the tally does not count), `tally` the (node, entry) it makes of
    them (rebootpods.tally_entry), `gpu` the parsed GPU pod (gpu_pod_from_json, or None, holding `key` as its own),
    and `extras` what a mig-manager pod or a DaemonSet's pod carries besides (PodExtras, None for the others):
    `mig_manager` whether it carries mig-manager's app label, `daemonsets` the names of the DaemonSets among its
    owners, `device_plugin` its DevicePluginPod (no log line yet) when it has such an owner, and `log_ref` the few
    fields a log read names it by (metadata name and namespace, its containers' names), kept only for a pod whose
    log may be read: a mig-manager pod, or a DaemonSet's pod that is not Ready.

    One object per pod with pointers to shared values (a cache keeps 140,000 at 5,000 nodes): the tally's entry is
    made when a cycle counts the pod, not kept."""

    key: str
    namespace: Any
    node: Any
    traits: Traits | None
    gpu: ObservedPod | None
    extras: PodExtras | None = None

    @property
    def tally(self) -> tuple[str, TallyEntry] | None:
        traits = self.traits
        return None if traits is None else (self.node, (self.key, *traits))

    @property
    def mig_manager(self) -> bool:
        return self.extras is not None and self.extras.mig_manager

    @property
    def mig_manager_source(self) -> str | None:
        return None if self.extras is None else self.extras.mig_manager_source

    @property
    def daemonsets(self) -> tuple[Any, ...]:
        return () if self.extras is None else self.extras.daemonsets

    @property
    def device_plugin(self) -> DevicePluginPod | None:
        return None if self.extras is None else self.extras.device_plugin

    @property
    def log_ref(self) -> Json | None:
        return None if self.extras is None else self.extras.log_ref

    def holds_nothing(self) -> bool:
        """True when the sorter would take nothing from this pod under any settings (it need not be kept)."""
        return self.traits is None and self.gpu is None and not self.mig_manager and not self.daemonsets


class CacheParts(Shared):
    """Shared, plus the tally traits (Traits) a cache's records repeat, kept once (at most SHARED_TABLE_LIMIT)."""

    def __init__(self) -> None:
        super().__init__()
        self._traits: dict[tuple[Any, ...], Traits] = {}

    def begin(self) -> None:
        super().begin()
        self._traits.clear()

    def traits(self, value: Traits) -> Traits:
        labels = value[0]
        table = self._traits
        try:  # keyed by the labels' items (a dict is no key); a value that cannot be one is kept as it is, unshared
            key = (tuple(labels.items()) if type(labels) is dict else labels, *value[1:])
            if len(table) >= SHARED_TABLE_LIMIT and key not in table:
                table.clear()  # bounded as Shared's tables are
            return table.setdefault(key, value)
        except TypeError:
            return value


def _log_ref(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Json:
    containers = spec.get("containers")
    listed = containers if isinstance(containers, list) else []
    names = [{"name": c.get("name")} for c in listed if isinstance(c, Mapping)]
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}, "spec": {"containers": names}}


def pod_record(
    obj: Json, gpu_pod: Callable[[Json], ObservedPod | None] = gpu_pod_from_json, shared: Shared | None = None
) -> PodRecord:
    """One listed or watched pod as the PodSorter reads it (PodRecord). With `shared`, the tally's label set is the
    one equal label set kept for all pods (Shared.mapping), and with CacheParts its traits too."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    namespace = meta.get("namespace")
    app, mig_manager_app = MIG_MANAGER_APP_LABEL
    labels = meta.get("labels")
    # mig-manager's label, in whatever namespace (which one is the sorter's call: the settings may change)
    mig_manager = isinstance(labels, Mapping) and labels.get(app) == mig_manager_app
    refs = meta.get("ownerReferences")
    daemonsets = (
        tuple(r.get("name") for r in refs if isinstance(r, Mapping) and r.get("kind") == "DaemonSet")
        if isinstance(refs, list)
        else ()
    )
    readable = isinstance(obj.get("status") or {}, Mapping)  # else its Ready state cannot be read: not a plugin pod
    device_plugin = device_plugin_pod_from_json(obj) if daemonsets and readable else None
    tally = tally_entry(obj)
    bound_to = spec.get("nodeName")
    traits: Traits | None = None
    if tally is not None:
        # tally_entry's node is spec.nodeName itself (a checked string): the record's `node`
        key, tally_labels, owner_kind, controlled, phase, terminating = tally[1]
        if shared is not None:
            # A watch-fed cache keeps every record for the process's life: the node name, phase, label set and
            # DaemonSet names a fleet's pods repeat are kept once (the decoded page's own copies are dropped with it).
            if type(tally_labels) is dict:
                tally_labels = shared.mapping(tally_labels)
            phase = shared.text(phase)
        traits = (tally_labels, owner_kind, controlled, phase, terminating)
        if isinstance(shared, CacheParts):
            traits = shared.traits(traits)
    else:
        key = f"{namespace}/{meta.get('name')}"
    if shared is not None:
        daemonsets = tuple(shared.text(d) for d in daemonsets)
        namespace, bound_to = shared.text(namespace), shared.text(bound_to)
    wants_log = mig_manager or (device_plugin is not None and not device_plugin.ready)
    gpu = gpu_pod(obj)
    if gpu is not None:
        gpu.take_key(key)  # one "namespace/name" string for the record and its pod, not two equal ones
    extras = (
        PodExtras(
            mig_manager=mig_manager,
            mig_manager_source=mig_manager_source(obj) if mig_manager else None,
            daemonsets=daemonsets,
            device_plugin=device_plugin,
            log_ref=_log_ref(meta, spec) if wants_log else None,
        )
        if mig_manager or daemonsets
        else None
    )
    return PodRecord(key=key, namespace=namespace, node=bound_to, traits=traits, gpu=gpu, extras=extras)


class PodSorter:
    """Sorts listed pods, one at a time, into what the observation keeps: GPU pods, device-plugin pods
    (with the log line of those not Ready, at most `max_log_reads`), and the error line of the
    mig-manager pod of each node in `failed`. One pod at a time, so a LIST page's raw JSON can be
    dropped as soon as it is sorted: the raw pods of a whole cluster are never held at once.

    `add(obj)` takes a raw pod, `add_record(record)` one already read (pod_record, kept by a watch-fed cache): the
    same sorting, so a cycle fed from the cache observes what one fed by a LIST does (tests/unit/adapters/
    test_pod_records.py feeds both the same pods)."""

    def __init__(
        self,
        ops: GpuOperatorSettings,
        *,
        failed: frozenset[str],
        daemonset: bool,
        device_plugin_log: Callable[[Json], str | None],
        mig_manager_log: Callable[[Json], str | None],
        max_log_reads: int,
        gpu_pod: Callable[[Json], ObservedPod | None] = gpu_pod_from_json,
    ) -> None:
        self.ops = ops
        self.gpu_pod = gpu_pod  # gpu_pod_from_json, or a ParseMemo of it (the kube adapter's, across cycles)
        self.failed = failed
        self.daemonset = daemonset
        self.device_plugin_log = device_plugin_log
        self.mig_manager_log = mig_manager_log
        self.max_log_reads = max_log_reads
        self.log_reads = 0  # device-plugin logs read this cycle (capped: a cluster-wide refusal is one story)
        self.gpu_pods: list[ObservedPod] = []
        self.dp_pods: list[DevicePluginPod] = []
        self.mig_manager_errors: dict[str, str] = {}
        self.mig_manager_sources: dict[str, str] = {}
        # Per node, the pods a reboot ends (counted for every pod, named up to a cap: rebootpods.py).
        self.reboot = RebootTally()

    def add(self, obj: Json) -> None:
        ops = self.ops
        self.reboot.add(obj)
        if is_mig_manager_pod(obj, namespace=ops.namespace):
            node_name = (obj.get("spec") or {}).get("nodeName")
            source = mig_manager_source(obj)
            if isinstance(node_name, str) and source is not None:
                self.mig_manager_sources[node_name] = source
            if self.failed and isinstance(node_name, str) and node_name in self.failed:
                reason = self.mig_manager_log(obj)
                if reason:
                    self.mig_manager_errors[node_name] = reason
            return
        if self.daemonset and owned_by_daemonset(obj, namespace=ops.namespace, name=ops.device_plugin_daemonset):
            ready = pod_ready(obj)
            read = not ready and self.log_reads < self.max_log_reads
            self.log_reads += read
            line = self.device_plugin_log(obj) if read else None
            self.dp_pods.append(device_plugin_pod_from_json(obj, line, log_read=ready or read))
            return
        pod = self.gpu_pod(obj)
        if pod is not None:
            self.gpu_pods.append(pod)

    def add_record(self, pod: PodRecord) -> None:
        """`add` for a pod read earlier (pod_record): the same decisions, in the same order, on the record's fields
        (the sorting of one listed pod stays the direct path: a record per pod would cost a LIST-fed cycle some
        3 us a pod, 0.4 s at 5,000 nodes)."""
        ops = self.ops
        traits = pod.traits
        if traits is not None:
            self.reboot.add_entry(pod.node, (pod.key, *traits))
        if pod.mig_manager and pod.namespace == ops.namespace:
            node_name = pod.node
            if isinstance(node_name, str) and pod.mig_manager_source is not None:
                self.mig_manager_sources[node_name] = pod.mig_manager_source
            if self.failed and isinstance(node_name, str) and node_name in self.failed and pod.log_ref is not None:
                reason = self.mig_manager_log(pod.log_ref)
                if reason:
                    self.mig_manager_errors[node_name] = reason
            return
        dp = pod.device_plugin
        if (
            self.daemonset
            and dp is not None
            and pod.namespace == ops.namespace
            and ops.device_plugin_daemonset in pod.daemonsets
        ):
            ready = dp.ready
            read = not ready and self.log_reads < self.max_log_reads
            self.log_reads += read
            line = self.device_plugin_log(pod.log_ref) if read and pod.log_ref is not None else None
            self.dp_pods.append(dataclasses.replace(dp, log_line=line, log_read=ready or read))
            return
        if pod.gpu is not None:
            self.gpu_pods.append(pod.gpu)


def failed_nodes(nodes: Mapping[str, ObservedNode]) -> frozenset[str]:
    """Nodes whose mig-manager log says why they are where they are: `failed`, or `pending` with the GPU clients
    paused (a client wait that gave up leaves exactly that, reconfigure.go Run)."""
    return frozenset(
        n.name
        for n in nodes.values()
        if n.mig_config_state == MigConfigState.FAILED
        or (n.mig_config_state == MigConfigState.PENDING and n.paused_gpu_clients)
    )


def observed_state(
    ops: GpuOperatorSettings,
    *,
    nodes: Iterable[Json],
    pods: Iterable[Json],
    cluster_policy: Json | None,
    daemonset: Json | None,
    config_map: Callable[[str], Json | None],
    device_plugin_log: Callable[[Json], str | None],
    mig_manager_log: Callable[[Json], str | None],
    max_log_reads: int,
    pdbs: Iterable[Json] = (),
) -> ObservedState:
    """The observed state from the listed objects. What needs another request is a callback:
    `config_map(name)` (migplan's mig-parted ConfigMap, and the device-plugin config the
    ClusterPolicy names), the log line of a device-plugin pod that is not Ready (at most
    `max_log_reads` of them), and the error line of the mig-manager pod of a node whose state is
    `failed`, or `pending` with its GPU clients paused. The adapter does the same page by page
    (observed_from_parts), never holding every raw object at once."""
    observed_nodes: dict[str, ObservedNode] = {}
    for obj in nodes:
        n = node_from_json(obj)
        observed_nodes[n.name] = n
    sorter = PodSorter(
        ops,
        failed=failed_nodes(observed_nodes),
        daemonset=daemonset is not None,
        device_plugin_log=device_plugin_log,
        mig_manager_log=mig_manager_log,
        max_log_reads=max_log_reads,
    )
    for obj in pods:
        sorter.add(obj)
    return observed_from_parts(
        ops,
        nodes=observed_nodes,
        pods=sorter,
        cluster_policy=cluster_policy,
        daemonset=daemonset,
        config_map=config_map,
        pdbs=pdbs,
    )


def observed_from_parts(
    ops: GpuOperatorSettings,
    *,
    nodes: Mapping[str, ObservedNode],
    pods: PodSorter,
    cluster_policy: Json | None,
    daemonset: Json | None,
    config_map: Callable[[str], Json | None],
    pdbs: Iterable[Json] = (),
    resource_slices: Iterable[Json] = (),
    resource_claims: Iterable[Json] = (),
    gpu_clusters: Iterable[Json] = (),
    dra_drivers: Iterable[DraDriverConfig] = (),
) -> ObservedState:
    """The observed state from the listed objects: the nodes (node_from_json, by name), the pods as a
    PodSorter sorted them, and `config_map(name)` for migplan's mig-parted ConfigMap and the
    device-plugin config the ClusterPolicy names (each another request); PodDisruptionBudgets (a drain's);
    the ResourceSlices of NVIDIA's DRA driver (dra_from_slices)."""
    cp = cluster_policy_from_json(cluster_policy) if cluster_policy else None
    ds = device_plugin_from_json(daemonset, tuple(pods.dp_pods)) if daemonset else None
    claims, claim_problems = claims_from_json(resource_claims)
    node_pods = pods.reboot.by_node()
    bound_namespaces = {q.namespace for q in pods.gpu_pods if q.node is not None}
    # A drain before a possible reboot evicts these too: their namespaces' budgets are the drain's as well.
    bound_namespaces |= {k.split("/", 1)[0] for n in node_pods.values() for k in (*n.names, *n.unreplicated_names)}
    mig_cm = config_map(ops.mig_config_map)
    dp_cm = None
    if cp is not None and cp.device_plugin_config_name:
        dp_cm = config_map(cp.device_plugin_config_name)
    # Adopting: the configs nodes' labels name now live in the ConfigMap the ClusterPolicy names (one more GET).
    mm_cm = None
    if cp is not None and cp.mig_manager_config_name and cp.mig_manager_config_name != ops.mig_config_map:
        mm_cm = config_map(cp.mig_manager_config_name)
    return ObservedState(
        nodes=dict(nodes),
        pods=tuple(pods.gpu_pods),
        cluster_policy=cp,
        device_plugin=ds,
        mig_config_map=config_map_from_json(mig_cm) if mig_cm else None,
        device_plugin_config_map=config_map_from_json(dp_cm) if dp_cm else None,
        mig_manager_config_map=config_map_from_json(mm_cm) if mm_cm else None,
        mig_manager_errors=pods.mig_manager_errors,
        mig_manager_sources=pods.mig_manager_sources,
        # Only the PodDisruptionBudgets of namespaces where a GPU pod runs can block a drain.
        pdbs=tuple(p for p in (pdb_from_json(o) for o in pdbs) if p.namespace in bound_namespaces),
        node_pods=node_pods,
        dra=dra_from_slices(resource_slices),
        claims=claims,
        claim_problems=claim_problems,
        gpu_clusters=tuple(gpu_cluster_from_json(o) for o in gpu_clusters),
        dra_drivers=tuple(dra_drivers),
    )


# --- NVIDIA's DRA driver: its ResourceSlices (resource.k8s.io/v1) ----------------------------------------------

DRA_DRIVER = "gpu.nvidia.com"
_DRA_ATTRIBUTES = {
    "type": "kind",
    "profile": "profile",
    "uuid": "uuid",
    "parentUUID": "parent_uuid",
    "productName": "product",
}
_MAX_DRA_PROBLEMS = 16  # per node: enough to act on, bounded so a hostile slice cannot flood the report


def _dra_device(raw: Any, where: str, problems: list[str]) -> DraDevice | None:
    """One device of a slice, or None (and a problem) when its name or an attribute migplan uses is unreadable.

    Attributes are `{"string": ...}` in resource.k8s.io/v1 (`DeviceAttribute`, exactly one typed value); the ones
    migplan reads are strings in NVIDIA's driver (deviceinfo.go, mig.go `CommonAttributesMig`), so another type
    is bad input, not a value to coerce."""
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: a device that is not an object")
        return None
    name = raw.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 63:
        problems.append(f"{where}: a device without a readable name")
        return None
    attributes = raw.get("attributes") or {}
    if not isinstance(attributes, Mapping):
        problems.append(f"{where}: device {name}: attributes are not a map")
        return None
    values: dict[str, str | None] = {}
    for key, field_name in _DRA_ATTRIBUTES.items():
        attr = attributes.get(key)
        if attr is None:
            values[field_name] = None
            continue
        value = attr.get("string") if isinstance(attr, Mapping) else None
        if not isinstance(value, str) or len(value) > 64:
            problems.append(f"{where}: device {name}: attribute {key} is not a string")
            return None
        values[field_name] = value
    return DraDevice(
        name=name,
        kind=values["kind"],
        profile=values["profile"],
        uuid=values["uuid"],
        parent_uuid=values["parent_uuid"],
        product=values["product"],
        consumes_counters=bool(raw.get("consumesCounters")),
    )


def dra_from_slices(slices: Iterable[Json]) -> dict[str, NodeDra]:
    """node -> what NVIDIA's DRA driver publishes for it, from every listed ResourceSlice; never raises.

    Only slices of driver `gpu.nvidia.com` bound to one node (`spec.nodeName`, as the driver publishes: one pool
    per node) count; another driver's slices are not GPUs. What cannot be read is a one-line problem on the node
    (MP571), and the rest of the node's devices are still read."""
    devices: dict[str, list[DraDevice]] = {}
    counters: dict[str, list[str]] = {}
    problems: dict[str, list[str]] = {}
    for obj in slices:
        spec = obj.get("spec") if isinstance(obj, Mapping) else None
        if not isinstance(spec, Mapping) or spec.get("driver") != DRA_DRIVER:
            continue
        node = spec.get("nodeName")
        if not isinstance(node, str) or not node:
            continue  # not a node's pool: nothing migplan plans
        name = (obj.get("metadata") or {}).get("name")
        where = f"ResourceSlice {name if isinstance(name, str) else '?'}"
        found = problems.setdefault(node, [])
        raw_devices, raw_counters = spec.get("devices") or [], spec.get("sharedCounters") or []
        if not isinstance(raw_devices, list) or not isinstance(raw_counters, list):
            found.append(f"{where}: devices or sharedCounters is not a list")
            continue
        for raw in raw_devices:
            device = _dra_device(raw, where, found)
            if device is not None:
                devices.setdefault(node, []).append(device)
        for cs in raw_counters:
            cs_name = cs.get("name") if isinstance(cs, Mapping) else None
            if isinstance(cs_name, str) and cs_name:
                counters.setdefault(node, []).append(cs_name)
            else:
                found.append(f"{where}: a counter set without a name")
    return {
        node: NodeDra(
            node=node,
            devices=tuple(sorted(devices.get(node, ()), key=lambda d: d.name)),
            counter_sets=tuple(sorted(counters.get(node, ()))),
            problems=tuple(problems.get(node, ())[:_MAX_DRA_PROBLEMS]),
        )
        for node in sorted(set(devices) | set(counters) | {n for n, p in problems.items() if p})
    }


def _claim(obj: Json) -> ObservedClaim | str | None:
    """A ResourceClaim with devices of NVIDIA's driver, None when it has none, or why it cannot be read."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    status = obj.get("status") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return "a ResourceClaim without metadata"
    namespace, name = _name(meta.get("namespace")), _name(meta.get("name"))
    if namespace is None or name is None:
        return "a ResourceClaim without a readable namespace and name"
    if not isinstance(status, Mapping) or status.get("allocation") is None:
        return None  # not allocated: it holds nothing yet
    allocation = status.get("allocation")
    results = ((allocation.get("devices") or {}) if isinstance(allocation, Mapping) else {}).get("results")
    if not isinstance(results, list):
        return f"ResourceClaim {namespace}/{name}: status.allocation.devices.results is not a list"
    devices: list[ClaimedDevice] = []
    for r in results:
        if not isinstance(r, Mapping) or r.get("driver") != DRA_DRIVER:
            continue
        pool, device = _name(r.get("pool")), r.get("device")
        if pool is None or not isinstance(device, str) or not 0 < len(device) <= 63:
            return f"ResourceClaim {namespace}/{name}: an allocation result without a readable pool and device"
        devices.append(ClaimedDevice(DRA_DRIVER, pool, device))
    if not devices:
        return None
    reserved = status.get("reservedFor") or []
    pods = sorted(
        {
            f"{namespace}/{n}"
            for c in (reserved if isinstance(reserved, list) else ())
            if isinstance(c, Mapping) and c.get("resource") == "pods" and (n := _name(c.get("name"))) is not None
        }
    )
    return ObservedClaim(namespace, name, tuple(devices), tuple(pods))


def claims_from_json(items: Iterable[Json]) -> tuple[tuple[ObservedClaim, ...], tuple[str, ...]]:
    """(the claims allocated a device of NVIDIA's driver, why the unreadable ones were left out); never raises.

    `status.reservedFor` names the pods using a claim (the scheduler reserves it for them; core/v1 pods are the only
    consumers kept). A claim that cannot be read is named (MP571, bounded), not guessed at."""
    claims: list[ObservedClaim] = []
    problems: list[str] = []
    for obj in items:
        found = _claim(obj)
        if isinstance(found, ObservedClaim):
            claims.append(found)
        elif found is not None and len(problems) < _MAX_DRA_PROBLEMS:
            problems.append(found)
    return tuple(sorted(claims, key=lambda c: c.key)), tuple(problems)


GPUCLUSTER_VERSION = "v1alpha1"  # the version migplan reads (api/nvidia/v1alpha1/gpucluster_types.go)


def gpu_cluster_from_json(obj: Json) -> GpuClusterState:
    """What a GPUCluster says about DynamicMIG; never raises. An object of another apiVersion, or a feature-gate map
    migplan cannot read, leaves DynamicMIG unknown (None) with the reason: taken as on, so nothing is written."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = _name((meta or {}).get("name")) or "?"
    status = obj.get("status") if isinstance(obj, Mapping) else None
    ignored = isinstance(status, Mapping) and status.get("state") == "ignored"
    api_version = obj.get("apiVersion") if isinstance(obj, Mapping) else None
    if api_version not in (None, f"nvidia.com/{GPUCLUSTER_VERSION}"):
        return GpuClusterState(
            name, None, ignored, f"GPUCluster {name} is {short(api_version)}, not nvidia.com/v1alpha1"
        )
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    driver = spec.get("draDriver", {}) if isinstance(spec, Mapping) else None
    gates = driver.get("featureGates") or {} if isinstance(driver, Mapping) else None
    if not isinstance(gates, Mapping):
        return GpuClusterState(name, None, ignored, f"GPUCluster {name}: spec.draDriver.featureGates is not a map")
    value = gates.get("DynamicMIG", False)
    if not isinstance(value, bool):
        return GpuClusterState(name, None, ignored, f"GPUCluster {name}: featureGates.DynamicMIG is not true or false")
    return GpuClusterState(name, value, ignored)


# --- NVIDIA's DRA driver installed by its own chart: the kubelet-plugin DaemonSet ----------------------------------

# deployments/helm/dra-driver-nvidia-gpu (NVIDIA/k8s-dra-driver-gpu): _helpers.tpl `templateLabels` gives every
# object `app.kubernetes.io/name: <chart name>`; kubeletplugin.yaml names the DaemonSet `<name>-kubelet-plugin` and
# passes `.Values.featureGates` to container `gpus` as env FEATURE_GATES ("Name=value," per gate).
DRA_DRIVER_CHART_NAME = "dra-driver-nvidia-gpu"
DRA_DRIVER_LABEL_SELECTOR = f"app.kubernetes.io/name={DRA_DRIVER_CHART_NAME}"
DRA_DRIVER_PLUGIN_SUFFIX = "-kubelet-plugin"
DRA_DRIVER_CONTAINER = "gpus"
DYNAMIC_MIG_GATE = "DynamicMIG"


def is_dra_kubelet_plugin(obj: Json) -> bool:
    """The DaemonSet is the driver chart's kubelet plugin (not its controller or webhook, which share the label)."""
    name = _name((obj.get("metadata") or {}).get("name")) if isinstance(obj, Mapping) else None
    return name is not None and name.endswith(DRA_DRIVER_PLUGIN_SUFFIX)


def dra_driver_pod_selector(obj: Json) -> str | None:
    """The DaemonSet's spec.selector.matchLabels as a label selector (to list its pods), or None when absent."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    selector = spec.get("selector") if isinstance(spec, Mapping) else None
    labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
    if not isinstance(labels, Mapping) or not labels:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _dynamic_mig_of_gates(value: Any, where: str) -> tuple[bool | None, str | None]:
    if not isinstance(value, str):
        return None, f"{where} is not a literal string"
    try:
        gates = featuregates.parse(value)
    except featuregates.FeatureGateError as e:
        return None, f"{where} {short(value)} cannot be read ({e})"
    return gates.get(DYNAMIC_MIG_GATE), None


def _container_dynamic_mig(container: Mapping[str, Any]) -> tuple[bool | None, str | None]:
    """DynamicMIG as the container sets it (None: not set), or a problem. `--feature-gates` on the command line
    overrides the env (urfave/cli: a flag given wins over its EnvVars); both may be given."""
    value: bool | None = None
    env = container.get("env") or []
    if not isinstance(env, list):
        return None, "env is not a list"
    for item in env:
        if isinstance(item, Mapping) and item.get("name") == "FEATURE_GATES":
            if "value" not in item:
                return None, "FEATURE_GATES comes from elsewhere (valueFrom), not a value migplan can read"
            value, problem = _dynamic_mig_of_gates(item.get("value"), "FEATURE_GATES")
            if problem is not None:
                return None, problem
    command, args = container.get("command") or [], container.get("args") or []
    if not isinstance(command, list) or not isinstance(args, list):
        return None, "command or args is not a list of strings"
    for word in [*command, *args]:
        if not isinstance(word, str):
            return None, "command or args is not a list of strings"
        for token in word.split():
            flag, sep, rest = token.partition("=")
            if flag not in ("--feature-gates", "-feature-gates"):
                continue
            if not sep:
                return None, "--feature-gates without an inline value cannot be read"
            gate, problem = _dynamic_mig_of_gates(rest, "--feature-gates")
            if problem is not None:
                return None, problem
            if gate is not None:
                value = gate
    return value, None


def dra_plugin_pod(obj: Json) -> DraPluginPod | None:
    """A kubelet-plugin pod bound to a node, with what deleting it needs (name, uid); None when any is missing or
    not a string (such a pod is never deleted: migplan names the node's plugin as not found instead)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return None
    node, namespace, name, uid = (
        _name(spec.get("nodeName")),
        _name(meta.get("namespace")),
        _name(meta.get("name")),
        _name(meta.get("uid")),
    )
    if node is None or namespace is None or name is None or uid is None:
        return None
    return DraPluginPod(node, namespace, name, uid, deleting=bool(meta.get("deletionTimestamp")))


def dra_driver_from_json(obj: Json, nodes: Iterable[str], pods: Iterable[DraPluginPod] = ()) -> DraDriverConfig:
    """What the driver's kubelet-plugin DaemonSet says about DynamicMIG on the nodes its pods run on; never raises.
    A gate absent is off (pkg/featuregates/featuregates.go: DynamicMIG defaults to false); one that cannot be read
    leaves it unknown (None) with the reason: taken as on, so nothing is written there (MP579)."""
    meta = (obj.get("metadata") or {}) if isinstance(obj, Mapping) else {}
    namespace = _name(meta.get("namespace") if isinstance(meta, Mapping) else None) or "?"
    name = _name(meta.get("name") if isinstance(meta, Mapping) else None) or "?"
    where = frozenset(nodes)
    plugin_pods = tuple(sorted(pods, key=lambda p: (p.node, p.name)))
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, Mapping) else None
    if not isinstance(containers, list):
        return DraDriverConfig(namespace, name, None, where, "spec.template.spec.containers is not a list", plugin_pods)
    gpus = [c for c in containers if isinstance(c, Mapping) and c.get("name") == DRA_DRIVER_CONTAINER]
    if len(gpus) != 1:
        return DraDriverConfig(
            namespace, name, None, where, f"no single container named {DRA_DRIVER_CONTAINER!r}", plugin_pods
        )
    value, problem = _container_dynamic_mig(gpus[0])
    if problem is not None:
        return DraDriverConfig(
            namespace, name, None, where, f"container {DRA_DRIVER_CONTAINER}: {problem}", plugin_pods
        )
    return DraDriverConfig(namespace, name, bool(value), where, pods=plugin_pods)
