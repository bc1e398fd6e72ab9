"""Per-node NVML files of a running twin, for `migplan agent` processes (reconciler.twin.nvml.fromfile).

`NvmlExports(twin, nodes, folder)` writes one `<node>.json` per node (reconciler.twin.nvml.snapshot) and
`refresh()` rewrites those whose GPUs changed since (MIG layout or the pods holding devices); `migplan twin`
calls it on its serving loop. Each file is written next to its place and renamed into it, so a reader sees the
whole of one state or the whole of the next, never a torn file.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reconciler.twin.nvml.snapshot import dump

__all__ = ["NvmlExports"]

_FILE_SAFE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class NvmlExports:
    def __init__(self, twin: Any, nodes: Sequence[str], folder: Path) -> None:
        self._twin = twin  # a ClusterTwin: its fleet's nodes hold the GPUs and their lock
        self._nodes = list(nodes)
        self.folder = folder
        self._written: dict[str, bytes] = {}

    def path(self, node: str) -> Path:
        # A Node name is a DNS subdomain; anything else (a twin built from a broken inventory) must not pick
        # where the file goes ("../x"): it gets a name derived from it instead.
        name = node if _FILE_SAFE.fullmatch(node) else "node-" + hashlib.sha256(node.encode()).hexdigest()[:16]
        return self.folder / f"{name}.json"

    def refresh(self) -> int:
        """Write the files whose node changed; returns how many were written."""
        written = 0
        for node in self._nodes:
            twin_node = self._twin.fleet.nodes[node]
            with twin_node.lock:
                data = dump(node, twin_node.gpus)
            if self._written.get(node) == data:
                continue
            target = self.path(node)
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
            self._written[node] = data
            written += 1
        return written
