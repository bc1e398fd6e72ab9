"""The requests of the kube adapter, built and sent by the official client's ApiClient and answered raw.

The official client's generated API classes (CoreV1Api, AppsV1Api, CustomObjectsApi, PolicyV1Api, ResourceV1Api)
import some 330 pydantic models and build a validator per method: about 1 s of CPU and 30 MB in every
`migplan reconcile` process (the largest single cost of an in-sync cycle's start), for requests whose answers
migplan never lets the client deserialise (`_preload_content=False`: orjson reads the raw JSON, kube/observe.py
keeps the few fields it needs). These classes send the very requests the generated methods of kubernetes 37
build (path, query parameters, Accept and Content-Type headers, BearerToken auth) through the same public
ApiClient methods they call, `param_serialize` and `call_api` (so TimeoutApiClient's timeouts and deadline
apply), and raise the same ApiException for an answer outside 2xx, as `ApiClient._call_with_legacy_options`
does for a raw answer. Every method returns the raw urllib3 response: the caller reads it and hands its
connection back (cluster._drain).

Only the methods the adapter calls are here, with the generated methods' names and argument names, so a call
site reads as it did with the generated class. Values migplan puts in a path (node, pod, namespace names) are
percent-encoded by `param_serialize` exactly as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

JSON = "application/json"
AUTH = ["BearerToken"]  # the auth setting every generated method names


class RawApi:
    """One ApiClient; every request raw. The group-specific classes below only name paths."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def _send(
        self,
        method: str,
        path: str,
        path_params: dict[str, str] | None = None,
        query: tuple[tuple[str, Any], ...] = (),
        *,
        body: Any = None,
        content_type: str | None = None,
        request_timeout: Any = None,
    ) -> Any:
        headers: dict[str, Any] = {"Accept": JSON}
        if content_type is not None:  # a patch's; a POST leaves it to the REST layer (JSON), as generated ones do
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            path_params=path_params or None,
            query_params=[(k, v) for k, v in query if v is not None],
            header_params=headers,
            body=body,
            auth_settings=AUTH,
        )
        answer = self.api_client.call_api(*request, _request_timeout=request_timeout)
        if not 200 <= answer.status <= 299:
            answer.read()
            raise ApiException.from_response(http_resp=answer, body=None, data=None)
        return answer.response

    def _list(
        self,
        path: str,
        path_params: dict[str, str] | None,
        *,
        limit: int | None,
        cont: str | None,
        field_selector: str | None,
        label_selector: str | None,
        request_timeout: Any,
        watch: Watch | None = None,
    ) -> Any:
        w = watch or Watch()
        # The generated methods' query order: allowWatchBookmarks, continue, fieldSelector, labelSelector, limit,
        # resourceVersion, timeoutSeconds, watch (the last three and the first only on a watch).
        query = (
            ("allowWatchBookmarks", w.allow_watch_bookmarks),
            ("continue", cont),
            ("fieldSelector", field_selector),
            ("labelSelector", label_selector),
            ("limit", limit),
            ("resourceVersion", w.resource_version),
            ("timeoutSeconds", w.timeout_seconds),
            ("watch", w.watch),
        )
        return self._send("GET", path, path_params, query, request_timeout=request_timeout)


@dataclasses.dataclass(frozen=True)
class Watch:
    """The watch parameters of a list method (all None: a plain LIST)."""

    watch: bool | None = None
    allow_watch_bookmarks: bool | None = None
    resource_version: str | None = None
    timeout_seconds: int | None = None


# Keyword arguments every list method takes (the generated methods' names): limit, _continue, field_selector,
# label_selector, _preload_content (always raw here) and _request_timeout. A list method differs only by its path,
# so it is made once here, for a cluster-wide or a namespaced list.
def _cluster_list(path: str) -> Callable[..., Any]:
    def list_(
        self: RawApi,
        *,
        limit: int | None = None,
        _continue: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        watch: bool | None = None,
        allow_watch_bookmarks: bool | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        """A LIST, or with watch=True a WATCH (kube/informer.py: the answer is the event stream, unread)."""
        return self._list(
            path,
            None,
            limit=limit,
            cont=_continue,
            field_selector=field_selector,
            label_selector=label_selector,
            request_timeout=_request_timeout,
            watch=Watch(watch, allow_watch_bookmarks, resource_version, timeout_seconds),
        )

    return list_


def _namespaced_list(path: str) -> Callable[..., Any]:
    def list_(
        self: RawApi,
        namespace: str,
        *,
        limit: int | None = None,
        _continue: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._list(
            path,
            {"namespace": namespace},
            limit=limit,
            cont=_continue,
            field_selector=field_selector,
            label_selector=label_selector,
            request_timeout=_request_timeout,
        )

    return list_


class CoreV1(RawApi):
    list_node = _cluster_list("/api/v1/nodes")
    list_pod_for_all_namespaces = _cluster_list("/api/v1/pods")
    list_namespaced_pod = _namespaced_list("/api/v1/namespaces/{namespace}/pods")
    list_namespaced_config_map = _namespaced_list("/api/v1/namespaces/{namespace}/configmaps")

    def read_namespaced_pod_log(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        previous: bool | None = None,
        tail_lines: int | None = None,
        _request_timeout: Any = None,
    ) -> Any:
        """Raw, like every method here (the generated one returns the decoded text): see `log_text`."""
        query = (("container", container), ("previous", previous), ("tailLines", tail_lines))
        return self._send(
            "GET",
            "/api/v1/namespaces/{namespace}/pods/{name}/log",
            {"name": name, "namespace": namespace},
            query,
            request_timeout=_request_timeout,  # Accept: application/json, as the generated method picks
        )

    def create_namespaced_config_map(
        self,
        namespace: str,
        body: Any,
        *,
        field_manager: str | None = None,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "POST",
            "/api/v1/namespaces/{namespace}/configmaps",
            {"namespace": namespace},
            (("dryRun", dry_run), ("fieldManager", field_manager)),
            body=body,
            request_timeout=_request_timeout,
        )

    def patch_namespaced_config_map(
        self,
        name: str,
        namespace: str,
        body: Any,
        *,
        _content_type: str,
        field_manager: str | None = None,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "PATCH",
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            {"name": name, "namespace": namespace},
            (("dryRun", dry_run), ("fieldManager", field_manager)),
            body=body,
            content_type=_content_type,
            request_timeout=_request_timeout,
        )

    def patch_node(
        self,
        name: str,
        body: Any,
        *,
        _content_type: str,
        field_manager: str | None = None,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "PATCH",
            "/api/v1/nodes/{name}",
            {"name": name},
            (("dryRun", dry_run), ("fieldManager", field_manager)),
            body=body,
            content_type=_content_type,
            request_timeout=_request_timeout,
        )

    def create_namespaced_pod_eviction(
        self,
        name: str,
        namespace: str,
        body: Any,
        *,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "POST",
            "/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            {"name": name, "namespace": namespace},
            (("dryRun", dry_run),),
            body=body,
            request_timeout=_request_timeout,
        )

    def delete_namespaced_pod(
        self,
        name: str,
        namespace: str,
        *,
        body: Any = None,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "DELETE",
            "/api/v1/namespaces/{namespace}/pods/{name}",
            {"name": name, "namespace": namespace},
            (("dryRun", dry_run),),
            body=body,
            request_timeout=_request_timeout,
        )


class AppsV1(RawApi):
    list_namespaced_daemon_set = _namespaced_list("/apis/apps/v1/namespaces/{namespace}/daemonsets")
    list_daemon_set_for_all_namespaces = _cluster_list("/apis/apps/v1/daemonsets")

    def patch_namespaced_daemon_set(
        self,
        name: str,
        namespace: str,
        body: Any,
        *,
        _content_type: str,
        field_manager: str | None = None,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "PATCH",
            "/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}",
            {"name": name, "namespace": namespace},
            (("dryRun", dry_run), ("fieldManager", field_manager)),
            body=body,
            content_type=_content_type,
            request_timeout=_request_timeout,
        )


class CustomObjects(RawApi):
    def list_cluster_custom_object(
        self,
        group: str,
        version: str,
        plural: str,
        *,
        limit: int | None = None,
        _continue: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._list(
            "/apis/{group}/{version}/{plural}",
            {"group": group, "version": version, "plural": plural},
            limit=limit,
            cont=_continue,
            field_selector=field_selector,
            label_selector=label_selector,
            request_timeout=_request_timeout,
        )

    def patch_cluster_custom_object(
        self,
        group: str,
        version: str,
        plural: str,
        name: str,
        body: Any,
        *,
        _content_type: str,
        field_manager: str | None = None,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "PATCH",
            "/apis/{group}/{version}/{plural}/{name}",
            {"group": group, "version": version, "plural": plural, "name": name},
            (("dryRun", dry_run), ("fieldManager", field_manager)),
            body=body,
            content_type=_content_type,
            request_timeout=_request_timeout,
        )


class PolicyV1(RawApi):
    list_pod_disruption_budget_for_all_namespaces = _cluster_list("/apis/policy/v1/poddisruptionbudgets")


class ResourceV1(RawApi):
    list_resource_claim_for_all_namespaces = _cluster_list("/apis/resource.k8s.io/v1/resourceclaims")
    list_resource_slice = _cluster_list("/apis/resource.k8s.io/v1/resourceslices")
    list_device_class = _cluster_list("/apis/resource.k8s.io/v1/deviceclasses")

    def create_device_class(
        self,
        body: Any,
        *,
        field_manager: str | None = None,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "POST",
            "/apis/resource.k8s.io/v1/deviceclasses",
            None,
            (("dryRun", dry_run), ("fieldManager", field_manager)),
            body=body,
            request_timeout=_request_timeout,
        )

    def patch_device_class(
        self,
        name: str,
        body: Any,
        *,
        _content_type: str,
        field_manager: str | None = None,
        dry_run: str | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        return self._send(
            "PATCH",
            "/apis/resource.k8s.io/v1/deviceclasses/{name}",
            {"name": name},
            (("dryRun", dry_run), ("fieldManager", field_manager)),
            body=body,
            content_type=_content_type,
            request_timeout=_request_timeout,
        )
