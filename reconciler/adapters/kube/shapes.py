"""Node and Pod as migplan reads them: typed, pruned shapes for decoding the big LIST pages.

A pod from an API server is some 4 KB of JSON, 40% of it `metadata.managedFields`, most of the rest spec and
status fields migplan never reads; decoding all of it (orjson) and freeing it again was the largest single cost
of an in-sync cycle at fleet size. Decoding a page into these shapes (msgspec, TypedDicts) skips every other field
while parsing (still checking the JSON's syntax), and `decode_page` hands the consumers plain dicts of only the
present fields, so kube/observe.py and rebootpods.py read them exactly as they read the full objects.

What is kept is what the consumers of `list nodes` and `list pods` read, field for field (audited from every
`.get` of kube/observe.py `node_from_json`, `unschedulable_owned_by_migplan`, `ParseMemo`, `PodSorter.add` and all
it calls: `gpu_pod_from_json`, `pod_claims`, `controller_of`, `is_mig_manager_pod`, `mig_manager_source`,
`owned_by_daemonset`, `pod_ready`, `pod_ready_since`, `device_plugin_pod_from_json`, rebootpods.py
`RebootTally.add`, and cluster.py `_quote_log` / `_mig_manager_reason`); tests/unit/adapters/test_kube_shapes.py
records every key those consumers read on full objects and fails on one a shape drops.

Only the first levels are typed objects; below them every value is `Any`, so a hostile value (a label that is a
list, a phase that is a number) reaches the consumers exactly as orjson would have decoded it. A value of the wrong
type where a shape has an object (a `spec` that is a string, a container that is a number) fails the typed decode, and
the caller decodes that page in full instead (cluster.read_list_page): the same objects, the same errors.
Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

import msgspec

from reconciler.model.observed import MIRROR_POD_ANNOTATION

# TypedDicts, not Structs: msgspec decodes them straight into plain dicts holding only the declared keys present
# (in the order the server wrote them), skipping every other key, so there is no second pass to turn records into
# the dicts the consumers read. `total=False`: any key may be absent, as in any object a server sends.

# --- Node: kube/observe.py node_from_json, unschedulable_owned_by_migplan, ParseMemo ------------------------------

# A managedFields entry's fieldsV1: only `f:spec` is read (who owns `f:spec.f:unschedulable`).
NodeFieldsV1 = TypedDict("NodeFieldsV1", {"f:spec": Any}, total=False)


class NodeManagedField(TypedDict, total=False):
    manager: Any
    subresource: Any
    fieldsV1: NodeFieldsV1 | None


class NodeMeta(TypedDict, total=False):
    name: Any
    uid: Any
    resourceVersion: Any
    labels: Any  # kept whole: ObservedNode carries every label
    annotations: Any  # kept whole: ObservedNode carries every annotation (the observer's report among them)
    managedFields: list[NodeManagedField] | None


class NodeSpec(TypedDict, total=False):
    unschedulable: Any
    taints: Any


class NodeStatus(TypedDict, total=False):
    capacity: Any
    allocatable: Any


class Node(TypedDict, total=False):
    metadata: NodeMeta | None
    spec: NodeSpec | None
    status: NodeStatus | None


# --- Pod: PodSorter.add and everything it feeds -------------------------------------------------------------------

# Only whether a pod is a mirror pod is read (`in`): its other annotations (a last-applied configuration can be
# kilobytes) are dropped.
PodAnnotations = TypedDict("PodAnnotations", {MIRROR_POD_ANNOTATION: Any}, total=False)  # type: ignore[misc]


class PodMeta(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    resourceVersion: Any
    labels: Any  # kept whole: ObservedPod and the reboot tally carry them (PodDisruptionBudget selectors)
    annotations: PodAnnotations | None
    ownerReferences: Any
    deletionTimestamp: Any


# A container's env is read only on a mig-manager pod, and only the names (is CONFIG_FILE set): typed, so the values
# of every other pod's env (often dozens of entries, some long) are skipped while parsing.
class EnvVar(TypedDict, total=False):
    name: Any


class Container(TypedDict, total=False):
    name: Any
    resources: Any  # requests and limits, read whole (every GPU resource)
    env: list[EnvVar] | None  # a mig-manager pod's first container: CONFIG_FILE


class Volume(TypedDict, total=False):
    name: Any
    configMap: Any  # a mig-manager pod's `mig-parted-config` volume


class PodSpec(TypedDict, total=False):
    nodeName: Any
    nodeSelector: Any
    containers: list[Container] | None
    volumes: list[Volume] | None
    resourceClaims: Any


# Each pod has five or so conditions, read only on device-plugin pods (pod_ready, pod_ready_since): typed, so their
# reason, message and lastProbeTime are skipped, not made into strings for every pod (a tenth of a pod page's decode).
class PodCondition(TypedDict, total=False):
    type: Any
    status: Any
    lastTransitionTime: Any


class PodStatus(TypedDict, total=False):
    phase: Any
    conditions: list[PodCondition] | None  # Ready and its lastTransitionTime
    resourceClaimStatuses: Any


class Pod(TypedDict, total=False):
    metadata: PodMeta | None
    spec: PodSpec | None
    status: PodStatus | None


# --- pages ----------------------------------------------------------------------------------------------------------


class NodeList(TypedDict, total=False):
    items: list[Node] | None
    metadata: Any  # resourceVersion and continue: read_list_page checks them as for any list


class PodList(TypedDict, total=False):
    items: list[Pod] | None
    metadata: Any


class PageShape:
    """The typed decoder of one kind's LIST page (made once: msgspec compiles the shape into the decoder)."""

    __slots__ = ("decoder", "kind")

    def __init__(self, kind: str, page: Any) -> None:
        self.kind = kind
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(page)


NODES = PageShape("Node", NodeList)
PODS = PageShape("Pod", PodList)

# Where msgspec and orjson could read the same bytes differently, the page is decoded in full instead:
# - a number orjson reads otherwise: an integer past 64 bits (orjson: a float; msgspec: an int), a float whose
#   exponent has three digits or more (orjson refuses an infinity; msgspec skips it where the shape drops it), a long
#   mantissa or fraction (two parsers' rounding, not worth trusting to agree). Found on a copy of the page with every
#   digit made `0` (bytes.translate and find run at memory speed; a regex over the raw page cost as much as the whole
#   typed decode saves, one over the copy starts with the literal `0e` and runs near find's speed): a run of 17
#   digits, or an exponent of three digits or more that ends a number (`0e000,`). A
#   false match (such text inside a string) only costs the faster path, never a wrong page;
# - bytes that are not UTF-8: orjson refuses the page, msgspec does not check a string it skips.
# Nesting is the one difference left: orjson refuses more than 1,024 levels, msgspec stops at the interpreter's
# recursion limit, which celpy.Environment() raises to 2,500 for the whole process (logic/workloads/dracel.py). A page
# nested between the two is then read with the shape (a deep kept value reaches the consumers as any other hostile
# value; a deep dropped one is skipped) where the full decode refuses it. Node and Pod are typed structs in the API
# server (no free-form nesting), so no server sends such a page; tests/unit/adapters/test_kube_shapes.py pins both.
_FLAT = bytes.maketrans(b"123456789E-", b"000000000e+")
_LONG_DIGITS = b"0" * 17
_EXPONENT = re.compile(rb"0e\+?000+[,}\]\s]")


def _typed_safe(data: bytes) -> bool:
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    flat = data.translate(_FLAT)
    if flat.find(_LONG_DIGITS) >= 0:
        return False
    # One search of the flat copy: its literal prefix `0e` lets the regex engine skip ahead as find does (a third
    # of the time of finding each `e000` and `e+000`, a few per hex uid, and matching there, in a Python loop).
    return _EXPONENT.search(flat) is None


def decode_page(data: bytes, shape: PageShape) -> dict[str, Any] | None:
    """The LIST page as a plain dict of only the fields `shape` keeps (`items`: plain dicts of the present fields,
    `metadata`: as sent), or None when the typed decode cannot be trusted to equal the full one: any decode error
    (not JSON, a wrong type where the shape has a Struct, nesting too deep) or bytes the two decoders could read
    differently. None means: decode this page in full (what cluster.read_list_page does)."""
    if not _typed_safe(data):
        return None
    try:
        doc: dict[str, Any] = shape.decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    return doc
