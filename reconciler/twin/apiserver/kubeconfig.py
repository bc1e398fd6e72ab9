"""Kubeconfig files for the twin (bearer token; https with the twin's own CA, or plain http).

Writes a file; nothing else. kubectl only sends the token over https, hence TLS by default in ApiServerTwin.
"""

from __future__ import annotations

import base64
from pathlib import Path

import yaml


def kubeconfig_dict(
    url: str, token: str, name: str = "migplan-twin", namespace: str = "default", ca_pem: bytes | None = None
) -> dict[str, object]:
    cluster: dict[str, str] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin", "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | Path, url: str, token: str, name: str = "migplan-twin", ca_pem: bytes | None = None
) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig_dict(url, token, name, ca_pem=ca_pem), sort_keys=False))
    target.chmod(0o600)
    return target
