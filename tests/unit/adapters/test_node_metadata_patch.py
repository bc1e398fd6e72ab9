"""One node-metadata write (adapters/kube/nodemeta.py): a JSON merge patch of `metadata` as migplan's field manager,
whichever adapter writes (agent annotations, GPU-client pause labels, the controller's node marks); a refused write
is the one translated error, and a node mark that cannot be written is counted, never fatal."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube import cluster as kube
from reconciler.adapters.kube.events import REASON_ANNOTATION, STATE_ANNOTATION, KubeSignals
from reconciler.adapters.kube.nodemeta import patch_node_metadata
from reconciler.model.signals import MarkState, NodeMark


class _Core:
    """Records patch_node calls; refuses the nodes in `refuse` with `status`."""

    def __init__(self, refuse: frozenset[str] = frozenset(), status: int = 403) -> None:
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []
        self._refuse, self._status = refuse, status

    def patch_node(self, name: str, body: Any, **kwargs: Any) -> None:
        self.calls.append((name, body, kwargs))
        if name in self._refuse:
            exc = ApiException(status=self._status, reason="Refused")
            exc.body = orjson.dumps({"kind": "Status", "message": "nodes is forbidden"}).decode()
            raise exc


def test_the_patch_is_a_merge_patch_of_metadata_as_migplan() -> None:
    core = _Core()
    patch_node_metadata(core, "gpu-1", {"labels": {"a": "1"}, "annotations": {"b": None}})
    assert core.calls == [
        (
            "gpu-1",
            {"metadata": {"labels": {"a": "1"}, "annotations": {"b": None}}},
            {"field_manager": "migplan", "_content_type": "application/merge-patch+json"},
        )
    ]


@pytest.mark.parametrize(("status", "kind"), [(403, kube.ApiRequestFailed), (404, kube.NotFound)])
def test_a_refused_patch_is_the_translated_error(status: int, kind: type[Exception]) -> None:
    with pytest.raises(kind) as caught:
        patch_node_metadata(_Core(frozenset({"gpu-1"}), status), "gpu-1", {"labels": {"a": "1"}})
    assert "patch node gpu-1" in str(caught.value)


def test_a_node_mark_that_cannot_be_written_is_counted_and_the_others_are_written() -> None:
    core = _Core(frozenset({"gpu-2"}))
    signals = KubeSignals(core, instance="test")  # type: ignore[arg-type]
    marks = [
        NodeMark("gpu-1", MarkState.IN_SYNC, "ok"),
        NodeMark("gpu-2", MarkState.FAILED, "x"),
        NodeMark("gpu-3", MarkState.HELD, "y"),
    ]
    assert signals.mark(marks) == 2
    assert signals.failures == 1
    assert [c[0] for c in core.calls] == ["gpu-1", "gpu-2", "gpu-3"]
    assert core.calls[2][1] == {"metadata": {"annotations": {STATE_ANNOTATION: "Held", REASON_ANNOTATION: "y"}}}
