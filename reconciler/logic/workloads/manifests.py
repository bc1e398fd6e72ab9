"""Kubernetes manifests as a person or a pipeline hands them to `migplan check-workloads`.

Pure: bytes in, documents with line numbers (or diagnostics) out. A file may hold several YAML
documents (`---`), JSON, or a `kind: List` / `*List` whose `items` are objects; each object comes out
as one `Manifest` with the line of its first key and a `lines` map from a path inside it
(("spec", "template", "spec", "containers", 0)) to a 1-based line, so a finding points at the line
a person wrote.

What the reader refuses, with a code and a line rather than a traceback:
- bytes that are not UTF-8, NUL bytes, a file larger than MAX_FILE_BYTES (MP600);
- YAML or JSON syntax errors (MP601);
- a document with template placeholders (`{{ .Values.x }}`): Helm or another templater must render it
  first (MP602) — the values are not known, so nothing in it can be checked;
- a document that is not a mapping with `apiVersion` and `kind` (MP618).
YAML is read as the API machinery reads it (sigs.k8s.io/yaml converts YAML 1.1 to JSON), so
`replicas: 010` means 8 here as it does for kubectl. Aliases are expanded, but a document expanding
to more than MAX_NODES values (a "billion laughs") or nesting deeper than MAX_DEPTH is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.model import codes
from reconciler.model.diagnostics import Diagnostic, Severity

MAX_FILE_BYTES = 32 * 1024 * 1024  # `helm template` of a large umbrella chart is a few MB
MAX_NODES = 2_000_000  # values in one file after alias expansion
MAX_DEPTH = 100

Path = tuple[str | int, ...]

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALAR = yaml.constructor.SafeConstructor()
_TEMPLATE = re.compile(r"\{\{-?\s*[^}]*\}\}")
_UNPARSED = codes.with_trait(codes.Trait.UNPARSED)  # the YAML reader could not parse the text: JSON's turn


@dataclass(frozen=True, slots=True)
class Manifest:
    """One Kubernetes object from a file."""

    file: str
    line: int  # of the object's first key
    body: Mapping[str, Any]
    lines: Mapping[Path, int] = field(default_factory=dict)  # paths inside `body`

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def name(self) -> str:
        meta = self.body.get("metadata")
        return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""

    @property
    def namespace(self) -> str:
        meta = self.body.get("metadata")
        ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        return str(ns) if ns else "default"

    def line_of(self, *path: str | int) -> int:
        """The line of the deepest known prefix of `path` (the object's line at worst)."""
        for n in range(len(path), 0, -1):
            line = self.lines.get(tuple(path[:n]))
            if line is not None:
                return line
        return self.line


class _TooBig(Exception):
    """A document the reader refuses whole: too large once expanded, too deep, or an unsupported tag."""


_STANDARD_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary", "merge")
)


def _diag(code: str, message: str, file: str, line: int | None) -> Diagnostic:
    """A Diagnostic with the registry's severity for `code` (MP618, not a Kubernetes object, is a warning: a values
    file or a CI config next to the manifests; the rest stop the check)."""
    return Diagnostic(code, message, file=file, line=line, severity=Severity(codes.severity(code).value))


def read_manifests(data: bytes, *, file: str) -> tuple[list[Manifest], list[Diagnostic]]:
    """Every Kubernetes object in one file (or stdin), and what could not be read."""
    if len(data) > MAX_FILE_BYTES:
        return [], [_diag("MP600", f"file of {len(data)} bytes is larger than {MAX_FILE_BYTES}", file, None)]
    if b"\0" in data:
        return [], [_diag("MP600", "binary file (NUL bytes): not a manifest", file, None)]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return [], [_diag("MP600", f"not UTF-8 (byte {exc.start})", file, line)]
    stripped = text.lstrip()
    if stripped[:1] in ("{", "[") and not _TEMPLATE.search(text):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            # Not JSON after all (YAML flow style starts the same way): the YAML reader decides.
            if not isinstance(exc, json.JSONDecodeError):
                return [], [_diag("MP601", "JSON nested too deep", file, None)]
        else:
            # JSON is YAML too, and the YAML reader knows lines; JSON YAML cannot read (tabs) has none.
            from_yaml = _read_yaml(text, file)
            if not any(d.code in _UNPARSED for d in from_yaml[1]):
                return from_yaml
            manifests: list[Manifest] = []
            diags: list[Diagnostic] = []
            _collect(doc, {}, (), 1, file, manifests, diags)
            return manifests, diags
    return _read_yaml(text, file)


def _read_yaml(text: str, file: str) -> tuple[list[Manifest], list[Diagnostic]]:
    manifests: list[Manifest] = []
    diags: list[Diagnostic] = []
    budget = [MAX_NODES]
    # Documents are split first so a template placeholder or a syntax error in one spoils only that one.
    for start_line, chunk in _documents(text):
        if not chunk.strip() or all(not ln.strip() or ln.lstrip().startswith("#") for ln in chunk.splitlines()):
            continue
        m = _TEMPLATE.search(chunk)
        if m is not None:
            line = start_line + chunk[: m.start()].count("\n")
            diags.append(
                _diag(
                    "MP602",
                    f"template placeholder {m.group(0)[:60]!r}: render it first "
                    "(`helm template ... | migplan check-workloads -`, `kubectl kustomize ... | ...`)",
                    file,
                    line,
                )
            )
            continue
        try:
            node = yaml.compose(chunk, Loader=_Loader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            if exc.context_mark is not None and (mark is None or mark.index >= len(chunk.rstrip())):
                mark = exc.context_mark  # "found end of stream": the line that opened what is unclosed
            line = start_line + (mark.line if mark is not None else 0)
            problem = " ".join(str(exc.problem or exc).split())[:200]
            diags.append(_diag("MP601", f"YAML syntax error: {problem}", file, line))
            continue
        except yaml.YAMLError as exc:
            diags.append(_diag("MP601", f"YAML error: {' '.join(str(exc).split())[:200]}", file, start_line))
            continue
        if node is None:
            continue
        lines: dict[Path, int] = {}
        try:
            value = _build(node, (), lines, start_line - 1, 0, budget)
        except _TooBig as exc:
            diags.append(_diag("MP601", str(exc), file, start_line))
            continue
        _collect(value, lines, (), start_line + node.start_mark.line, file, manifests, diags)
    return manifests, diags


def _documents(text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each `---`-separated document; the separator's own line is not part of it."""
    start, buf = 1, list[str]()
    for n, ln in enumerate(text.splitlines(keepends=True), start=1):
        if ln.startswith("---") and (len(ln.rstrip("\r\n")) == 3 or ln[3] in " \t"):
            if buf:
                yield start, "".join(buf)
            buf, start = [], n + 1
            rest = ln[3:].strip()
            if rest and not rest.startswith("#"):  # `--- {kind: Pod}`: content on the marker line
                buf.append(" " * 4 + rest + "\n")
                start = n
            continue
        if ln.startswith("..."):
            continue
        buf.append(ln)
    if buf:
        yield start, "".join(buf)


def _build(node: yaml.Node, path: Path, lines: dict[Path, int], offset: int, depth: int, budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooBig(f"document expands to more than {MAX_NODES} values (aliases?)")
    if depth > MAX_DEPTH:
        raise _TooBig(f"document nested deeper than {MAX_DEPTH} levels")
    lines.setdefault(path, offset + node.start_mark.line + 1)
    if node.tag not in _STANDARD_TAGS:
        # !!python/object/apply:..., !custom: Kubernetes' YAML reader (sigs.k8s.io/yaml over go-yaml) refuses them.
        raise _TooBig(f"unsupported YAML tag {node.tag[:60]!r} (line {offset + node.start_mark.line + 1})")
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k, v in node.value:
            key = _scalar(k) if isinstance(k, yaml.ScalarNode) else None
            if key == "<<" and isinstance(v, yaml.MappingNode | yaml.SequenceNode):
                merged = _build(v, path, {}, offset, depth + 1, budget)
                for m in merged if isinstance(merged, list) else [merged]:
                    if isinstance(m, dict):
                        for mk, mv in m.items():
                            out.setdefault(mk, mv)
                continue
            skey = str(key)
            lines[(*path, skey)] = offset + k.start_mark.line + 1
            out[skey] = _build(v, (*path, skey), lines, offset, depth + 1, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(v, (*path, i), lines, offset, depth + 1, budget) for i, v in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    try:
        return _SCALAR.construct_object(node)
    except (yaml.constructor.ConstructorError, ValueError, OverflowError, AttributeError, KeyError, TypeError):
        # An unusual tag or value: keep the text, the rules say what is wrong. PyYAML's constructors raise
        # more than ConstructorError on a value their tag does not fit: `!!timestamp x` is an AttributeError
        # (its regex does not match), `!!bool maybe` a KeyError, `!!int 0x` a ValueError.
        return node.value


def _collect(
    value: Any,
    lines: Mapping[Path, int],
    path: Path,
    line: int,
    file: str,
    out: list[Manifest],
    diags: list[Diagnostic],
) -> None:
    """One Manifest per object; a List's items each become one (their paths re-rooted)."""
    if not isinstance(value, dict) or not value.get("kind") or not value.get("apiVersion"):
        what = "a mapping" if isinstance(value, dict) else type(value).__name__
        diags.append(
            _diag("MP618", f"not a Kubernetes object ({what} without apiVersion and kind): ignored", file, line)
        )
        return
    kind = str(value["kind"])
    if kind == "List" or (kind.endswith("List") and isinstance(value.get("items"), list)):
        items = value.get("items")
        if not isinstance(items, list):
            diags.append(_diag("MP618", f"{kind} without an items list", file, line))
            return
        for i, item in enumerate(items):
            sub = (*path, "items", i)
            n = len(sub)
            sub_lines = {p[n:]: ln for p, ln in lines.items() if p[:n] == sub}
            _collect(item, sub_lines, (), lines.get(sub, line), file, out, diags)
        return
    out.append(Manifest(file=file, line=line, body=value, lines=dict(lines)))
