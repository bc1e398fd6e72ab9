"""The twin kubelet's PodResources API (v1): a real gRPC server on a unix socket, one per twin node.

What `migplan agent` reads on a real node from `/var/lib/kubelet/pod-resources/kubelet.sock`, served from the
twin's state: the GPU Operator twin's kubelet records, at admission, which device IDs the device plugin handed
each container (reconciler/twin/operator/components/kubelet.py `pod_resources`, IDs from deviceplugin.device_id).
Built from kubernetes/kubernetes pkg/kubelet/apis/podresources/server_v1.go (`List`: every pod of the node, every
container of its spec in order, its devices from the device manager, its `DynamicResources` from the DRA
manager's `GetDynamicResources(pod, container)` when the KubeletPodResourcesDynamicResources gate is on;
`GetAllocatableResources`: the devices known; `Get`: one pod, NotFound-style error when absent) and served
through the generated stubs of our proto, written from the kubelet's wire contract (reconciler/kubeletapi).
Assumptions: ASSUMPTIONS-operator.md "Kubelet PodResources".

`answer` replaces the servicer's answer for tests of hostile kubelets: raw bytes (garbage, or a message larger
than a client accepts) sent as the `List` response as they are.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from reconciler.kubeletapi.podresources.v1 import api_pb2

__all__ = ["ClaimListing", "PodListing", "PodResourcesServer"]

# (namespace, name, [(container, [(resource, [device IDs])])])
PodListing = tuple[str, str, list[tuple[str, list[tuple[str, list[str]]]]]]
# A container's DRA claim as the kubelet's DRA manager reports it: (pod namespace, pod, container,
# claim namespace, claim name, [(driver, pool, device)])
ClaimListing = tuple[str, str, str, str, str, list[tuple[str, str, str]]]
SERVICE = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"].full_name  # "v1.PodResourcesLister"
# the kubelet's own server limit (pkg/kubelet/apis/podresources: DefaultMaxMsgSize = 16 MiB)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def _dynamic(claims: Sequence[ClaimListing], namespace: str, pod: str, container: str) -> list[api_pb2.DynamicResource]:
    return [
        api_pb2.DynamicResource(
            claim_name=claim_name,
            claim_namespace=claim_namespace,
            claim_resources=[
                api_pb2.ClaimResource(driver_name=driver, pool_name=pool, device_name=device)
                for driver, pool, device in devices
            ],
        )
        for ns, name, cname, claim_namespace, claim_name, devices in claims
        if (ns, name, cname) == (namespace, pod, container)
    ]


def _pod(p: PodListing, claims: Sequence[ClaimListing] = ()) -> api_pb2.PodResources:
    namespace, name, containers = p
    return api_pb2.PodResources(
        name=name,
        namespace=namespace,
        containers=[
            api_pb2.ContainerResources(
                name=cname,
                devices=[api_pb2.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in devices],
                dynamic_resources=_dynamic(claims, namespace, name, cname),
            )
            for cname, devices in containers
        ],
    )


def _listing(pods: Sequence[PodListing], claims: Sequence[ClaimListing]) -> list[PodListing]:
    """Every pod, with the containers that hold only claims added (the real `List` walks every container)."""
    out = [(ns, name, list(containers)) for ns, name, containers in pods]
    for ns, name, cname, *_ in claims:
        pod = next((p for p in out if (p[0], p[1]) == (ns, name)), None)
        if pod is None:
            pod = (ns, name, [])
            out.append(pod)
        if all(c != cname for c, _ in pod[2]):
            pod[2].append((cname, []))
    return out


class _Servicer:
    """The three methods of `v1.PodResourcesLister`, on the generated messages."""

    def __init__(self, pods: Callable[[], Sequence[PodListing]]) -> None:
        self._pods = pods

    def List(self, request: Any, context: Any) -> api_pb2.ListPodResourcesResponse:  # gRPC name
        return api_pb2.ListPodResourcesResponse(pod_resources=[_pod(p) for p in self._pods()])

    def GetAllocatableResources(self, request: Any, context: Any) -> api_pb2.AllocatableResourcesResponse:
        seen: dict[str, set[str]] = {}
        for _, _, containers in self._pods():
            for _, devices in containers:
                for r, ids in devices:
                    seen.setdefault(r, set()).update(ids)
        return api_pb2.AllocatableResourcesResponse(
            devices=[
                api_pb2.ContainerDevices(resource_name=r, device_ids=sorted(ids)) for r, ids in sorted(seen.items())
            ]
        )

    def Get(self, request: Any, context: Any) -> api_pb2.GetPodResourcesResponse:
        for p in self._pods():
            if (p[0], p[1]) == (request.pod_namespace, request.pod_name):
                return api_pb2.GetPodResourcesResponse(pod_resources=_pod(p))
        context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} not found in {request.pod_namespace}")
        raise AssertionError("unreachable: abort raises")


class PodResourcesServer:
    """A PodResourcesLister on `socket_path` (start()/stop(), or a with-block)."""

    def __init__(
        self,
        socket_path: str | Path,
        pods: Callable[[], Sequence[PodListing]],
        claims: Callable[[], Sequence[ClaimListing]] | None = None,
    ) -> None:
        self.socket_path = Path(socket_path)
        self._pods = pods
        # DRA allocations (`dynamic_resources`, the KubeletPodResourcesDynamicResources gate, GA in 1.36)
        self._claims: Callable[[], Sequence[ClaimListing]] = claims if claims is not None else tuple
        self._server: Any = None
        self._lock = threading.Lock()
        self.answer: bytes | None = None  # raw List answer override (hostile-kubelet tests)
        self.delay_seconds = 0.0  # a kubelet that answers late (timeout tests)

    def _list_raw(self, request: bytes, context: Any) -> bytes:
        if self.delay_seconds:
            threading.Event().wait(self.delay_seconds)
        if self.answer is not None:
            return self.answer
        claims = self._claims()
        listing = _listing(self._pods(), claims)
        return bytes(
            api_pb2.ListPodResourcesResponse(pod_resources=[_pod(p, claims) for p in listing]).SerializeToString()
        )

    def start(self) -> PodResourcesServer:
        with self._lock:
            if self._server is not None:
                return self
            if self.socket_path.exists():
                os.unlink(self.socket_path)
            server = grpc.server(
                futures.ThreadPoolExecutor(max_workers=4),
                options=[("grpc.max_send_message_length", 64 * 1024 * 1024)],
            )
            servicer = _Servicer(self._pods)
            # List goes through a raw-bytes handler so tests can make the kubelet answer anything (the bytes
            # are the serialized ListPodResourcesResponse unless overridden); the others are typed handlers.
            handlers = {
                "List": grpc.unary_unary_rpc_method_handler(self._list_raw),
                "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(
                    servicer.GetAllocatableResources,
                    request_deserializer=api_pb2.AllocatableResourcesRequest.FromString,
                    response_serializer=api_pb2.AllocatableResourcesResponse.SerializeToString,
                ),
                "Get": grpc.unary_unary_rpc_method_handler(
                    servicer.Get,
                    request_deserializer=api_pb2.GetPodResourcesRequest.FromString,
                    response_serializer=api_pb2.GetPodResourcesResponse.SerializeToString,
                ),
            }
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
            server.add_insecure_port(f"unix://{self.socket_path}")
            server.start()
            self._server = server
        return self

    def stop(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop(grace=None)
        if self.socket_path.exists():
            os.unlink(self.socket_path)

    def __enter__(self) -> PodResourcesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
