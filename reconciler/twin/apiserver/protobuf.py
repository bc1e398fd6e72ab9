"""Decoding of the Kubernetes protobuf encoding for the few kinds kubectl's typed clients send that way.

Pure. `kubectl create configmap|namespace|serviceaccount|quota` and `kubectl auth can-i` post
`application/vnd.kubernetes.protobuf` bodies and do not fall back to JSON on 415, so the twin reads these: the
`k8s\\0` envelope (runtime.Unknown), ObjectMeta, and the ConfigMap, Namespace, ServiceAccount, ResourceQuota and
SelfSubjectAccessReview messages, with the field numbers of k8s.io/api and apimachinery's
generated.proto files. Other kinds in protobuf are answered 415 (every other client sends JSON).
Responses are always JSON, which those clients accept (they ask for protobuf or */*).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    """The body is not a protobuf message the twin can read."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of a message: ints for varints, bytes for length-delimited."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _str(value: bytes) -> str:
    return value.decode("utf-8")


def _map(entries: list[bytes], value: Callable[[bytes], Any] = _str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for entry in entries:
        key, val = "", b""
        for number, _, v in fields(entry):
            if number == 1:
                key = _str(v)
            elif number == 2:
                val = v
        out[key] = value(val)
    return out


def object_meta(buf: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    labels: list[bytes] = []
    annotations: list[bytes] = []
    finalizers: list[str] = []
    names = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
    for number, _, value in fields(buf):
        if number in names and value:  # the k8s encoder writes empty optional strings too
            meta[names[number]] = _str(value)
        elif number == 11:
            labels.append(value)
        elif number == 12:
            annotations.append(value)
        elif number == 14:
            finalizers.append(_str(value))
    if labels:
        meta["labels"] = _map(labels)
    if annotations:
        meta["annotations"] = _map(annotations)
    if finalizers:
        meta["finalizers"] = finalizers
    return meta


def _configmap(raw: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    data: list[bytes] = []
    binary: list[bytes] = []
    for number, _, value in fields(raw):
        if number == 1:
            obj["metadata"] = object_meta(value)
        elif number == 2:
            data.append(value)
        elif number == 3:
            binary.append(value)
        elif number == 4:
            obj["immutable"] = bool(value)
    if data:
        obj["data"] = _map(data)
    if binary:
        obj["binaryData"] = _map(binary, lambda b: base64.b64encode(b).decode())
    return obj


def _namespace(raw: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, _, value in fields(raw):
        if number == 1:
            obj["metadata"] = object_meta(value)
        elif number == 2:
            finals = [_str(v) for n, _, v in fields(value) if n == 1]
            obj["spec"] = {"finalizers": finals} if finals else {}
    return obj


def _serviceaccount(raw: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    pulls: list[dict[str, str]] = []
    for number, _, value in fields(raw):
        if number == 1:
            obj["metadata"] = object_meta(value)
        elif number == 3:
            ref = [_str(v) for n, _, v in fields(value) if n == 1]
            pulls.append({"name": ref[0]} if ref else {})
        elif number == 4:
            obj["automountServiceAccountToken"] = bool(value)
    if pulls:
        obj["imagePullSecrets"] = pulls
    return obj


def _quantity(buf: bytes) -> str:
    """resource.Quantity's protobuf form: message Quantity { optional string string = 1; }."""
    return "".join(_str(v) for n, _, v in fields(buf) if n == 1)


def _resource_quota(raw: bytes) -> dict[str, Any]:
    """`kubectl create quota` (core/v1 ResourceQuota: metadata 1, spec 2 {hard 1, scopes 2, scopeSelector 3})."""
    obj: dict[str, Any] = {}
    for number, _, value in fields(raw):
        if number == 1:
            obj["metadata"] = object_meta(value)
        elif number == 2:
            spec: dict[str, Any] = {}
            hard: list[bytes] = []
            for n, _, v in fields(value):
                if n == 1:
                    hard.append(v)
                elif n == 2:
                    spec.setdefault("scopes", []).append(_str(v))
                elif n == 3:
                    exprs = []
                    for k, _, e in fields(v):
                        if k == 1:
                            parts = fields(e)
                            expr: dict[str, Any] = {
                                "scopeName": "".join(_str(x) for i, _, x in parts if i == 1),
                                "operator": "".join(_str(x) for i, _, x in parts if i == 2),
                            }
                            values = [_str(x) for i, _, x in parts if i == 3]
                            if values:
                                expr["values"] = values
                            exprs.append(expr)
                    spec["scopeSelector"] = {"matchExpressions": exprs}
            if hard:
                spec["hard"] = _map(hard, _quantity)
            obj["spec"] = spec
    return obj


def _resource_attributes(buf: bytes) -> dict[str, str]:
    names = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource", 7: "name"}
    return {names[n]: _str(v) for n, _, v in fields(buf) if n in names and v}


def _self_subject_access_review(raw: bytes) -> dict[str, Any]:
    """`kubectl auth can-i` (authorization.k8s.io/v1 SelfSubjectAccessReview)."""
    obj: dict[str, Any] = {"spec": {}}
    for number, _, value in fields(raw):
        if number == 1:
            obj["metadata"] = object_meta(value)
        elif number == 2:
            for n, _, v in fields(value):
                if n == 1:
                    obj["spec"]["resourceAttributes"] = _resource_attributes(v)
                elif n == 2:
                    non = {1: "path", 2: "verb"}
                    obj["spec"]["nonResourceAttributes"] = {non[k]: _str(x) for k, _, x in fields(v) if k in non}
    return obj


DECODERS: dict[str, Callable[[bytes], dict[str, Any]]] = {
    "ConfigMap": _configmap,
    "Namespace": _namespace,
    "ServiceAccount": _serviceaccount,
    "ResourceQuota": _resource_quota,
    "SelfSubjectAccessReview": _self_subject_access_review,
}


def decode(body: bytes) -> dict[str, Any]:
    """A JSON-shaped object from a `k8s\\0`-framed protobuf body; ProtobufError if it cannot be read."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic number")
    api_version = kind = ""
    raw = b""
    for number, _, value in fields(body[len(MAGIC) :]):
        if number == 1:
            for n, _, v in fields(value):
                if n == 1:
                    api_version = _str(v)
                elif n == 2:
                    kind = _str(v)
        elif number == 2:
            raw = value
    decoder = DECODERS.get(kind)
    if decoder is None:
        raise ProtobufError(f"kind {kind!r} is not readable from protobuf by the twin")
    return {"apiVersion": api_version, "kind": kind, **decoder(raw)}
