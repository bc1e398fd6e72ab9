"""The kubelet's PodResources API (v1), client side: which devices each pod's containers were given.

The kubelet serves `v1.PodResourcesLister` on a unix socket (`/var/lib/kubelet/pod-resources/kubelet.sock`,
the source DCGM exporter uses to attribute GPU metrics to pods). `List` returns every pod the kubelet runs,
each container with its `ContainerDevices` (resource name, device IDs) and its `dynamic_resources` (the
DRA claims it uses: claim namespace and name, per allocated device the driver, pool and device name) —
kubernetes/kubernetes pkg/kubelet/apis/podresources/server_v1.go `List`: pods from the pod manager, devices
from the device manager's allocations (`GetDevices(podUID, container)`), DRA claims from the DRA manager's
(`GetDynamicResources(pod, container)`). The stubs are generated from our own proto
(reconciler/kubeletapi/podresources/v1/README.md).

Every way this can go wrong becomes a MigplanError with an observer code, never a traceback and never a
partial answer taken as the whole: the socket is missing or not a socket (MP930), nobody answers within the
timeout or the connection is refused (MP931), the answer cannot be decoded (MP932), the answer is larger than
`max_message_bytes` (MP933, gRPC RESOURCE_EXHAUSTED), any other gRPC status (MP934). The call has a deadline
and no retry, so a kubelet that accepts and never answers costs one timeout per pass.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any

import grpc

from reconciler.kubeletapi.podresources.v1 import api_pb2, api_pb2_grpc
from reconciler.model.errors import MigplanError
from reconciler.model.nodeobservation import KubeletAllocation

if TYPE_CHECKING:
    from reconciler.observer import HoldersPort

# The kubelet's own server limit for this API (pkg/kubelet/apis/podresources DefaultMaxMsgSize = 16 MiB):
# an answer larger than that could not come from a kubelet anyway.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
UNIX_SCHEME = "unix://"


def socket_path(address: str) -> str:
    """The file path of a `unix:///path` address or of a plain path."""
    return address[len(UNIX_SCHEME) :] if address.startswith(UNIX_SCHEME) else address


def _code(err: grpc.RpcError) -> Any:
    try:
        return err.code()
    except Exception:  # an RpcError that is not a Call (never seen; the reason must still be one line)
        return None


def _details(err: grpc.RpcError) -> str:
    try:
        return str(err.details() or "")
    except Exception:
        return ""


class KubeletPodResources:
    """PodResources v1 `List` over the kubelet's unix socket (implements reconciler.observer.HoldersPort)."""

    def __init__(
        self,
        address: str,
        *,
        timeout_seconds: float = 5.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.path = socket_path(address)
        self.timeout_seconds = timeout_seconds
        self.max_message_bytes = max_message_bytes

    def _check_socket(self) -> None:
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            raise MigplanError(
                f"pod-resources socket {self.path} does not exist (is /var/lib/kubelet/pod-resources mounted?)",
                code="MP930",
            ) from None
        except OSError as exc:
            raise MigplanError(f"pod-resources socket {self.path}: {exc.strerror or exc}", code="MP930") from None
        if not stat.S_ISSOCK(mode):
            raise MigplanError(f"pod-resources socket {self.path} is not a socket", code="MP930")

    def list_allocations(self) -> tuple[KubeletAllocation, ...]:
        """Every (pod, container, resource) the kubelet reports devices for, in the kubelet's order."""
        self._check_socket()
        options = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.enable_retries", 0),
        ]
        try:
            with grpc.insecure_channel(UNIX_SCHEME + self.path, options=options) as channel:
                stub = api_pb2_grpc.PodResourcesListerStub(channel)  # type: ignore[no-untyped-call]  # generated
                response = stub.List(api_pb2.ListPodResourcesRequest(), timeout=self.timeout_seconds)
        except grpc.RpcError as err:
            raise self._translate(err) from None
        return self._allocations(response)

    def _translate(self, err: grpc.RpcError) -> MigplanError:
        code, details = _code(err), " ".join(_details(err).split())[:200]
        where = f"pod-resources socket {self.path}"
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return MigplanError(f"{where} did not answer within {self.timeout_seconds:g} s", code="MP931")
        if code == grpc.StatusCode.UNAVAILABLE:
            return MigplanError(f"{where} is unreachable: {details or 'unavailable'}", code="MP931")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return MigplanError(
                f"{where}: the answer is larger than {self.max_message_bytes} bytes ({details})", code="MP933"
            )
        if code == grpc.StatusCode.INTERNAL and "serializ" in details.lower():
            return MigplanError(f"{where}: the answer is not a PodResources v1 message ({details})", code="MP932")
        name = getattr(code, "name", "UNKNOWN")
        return MigplanError(f"{where}: gRPC {name}: {details or 'no detail'}", code="MP934")

    @staticmethod
    def _allocations(response: api_pb2.ListPodResourcesResponse) -> tuple[KubeletAllocation, ...]:
        out: list[KubeletAllocation] = []
        for pod in response.pod_resources:
            for container in pod.containers:
                for devices in container.devices:
                    out.append(
                        KubeletAllocation(
                            namespace=pod.namespace,
                            pod=pod.name,
                            container=container.name,
                            resource=devices.resource_name,
                            device_ids=tuple(devices.device_ids),
                        )
                    )
                # DRA: one allocation per device of each claim (pkg/kubelet/apis/podresources/server_v1.go
                # `List`: `DynamicResources` from the DRA manager's `GetDynamicResources(pod, container)`)
                for dynamic in container.dynamic_resources:
                    claim = f"{dynamic.claim_namespace}/{dynamic.claim_name}"
                    for resource in dynamic.claim_resources:
                        out.append(
                            KubeletAllocation(
                                namespace=pod.namespace,
                                pod=pod.name,
                                container=container.name,
                                resource=resource.driver_name,
                                device_ids=(resource.device_name,),
                                claim=claim,
                                pool=resource.pool_name,
                            )
                        )
        return tuple(out)


if TYPE_CHECKING:

    def _conforms(x: KubeletPodResources) -> HoldersPort:
        return x
