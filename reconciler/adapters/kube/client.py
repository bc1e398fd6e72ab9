"""Kubernetes client construction for the controller and the agent (the official client).

The controller and the commands only pass these objects around; building them stays here so that
nothing outside reconciler/adapters imports `kubernetes`.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client, config

from reconciler.adapters.kube.cluster import KubeconfigUnusable, TimeoutApiClient, load_kube_config


def kube_configuration(kubeconfig: str | None) -> Any:
    """A client Configuration from a kubeconfig file, or in-cluster when none is given.

    A broken kubeconfig or a missing in-cluster service account is a MigplanError MP556.
    """
    if kubeconfig:
        return load_kube_config(kubeconfig)
    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    except config.ConfigException as exc:
        raise KubeconfigUnusable(f"in-cluster configuration: {exc}") from exc
    return cfg


def api_client(configuration: Any) -> Any:
    """An ApiClient whose every request has a timeout (and respects the cycle deadline)."""
    return TimeoutApiClient(configuration)


def core_v1(api: Any) -> Any:
    return client.CoreV1Api(api)


def coordination_v1(api: Any) -> Any:
    return client.CoordinationV1Api(api)
