"""The generated reference under docs/reference/: every error code, every command, every setting, from the code.

Pure: each generator takes nothing and returns the Markdown text of one file, read from what the package declares
(the code registry reconciler.model.codes, the `migplan` click group with its commands, the Settings dataclass),
never from a hand-kept copy, so a code, an option or a setting added anywhere shows up here by itself.
`python -m reconciler.docsgen --write` writes the files; tests/unit/project/test_docs_reference.py regenerates them and
fails on any difference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.docsgen.clidoc import cli_reference
from reconciler.docsgen.codesdoc import codes_reference
from reconciler.docsgen.settingsdoc import settings_reference

# repository-relative path -> its generator
GENERATED: Mapping[str, Callable[[], str]] = {
    "docs/reference/codes.md": codes_reference,
    "docs/reference/cli.md": cli_reference,
    "docs/reference/settings.md": settings_reference,
}

__all__ = ["GENERATED", "cli_reference", "codes_reference", "settings_reference"]
