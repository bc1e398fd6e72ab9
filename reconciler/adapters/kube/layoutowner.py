"""Who else writes the agent's own node's MIG layout, read by the node agent itself (reconciler.agent.LayoutOwnerPort).

The controller withdraws a layout it published on a node another component took (MP577), but between that
node's change of hands and the controller's next cycle the agent would still build the old layout. So the agent
asks on every pass, from what it may read about its own node:
- the ResourceSlices of NVIDIA's DRA driver bound to the node (resource.k8s.io/v1, the server filtering on
  `spec.nodeName` and `spec.driver`): counter sets or devices consuming counters are DynamicMIG
  (reconciler.logic.drift.draregime);
- the Node's `hami.io/node-nvidia-register` annotation (HAMi's MIG mode, reconciler.logic.drift.thirdparty).
A server without resource.k8s.io/v1 answers 404: no DRA there. Any other failure is raised (the pass writes
nothing). The GPU Operator's GPUCluster is the controller's to read (cluster-wide RBAC the agent does not hold).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.cluster import api_error
from reconciler.adapters.kube.observe import DRA_DRIVER, dra_from_slices
from reconciler.logic.drift import draregime, thirdparty
from reconciler.model.errors import MigplanError

if TYPE_CHECKING:
    from reconciler.agent import LayoutOwnerPort

_PAGE = 100
_MAX_PAGES = 100  # a node's slices fit in one page; a server that never stops paging is failing


class KubeLayoutOwner:
    """The other writer of one node's MIG layout, from its ResourceSlices and its Node (LayoutOwnerPort)."""

    def __init__(self, api: Any) -> None:
        """`api` is a kubernetes.client.ApiClient."""
        self._core = client.CoreV1Api(api)
        self._resource = client.ResourceV1Api(api)

    def _slices(self, node: str) -> list[Any]:
        out: list[Any] = []
        cont: str | None = None
        for _ in range(_MAX_PAGES):
            try:
                resp: Any = self._resource.list_resource_slice(
                    field_selector=f"spec.nodeName={node},spec.driver={DRA_DRIVER}",
                    limit=_PAGE,
                    _continue=cont,
                    _preload_content=False,  # raw JSON: dra_from_slices reads (and bounds) what the typed model drops
                )
                doc = json.loads(resp.data)
            except ApiException as exc:
                if exc.status == 404:
                    return []  # no resource.k8s.io/v1 on this server: no DRA driver publishes anything
                raise api_error(exc, f"list resourceslices of node {node}") from exc
            except (ValueError, RecursionError) as exc:
                raise MigplanError(f"list resourceslices of node {node}: the answer is not JSON", code="MP554") from exc
            items = doc.get("items") if isinstance(doc, dict) else None
            out.extend(items if isinstance(items, list) else [])
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            cont = meta.get("continue") if isinstance(meta, dict) else None
            if not isinstance(cont, str) or not cont:
                return out
        raise MigplanError(f"list resourceslices of node {node}: more than {_MAX_PAGES} pages", code="MP554")

    def other_writer(self, node: str) -> str | None:
        try:
            obj = self._core.read_node(node)
        except ApiException as exc:
            raise api_error(exc, f"read node {node}") from exc
        meta = obj.metadata
        third = thirdparty.node_writer(dict((meta.annotations if meta is not None else None) or {}))
        if third is not None:
            return third.writer
        return draregime.other_writer(dra_from_slices(self._slices(node)).get(node))


if TYPE_CHECKING:

    def _conforms(x: KubeLayoutOwner) -> LayoutOwnerPort:
        return x
