"""Safe YAML loading of one inventory file: bytes in, a plain value plus line numbers out.

Pure (no I/O). This is the *reference* loader: every diagnostic about a file's bytes or YAML syntax
comes from here, with the line it concerns. It refuses what a reviewer could not see or what makes a
parser dangerous, instead of guessing:

* files over MAX_FILE_BYTES, binary content (NUL bytes), bytes that are not UTF-8, byte-order marks;
* tabs in indentation (YAML forbids them; pyyaml's own message for them is cryptic);
* more than one document, an empty file, a top level that is not a mapping;
* anchors reused through aliases: rejected on first reuse, so a "billion laughs" file costs one
  composition pass (pyyaml's composer shares alias nodes, it does not expand them), never an expansion;
* duplicate keys (pyyaml silently keeps the last one) and keys that are not strings (`on:`, `1:`);
* tags other than the plain JSON-like ones, numbers too large to read, nesting deeper than MAX_DEPTH.

Values are built from pyyaml's node graph (composed by the C loader) by this module, not by pyyaml's
constructor, so that every mapping key and sequence item gets the line it was written on: `lines`
maps a path such as ("spec", "gpus", 0, "mig", "partitions", 2) to a 1-based line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.model.diagnostics import Diagnostic

MAX_FILE_BYTES = 1024 * 1024  # an inventory file is hand-written; 1 MiB is ~20,000 lines
MAX_DEPTH = 32  # the inventory format nests 7 levels; anything far deeper is an attack or a mistake

Path = tuple[str | int, ...]

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALAR = yaml.constructor.SafeConstructor()
_PLAIN_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_TAB_INDENT = re.compile(rb"^[ ]*\t", re.MULTILINE)
_BOMS = (
    (b"\xef\xbb\xbf", "UTF-8"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


@dataclass(frozen=True, slots=True)
class YamlDoc:
    """One parsed file: its top-level mapping and the line of every key and sequence item."""

    value: dict[str, Any]
    lines: Mapping[Path, int]

    def line_of(self, path: Path) -> int:
        """The line of `path`, or of its nearest ancestor that has one (schema errors may point
        below what the source spells out, e.g. at a property that is missing)."""
        p = tuple(path)
        while p:
            line = self.lines.get(p)
            if line is not None:
                return line
            p = p[:-1]
        return self.lines.get((), 1)


class _Reject(Exception):
    """Internal: stop building the value and report this diagnostic."""

    def __init__(self, code: str, message: str, line: int | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line


def _line_of_offset(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def check_bytes(data: bytes, *, file: str) -> Diagnostic | None:
    """The byte-level checks that come before any YAML parsing (size, binary, encoding, tabs)."""
    if len(data) > MAX_FILE_BYTES:
        return Diagnostic(
            "MP101",
            f"file is larger than {MAX_FILE_BYTES // 1024} KiB; an inventory file this large is not "
            "reviewable (split the node or use layouts/)",
            file,
            1,
        )
    for bom, name in _BOMS:
        if data.startswith(bom):
            if name == "UTF-8":
                return Diagnostic(
                    "MP105",
                    "file starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM",
                    file,
                    1,
                )
            return Diagnostic("MP104", f"file is {name}-encoded; inventory files must be UTF-8", file, 1)
    nul = data.find(b"\x00")
    if nul >= 0:
        return Diagnostic(
            "MP103", "file is binary (contains NUL bytes), not YAML text", file, _line_of_offset(data, nul)
        )
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Diagnostic(
            "MP104",
            f"file is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            file,
            _line_of_offset(data, exc.start),
        )
    if not data.strip() or all(not ln.strip() or ln.lstrip().startswith(b"#") for ln in data.splitlines()):
        return Diagnostic("MP102", "file is empty (no YAML document)", file, 1)
    tab = _TAB_INDENT.search(data)
    if tab is not None:
        return Diagnostic(
            "MP106",
            "tab character in indentation; YAML indentation must use spaces",
            file,
            _line_of_offset(data, tab.start()),
        )
    return None


def load_yaml(data: bytes, *, file: str) -> tuple[YamlDoc | None, tuple[Diagnostic, ...]]:
    """Parse one inventory file. Never raises: problems come back as diagnostics (then doc is None)."""
    bad = check_bytes(data, file=file)
    if bad is not None:
        return None, (bad,)
    loader = _Loader(data)
    try:
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.composer.ComposerError as exc:
        if "single document" in f"{exc.context} {exc.problem}":
            line = exc.problem_mark.line + 1 if exc.problem_mark else None
            return None, (
                Diagnostic(
                    "MP108",
                    "file holds more than one YAML document ('---'); put one document per file",
                    file,
                    line,
                ),
            )
        return None, (_syntax(exc, file),)
    except yaml.MarkedYAMLError as exc:
        return None, (_syntax(exc, file),)
    except yaml.reader.ReaderError as exc:  # control characters; position counts characters
        text = data.decode("utf-8")
        line = text.count("\n", 0, exc.position) + 1
        return None, (
            Diagnostic(
                "MP107", f"YAML syntax error: control character 0x{exc.character:02x} is not allowed", file, line
            ),
        )
    except yaml.YAMLError as exc:
        return None, (Diagnostic("MP107", f"YAML syntax error: {_one_line(str(exc))}", file, 1),)
    except RecursionError:
        return None, (Diagnostic("MP114", f"YAML nested deeper than {MAX_DEPTH} levels", file, 1),)
    if node is None:
        return None, (Diagnostic("MP102", "file is empty (no YAML document)", file, 1),)
    lines: dict[Path, int] = {(): node.start_mark.line + 1}
    try:
        value = _build(node, (), lines, set(), 0)
    except _Reject as r:
        return None, (Diagnostic(r.code, r.message, file, r.line),)
    if not isinstance(value, dict):
        kind = "empty document" if value is None else f"a {_type_name(value)}"
        return None, (
            Diagnostic(
                "MP113",
                f"the document must be a mapping (apiVersion, kind, metadata, spec), not {kind}",
                file,
                node.start_mark.line + 1,
            ),
        )
    return YamlDoc(value=value, lines=lines), ()


def _syntax(exc: yaml.MarkedYAMLError, file: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    what = " ".join(x for x in (exc.context, exc.problem) if x) or "invalid YAML"
    return Diagnostic("MP107", f"YAML syntax error: {_one_line(what)}", file, line)


def _one_line(s: str) -> str:
    return " ".join(s.split())


def _type_name(v: Any) -> str:
    if isinstance(v, list):
        return "list"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    return type(v).__name__


def _build(node: yaml.Node, path: Path, lines: dict[Path, int], seen: set[int], depth: int) -> Any:
    # An alias makes pyyaml's composer hand out the node it refers to a second time; refusing the
    # second visit rejects every alias, including billion-laughs chains, after one linear pass.
    if id(node) in seen:
        raise _Reject(
            "MP109",
            "YAML aliases (*name) are not allowed in the inventory; write the value out "
            f"(anchor defined at line {node.start_mark.line + 1})",
            lines.get(path, node.start_mark.line + 1),
        )
    seen.add(id(node))
    if depth > MAX_DEPTH:
        raise _Reject("MP114", f"YAML nested deeper than {MAX_DEPTH} levels", node.start_mark.line + 1)
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node)
    if isinstance(node, yaml.SequenceNode):
        if node.tag != "tag:yaml.org,2002:seq":
            raise _Reject("MP110", f"unsupported YAML tag {node.tag!r}", node.start_mark.line + 1)
        out: list[Any] = []
        for i, item in enumerate(node.value):
            p = (*path, i)
            # An alias item carries the anchor's position, not its own: point at the list instead.
            lines[p] = lines[path] if id(item) in seen else item.start_mark.line + 1
            out.append(_build(item, p, lines, seen, depth + 1))
        return out
    if isinstance(node, yaml.MappingNode):
        if node.tag != "tag:yaml.org,2002:map":
            raise _Reject("MP110", f"unsupported YAML tag {node.tag!r}", node.start_mark.line + 1)
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            kline = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _Reject("MP109", "YAML merge keys (<<) are not allowed in the inventory", kline)
            if not isinstance(key_node, yaml.ScalarNode):
                raise _Reject("MP112", "mapping keys must be plain strings, not lists or mappings", kline)
            key = _scalar(key_node)
            if not isinstance(key, str):
                raise _Reject(
                    "MP112",
                    f"mapping key {key_node.value!r} is read as a {_type_name(key)}, not a string; quote it",
                    kline,
                )
            if key in first_line:
                raise _Reject(
                    "MP111",
                    f"duplicate key {key!r} (first at line {first_line[key]}); YAML would silently keep "
                    "only the last one",
                    kline,
                )
            first_line[key] = kline
            p = (*path, key)
            lines[p] = kline
            result[key] = _build(value_node, p, lines, seen, depth + 1)
        return result
    raise _Reject("MP107", "unsupported YAML node", node.start_mark.line + 1)  # pragma: no cover


def _scalar(node: yaml.ScalarNode) -> Any:
    line = node.start_mark.line + 1
    if node.tag == _TIMESTAMP:
        # Dates are not part of the format; keep what was written so the schema reports the field.
        return node.value
    if node.tag not in _PLAIN_TAGS:
        raise _Reject("MP110", f"unsupported YAML tag {node.tag!r}; write a plain value", line)
    try:
        # The per-tag constructor directly: construct_object() would memoise every node forever.
        return _SCALAR.yaml_constructors[node.tag](_SCALAR, node)
    except ValueError as exc:  # int() beyond Python's 4300-digit limit
        raise _Reject("MP115", f"number with {len(node.value)} characters is too large to read", line) from exc
    except yaml.YAMLError as exc:
        raise _Reject("MP107", f"cannot read value {node.value[:40]!r}: {_one_line(str(exc))[:120]}", line) from exc
