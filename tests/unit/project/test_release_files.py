"""What a release carries: `migplan --version` is the package's version (one source), the LICENSE is the whole
Apache-2.0 text the package metadata declares, and the CHANGELOG has a section for the version released."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from click.testing import CliRunner

from reconciler import __version__
from reconciler.cli import cli

ROOT = Path(__file__).resolve().parents[3]


def test_version_is_the_packages_own() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"migplan, version {importlib.metadata.version('migplan')}\n"
    assert importlib.metadata.version("migplan") == __version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]  # not a second place to forget


def test_license_is_the_whole_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    sections = re.findall(r"^\s+(\d)\. (\w[\w ]+)\.", text, flags=re.M)
    assert [n for n, _ in sections] == [str(i) for i in range(1, 10)]  # sections 1-9, in order
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"


def test_changelog_has_the_version_released() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{__version__}]" in text and "## [Unreleased]" in text
