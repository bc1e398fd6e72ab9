"""The one write of a node's labels and annotations: a JSON merge patch of `metadata`, as migplan's field manager.

The agent's layout annotations (agentmode), the GPU-client pause labels (gpuclients) and the controller's node
marks (events) all write a node's metadata this way; an API error comes back as the one translation (api_error).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.cluster import MERGE_PATCH, api_error
from reconciler.model.observed import FIELD_MANAGER


def patch_node_metadata(api: Any, node: str, metadata: Mapping[str, Any]) -> None:
    """Merge-patch `metadata` (labels and/or annotations; a None value deletes the key) into `node`.

    `api` is a CoreV1Api. Raises the MigplanError api_error makes of a refused or failed request."""
    try:
        api.patch_node(node, {"metadata": dict(metadata)}, field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH)
    except ApiException as exc:
        raise api_error(exc, f"patch node {node}") from exc
