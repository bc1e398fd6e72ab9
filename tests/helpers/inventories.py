"""Edits of the example inventory that several tests make."""

from __future__ import annotations

from pathlib import Path


def recut_gpu1_to_sevens(root: Path, node: str) -> None:
    """Rewrite GPU 1 of `node` (and everything after it in the file) as 7 x 1g.18gb, placements left to the solver."""
    node_file = root / "nodes" / f"{node}.yaml"
    text = node_file.read_text()
    gpu1 = text.index("    - index: 1")
    node_file.write_text(
        text[:gpu1]
        + "    - index: 1\n      model: H200-141GB\n      mig:\n        enabled: true\n        partitions:\n"
        + "".join("          - {profile: 1g.18gb}\n" for _ in range(7))
    )


# The example's H100 node as if it held H200s cut into 1g.18gb: valid against the catalog's H200, while the twin's node
# (H100s, and its GFD labels say so) does not offer that profile (MP564).
H100_NODE = "gpu-h100-01"
H100_NODE_AS_H200 = """apiVersion: migplan/v1
kind: Node
metadata: {name: gpu-h100-01}
spec:
  gpus:
    - {index: 0, model: H200-141GB, mig: {enabled: true, partitions: [{profile: 1g.18gb}, {profile: 1g.18gb}]}}
    - {index: 1, model: H100-80GB, mig: {enabled: false}}
"""


def plan_h100_node_as_h200(root: Path) -> None:
    """Write H100_NODE_AS_H200 over the H100 node's file of the inventory at `root`."""
    (root / "nodes" / f"{H100_NODE}.yaml").write_text(H100_NODE_AS_H200)
