"""Write a node's desired layout as the controller's plan does, for tests that drive a node agent directly."""

from __future__ import annotations

from kubernetes import client

from reconciler.logic.planning import desiredcodec
from reconciler.logic.planning.agentplan import DesiredNode


def publish(core: client.CoreV1Api, layout: DesiredNode) -> None:
    """A JSON merge patch of the one `migplan.io/mig-desired` annotation, migplan's field manager."""
    body = {"metadata": {"annotations": {desiredcodec.ANNOTATION: desiredcodec.encode(layout)}}}
    core.patch_node(layout.node, body, field_manager="migplan", _content_type="application/merge-patch+json")
