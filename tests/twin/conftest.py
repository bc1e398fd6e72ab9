"""Shared fixtures for the cluster twin's tests (API server twin; GPU Operator / NVML twins add theirs here).

Servers bind 127.0.0.1 on a free port and are stopped by the fixture; nothing survives a test module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.twin.apiserver import ApiServerTwin

REPO_ROOT = Path(__file__).resolve().parents[2]


# The recorded kube-apiserver transcripts, vendored in the repository (origin: tests/reference/README.md).
TRANSCRIPTS_DIR = REPO_ROOT / "tests" / "reference" / "kube-apiserver"


@pytest.fixture(scope="session")
def transcripts_dir() -> Path:
    """The recorded kube-apiserver transcripts; a missing directory is an error, never a skip."""
    if not (TRANSCRIPTS_DIR / "README.md").is_file():
        raise FileNotFoundError(f"the vendored kube-apiserver transcripts are missing: {TRANSCRIPTS_DIR}")
    return TRANSCRIPTS_DIR


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServerTwin]:
    """One running API server twin per test module (ClusterPolicy CRD installed, default namespaces)."""
    with ApiServerTwin(namespaces=("default", "kube-system", "kube-public", "kube-node-lease", "gpu-operator")) as api:
        yield api


@pytest.fixture(scope="module")
def kubeconfig(apiserver: ApiServerTwin, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return apiserver.write_kubeconfig(tmp_path_factory.mktemp("kubeconfig") / "config")


@pytest.fixture
def fresh_apiserver() -> Iterator[ApiServerTwin]:
    """A new twin for tests that need an empty cluster."""
    with ApiServerTwin() as api:
        yield api
