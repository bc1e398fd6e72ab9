"""Where the embedded default inventory and the JSON Schemas are found.

A wheel carries them as `reconciler/_embedded/{inventory,schemas}` (copied by setup.py); a source
checkout or an editable install reads them from the repository's top level, where users edit them.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (_PACKAGE / "_embedded" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"migplan installation is incomplete: no {name}/ directory found")


def inventory_dir() -> Path:
    """The example inventory, which is also the embedded default of `migplan demo`."""
    return _find("inventory")


def schemas_dir() -> Path:
    """The JSON Schemas (draft 2020-12) for Cluster, Node and Layout documents."""
    return _find("schemas")
