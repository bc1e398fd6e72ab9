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
* tags other than the plain JSON-like ones, numbers too large to read, nesting deeper than MAX_DEPTH;
* number forms YAML 1.1 and YAML 1.2 read differently (010, 0b100, 0x10, +4, 1_000, 1:20 as numbers;
  09, 1e3, 0o17 as text): MP116, so a value means what every tool reading the file says it means.

Values are built from pyyaml's node graph (composed by the C loader) by this module, not by pyyaml's
constructor, so that every mapping key and sequence item gets the line it was written on: `lines`
maps a path such as ("spec", "gpus", 0, "mig", "partitions", 2) to a 1-based line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.model.diagnostics import Diagnostic

if TYPE_CHECKING:
    import yaml

MAX_FILE_BYTES = 1024 * 1024  # an inventory file is hand-written; 1 MiB is ~20,000 lines
MAX_DEPTH = 32  # the inventory format nests 7 levels; anything far deeper is an attack or a mistake

Path = tuple[str | int, ...]


@functools.cache
def _pyyaml() -> tuple[type[Any], Any]:
    """pyyaml's loader class and scalar constructor. pyyaml is the reference reader, imported on first use: a
    valid inventory is read by the fast path alone, and importing pyyaml costs ~10 ms of every `migplan validate`
    process (python -X importtime)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader), yaml.constructor.SafeConstructor()


_PLAIN_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_STR = "tag:yaml.org,2002:str"
# The only integer spelling both YAML 1.1 (pyyaml, this loader) and YAML 1.2 (editors, yq, yaml-rs,
# Go's yaml.v3) read as the same number. YAML 1.1 also reads 010 as 8, 0b100 as 4, 0x10 as 16,
# 1_000 as 1000, +4 as 4 and 1:20 as 80 (base 60); a 1.2 tool reads 010 as 10 and 0b100 or 1:20 as text.
_CANONICAL_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
# Plain scalars YAML 1.2's core schema reads as numbers while YAML 1.1 reads them as text (09, 1e3, 0o17).
_YAML12_NUMBER = re.compile(
    r"[-+]?(?:[0-9]+|(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|\.(?:inf|Inf|INF))|0o[0-7]+|0x[0-9a-fA-F]+"
    r"|\.(?:nan|NaN|NAN)"
)
_TAB_INDENT = re.compile(rb"^[ ]*\t", re.MULTILINE)


def is_yaml12_number(text: str) -> bool:
    """Whether a plain scalar `text` is a number to a YAML 1.2 reader (MP116 when YAML 1.1 reads text): for
    writers (`migplan import`) that must quote it."""
    return _YAML12_NUMBER.fullmatch(text) is not None


_BOMS = (
    (b"\xef\xbb\xbf", "UTF-8"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


@dataclass(frozen=True, slots=True)
class YamlDoc:
    """One parsed file: its top-level mapping and the line of every key and sequence item.

    `exact` is False for a document read by the fast path with node_item_lines: then only item
    lines and metadata.name are known, and key lines resolve to the enclosing item."""

    value: dict[str, Any]
    lines: Mapping[Path, int]
    exact: bool = True

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
    import yaml

    loader_class, _ = _pyyaml()
    loader = loader_class(data)
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
    import yaml  # loaded by load_yaml already: a lookup in sys.modules

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
    import yaml  # loaded by load_yaml already: a lookup in sys.modules

    _, constructor = _pyyaml()
    try:
        # The per-tag constructor directly: construct_object() would memoise every node forever.
        value = constructor.yaml_constructors[node.tag](constructor, node)
    except ValueError as exc:  # int() beyond Python's 4300-digit limit
        raise _Reject("MP115", f"number with {len(node.value)} characters is too large to read", line) from exc
    except yaml.YAMLError as exc:
        raise _Reject("MP107", f"cannot read value {node.value[:40]!r}: {_one_line(str(exc))[:120]}", line) from exc
    _check_number_form(node, value, line)
    return value


def _check_number_form(node: yaml.ScalarNode, value: Any, line: int) -> None:
    """MP116 for a plain scalar whose meaning depends on the YAML version of the reader."""
    text = node.value
    if node.tag == _INT and not _CANONICAL_INT.fullmatch(text):
        raise _Reject(
            "MP116",
            f"{text[:40]!r} is the integer {value} in YAML 1.1 but not in YAML 1.2 (octal, binary, hex, base-60, "
            f"'_' or '+' form); write {value}, or quote it if it is text",
            line,
        )
    if node.tag == _FLOAT and ("_" in text or ":" in text or text.startswith("+")):
        raise _Reject(
            "MP116", f"{text[:40]!r} is a YAML 1.1-only number form ('_', '+' or base 60); write it plainly", line
        )
    if node.tag == _STR and not node.style and _YAML12_NUMBER.fullmatch(text):  # plain: None, or "" (C loader)
        raise _Reject(
            "MP116",
            f"{text[:40]!r} is text in YAML 1.1 but a number in YAML 1.2; quote it if it is text, or write the "
            "number in decimal",
            line,
        )


# --------------------------------------------------------------------------------------------
# Fast path: a Rust YAML parser for files in the plain shape the inventory is written in.
#
# pyyaml (YAML 1.1) stays the reference; yaml-rs (YAML 1.2) reads most inventory files ~10x
# faster. The two disagree on some plain scalars (yes/no/on/off, 017, 0o17, 1e3, 1:20), and
# yaml-rs does not report lines. So the fast path takes a file only when a byte screen finds none
# of the constructs where they could disagree or where the reference has something to say
# (aliases, tags, tabs, BOMs, non-ASCII, control characters, escapes, several documents, odd
# numbers); YAML 1.1 boolean words are refused by the fast schema (schemas.fast_valid). Lines come
# from scan_lines (every block key and item) or, for nodes, node_item_lines (items only). When
# anything is unusual the caller uses load_yaml, whose word is final; a file with any diagnostic
# is always re-read by it. tests/unit/inventory/test_validation_fastpath.py checks both paths agree.

# Bytes a plain inventory file never needs (anchors, aliases, tags, block scalars, directives,
# quotes with escapes, merge keys, '[' flow lists, tabs, CR, control and non-ASCII bytes): the
# translate() below deletes every other byte, so one C call tells whether any is present.
_RISKY_BYTES = frozenset(b"&*!|>%@`'\\?<=[]")
_SAFE = bytes(b for b in range(0x20, 0x7F) if b not in _RISKY_BYTES) + b"\n"
_TEXT_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n"
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
# After digits become '0' (one translate() call), number forms that YAML 1.1 (pyyaml) and 1.2
# (yaml-rs) read differently, or where a float could pose as an integer: 4.0, 1e3, 1:20, 1_000,
# 19+ digits, .5; on the original bytes: leading zeros (017, 0x1f, 0o17). Literal-led patterns and
# substring tests only: they run at memchr speed, alternations would cost more than the parse.
_FLOATISH = re.compile(rb"0[.eE:_]")
# Leading zeros are looked for after '{', ',' and '+' have become spaces, so that each pattern starts with a
# literal: one alternation led by a character class scanned every byte and cost as much as the parse. ('+-0'
# is refused too: more than needed, never less.)
_LEAD_TO_SPACE = bytes.maketrans(b"{,+", b"   ")
_LEADING_ZERO = re.compile(rb" 0[0-9xXoObB_]")
_LEADING_MINUS_ZERO = re.compile(rb" -0[0-9xXoObB_]")
_SEPARATORS_TO_SPACE = bytes.maketrans(b"{,+-", b"    ")  # then " .0" stands for all of " {,+-" + ".0"
# A comment cut from the screened copy only when no '"' follows it on its line, so that a ' #'
# inside a quoted string never hides what comes after it.
_TRAILING_COMMENT = re.compile(rb'(?:^|[ ])#[^\n"]*$', re.MULTILINE)

_yaml_rs: Any
try:  # an accelerator: without it every file takes the reference path
    import yaml_rs as _yaml_rs

    _DUPLICATES_ERROR: Any = _yaml_rs.DuplicateKeyPolicy.Error
except ImportError:  # pragma: no cover - yaml-rs is a declared dependency
    _yaml_rs = None


def fast_load(data: bytes) -> YamlDoc | None:
    """The file as YamlDoc through the fast parser, or None when only the reference may judge it."""
    parsed = fast_parse(data)
    if parsed is None:
        return None
    lines = scan_lines(parsed[0])
    return YamlDoc(value=parsed[1], lines=lines) if lines is not None else None


def fast_parse(data: bytes) -> tuple[str, dict[str, Any]] | None:
    """(text, value) through the fast parser for a file that passes the byte screen, else None.
    No line numbers: see scan_lines and node_item_lines."""
    if _yaml_rs is None or len(data) > MAX_FILE_BYTES:
        return None
    # The whole file first, comments included: the reference rejects control characters and reads
    # a CR or a Unicode line separator as a line break even inside a comment.
    if not data.isascii() or data.translate(None, _TEXT_ASCII):
        return None
    body = data
    while body.startswith(b"#"):  # leading comments (the schema modeline) may say anything
        cut = body.find(b"\n")
        body = body[cut + 1 :] if cut >= 0 else b""
    if b"#" in body:  # trailing comments may say anything too
        body = _TRAILING_COMMENT.sub(b"", body)
    if body.translate(None, _SAFE) or b"\n---" in body or b"\n..." in body or body.startswith((b"---", b"...")):
        return None
    digits = body.translate(_DIGITS_TO_ZERO)
    if _FLOATISH.search(digits) or b"0000000000000000000" in digits:
        return None
    spaced = body.translate(_LEAD_TO_SPACE)
    if _LEADING_ZERO.search(spaced) or _LEADING_MINUS_ZERO.search(spaced):
        return None
    if b"+0" in digits:  # +4: YAML 1.1-only (MP116), the reference words it
        return None
    if b".0" in digits and b" .0" in digits.translate(_SEPARATORS_TO_SPACE):
        return None
    text = data.decode("ascii")
    try:
        value = _yaml_rs.loads(text, parse_datetime=False, duplicate_key_policy=_DUPLICATES_ERROR)
    except Exception:  # any complaint at all: let the reference parser word it
        return None
    if not isinstance(value, dict):
        return None
    return text, value


def node_item_lines(text: str, value: Mapping[str, Any]) -> dict[Path, int] | None:
    """The lines a Node's DesiredState needs, without a full scan: the root, metadata.name, every
    spec.gpus item and every partition item. `value` must already be schema-valid.

    A Node's only sequences are spec.gpus and their partitions, so every block item line ("- ...")
    is one of them: the shallowest are GPUs, deeper ones the partitions of the GPU above. The counts
    must match the parsed value, or the text is not in this shape and None sends it elsewhere.
    Key lines (index:, model:, layout:) are not computed: they are only needed for diagnostics,
    and a file with a diagnostic is read again by the reference loader."""
    raw_lines = text.split("\n")
    lines: dict[Path, int] = {}
    meta = -1
    for n, raw in enumerate(raw_lines):
        if raw and raw[0] not in " #":
            if () not in lines:
                lines[()] = n + 1
            if raw.startswith("metadata:"):
                meta = n
                break
    if meta < 0:
        return None
    if "{" in raw_lines[meta]:
        lines[("metadata", "name")] = meta + 1
    else:
        # metadata holds name and labels only; its first child at the first indent named `name`.
        child_indent = -1
        for n in range(meta + 1, len(raw_lines)):
            raw = raw_lines[n]
            body = raw.lstrip(" ")
            if not body or body[0] == "#":
                continue
            indent = len(raw) - len(body)
            if child_indent < 0:
                child_indent = indent
            if indent < child_indent or indent == 0:
                return None
            if indent == child_indent and body.startswith("name:"):
                lines[("metadata", "name")] = n + 1
                break
        else:
            return None
    gpus = value["spec"]["gpus"]
    counts = [0] * len(gpus)
    gpu_indent = -1
    gi = -1
    for n, raw in enumerate(raw_lines, 1):
        if "- " not in raw:
            continue
        body = raw.lstrip(" ")
        if not body.startswith("- "):
            continue
        if body[2:].lstrip(" ")[:1] in ("", "#"):
            return None  # "- " alone: the item's content starts on a later line
        indent = len(raw) - len(body)
        if gpu_indent < 0:
            gpu_indent = indent
        if indent == gpu_indent:
            gi += 1
            if gi >= len(gpus):
                return None
            lines[("spec", "gpus", gi)] = n
        elif indent > gpu_indent and gi >= 0:
            lines[("spec", "gpus", gi, "mig", "partitions", counts[gi])] = n
            counts[gi] += 1
        else:
            return None
    if gi != len(gpus) - 1:
        return None
    for g, c in zip(gpus, counts, strict=True):
        if c != len(g.get("mig", {}).get("partitions", ())):
            return None
    return lines


def scan_lines(text: str) -> dict[Path, int] | None:
    """Line of every key and sequence item of a block-style YAML text, as load_yaml records them.

    Flow collections (`{profile: 3g.71gb}`) are leaves: paths inside them resolve, through
    YamlDoc.line_of, to the line of the item, which is where the reference puts them too as long
    as a flow collection does not span lines (the byte screen rejects '[' and ']'; a '{' must
    close on its line). Returns None for anything it does not understand. Only called on text that
    yaml-rs has already parsed, so each line is a key, an item or a continuation (refused)."""
    lines: dict[Path, int] = {}
    # Open containers, innermost last: [column of their entries, path, is_sequence, next index].
    stack: list[list[Any]] = []
    pending: Path | None = None  # `key:` with nothing after it, waiting for its children
    pending_col = -1
    lineno = 0
    for raw in text.split("\n"):
        lineno += 1
        s = raw.lstrip(" ")
        if not s or s[0] == "#":
            continue
        col = len(raw) - len(s)
        if "{" in s and s.count("{") != s.count("}"):
            return None
        dash = s[0] == "-" and (len(s) == 1 or s[1] == " ")
        if dash:
            while stack and stack[-1][0] > col:
                stack.pop()
            if pending is not None and col >= pending_col:
                stack.append([col, pending, True, 0])
                pending = None
            elif not stack or not stack[-1][2] or stack[-1][0] != col:
                return None
            seq = stack[-1]
            item: Path = (*seq[1], seq[3])
            seq[3] += 1
            lines[item] = lineno
            rest = s[1:].lstrip(" ")
            if not rest or rest[0] in "{#":
                continue  # a flow mapping or scalar item: a leaf
            if rest[0] == "-":
                return None  # nested "- - x": not in the inventory's shape
            col += len(s) - len(rest)
            s = rest
            key_end = s.find(":")
            if key_end <= 0 or not (len(s) == key_end + 1 or s[key_end + 1] == " "):
                continue  # "- plain scalar"
            stack.append([col, item, False, 0])
        else:
            key_end = s.find(":")
            if key_end <= 0 or not (len(s) == key_end + 1 or s[key_end + 1] == " ") or "{" in s[:key_end]:
                return None  # a continuation line (multi-line plain scalar) or a flow key
            while stack and stack[-1][0] > col:
                stack.pop()
            if pending is not None and col > pending_col:
                stack.append([col, pending, False, 0])
            elif not stack:
                if col:
                    return None
                stack.append([0, (), False, 0])
                lines[()] = lineno
            elif stack[-1][2] or stack[-1][0] != col:
                return None
        pending = None
        path: Path = (*stack[-1][1], s[:key_end].rstrip(" "))
        if path in lines:
            return None  # duplicate key: the reference reports it
        lines[path] = lineno
        value = s[key_end + 1 :].lstrip(" ")
        if not value or value[0] == "#":
            pending, pending_col = path, col
    return lines if stack else None
