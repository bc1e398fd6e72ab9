"""metadata.managedFields, as the apiserver's field manager keeps them on every write.

Follows k8s.io/apiserver pkg/endpoints/handlers/fieldmanager (now k8s.io/apimachinery/pkg/util/managedfields
/internal) and sigs.k8s.io/structured-merge-diff merge/update.go:

- `Update` operation (create, PUT, every non-apply PATCH, status writes; `Updater.Update` through
  managedFieldsUpdater.Update): the fields this write added or changed leave every other manager's set and join the
  writer's; removed fields leave every set; the writer's entry gets a new `time` only when it took something.
- Managers are identified by (manager, operation, apiVersion, subresource), apiVersion left out for appliers
  (BuildManagerIdentifier); an entry with an empty set is dropped; more than 10 Update entries are folded, oldest
  first, into `ancient-changes` per apiVersion (capManagersManager).
- What nobody owns (stripMetaManager): apiVersion, kind, metadata itself and metadata.name, namespace,
  creationTimestamp, selfLink, uid, clusterName, generation, managedFields, resourceVersion.
- On create the live object is the kind's zero value (`Creater.New`): Go's non-omitempty zero fields are present
  there (BASELINES), so they are nobody's. The field manager runs after decoding (scheme defaults are the
  creator's) and before admission and the strategy (their additions are nobody's: ADMITTED).
- managedFields sent with a write replace the live ones when they decode, `[]` or `[{}]` clears them, and a
  subresource write always keeps the live ones (decodeLiveOrNew).
- Entries are sorted by operation, time (seconds), manager, apiVersion, subresource (sortEncodedManagedFields).

Pure: values in, values out (the caller passes the time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import fieldpaths
from .errors import FieldError, bad_request, invalid
from .fieldpaths import Path
from .fieldschema import Shape
from .kinds import NODE_INFO_FIELDS

MAX_UPDATE_MANAGERS = 10  # DefaultMaxUpdateManagers
ANCIENT_CHANGES = "ancient-changes"
FIELD_MANAGER_MAX_LENGTH = 128  # validation.FieldManagerMaxLength

STRIPPED: frozenset[Path] = frozenset(
    {("f:apiVersion",), ("f:kind",), ("f:metadata",)}
    | {
        ("f:metadata", "f:" + name)
        for name in (
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        )
    }
)

# Go's zero value of each kind as JSON, without metadata (stripped anyway): fields without `omitempty`, and structs,
# which omitempty never drops (k8s.io/api types.go of each kind). A nil slice without omitempty is `null` there: a
# value there, so the list itself is nobody's (structured-merge-diff walks null as an empty list or map).
BASELINES: dict[str, dict[str, Any]] = {
    "nodes": {
        "spec": {},
        "status": {
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": dict.fromkeys(NODE_INFO_FIELDS, ""),
        },
    },
    "pods": {"spec": {"containers": None}, "status": {}},
    "namespaces": {"spec": {}, "status": {}},
    "events": {
        "involvedObject": {},
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    },
    "events.events.k8s.io": {
        "eventTime": None,
        "regarding": {},
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    },
    "leases.coordination.k8s.io": {"spec": {}},
    "daemonsets.apps": {
        "spec": {
            "template": {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}},
            "updateStrategy": {},
        },
        "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0},
    },
    "deployments.apps": {
        "spec": {"template": {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}}, "strategy": {}},
        "status": {},
    },
    "services": {"spec": {}, "status": {"loadBalancer": {}}},
    "customresourcedefinitions.apiextensions.k8s.io": {
        "spec": {"group": "", "names": {"plural": "", "kind": ""}, "scope": "", "versions": None},
        "status": {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": None},
    },
}
# What admission plugins and registry strategies add on create, after the field manager ran: nobody's unless the
# client sent it. "*" stands for any list item. (pods: ServiceAccount, DefaultTolerationSeconds and Priority
# admission, podStrategy.PrepareForCreate; nodes: TaintNodesByCondition; namespaces: namespaceStrategy
# PrepareForCreate; status everywhere: the strategies' PrepareForCreate.)
ADMITTED: dict[str, tuple[tuple[str, ...], ...]] = {
    "pods": (
        ("spec", "serviceAccountName"),
        ("spec", "serviceAccount"),
        ("spec", "volumes"),
        ("spec", "containers", "*", "volumeMounts"),
        ("spec", "initContainers", "*", "volumeMounts"),
        ("spec", "tolerations"),
        ("spec", "priority"),
        ("spec", "preemptionPolicy"),
        ("status",),
    ),
    "nodes": (("spec", "taints"),),
    "namespaces": (("spec",), ("status",)),
    "daemonsets.apps": (("status",),),
    "deployments.apps": (("status",),),
    "customresourcedefinitions.apiextensions.k8s.io": (("status",),),
}


@dataclass
class Managed:
    """One managedFields entry, decoded."""

    manager: str
    operation: str  # "Apply" or "Update"
    api_version: str
    subresource: str = ""
    time: str | None = None
    fields: set[Path] = field(default_factory=set)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """BuildManagerIdentifier: appliers keep one entry whatever apiVersion they apply."""
        version = "" if self.operation == "Apply" else self.api_version
        return (self.manager, self.operation, version, self.subresource)


def manager_from_user_agent(user_agent: str) -> str:
    """prefixFromUserAgent: the User-Agent up to its first '/', printable characters only, at most 128 bytes."""
    out: list[str] = []
    size = 0
    for ch in user_agent.split("/", 1)[0]:
        if not ch.isprintable():
            continue
        size += len(ch.encode())
        if size > FIELD_MANAGER_MAX_LENGTH:
            break
        out.append(ch)
    return "".join(out)


def field_manager_errors(name: str) -> list[FieldError]:
    """ValidateFieldManager: too long, or a character Go's unicode.IsPrint refuses (positions are byte offsets,
    as Go's range over a string gives them)."""
    errors: list[FieldError] = []
    if len(name.encode()) > FIELD_MANAGER_MAX_LENGTH:
        limit = f"may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"
        errors.append(FieldError("TooLong", "fieldManager", detail=limit))
    offset = 0
    for ch in name:
        if not ch.isprintable():
            errors.append(
                FieldError("Invalid", "fieldManager", name, f"invalid character U+{ord(ch):04X} (at position {offset})")
            )
        offset += len(ch.encode())
    return errors


# ------------------------------------------------------------------ entries


def decode_entries(entries: Any) -> list[Managed]:
    """decodeManagedFields; ValueError on anything the real decoder refuses."""
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    out: list[Managed] = []
    seen: set[tuple[str, str, str, str]] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"managed fields entry {i} is not an object")
        operation = entry.get("operation")
        if operation not in ("Apply", "Update"):
            raise ValueError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion")
        if not isinstance(api_version, str) or not api_version:
            raise ValueError("apiVersion must not be empty")
        if entry.get("fieldsType") != "FieldsV1":
            raise ValueError(f"invalid fieldsType in managed fields entry {i}")
        manager, sub, when = entry.get("manager", ""), entry.get("subresource", ""), entry.get("time")
        if not isinstance(manager, str) or not isinstance(sub, str) or not (when is None or isinstance(when, str)):
            raise ValueError(f"managed fields entry {i} is malformed")
        fields = fieldpaths.decode(entry.get("fieldsV1", {}))
        item = Managed(manager, operation, api_version, sub, when, fields)
        if item.identity in seen:
            raise ValueError(f"duplicate entry for manager {manager!r}")
        seen.add(item.identity)
        out.append(item)
    return out


def live_entries(obj: Mapping[str, Any]) -> list[Managed]:
    """The stored object's managers (emptyManagedFieldsOnErr: garbage reads as none)."""
    raw = (obj.get("metadata") or {}).get("managedFields")
    if raw is None:
        return []
    try:
        return decode_entries(raw)
    except (ValueError, RecursionError):
        return []


def entries_for_write(sent: Mapping[str, Any], live: Mapping[str, Any], subresource: str | None) -> list[Managed]:
    """decodeLiveOrNew: whose managedFields this write starts from."""
    if subresource:
        return live_entries(live)
    raw = (sent.get("metadata") or {}).get("managedFields", None)
    if isinstance(raw, list) and (raw == [] or raw == [{}]):
        return []  # isResetManagedFields
    if raw is not None:
        try:
            decoded = decode_entries(raw)
        except (ValueError, RecursionError):
            decoded = []
        if decoded:
            return decoded
    return live_entries(live)


def encode_entries(managers: Iterable[Managed]) -> list[dict[str, Any]]:
    """managedFields as the server writes them, sorted (sortEncodedManagedFields)."""
    items = sorted(managers, key=lambda m: (m.operation, m.time or "", m.manager, m.api_version, m.subresource))
    out: list[dict[str, Any]] = []
    for m in items:
        entry: dict[str, Any] = {"manager": m.manager, "operation": m.operation, "apiVersion": m.api_version}
        if m.time is not None:
            entry["time"] = m.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = fieldpaths.encode(m.fields)
        if m.subresource:
            entry["subresource"] = m.subresource
        out.append(entry)
    return out


def store_entries(obj: dict[str, Any], managers: list[Managed]) -> None:
    """Write managedFields into obj's metadata (none at all when no manager owns anything)."""
    meta = obj.setdefault("metadata", {})
    if managers:
        meta["managedFields"] = encode_entries(managers)
    else:
        meta.pop("managedFields", None)


# ------------------------------------------------------------------ comparing objects


def comparable(key: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """obj as the field manager compares it: without managedFields, over the kind's Go zero value."""
    body = {k: v for k, v in obj.items() if k != "metadata"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {"metadata": meta, **_fill(BASELINES.get(key, {}), body)}


def _fill(base: Any, value: Any) -> Any:
    """value over base; new dicts along the way, neither input changed (the result shares their leaves)."""
    if isinstance(base, dict) and isinstance(value, dict):
        out = dict(base)
        for k, v in value.items():
            out[k] = _fill(base.get(k), v) if k in base else v
        return out
    return value


def zero(key: str) -> dict[str, Any]:
    """The live object a create starts from (Creater.New)."""
    return comparable(key, {})


def strip_meta(paths: set[Path]) -> set[Path]:
    """Without what nobody owns (stripMetaManager's set)."""
    return {p for p in paths if p not in STRIPPED and p[:2] != ("f:metadata", "f:managedFields")}


def _admitted(path: Path, prefixes: tuple[tuple[str, ...], ...]) -> bool:
    for prefix in prefixes:
        if len(path) < len(prefix):
            continue
        if all(want == "*" or got == "f:" + want for want, got in zip(prefix, path, strict=False)):
            return True
    return False


def created_fields(key: str, shape: Shape, sent: Mapping[str, Any], stored: Mapping[str, Any]) -> set[Path]:
    """The creator's fields: what the decoded object sets over the zero value, minus what admission added."""
    base = zero(key)
    added, modified, _ = fieldpaths.compare(base, comparable(key, stored), shape)
    owned = strip_meta(added | modified)
    prefixes = ADMITTED.get(key, ())
    if not prefixes:
        return owned
    s_added, s_modified, _ = fieldpaths.compare(base, comparable(key, sent), shape)
    sent_paths = s_added | s_modified
    return {p for p in owned if p in sent_paths or not _admitted(p, prefixes)}


_NOBODYS_META = frozenset(p[1][2:] for p in STRIPPED if len(p) == 2)
_GONE: Any = object()
Trie = dict[str, Any]  # field name (or "*" for a list item) -> sub-trie; "" marks the end of an admitted prefix


def _trie(prefixes: tuple[tuple[str, ...], ...]) -> Trie:
    root: Trie = {}
    for prefix in prefixes:
        node = root
        for name in prefix:
            node = node.setdefault(name, {})
        node[""] = {}
    return root


_ADMITTED_TRIES = {key: _trie(prefixes) for key, prefixes in ADMITTED.items()}


def created_fields_v1(key: str, shape: Shape, sent: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """`created_fields` as FieldsV1 in one walk of the stored object (the create path of bulk loads).

    Same result as fieldpaths.encode(created_fields(...)) - test_apiserver_fieldmanager.py holds them together -
    without building path sets: a value absent from the zero object is the creator's with all it holds, a leaf
    that differs from it is the creator's, an admitted region is walked only where the client sent something."""
    base = BASELINES.get(key, {})
    trie = _ADMITTED_TRIES.get(key, {})
    out: dict[str, Any] = {}
    meta = {k: v for k, v in (stored.get("metadata") or {}).items() if k not in _NOBODYS_META}
    node = _walk(meta, {}, shape.field("metadata"), trie.get("metadata"), sent.get("metadata", _GONE), False)
    if node:
        out["f:metadata"] = node
    for name, value in stored.items():
        if name in ("apiVersion", "kind", "metadata"):
            continue
        node = _walk(value, base.get(name, _GONE), shape.field(name), trie.get(name), sent.get(name, _GONE), False)
        if node is not None:
            out["f:" + name] = node
    return _sorted_node(out)


def _sorted_node(node: dict[str, Any]) -> dict[str, Any]:
    if len(node) < 2:
        return node
    out: dict[str, Any] = {".": {}} if "." in node else {}
    for element in sorted((e for e in node if e != "."), key=fieldpaths.element_order):
        out[element] = node[element]
    return out


def _walk(value: Any, base: Any, shape: Shape, trie: Trie | None, sent: Any, guarded: bool) -> dict[str, Any] | None:
    """The FieldsV1 node of `value` against the zero object's `base`, or None when nothing here is the creator's.
    `trie`: the admitted prefixes still reachable from here."""
    if trie is not None and "" in trie:
        guarded = True
    if guarded and sent is _GONE:
        return None  # admission's, not the creator's
    if base is _GONE:
        return _everything(value, shape, trie, sent, guarded)
    if isinstance(value, dict | None) and isinstance(base, dict | None) and not shape.atomic():
        if value is None and base is None:
            return None
        out: dict[str, Any] = {}
        vmap, bmap = value or {}, base or {}
        smap = sent if isinstance(sent, dict) else {}
        for k, v in vmap.items():
            sub = trie.get(k) if trie else None
            node = _walk(v, bmap.get(k, _GONE), shape.field(k), sub, smap.get(k, _GONE), guarded)
            if node is not None:
                out["f:" + k] = node
        return _sorted_node(out) if out else None
    if isinstance(value, list | None) and isinstance(base, list | None) and not (value is None and base is None):
        elems = fieldpaths.elements(value or [], shape)
        belems = fieldpaths.elements(base or [], shape)
        if elems is not None and belems is not None:
            bmap = dict(zip(belems, base or [], strict=True))
            smap = _sent_items(sent, shape)
            item = shape.item()
            sub = trie.get("*") if trie else None
            out = {}
            for elem, v in zip(elems, value or [], strict=True):
                node = _walk(v, bmap.get(elem, _GONE), item, sub, smap.get(elem, _GONE), guarded)
                if node is not None:
                    out[elem] = node
            return _sorted_node(out) if out else None
    return None if fieldpaths.same(value, base) else {}


def _sent_items(sent: Any, shape: Shape) -> dict[str, Any]:
    if not isinstance(sent, list):
        return {}
    elems = fieldpaths.elements(sent, shape)
    return dict(zip(elems, sent, strict=True)) if elems is not None else {}


def _everything(value: Any, shape: Shape, trie: Trie | None, sent: Any, guarded: bool) -> dict[str, Any]:
    """A member with all it holds (in an admitted region: only what the client sent)."""
    out: dict[str, Any] = {}
    if isinstance(value, dict) and not shape.atomic():
        smap = sent if isinstance(sent, dict) else {}
        for k, v in value.items():
            sub = trie.get(k) if trie else None
            inside = guarded or (sub is not None and "" in sub)
            child_sent = smap.get(k, _GONE)
            if inside and child_sent is _GONE:
                continue
            out["f:" + k] = _everything(v, shape.field(k), sub, child_sent, inside)
    elif isinstance(value, list):
        elems = fieldpaths.elements(value, shape)
        if elems is not None:
            items = _sent_items(sent, shape) if (guarded or trie) else {}
            item = shape.item()
            sub = trie.get("*") if trie else None
            inside = guarded or (sub is not None and "" in sub)
            for elem, v in zip(elems, value, strict=True):
                child_sent = items.get(elem, _GONE)
                if inside and child_sent is _GONE:
                    continue
                out[elem] = _everything(v, item, sub, child_sent, inside)
    if not out:
        return {}
    out = _sorted_node(out)
    return {".": {}, **out}


# ------------------------------------------------------------------ operations


def on_create(
    key: str,
    shape: Shape,
    sent: Mapping[str, Any],
    stored: dict[str, Any],
    manager: str,
    api_version: str,
    now: str,
) -> None:
    """Record the creator's Update entry in `stored`. managedFields sent with the create are kept for what the
    creator does not take (decodeLiveOrNew on a create: the live object is the zero value)."""
    sent_managers = entries_for_write(sent, {}, None)
    if not sent_managers:  # the usual create: one entry, encoded in one walk
        fields_v1 = created_fields_v1(key, shape, sent, stored)
        meta = stored.setdefault("metadata", {})
        if fields_v1:
            entry = {"manager": manager, "operation": "Update", "apiVersion": api_version, "time": now}
            meta["managedFields"] = [{**entry, "fieldsType": "FieldsV1", "fieldsV1": fields_v1}]
        else:
            meta.pop("managedFields", None)
        return
    fields = created_fields(key, shape, sent, stored)
    managers = []
    for m in sent_managers:
        m.fields -= fields
        if m.fields:
            managers.append(m)
    if fields:
        managers.append(Managed(manager, "Update", api_version, "", now, fields))
    store_entries(stored, cap_update_managers(managers))


def on_update(
    key: str,
    shape: Shape,
    managers: list[Managed],
    live: Mapping[str, Any],
    new: dict[str, Any],
    manager: str,
    api_version: str,
    subresource: str,
    now: str,
) -> None:
    """An Update operation (PUT, non-apply PATCH, status writes) by `manager`; writes new's managedFields."""
    added, modified, removed = fieldpaths.compare(comparable(key, live), comparable(key, new), shape)
    taken = strip_meta(added | modified)
    result: list[Managed] = []
    for m in managers:
        m.fields = (m.fields - taken) - removed
        if m.fields:
            result.append(m)
    if taken:
        ident = (manager, "Update", api_version, subresource)
        mine = next((m for m in result if m.identity == ident), None)
        if mine is None:
            result.append(Managed(manager, "Update", api_version, subresource, now, set(taken)))
        else:
            mine.fields |= taken
            mine.time = now
    store_entries(new, cap_update_managers(result))


def cap_update_managers(managers: list[Managed], limit: int = MAX_UPDATE_MANAGERS) -> list[Managed]:
    """capManagersManager: fold the oldest Update entries into `ancient-changes` (one per apiVersion)."""
    updaters = [m for m in managers if m.operation == "Update"]
    if len(updaters) <= limit:
        return managers
    updaters.sort(key=lambda m: (m.time or "", m.identity))
    keep = list(managers)
    first_of_version: dict[str, Managed] = {}
    buckets: dict[str, Managed] = {}
    count = len(updaters)
    for m in updaters:
        if count <= limit:
            break
        if m.api_version not in first_of_version:
            first_of_version[m.api_version] = m
            continue
        bucket = buckets.get(m.api_version)
        if bucket is None:
            first = first_of_version[m.api_version]
            keep.remove(first)
            bucket = Managed(ANCIENT_CHANGES, "Update", m.api_version, "", first.time, set(first.fields))
            buckets[m.api_version] = bucket
            keep.append(bucket)
        bucket.fields |= m.fields
        bucket.time = m.time
        keep.remove(m)
        count -= 1
    return keep


# ------------------------------------------------------------------ request options

_OPTIONS = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def request_manager(query: Mapping[str, str], user_agent: str, verb: str, *, applying: bool) -> str:
    """The write's field manager: `fieldManager`, else the User-Agent's prefix (managerOrUserAgent).

    Validates the options as ValidateCreateOptions/ValidateUpdateOptions/ValidatePatchOptions do (422 on the
    options kind, group meta.k8s.io, empty name): apply needs a fieldManager, `force` is for apply only."""
    name = query.get("fieldManager", "")
    errors: list[FieldError] = []
    if verb == "patch":
        if not applying and "force" in query:
            errors.append(FieldError("Forbidden", "force", detail="may not be specified for non-apply patch"))
        if applying and not name:
            errors.append(FieldError("Required", "fieldManager", detail="is required for apply patch"))
    errors += field_manager_errors(name)
    if errors:
        raise invalid(_OPTIONS.get(verb, "PatchOptions"), "meta.k8s.io", "", errors)
    return name or manager_from_user_agent(user_agent)


def force_option(query: Mapping[str, str]) -> bool:
    """`force` as strconv.ParseBool reads it (400 otherwise, as DecodeParameters answers)."""
    text = query.get("force")
    if text is None or text in _FALSE:
        return False
    if text in _TRUE:
        return True
    raise bad_request(f'strconv.ParseBool: parsing "{text}": invalid syntax')
