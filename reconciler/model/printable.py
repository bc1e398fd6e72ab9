"""Text from outside (a file name, a label, a manifest's names, a ConfigMap's YAML error) made safe to print.

Pure, stdlib only. Such text reaches `file:line: severity CODE: message` lines, warnings, YAML comments and CI
logs; a newline in it would forge a line of its own, a control character could drive a terminal or make a
YAML reader refuse the file, a bidi override (U+202E) could make a line read otherwise. `escaped` writes every
character that is not printable (str.isprintable: controls, format characters, line and paragraph separators,
lone surrogates) as its Python escape; `one_line` first turns every run of whitespace (newlines, NEL, U+2028
included) into one space.
"""

from __future__ import annotations


def escaped(text: str) -> str:
    """`text` with each character that is not printable written as its escape (`\\n`, `\\x1b`, `\\u202e`)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def one_line(text: str) -> str:
    """`text` as one printable line: whitespace runs become one space, the rest as `escaped`."""
    return escaped(" ".join(text.split()))
