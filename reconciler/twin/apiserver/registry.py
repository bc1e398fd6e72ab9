"""Per-kind registry strategies: what each built-in kind adds to the generic store's create, update and delete.

kube-apiserver serves every resource through one generic store (staging/src/k8s.io/apiserver/pkg/registry/generic/
registry/store.go) that calls the kind's strategy (pkg/registry/<group>/<kind>/strategy.go, `rest.RESTCreateStrategy`,
`RESTUpdateStrategy`, `RESTGracefulDeleteStrategy`) and the kind's storage wrapper (pkg/registry/<group>/<kind>/
storage/storage.go) at fixed points. The twin's store (store.py) does the same: it asks `strategy_for(rt)` and
calls the hooks below in the real order, so it never names a kind. The rules themselves are kinds.py's,
strategies.py's and admission.py's; this module only says which kind runs which, and when. Sources, kubernetes/
kubernetes:
- pkg/registry/core/pod/strategy.go `CheckGracefulDelete`: a pod bound to a node is only marked (deletionTimestamp,
  grace from DeleteOptions or spec.terminationGracePeriodSeconds); an unbound one, or grace 0, is deleted at once
  after the registry records deletionTimestamp with grace 0 (`BeforeDelete`, generation bumped the first time);
- pkg/registry/core/namespace/storage/storage.go `Delete`: a namespace with spec.finalizers is set Terminating and
  kept until the namespace controller (pkg/controller/namespace/deletion/namespaced_resources_deleter.go) has
  deleted its content and removed the `kubernetes` finalizer; plugin/pkg/admission/namespace/lifecycle refuses
  deleting the immortal namespaces;
- pkg/registry/core/namespace/strategy.go `PrepareForUpdate`: the `kubernetes.io/metadata.name` label is put back;
- pkg/registry/apps/daemonset/strategy.go `PrepareForCreate`/`PrepareForUpdate`: generation 1 and the
  `deprecated.daemonset.template.generation` annotation, bumped with generation when the template changes;
- pkg/registry/coordination/lease/strategy.go and pkg/registry/core/event/strategy.go `AllowCreateOnUpdate`: true;
- staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition/strategy.go `PrepareForCreate`
  (status reset, conversion strategy None) and the apiextensions controllers (NamesAccepted, Established) that run
  inside kube-apiserver; deleting a CRD stops serving its resources.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from . import admission, dra, kinds, schema, strategies
from .errors import ApiError, FieldError
from .resources import ResourceType, from_crd

After = Callable[[], None]  # follow-up work run once the store's lock is released and the write delivered


class Host(Protocol):
    """What a strategy may ask of the store it runs in (store.Store)."""

    @property
    def bare(self) -> bool:
        """True: no controllers run (the transcripts' bare server)."""

    @property
    def rng(self) -> random.Random:
        """The store's seeded source of generated names."""

    def exists(self, resource: str, namespace: str | None, name: str) -> bool: ...

    def namespace_objects(self, resource: str, namespace: str | None) -> list[dict[str, Any]]: ...

    def namespace_contents(self, namespace: str) -> list[tuple[ResourceType, dict[str, Any]]]: ...

    def register(self, rt: ResourceType) -> None: ...

    def unregister(self, rt: ResourceType) -> None: ...

    def forget_pod_logs(self, namespace: str, name: str) -> None: ...

    def create(self, resource: str, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]: ...

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]: ...

    def delete(
        self, resource: str, name: str, namespace: str | None = None, *, grace_period_seconds: int | None = None
    ) -> dict[str, Any]: ...

    def finish_deletion(
        self, resource: str, namespace: str | None, name: str, finalize: Callable[[dict[str, Any]], None]
    ) -> None: ...


class Strategy:
    """The generic registry's behaviour; a kind's strategy overrides the hooks its kind changes.

    Every hook works on the JSON dict the store owns (mutating it in place) and runs with the store's lock held,
    except the `After` callables some return."""

    allow_create_on_update = False  # PUT of a missing object creates it (AllowCreateOnUpdate)

    def decode(self, obj: dict[str, Any]) -> None:
        """After the scheme's defaulters: the kind's own decoding (normalised times)."""

    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        """Mutating admission and PrepareForCreate. A custom resource with a status subresource drops the status
        a client sends (customresource/strategy.go)."""
        if rt.is_custom and not rt.status_in_main:
            obj.pop("status", None)

    def after_create(self, host: Host, rt: ResourceType, obj: dict[str, Any]) -> After | None:
        """What controllers inside kube-apiserver do once the object is stored."""
        return None

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any], subresource: str | None) -> None:
        """Mutating admission and PrepareForUpdate, after the generic resets of server-owned fields."""

    def on_generation(self, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """After metadata.generation is set (create: 1) or bumped by a spec change."""

    def validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        """Validate (old None) or ValidateUpdate: the object's metadata, then the kind's own rules."""
        return self.validate_metadata(obj, old) + self.validate_kind(rt, obj, old, subresource)

    def validate_metadata(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        """ValidateObjectMeta as the kind calls it."""
        return kinds.validate_metadata(obj)

    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        """The kind's rules after its metadata: a custom resource's schema."""
        return schema.validate(obj, rt.schema) if rt.schema is not None else []

    def check_delete(self, name: str) -> None:
        """Validating admission of a delete (raises ApiError)."""

    def mark_for_deletion(self, old: dict[str, Any], grace_period_seconds: int | None) -> dict[str, Any] | None:
        """The object to keep, marked for deletion, instead of removing `old` now; None removes it."""
        return None

    def after_marked(self, host: Host, marked: dict[str, Any]) -> After | None:
        """What finishes a deletion the store only marked."""
        return None

    def final_state(self, gone: dict[str, Any]) -> None:
        """The last state of a removed object, as the DELETED event and the reply show it."""

    def on_removed(self, host: Host, old: dict[str, Any]) -> None:
        """Storage the kind keeps beside the object, dropped with it."""


class PodStrategy(Strategy):
    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        sa_name = (obj.get("spec") or {}).get("serviceAccountName") or "default"
        sa_exists = host.exists("serviceaccounts", ns, sa_name)
        if not host.bare and sa_name == "default":
            sa_exists = True  # the serviceaccount controller keeps `default` in every namespace
        limit_ranges = host.namespace_objects("limitranges", ns)
        admission.admit_pod_create(obj, ns or "", sa_exists, host.rng, limit_ranges)

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any], subresource: str | None) -> None:
        if subresource is None:
            admission.admit_pod_update(new, old)

    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        errors = kinds.validate_pod_spec(obj.get("spec") or {}, "spec")
        if old is not None:
            errors += kinds.validate_pod_update(obj, old)
        return errors

    def mark_for_deletion(self, old: dict[str, Any], grace_period_seconds: int | None) -> dict[str, Any] | None:
        if not (old.get("spec") or {}).get("nodeName") or grace_period_seconds == 0:
            return None
        grace = grace_period_seconds
        if grace is None:
            grace = (old.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        marked: dict[str, Any] = orjson.loads(orjson.dumps(old))
        kinds.graceful_delete(marked, int(grace))
        marked["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        return marked

    def final_state(self, gone: dict[str, Any]) -> None:
        # an unbound pod, or grace 0: the registry first records deletionTimestamp with grace 0 (bumping
        # generation the first time), then removes the object (pods.json)
        meta = gone["metadata"]
        if not meta.get("deletionTimestamp"):
            kinds.graceful_delete(gone, 0)
            meta["generation"] = int(meta.get("generation", 1)) + 1
        meta["deletionGracePeriodSeconds"] = 0

    def on_removed(self, host: Host, old: dict[str, Any]) -> None:
        meta = old["metadata"]
        host.forget_pod_logs(meta.get("namespace") or "", meta["name"])


class NodeStrategy(Strategy):
    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        admission.taint_new_node(obj)
        kinds.default_node(obj)

    def validate_metadata(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        repeat = 4 if old is not None else 1  # the real node update path reports label errors 4x
        return kinds.validate_metadata(obj, repeat=repeat)

    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        return strategies.validate_node(obj, old, subresource)


class NamespaceStrategy(Strategy):
    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        kinds.default_namespace(obj)

    def after_create(self, host: Host, rt: ResourceType, obj: dict[str, Any]) -> After | None:
        if host.bare:
            return None
        ns = obj["metadata"]["name"]

        def default_sa() -> None:
            with contextlib.suppress(ApiError):  # already there: nothing to do
                host.create("serviceaccounts", {"metadata": {"name": "default"}}, ns)

        return default_sa

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any], subresource: str | None) -> None:
        if subresource is None:
            new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = old["metadata"]["name"]

    def validate_metadata(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        return kinds.validate_metadata(obj, label_name=True)  # a namespace's name is an RFC 1123 label

    def check_delete(self, name: str) -> None:
        admission.check_namespace_delete(name)

    def mark_for_deletion(self, old: dict[str, Any], grace_period_seconds: int | None) -> dict[str, Any] | None:
        # the `kubernetes` finalizer keeps a deleted namespace Terminating until the namespace controller has
        # deleted its content (configmaps.json create-ns shows the finalizer)
        if not (old.get("spec") or {}).get("finalizers"):
            return None
        marked: dict[str, Any] = orjson.loads(orjson.dumps(old))
        marked["metadata"]["deletionTimestamp"] = kinds.now_rfc3339()
        marked["metadata"]["deletionGracePeriodSeconds"] = 0
        marked["status"] = {"phase": "Terminating"}
        return marked

    def after_marked(self, host: Host, marked: dict[str, Any]) -> After | None:
        if host.bare:
            return None
        name = marked["metadata"]["name"]
        content = host.namespace_contents(name)

        def finalize(obj: dict[str, Any]) -> None:
            obj["spec"]["finalizers"] = []

        def namespace_controller() -> None:
            # the namespace controller's job, done at once (ASSUMPTIONS.md)
            for crt, obj in content:
                meta = obj["metadata"]
                with contextlib.suppress(ApiError):  # already gone
                    host.delete(crt.key, meta["name"], meta.get("namespace"), grace_period_seconds=0)
            host.finish_deletion("namespaces", None, name, finalize)

        return namespace_controller


class ConfigMapStrategy(Strategy):
    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        errors = []
        if old is not None:
            errors += strategies.configmap_update(obj, old)
        return errors + kinds.validate_configmap(obj)


class WorkloadStrategy(Strategy):
    """Deployment: the status a client sends is dropped; the selector rules DaemonSet shares."""

    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        obj["status"] = {}

    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        errors = kinds.validate_daemonset(obj)  # same selector/template rules
        if old is not None:
            errors += strategies.selector_update(obj, old)
        return errors


class DaemonSetStrategy(WorkloadStrategy):
    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        obj["status"] = kinds.daemonset_initial_status()

    def on_generation(self, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is None or new.get("spec", {}).get("template") != old.get("spec", {}).get("template"):
            new["metadata"].setdefault("annotations", {})["deprecated.daemonset.template.generation"] = str(
                new["metadata"]["generation"]
            )


class ResourceQuotaStrategy(Strategy):
    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        obj["status"] = {}  # PrepareForCreate: the quota controller fills it


class LeaseStrategy(Strategy):
    allow_create_on_update = True

    def decode(self, obj: dict[str, Any]) -> None:
        kinds.decode_lease(obj)

    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        return kinds.validate_lease(obj)


class PodDisruptionBudgetStrategy(Strategy):
    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        kinds.default_pdb(obj)

    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        return kinds.validate_pdb(obj)


class CoreEventStrategy(Strategy):
    allow_create_on_update = True

    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        kinds.default_core_event(obj)

    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        namespace = obj["metadata"].get("namespace", "")
        return kinds.validate_event(obj, namespace, via_events_api=False, create=old is None)


class EventsV1Strategy(Strategy):
    """events.k8s.io/v1 shares the core Event's storage; it is validated as the internal core Event (the core
    defaults are not applied to its view)."""

    allow_create_on_update = True

    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        namespace = obj["metadata"].get("namespace", "")
        return kinds.validate_event(kinds.event_v1_to_core(obj), namespace, via_events_api=True, create=old is None)


class CustomResourceDefinitionStrategy(Strategy):
    def prepare_for_create(self, host: Host, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        obj.setdefault("spec", {}).setdefault("conversion", {"strategy": "None"})
        obj["status"] = {
            "conditions": None,
            "acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": [v["name"] for v in obj.get("spec", {}).get("versions", []) if v.get("storage")],
        }

    def after_create(self, host: Host, rt: ResourceType, obj: dict[str, Any]) -> After | None:
        for crt in from_crd(obj):
            host.register(crt)
        name = obj["metadata"]["name"]
        status = _established_status(obj, kinds.now_rfc3339())

        def establish() -> None:
            # the apiextensions controllers run inside kube-apiserver (get-crd-established's managedFields)
            host.patch(rt.key, name, {"status": status}, subresource="status", field_manager="kube-apiserver")

        return establish

    def on_removed(self, host: Host, old: dict[str, Any]) -> None:
        for crt in from_crd(old):
            host.unregister(crt)


def _established_status(crd: dict[str, Any], now: str) -> dict[str, Any]:
    """The status the NamingConditionController and EstablishingController write."""
    names = crd["spec"]["names"]
    return {
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "acceptedNames": {
            "plural": names["plural"],
            "singular": names.get("singular", ""),
            "kind": names["kind"],
            "listKind": names.get("listKind", names["kind"] + "List"),
            **({"shortNames": names["shortNames"]} if names.get("shortNames") else {}),
            **({"categories": names["categories"]} if names.get("categories") else {}),
        },
        "storedVersions": crd["status"]["storedVersions"],
    }


class ResourceSliceStrategy(Strategy):
    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        return dra.validate_resource_slice(obj, old)


class ResourceClaimStrategy(Strategy):
    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        return dra.validate_resource_claim(obj, old, subresource)


class DeviceClassStrategy(Strategy):
    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        return dra.validate_device_class(obj)


class ResourceClaimTemplateStrategy(Strategy):
    def validate_kind(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
    ) -> list[FieldError]:
        return dra.validate_claim_template(obj)


GENERIC = Strategy()
STRATEGIES: dict[str, Strategy] = {
    "pods": PodStrategy(),
    "nodes": NodeStrategy(),
    "namespaces": NamespaceStrategy(),
    "configmaps": ConfigMapStrategy(),
    "daemonsets.apps": DaemonSetStrategy(),
    "deployments.apps": WorkloadStrategy(),
    "resourcequotas": ResourceQuotaStrategy(),
    "leases.coordination.k8s.io": LeaseStrategy(),
    "poddisruptionbudgets.policy": PodDisruptionBudgetStrategy(),
    "events": CoreEventStrategy(),
    "events.events.k8s.io": EventsV1Strategy(),
    "customresourcedefinitions.apiextensions.k8s.io": CustomResourceDefinitionStrategy(),
    "resourceslices.resource.k8s.io": ResourceSliceStrategy(),
    "resourceclaims.resource.k8s.io": ResourceClaimStrategy(),
    "deviceclasses.resource.k8s.io": DeviceClassStrategy(),
    "resourceclaimtemplates.resource.k8s.io": ResourceClaimTemplateStrategy(),
}


def strategy_for(rt: ResourceType) -> Strategy:
    """The kind's strategy (keyed by the resource, as resources.py names it), else the generic registry's."""
    return STRATEGIES.get(rt.key, GENERIC)
