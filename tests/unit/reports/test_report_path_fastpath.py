"""Report paths: the fast acceptance of a safe path says exactly what the rule-by-rule check says (issue 29, adoptcpu).

`_path_problem` accepts the usual path in two regex scans and hands anything else to `_why_unsafe`, which names the
problem; a path the fast scans accept must be one `_why_unsafe` accepts too, and one it refuses keeps its message.
"""

from __future__ import annotations

import itertools
import random

import pytest

from reconciler.adapters.git.reports import _path_problem, _why_unsafe, check_report_paths

# Every character a rule looks at, plus the non-ASCII letters that fold to i/k/s under IGNORECASE.
ALPHABET = [
    "a",
    "g",
    "i",
    "t",
    "G",
    "I",
    "T",
    ".",
    "/",
    "-",
    "_",
    "@",
    "+",
    "0",
    "\\",
    "\x00",
    ":",
    "\n",
    " ",
    "\u0130",  # I with dot above
    "\u0131",  # dotless i
    "\u212a",  # Kelvin sign
]


@pytest.mark.parametrize(
    "path",
    [
        "reports",
        "reports/nodes/gpu-h200-00001.md",
        "reports/maps/gpu-h200-00001.svg",
        "a/.gitignore",
        "a/.github/x",
        "a/...",
        "a/.git.md",
        "x@y+z_1-2.md",
    ],
)
def test_safe_paths_pass(path: str) -> None:
    assert _path_problem(path) is None
    assert _why_unsafe(path) is None


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "empty"),
        ("a\x00b", "contains NUL"),
        ("a\\b", "contains a backslash"),
        ("/etc/passwd", "is absolute"),
        ("C:/x", "is absolute"),
        ("a//b", "has an empty, '.' or '..' component"),
        ("a/", "has an empty, '.' or '..' component"),
        ("./a", "has an empty, '.' or '..' component"),
        ("a/../b", "has an empty, '.' or '..' component"),
        ("a/..", "has an empty, '.' or '..' component"),
        ("reports/.git/config", "names .git"),
        ("reports/.GiT", "names .git"),
        (".git", "names .git"),
        ("reports\n", "component 'reports\\n' has characters outside [A-Za-z0-9_.@+-]"),
        ("a/b c", "component 'b c' has characters outside [A-Za-z0-9_.@+-]"),
        ("a/.gİt", "component '.gİt' has characters outside [A-Za-z0-9_.@+-]"),
    ],
)
def test_unsafe_paths_keep_their_message(path: str, why: str) -> None:
    assert _path_problem(path) == why
    assert check_report_paths("reports", ["reports/ok.md", path]) is not None


def test_every_short_path_gets_the_rule_by_rule_answer() -> None:
    """Exhaustive up to 4 characters of the alphabet, then random longer ones: fast and slow always agree."""
    for n in range(5):
        for chars in itertools.product(ALPHABET[:12] if n == 4 else ALPHABET, repeat=n):
            p = "".join(chars)
            assert _path_problem(p) == _why_unsafe(p), repr(p)
    rng = random.Random(29)
    for _ in range(20000):
        p = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 16)))
        assert _path_problem(p) == _why_unsafe(p), repr(p)
