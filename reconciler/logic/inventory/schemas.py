"""The schema pass: check one parsed inventory document against its JSON Schema (draft 2020-12).

Pure apart from reading the three schema files shipped with migplan (schemas/*.json, found through
reconciler.resources) once per process. The schemas are the contract editors see through the
`yaml-language-server` modeline; this module is the *reference* check, whose diagnostics carry the
line of the offending key and a message a person understands (not jsonschema's repr of the
instance). Codes are MP2xx, listed with every other code in reconciler.logic.inventory.rules.

A document's kind is decided by its path (cluster.yaml, nodes/*.yaml, layouts/*.yaml), never by
what the file claims, so a Cluster pasted into nodes/ is reported instead of silently obeyed.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from reconciler import resources
from reconciler.logic.inventory.yamldocs import Path, YamlDoc
from reconciler.model.diagnostics import Diagnostic

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

KINDS = ("Cluster", "Node", "Layout")
SCHEMA_FILES = {"Cluster": "cluster.schema.json", "Node": "node.schema.json", "Layout": "layout.schema.json"}
_WHERE = {"Cluster": "cluster.yaml", "Node": "a file under nodes/", "Layout": "a file under layouts/"}


def _strict_integer(_checker: Any, instance: Any) -> bool:
    # JSON Schema calls 4.0 an integer; an inventory placement or index written 4.0 is a typo that
    # the rest of migplan (and NVML) would treat differently, so floats are never integers here.
    return isinstance(instance, int) and not isinstance(instance, bool)


@functools.cache
def _validator_class() -> Any:
    """jsonschema's Draft 2020-12 validator with strict integers. Imported on first use: a valid
    inventory is judged by the compiled fast path alone, and importing jsonschema costs ~40 ms of
    every `migplan validate` process (python -X importtime)."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
    )


@functools.cache
def schema(kind: str) -> Mapping[str, Any]:
    """The JSON Schema for a document kind, as shipped in schemas/."""
    path = resources.schemas_dir() / SCHEMA_FILES[kind]
    loaded: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return loaded


def python_patterns(node: Any) -> Any:
    """The schema with every `pattern` anchored for Python's `re`, which both validators use.

    JSON Schema patterns are ECMA-262 regexes applied as a search; the schemas anchor them with
    ^...$ (so editors full-match). In Python, `$` also matches before a trailing newline, so
    "team-a\\n" would pass `^[a-z0-9-]+$`: the final `$` becomes `\\Z` (end of text, what `$` means
    in ECMA-262 without the m flag)."""
    if isinstance(node, dict):
        out = {k: python_patterns(v) for k, v in node.items()}
        pat = out.get("pattern")
        if isinstance(pat, str) and pat.endswith("$") and not pat.endswith("\\$"):
            out["pattern"] = pat[:-1] + "\\Z"
        return out
    if isinstance(node, list):
        return [python_patterns(v) for v in node]
    return node


@functools.cache
def _validator(kind: str) -> Any:
    return _validator_class()(python_patterns(schema(kind)))


def check_document(doc: YamlDoc, *, kind: str, file: str) -> tuple[Diagnostic, ...]:
    """Every schema violation of `doc` against the schema of `kind`, each at its line."""
    errors = sorted(_validator(kind).iter_errors(doc.value), key=lambda e: [str(p) for p in e.absolute_path])
    out: list[Diagnostic] = []
    for err in errors:
        out.extend(_diagnose(err, doc=doc, kind=kind, file=file))
    return tuple(out)


def dotted(path: Iterable[str | int]) -> str:
    """spec.gpus[0].mig.partitions[2] -- how the messages name a place in a document."""
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s or "the document"


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "mapping"
    return type(v).__name__


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "boolean": "true or false",
    "number": "a number",
    "null": "null",
}


def _diagnose(err: ValidationError, *, doc: YamlDoc, kind: str, file: str) -> list[Diagnostic]:
    path: Path = tuple(err.absolute_path)
    where = dotted(path)
    line = doc.line_of(path)
    sub = err.schema if isinstance(err.schema, Mapping) else {}
    v = err.validator
    inst = err.instance
    vv: Any = err.validator_value

    def d(code: str, msg: str, at: int | None = None) -> Diagnostic:
        return Diagnostic(code, msg, file, at if at is not None else line, extra={"path": where})

    if v == "required":
        missing = [k for k in vv if isinstance(inst, dict) and k not in inst]
        return [d("MP201", f"{where} is missing the required field {k!r}") for k in missing]
    if v == "additionalProperties" and isinstance(inst, dict):
        known = list(sub.get("properties", {}))
        out = []
        for key in inst:
            if key in known:
                continue
            hint = difflib.get_close_matches(key, known, n=1)
            suggestion = f"; did you mean {hint[0]!r}?" if hint else f"; allowed: {', '.join(known)}"
            out.append(
                Diagnostic(
                    "MP202",
                    f"unknown field {key!r} in {where}{suggestion}",
                    file,
                    doc.line_of((*path, key)),
                    extra={"path": dotted((*path, key))},
                )
            )
        return out
    if v == "type":
        want = vv if isinstance(vv, list) else [vv]
        words = " or ".join(_TYPE_WORDS.get(str(w), str(w)) for w in want)
        return [d("MP203", f"{where} must be {words}, not {json_type(inst)} {_short(inst)}".rstrip())]
    if v == "const":
        if path == ("kind",):
            return [d("MP204", f"kind must be {vv!r} in {_WHERE[kind]}, not {_short(inst)}")]
        return [d("MP204", f"{where} must be {vv!r}, not {_short(inst)}")]
    if v == "enum":
        allowed = ", ".join(str(x) for x in vv)
        return [d("MP204", f"{where} must be one of {allowed}; got {_short(inst)}")]
    if v in ("pattern", "format", "propertyNames"):
        why = sub.get("x-migplan-message") or f"must match {vv!r}"
        if v == "propertyNames":
            why = (vv or {}).get("x-migplan-message", why)
        return [d("MP205", f"{where} {_short(inst)} is invalid: {why}")]
    if v in ("minLength", "maxLength"):
        n = vv
        what = f"at least {n} character(s)" if v == "minLength" else f"at most {n} characters"
        return [d("MP205", f"{where} must have {what}")]
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        lo, hi = sub.get("minimum"), sub.get("maximum")
        rng = f"{lo}..{hi}" if lo is not None and hi is not None else (f">= {lo}" if lo is not None else f"<= {hi}")
        return [d("MP206", f"{where} is {_short(inst)}, outside the allowed range {rng}")]
    if v in ("minItems", "maxItems", "minProperties", "maxProperties"):
        n = len(inst) if isinstance(inst, list | dict) else 0
        bound = "at most" if v.startswith("max") else "at least"
        return [d("MP207", f"{where} has {n} entries; {bound} {vv} allowed")]
    return [d("MP200", f"{where}: {err.message}")]  # pragma: no cover - every keyword we use is mapped


# --------------------------------------------------------------------------------------------
# Fast path: the same schemas compiled to Python code by fastjsonschema. It answers only "valid or
# not"; a document it rejects goes through check_document for positions and messages. The schemas
# use only keywords that draft-07 shares with draft 2020-12, so compiling them as draft-07 checks
# the same constraints. One difference is handled by the caller: fastjsonschema calls 4.0 an
# integer, so yamldocs.fast_load never hands it a float.


@functools.cache
def _fast(kind: str) -> Any:
    try:
        import fastjsonschema
    except ImportError:  # pragma: no cover - a declared dependency; without it, the reference only
        return None
    compiled = _guard_strings(python_patterns(schema(kind)))
    compiled["$schema"] = "http://json-schema.org/draft-07/schema#"
    return _compile(fastjsonschema, compiled)


def _compile(fastjsonschema: Any, definition: dict[str, Any]) -> Any:
    """fastjsonschema's validator for a definition, without detailed exceptions: the fast path only asks
    "valid or not", and the details (every rule's definition written into the generated code) made compiling
    the four validators cost ~40 ms of every `migplan validate` process instead of ~12 ms. fastjsonschema
    2.22 cannot generate `const` without the details, so each `const: v` becomes the equivalent `enum: [v]`
    (both are generated from the same match expression)."""
    return fastjsonschema.compile(
        _const_as_enum(definition), formats={_PLAIN_FORMAT: _not_a_yaml11_bool}, detailed_exceptions=False
    )


def _const_as_enum(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _const_as_enum(v) for k, v in node.items()}
        if "const" in out:
            same = {"enum": [out.pop("const")]}
            if "enum" in out:  # both: the value must satisfy both
                out["allOf"] = [*out.get("allOf", []), same]
            else:
                out.update(same)
        return out
    if isinstance(node, list):
        return [_const_as_enum(v) for v in node]
    return node


# Plain words that pyyaml (YAML 1.1) reads as booleans and yaml-rs (YAML 1.2) as strings. The fast
# schema refuses them wherever a string is expected (values and label keys), so such a file goes to
# the reference, which reads them as pyyaml does. Keys must be strings there too: yaml-rs turns
# `true:` into a boolean key that fastjsonschema's propertyNames would not look at.
_YAML11_BOOLS = ["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"]


_PLAIN_FORMAT = "migplan-yaml11-plain"
_BOOL_WORDS = frozenset(_YAML11_BOOLS)


def _not_a_yaml11_bool(value: str) -> bool:
    return value not in _BOOL_WORDS


def _guard_strings(node: Any) -> Any:
    # A custom format, not `not: {enum: ...}`: fastjsonschema evaluates `not` by raising and
    # catching an exception per string, which costs more than parsing the file.
    if isinstance(node, dict):
        out = {k: _guard_strings(v) for k, v in node.items()}
        if out.get("type") == "string":
            out["format"] = _PLAIN_FORMAT
        if "propertyNames" in out:
            out["propertyNames"] = {**out["propertyNames"], "type": "string", "format": _PLAIN_FORMAT}
        return out
    if isinstance(node, list):
        return [_guard_strings(v) for v in node]
    return node


def fast_valid(kind: str, value: Any) -> bool:
    """True when the compiled schema accepts `value`; False when it does not or cannot tell."""
    if kind == "Node":
        return _fast_node_valid(value)
    check = _fast(kind)
    if check is None:
        return False
    try:
        check(value)
    except Exception:  # JsonSchemaValueException, or anything odd: the reference decides
        return False
    return True


# A fleet repeats a handful of GPU cuts thousands of times. A Node is checked as its envelope
# (every GPU item accepted as is) plus each GPU item against the GPU sub-schema, and GPU items
# already accepted are remembered by their JSON text (orjson): for JSON-like values equal texts
# mean equal values (1, "1" and true all differ), so the answer is the same. Not for a text with
# `null` in it: orjson writes NaN and the infinities as null too (the reference loader can give them),
# so such an item is checked every time.
_GPU_SEEN: dict[bytes, None] = {}
_GPU_SEEN_LIMIT = 4096


@functools.cache
def _fast_node_parts() -> tuple[Any, Any] | None:
    try:
        import fastjsonschema
    except ImportError:  # pragma: no cover
        return None
    node = _guard_strings(python_patterns(schema("Node")))
    node["$schema"] = "http://json-schema.org/draft-07/schema#"
    gpu = {"$schema": node["$schema"], "$defs": node["$defs"], "$ref": "#/$defs/gpu"}
    envelope = json.loads(json.dumps(node))
    envelope["properties"]["spec"]["properties"]["gpus"]["items"] = {}
    return _compile(fastjsonschema, envelope), _compile(fastjsonschema, gpu)


def _fast_node_valid(value: Any) -> bool:
    parts = _fast_node_parts()
    if parts is None:
        return False
    envelope, gpu = parts
    try:
        envelope(value)
        for item in value["spec"]["gpus"]:
            key = orjson.dumps(item)  # raises on non-string keys or odd types: then the reference decides
            if key in _GPU_SEEN:
                continue
            gpu(item)
            if len(_GPU_SEEN) < _GPU_SEEN_LIMIT and b"null" not in key:
                _GPU_SEEN[key] = None
    except Exception:
        return False
    return True
