"""Kubeconfig files for the twin (plain http, bearer token).

Writes a file; nothing else. Both the official Python client and kubectl accept `server: http://...`.
"""

from __future__ import annotations

from pathlib import Path

import yaml


def kubeconfig_dict(url: str, token: str, name: str = "migplan-twin", namespace: str = "default") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin", "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, url: str, token: str, name: str = "migplan-twin") -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig_dict(url, token, name), sort_keys=False))
    target.chmod(0o600)
    return target
