"""Structural-schema handling of custom resources, as the apiextensions apiserver does it.

Pure. For a CRD's openAPIV3Schema: `prune` drops nulls of non-nullable fields and unknown fields (returning their
paths, which become a `Warning` header or, with fieldValidation=Strict, a 400); `apply_defaults` fills `default`s
of absent properties whose parent object exists; `validate` returns FieldErrors with the real messages
(Required value / Unsupported value / `... in body must be of type boolean: "string"`), sorted by field path as the
real server reports them (clusterpolicy.json). Not implemented (ASSUMPTIONS.md): CEL rules
(x-kubernetes-validations) and `format` checks; the ClusterPolicy CRD uses neither for the fields migplan writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import FieldError

_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), "object")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(obj: Any, schema: Mapping[str, Any], path: str = "") -> tuple[Any, list[str]]:
    """Copy of obj without unknown fields and without nulls in non-nullable fields; returns (pruned, unknown)."""
    unknown: list[str] = []
    result = _prune(obj, schema, path, unknown, top=not path)
    return result, unknown


def _prune(obj: Any, schema: Mapping[str, Any], path: str, unknown: list[str], top: bool = False) -> Any:
    if isinstance(obj, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if top and key in ("apiVersion", "kind", "metadata"):
                out[key] = value
                continue
            sub = props.get(key)
            if sub is None and isinstance(addl, dict):
                sub = addl
            if sub is None:
                if preserve or addl is True:
                    out[key] = value
                else:
                    unknown.append(_join(path, key))
                continue
            if value is None and not sub.get("nullable", False):
                continue  # nulls of non-nullable fields are dropped, as the apiserver's pruning does
            out[key] = _prune(value, sub, _join(path, key), unknown)
        return out
    if isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [_prune(v, items, f"{path}[{i}]", unknown) for i, v in enumerate(obj)]
    return obj


def apply_defaults(obj: Any, schema: Mapping[str, Any]) -> Any:
    """Fill the schema's defaults into absent properties (recursively, parents must exist)."""
    if isinstance(obj, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in obj and "default" in sub:
                obj[key] = _copy(sub["default"])
            if key in obj:
                obj[key] = apply_defaults(obj[key], sub)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for key in list(obj):
                if key not in props:
                    obj[key] = apply_defaults(obj[key], addl)
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [apply_defaults(v, items) for v in obj]
    return obj


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def validate(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> list[FieldError]:
    """Validate everything but metadata/apiVersion/kind; errors sorted by field path."""
    errors: list[FieldError] = []
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    sub_schema = dict(schema)
    sub_schema["properties"] = {
        k: v for k, v in (schema.get("properties") or {}).items() if k not in ("apiVersion", "kind", "metadata")
    }
    _validate(body, sub_schema, "", errors)
    return sorted(errors, key=lambda e: e.field)


def _type_ok(value: Any, schema: Mapping[str, Any]) -> bool:
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    if not expected:
        return True
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return bool(_type_name(value) == expected)


def _validate(value: Any, schema: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    if value is None:
        if not schema.get("nullable", False) and schema.get("type"):
            errors.append(
                FieldError("TypeInvalid", path, "null", f'{path} in body must be of type {schema["type"]}: "null"')
            )
        return
    if not _type_ok(value, schema):
        tname = _type_name(value)
        expected = schema.get("type") or "integer-or-string"
        errors.append(FieldError("TypeInvalid", path, tname, f'{path} in body must be of type {expected}: "{tname}"'))
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(FieldError("NotSupported", path, value, supported=tuple(str(v) for v in schema["enum"])))
    if isinstance(value, str) and not schema.get("x-kubernetes-int-or-string"):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(FieldError("Invalid", path, value, f"{path} in body should match '{schema['pattern']}'"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                FieldError(
                    "Invalid", path, value, f"{path} in body should be at least {schema['minLength']} chars long"
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(FieldError("TooLong", path, value, f"may not be more than {schema['maxLength']} bytes"))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(
                FieldError(
                    "Invalid", path, value, f"{path} in body should be greater than or equal to {schema['minimum']}"
                )
            )
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(
                FieldError(
                    "Invalid", path, value, f"{path} in body should be less than or equal to {schema['maximum']}"
                )
            )
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        for req in schema.get("required") or ():
            if req not in value:
                errors.append(FieldError("Required", _join(path, req)))
        addl = schema.get("additionalProperties")
        for key, sub_value in value.items():
            sub = props.get(key)
            if sub is None and isinstance(addl, dict):
                sub = addl
            if sub is not None:
                _validate(sub_value, sub, _join(path, key), errors)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _validate(item, items, f"{path}[{i}]", errors)
