"""The kube adapter's ApiClient pins the environment's proxy once: the same proxy, no environment walk per request.

The kubeconfig loader refreshes the bearer token before every request by setting the configuration's host again,
and the official Configuration then re-reads every proxy variable (urllib's getproxies walks all of os.environ);
the connection pool was built from the proxy at construction, so that re-read value is never used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import configuration as kube_configuration

from reconciler.adapters.kube.cluster import TimeoutApiClient, load_kube_config

PROXY = "http://proxy.example.test:3128"


def _kubeconfig(tmp_path: Path) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "s3cret-token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_environment_proxy_is_kept_and_not_read_again_per_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", PROXY)
    monkeypatch.setenv("https_proxy", PROXY)
    cfg = load_kube_config(str(_kubeconfig(tmp_path)))
    api = TimeoutApiClient(cfg)
    try:
        assert cfg.refresh_api_key_hook is not None  # a token: the loader refreshes it before each request
        assert cfg.proxy == PROXY  # the environment's proxy, as the official client would pick it
        assert api.rest_client.pool_manager.proxy is not None  # and the pool goes through it
        assert api.rest_client.pool_manager.proxy.host == "proxy.example.test"

        reads: list[Any] = []
        real = kube_configuration.getproxies

        def counting() -> dict[str, str]:
            reads.append(1)
            return real()

        monkeypatch.setattr(kube_configuration, "getproxies", counting)
        # what every request does before it is sent (update_params_for_auth -> auth_settings)
        for _ in range(3):
            assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer s3cret-token"
        assert reads == []  # no walk over the environment per request
        assert cfg.proxy == PROXY
        assert cfg.host == "https://10.0.0.1:6443"
    finally:
        api.close()  # type: ignore[no-untyped-call]


def test_no_proxy_in_the_environment_means_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    cfg = load_kube_config(str(_kubeconfig(tmp_path)))
    api = TimeoutApiClient(cfg)
    try:
        assert cfg.proxy is None
        assert getattr(api.rest_client.pool_manager, "proxy", None) is None
    finally:
        api.close()  # type: ignore[no-untyped-call]
