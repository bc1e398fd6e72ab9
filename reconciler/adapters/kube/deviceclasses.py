"""DeviceClasses (resource.k8s.io/v1) through the official client: read them, and send the writes the plan holds.

What to write is decided in reconciler/logic/planning/deviceclasses.py (pure); this module only turns raw JSON into
ObservedDeviceClass values and a DEVICE_CLASS Change into one request of the official client (sent raw through its
ApiClient, reconciler/adapters/kube/rawapi.py):
- create: the whole object, with migplan's field manager (the object carries migplan's managed-by label);
- configure: a JSON merge patch of the fields migplan owns (spec, its label and annotation), sent with the
  resourceVersion migplan read, so a class someone changed since is a conflict (409) the next cycle re-reads, never
  an overwrite;
nothing is ever deleted (a class migplan no longer wants is patched to select nothing: the planner's "retired").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.adapters.kube import rawapi
from reconciler.model.dra import DEVICE_CLASS_PURPOSE_ANNOTATION as PURPOSE_ANNOTATION
from reconciler.model.dra import ObservedDeviceClass
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from reconciler.model.plans import Action, Change

_MAX_SELECTORS = 32  # resource/v1 DeviceSelectorsMaxSize: more is not a class the API server stored


def from_json(obj: Mapping[str, Any]) -> ObservedDeviceClass | None:
    """One listed DeviceClass, or None when it has no readable name (nothing migplan could address)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    ext = spec.get("extendedResourceName")
    selectors: list[str] = []
    raw = spec.get("selectors")
    for sel in raw[:_MAX_SELECTORS] if isinstance(raw, list) else ():
        cel = sel.get("cel") if isinstance(sel, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        if isinstance(expression, str):
            selectors.append(expression)
    labels = meta.get("labels")
    annotations = meta.get("annotations")
    purpose = annotations.get(PURPOSE_ANNOTATION) if isinstance(annotations, Mapping) else None
    rv = meta.get("resourceVersion")
    return ObservedDeviceClass(
        name=name,
        extended_resource_name=ext if isinstance(ext, str) else None,
        selectors=tuple(selectors),
        managed=isinstance(labels, Mapping) and labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE,
        purpose=purpose if isinstance(purpose, str) else None,
        resource_version=rv if isinstance(rv, str) else "",
    )


def send(api: rawapi.ResourceV1, change: Change, common: Mapping[str, Any]) -> Any:
    """The one request a DEVICE_CLASS change stands for (`common`: field manager, dry run, timeouts)."""
    assert change.patch is not None
    name = change.subject.split("/", 1)[1]
    body = dict(change.patch)
    if change.action is Action.CREATE:
        return api.create_device_class(body, **common)
    return api.patch_device_class(name, body, _content_type="application/merge-patch+json", **common)
