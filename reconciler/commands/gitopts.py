"""Git options shared by the commands that read an inventory from a repository.

Credentials come from the environment, never from flags (flags end up in shell history and `ps`):
MIGPLAN_GIT_USERNAME / MIGPLAN_GIT_PASSWORD (HTTP basic; a token goes in the password),
MIGPLAN_GIT_SSH_KEY / MIGPLAN_GIT_KNOWN_HOSTS (SSH; host keys not in known_hosts are refused).
"""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.adapters.git.source import GitAuth, GitRemote


def auth_from_env() -> GitAuth:
    env = os.environ
    key = env.get("MIGPLAN_GIT_SSH_KEY") or None
    hosts = env.get("MIGPLAN_GIT_KNOWN_HOSTS") or None
    return GitAuth(
        username=env.get("MIGPLAN_GIT_USERNAME") or None,
        password=env.get("MIGPLAN_GIT_PASSWORD") or None,
        ssh_private_key=Path(key) if key else None,
        known_hosts=Path(hosts) if hosts else None,
    )


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "migplan"


def remote(url: str, cache_dir: Path | None) -> GitRemote:
    """A remote (URL or local path) with credentials from the environment and the cache directory."""
    return GitRemote(url, cache_dir or default_cache(), auth_from_env())
