"""The twin scheduler's extended-resource path of DRA (KEP-5004, `DRAExtendedResource`, beta and on in v1.36).

A pod asking an extended resource (`nvidia.com/mig-1g.18gb: 1`) that a node does not advertise (allocatable 0 or
absent) but that a DeviceClass maps is served from DRA. From kubernetes pkg/scheduler/framework/plugins/
dynamicresources (read at 16913111, ASSUMPTIONS-dra.md says which function gives which rule):
- the mapping (`extended/util.go` `DeviceClassMapping`, `extended/cache.go` `OnDeviceClassEvent`): a class's
  `spec.extendedResourceName` maps that name to it, and every class also maps the implicit name
  `deviceclass.resource.kubernetes.io/<class name>`; two classes for one name: the newer wins (resource/v1
  `DeviceClassSpec.ExtendedResourceName` comment), the twin taking the later creationTimestamp, then the name;
- `extendeddynamicresources.go` `filterExtendedResources`: per node, a mapped resource with node allocatable 0 is
  asked from DRA; an unmapped one the node does not advertise at all makes the node unfit;
- `createRequestsAndMappings` / `createResourceRequestAndMappings`: one request per container and resource,
  named `container-<i>-request-<j>` (i: the container's index in initContainers + containers; j: the resource's
  index among the container's sorted request names), `exactly` {deviceClassName, ExactCount, count}; the requests
  sorted by name; a mapping {containerName, resourceName, requestName} each (init containers' reuse of later
  requests is not modelled: the twin's pods have none asking GPUs);
- `preFilterExtendedResources` / `createExtendedResourceClaimInAPI`: one claim per pod, `generateName`
  `<pod>-extended-resources-`, in the pod's namespace, controlled by the pod (ownerReference), annotated
  `resource.kubernetes.io/extended-resource-claim: "true"`; allocated and reserved for the pod;
- `patchPodExtendedResourceClaimStatus`: the pod's `status.extendedResourceClaimStatus` {requestMappings,
  resourceClaimName}.
The kubelet's device manager then leaves those resources to the DRA manager (KEP-5004): the twin's kubelet skips
what `extendedResourceClaimStatus` maps (reconciler/twin/operator/scheduler.py `container_requests`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # resource/v1 ResourceDeviceClassPrefix


class NotFit(Exception):
    """The pod does not fit the node through the extended-resource path; the message says why."""


def class_mapping(classes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """extended resource name -> DeviceClass name (explicit names, and the implicit one of every class)."""
    ordered = sorted(
        classes, key=lambda c: (str(c["metadata"].get("creationTimestamp", "")), str(c["metadata"]["name"]))
    )
    out: dict[str, str] = {}
    for c in ordered:  # older first: a newer class mapping the same name replaces it
        name = str(c["metadata"]["name"])
        out[DEVICE_CLASS_PREFIX + name] = name
        ext = (c.get("spec") or {}).get("extendedResourceName")
        if isinstance(ext, str) and ext:
            out[ext] = name
    return out


def _count(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]


def _requests(container: Mapping[str, Any]) -> dict[str, Any]:
    res = container.get("resources") or {}
    return {**(res.get("limits") or {}), **(res.get("requests") or {})}


def maps_any(pod: Mapping[str, Any], mapping: Mapping[str, str]) -> bool:
    """`hasDeviceClassMappedExtendedResource`: the pod asks a non-zero quantity of a resource a class maps."""
    return any(r in mapping and _count(q) > 0 for c in _containers(pod) for r, q in _requests(c).items())


def special_claim(
    pod: Mapping[str, Any], allocatable: Mapping[str, Any], mapping: Mapping[str, str]
) -> tuple[dict[str, Any], list[dict[str, str]]] | None:
    """The special claim (not yet created: no name) and the request mappings for `pod` on a node with
    `allocatable`; None when every extended resource the pod asks is the device plugin's there; NotFit when the
    node has a resource neither advertised nor mapped."""
    asked: dict[str, int] = {}
    for c in _containers(pod):
        for r, q in _requests(c).items():
            if "/" in r and not r.startswith("kubernetes.io/") and _count(q) > 0:
                asked[r] = asked.get(r, 0) + _count(q)
    dra: set[str] = set()
    for r in sorted(asked):
        if r in mapping and _count(allocatable.get(r, 0)) == 0:
            dra.add(r)
        elif r not in allocatable:
            raise NotFit(f"cannot fit resource {r}")
    if not dra:
        return None
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(dra):
        for i, c in enumerate(_containers(pod)):
            wanted = _requests(c)
            n = _count(wanted.get(resource, 0))
            if n <= 0:
                continue
            name = f"container-{i}-request-{sorted(wanted).index(resource)}"
            requests.append(
                {
                    "name": name,
                    "exactly": {"deviceClassName": mapping[resource], "allocationMode": "ExactCount", "count": n},
                }
            )
            mappings.append({"containerName": str(c.get("name", "")), "resourceName": resource, "requestName": name})
    meta = pod["metadata"]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{meta['name']}-extended-resources-",
            "namespace": meta.get("namespace", "default"),
            "ownerReferences": [_controller(meta)],
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": sorted(requests, key=lambda r: r["name"])}},
    }
    return claim, mappings


def _controller(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta.get("uid", ""), "controller": True}


def dra_mapped(pod: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(container, resource) pairs the pod's `status.extendedResourceClaimStatus` gives to DRA."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    return {
        (str(m.get("containerName", "")), str(m.get("resourceName", "")))
        for m in status.get("requestMappings") or ()
        if isinstance(m, Mapping)
    }
