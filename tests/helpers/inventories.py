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
