"""Node and Pod as migplan reads them: typed, pruned shapes for decoding the big LIST pages.

A pod from an API server is some 4 KB of JSON, 40% of it `metadata.managedFields`, most of the rest spec and
status fields migplan never reads; decoding all of it (orjson) and freeing it again was the largest single cost
of an in-sync cycle at fleet size. Decoding a page into these msgspec Structs skips every other field while
parsing (still checking the JSON's syntax), and `decode_page` hands the consumers plain dicts of only the present
fields, so kube/observe.py and rebootpods.py read them exactly as they read the full objects.

What is kept is what the consumers of `list nodes` and `list pods` read, field for field (audited from every
`.get` of kube/observe.py `node_from_json`, `unschedulable_owned_by_migplan`, `ParseMemo`, `PodSorter.add` and all
it calls: `gpu_pod_from_json`, `pod_claims`, `controller_of`, `is_mig_manager_pod`, `mig_manager_source`,
`owned_by_daemonset`, `pod_ready`, `pod_ready_since`, `device_plugin_pod_from_json`, rebootpods.py
`RebootTally.add`, and cluster.py `_quote_log` / `_mig_manager_reason`); tests/unit/adapters/test_kube_shapes.py
records every key those consumers read on full objects and fails on one a shape drops.

Only the first levels are Structs; below them every value is `Any`, so a hostile value (a label that is a list, a
phase that is a number) reaches the consumers exactly as orjson would have decoded it. A value of the wrong type
where a shape has a Struct (a `spec` that is a string, a container that is a number) fails the typed decode, and
the caller decodes that page in full instead (cluster.read_list_page): the same objects, the same errors.
Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType, field

from reconciler.model.observed import MIRROR_POD_ANNOTATION

# gc=False: decoded JSON holds no reference cycles, and a Struct the collector does not track costs less to make
# and to free. rename="camel": the JSON names (nodeName, ownerReferences) from Python names.
_OPTIONS: dict[str, Any] = {"gc": False, "rename": "camel"}


# --- Node: kube/observe.py node_from_json, unschedulable_owned_by_migplan, ParseMemo ------------------------------


class NodeFieldsV1(Struct, **_OPTIONS):
    """A managedFields entry's fieldsV1: only `f:spec` is read (who owns `f:spec.f:unschedulable`)."""

    f_spec: Any = field(default=UNSET, name="f:spec")


class NodeManagedField(Struct, **_OPTIONS):
    manager: Any = UNSET
    subresource: Any = UNSET
    fields_v1: NodeFieldsV1 | None | UnsetType = field(default=UNSET, name="fieldsV1")


class NodeMeta(Struct, **_OPTIONS):
    name: Any = UNSET
    uid: Any = UNSET
    resource_version: Any = UNSET
    labels: Any = UNSET  # kept whole: ObservedNode carries every label
    annotations: Any = UNSET  # kept whole: ObservedNode carries every annotation (the observer's report among them)
    managed_fields: list[NodeManagedField] | None | UnsetType = UNSET


class NodeSpec(Struct, **_OPTIONS):
    unschedulable: Any = UNSET
    taints: Any = UNSET


class NodeStatus(Struct, **_OPTIONS):
    capacity: Any = UNSET
    allocatable: Any = UNSET


class Node(Struct, **_OPTIONS):
    metadata: NodeMeta | None | UnsetType = UNSET
    spec: NodeSpec | None | UnsetType = UNSET
    status: NodeStatus | None | UnsetType = UNSET


# --- Pod: PodSorter.add and everything it feeds -------------------------------------------------------------------


class PodAnnotations(Struct, gc=False):
    """Only whether a pod is a mirror pod is read (`in`): a pod's other annotations (a last-applied configuration
    can be kilobytes) are dropped."""

    mirror: Any = field(default=UNSET, name=MIRROR_POD_ANNOTATION)


class PodMeta(Struct, **_OPTIONS):
    name: Any = UNSET
    namespace: Any = UNSET
    uid: Any = UNSET
    resource_version: Any = UNSET
    labels: Any = UNSET  # kept whole: ObservedPod and the reboot tally carry them (PodDisruptionBudget selectors)
    annotations: PodAnnotations | None | UnsetType = UNSET
    owner_references: Any = UNSET
    deletion_timestamp: Any = UNSET


class Container(Struct, **_OPTIONS):
    name: Any = UNSET
    resources: Any = UNSET  # requests and limits, read whole (every GPU resource)
    env: Any = UNSET  # a mig-manager pod's first container: CONFIG_FILE


class Volume(Struct, **_OPTIONS):
    name: Any = UNSET
    config_map: Any = UNSET  # a mig-manager pod's `mig-parted-config` volume


class PodSpec(Struct, **_OPTIONS):
    node_name: Any = UNSET
    node_selector: Any = UNSET
    containers: list[Container] | None | UnsetType = UNSET
    volumes: list[Volume] | None | UnsetType = UNSET
    resource_claims: Any = UNSET


class PodStatus(Struct, **_OPTIONS):
    phase: Any = UNSET
    conditions: Any = UNSET  # Ready and its lastTransitionTime
    resource_claim_statuses: Any = UNSET


class Pod(Struct, **_OPTIONS):
    metadata: PodMeta | None | UnsetType = UNSET
    spec: PodSpec | None | UnsetType = UNSET
    status: PodStatus | None | UnsetType = UNSET


# --- pages ----------------------------------------------------------------------------------------------------------


class NodeList(Struct, gc=False):
    items: list[Node] | None | UnsetType = UNSET
    metadata: Any = UNSET  # resourceVersion and continue: read_list_page checks them as for any list


class PodList(Struct, gc=False):
    items: list[Pod] | None | UnsetType = UNSET
    metadata: Any = UNSET


class PageShape:
    """The typed decoder of one kind's LIST page (made once: msgspec compiles the shape into the decoder)."""

    __slots__ = ("decoder", "kind")

    def __init__(self, kind: str, page: type[Struct]) -> None:
        self.kind = kind
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(page)


NODES = PageShape("Node", NodeList)
PODS = PageShape("Pod", PodList)

# Where msgspec and orjson could read the same bytes differently, the page is decoded in full instead:
# - a number orjson reads otherwise: an integer past 64 bits (orjson: a float; msgspec: an int), a float whose
#   exponent has three digits or more (orjson refuses an infinity, msgspec skips it where the shape drops it), a
#   long fraction (two parsers' rounding, not worth trusting to agree). Every JSON number follows `:` `,` or `[`
#   (and whitespace): a false match (such text inside a string) only costs the faster path, never a wrong page;
# - bytes that are not UTF-8: orjson refuses the page, msgspec does not check a string it skips.
_RISKY_NUMBER = re.compile(rb"[:,\[]\s*-?(?:\d{19}|\d+(?:\.\d+)?[eE][+-]?\d{3}|\d+\.\d{17})")


def _typed_safe(data: bytes) -> bool:
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return _RISKY_NUMBER.search(data) is None


def decode_page(data: bytes, shape: PageShape) -> dict[str, Any] | None:
    """The LIST page as a plain dict of only the fields `shape` keeps (`items`: plain dicts of the present fields,
    `metadata`: as sent), or None when the typed decode cannot be trusted to equal the full one: any decode error
    (not JSON, a wrong type where the shape has a Struct, nesting too deep) or bytes the two decoders could read
    differently. None means: decode this page in full (what cluster.read_list_page does)."""
    if not _typed_safe(data):
        return None
    try:
        page = shape.decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    doc: dict[str, Any] = msgspec.to_builtins(page)
    return doc
