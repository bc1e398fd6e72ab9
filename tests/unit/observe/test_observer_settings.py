"""The observer's settings: defaults shared with the controller, bad values named (MP800)."""

from __future__ import annotations

import pytest

from reconciler.adapters.podresources import socket_path
from reconciler.logic.codecs import observedcodec
from reconciler.model.errors import MigplanError
from reconciler.settings import DEFAULT_POD_RESOURCES_SOCKET, load_settings


def test_defaults_are_the_kubelets_socket_and_the_codecs_heartbeat() -> None:
    s = load_settings(env={})
    assert s.pod_resources_socket == "/var/lib/kubelet/pod-resources/kubelet.sock" == DEFAULT_POD_RESOURCES_SOCKET
    assert s.observe_heartbeat_seconds == observedcodec.HEARTBEAT_SECONDS == 300
    assert s.observe_only is False and s.pod_resources_timeout_seconds == 5.0


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"MIGPLAN_OBSERVE_HEARTBEAT_SECONDS": "0"}, "observe_heartbeat_seconds"),
        ({"MIGPLAN_POD_RESOURCES_TIMEOUT_SECONDS": "0"}, "pod_resources_timeout_seconds"),
        ({"MIGPLAN_POD_RESOURCES_TIMEOUT_SECONDS": "-1"}, "POD_RESOURCES_TIMEOUT_SECONDS"),
        ({"MIGPLAN_OBSERVE_HEARTBEAT_SECONDS": "soon"}, "OBSERVE_HEARTBEAT_SECONDS"),
    ],
)
def test_bad_values_are_named(env: dict[str, str], field: str) -> None:
    with pytest.raises(MigplanError) as err:
        load_settings(env=env)
    assert err.value.code == "MP800" and field in err.value.message


def test_socket_addresses_with_and_without_scheme() -> None:
    assert socket_path("unix:///var/lib/kubelet/pod-resources/kubelet.sock") == DEFAULT_POD_RESOURCES_SOCKET
    assert socket_path("/tmp/k.sock") == "/tmp/k.sock"
