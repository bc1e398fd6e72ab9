"""Ship the example inventory and the JSON Schemas inside the wheel.

They live at the top of the repository (where users and editors find them), but `migplan demo` and
`migplan validate` need them after a plain `pip install .` too, so the build copies them into the
package as `reconciler/_embedded/`. Editable installs read them from the repository instead
(see reconciler/resources.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py

ROOT = Path(__file__).resolve().parent


class build_py(_build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "reconciler" / "_embedded"
        for name in ("inventory", "schemas"):
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, target / name, dirs_exist_ok=True)


setup(cmdclass={"build_py": build_py})
