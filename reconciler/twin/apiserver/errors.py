"""API errors shaped like the real kube-apiserver's `Status` objects.

Pure: builds values only. `ApiError` is raised by the store and turned into an HTTP response by the server;
`FieldError` mirrors k8s.io/apimachinery/pkg/util/validation/field.Error so that the 422 messages read exactly
like the real ones (see tests/reference/kube-apiserver/*.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_MISSING: Any = object()


class ApiError(Exception):
    """An API failure: HTTP code, Status reason, message and optional details."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The `Status` body the real server sends for this error."""
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
        body["message"] = self.message
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.reason!r}, {self.message!r})"


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if group:
        d["group"] = group
    d["kind"] = kind
    return d


def qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found', _details(name, group, resource)
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{qualified(resource, group)} "{name}" already exists', _details(name, group, resource)
    )


def conflict(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(name, group, resource),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def resource_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def unsupported_media_type(message: str = "415: Unsupported Media Type") -> ApiError:
    return ApiError(415, "UnsupportedMediaType", message, None if message != "415: Unsupported Media Type" else {})


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def go_quote(value: str) -> str:
    """Go's %q for the strings that appear in messages (JSON escaping is close enough for printable text)."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class GoLiteral:
    """A value field.Error prints with Go's %#v (a struct such as v1.LabelSelector), pre-rendered."""

    text: str


def go_value(value: Any) -> str:
    """How field.Error prints a value: %q for strings, JSON for objects, plain for numbers and booleans."""
    if isinstance(value, GoLiteral):
        return value.text
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class FieldError:
    """One validation failure, as field.Error: kind is Required|Invalid|TypeInvalid|NotSupported|Forbidden|..."""

    kind: str
    field: str
    value: Any = _MISSING
    detail: str = ""
    supported: tuple[str, ...] = ()

    _REASONS = {
        "Required": ("FieldValueRequired", "Required value"),
        "Invalid": ("FieldValueInvalid", "Invalid value"),
        "TypeInvalid": ("FieldValueTypeInvalid", "Invalid value"),
        "NotSupported": ("FieldValueNotSupported", "Unsupported value"),
        "Forbidden": ("FieldValueForbidden", "Forbidden"),
        "Duplicate": ("FieldValueDuplicate", "Duplicate value"),
        "TooLong": ("FieldValueTooLong", "Too long"),
        "TooMany": ("FieldValueTooMany", "Too many"),  # field.TooMany (list sizes: resource.k8s.io)
    }

    @property
    def reason(self) -> str:
        return self._REASONS[self.kind][0]

    def body(self) -> str:
        """field.Error.ErrorBody(): the message without the field path."""
        label = self._REASONS[self.kind][1]
        if self.kind in ("Required", "Forbidden", "TooLong"):
            text = label
        else:
            text = f"{label}: {go_value(self.value)}" if self.value is not _MISSING else label
        if self.kind == "NotSupported" and self.supported:
            text += ": supported values: " + ", ".join(go_quote(s) for s in self.supported)
        elif self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def invalid(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid with the aggregate message `Kind.group "name" is invalid: ...` and one cause per error."""
    qual = f"{kind}.{group}" if group else kind
    parts = list(dict.fromkeys(str(e) for e in errors))  # ToAggregate() de-duplicates the message, not the causes
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = _details(name, group, kind)
    if not name:
        details.pop("name")
    details["causes"] = [{"reason": e.reason, "message": e.body(), "field": e.field} for e in errors]
    return ApiError(422, "Invalid", f'{qual} "{name}" is invalid: {joined}', details)
