"""Label and field selectors with the real apiserver's syntax, matching and error messages.

Pure. `parse_label_selector` follows k8s.io/apimachinery/pkg/labels (equality `=`/`==`/`!=`, set-based `in`/`notin`,
existence `key` and `!key`); `parse_field_selector` follows pkg/fields (`=`, `==`, `!=` only). Both raise ApiError(400)
with the messages the real server uses ("unable to parse requirement: ...", "field label not supported: ...").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, bad_request

_SPECIAL = "=!(),"
_OPERATORS = ("==", "=", "!=", "!", "(", ")", ",")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("=", "in"):
            return has and labels[self.key] in self.values
        # != and notin match objects without the key too, as in Kubernetes
        return not has or labels[self.key] not in self.values


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        lab = labels or {}
        return all(r.matches(lab) for r in self.requirements)


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as (kind, text): kind is 'id', 'op' or 'end'."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c in _SPECIAL:
            j = i + 1
            # greedy like the Go lexer: extend while the buffer is still an operator
            while j < n and text[i : j + 1] in _OPERATORS:
                j += 1
            out.append(("op", text[i:j]))
            i = j
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in _SPECIAL:
            j += 1
        word = text[i:j]
        out.append(("op" if word in ("in", "notin") else "id", word))
        i = j
    out.append(("end", ""))
    return out


def _tok_desc(tok: tuple[str, str]) -> str:
    return tok[1] if tok[0] != "end" else ""


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a labelSelector query value; raises ApiError 400 on a syntax error."""
    if not text or not text.strip():
        return LabelSelector(())
    toks = _lex(text)
    pos = 0
    reqs: list[Requirement] = []

    def fail(msg: str) -> ApiError:
        return bad_request(f"unable to parse requirement: {msg}")

    while True:
        kind, val = toks[pos]
        if kind == "op" and val == "!":
            pos += 1
            kind, key = toks[pos]
            if kind != "id":
                raise fail(f"found '{_tok_desc(toks[pos])}', expected: identifier")
            pos += 1
            reqs.append(Requirement(key, "!"))
        elif kind == "id":
            key = val
            pos += 1
            kind, op = toks[pos]
            if kind == "end" or (kind == "op" and op == ","):
                reqs.append(Requirement(key, "exists"))
            elif kind == "op" and op in ("=", "==", "!="):
                pos += 1
                vkind, value = toks[pos]
                if vkind == "id":
                    pos += 1
                elif vkind == "end" or (vkind == "op" and value == ","):
                    value = ""
                else:
                    raise fail(f"found '{value}', expected: identifier")
                reqs.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
            elif kind == "op" and op in ("in", "notin"):
                pos += 1
                if toks[pos] != ("op", "("):
                    raise fail(f"found '{_tok_desc(toks[pos])}', expected: '('")
                pos += 1
                values: list[str] = []
                while True:
                    vkind, value = toks[pos]
                    if vkind == "id":
                        values.append(value)
                        pos += 1
                    elif vkind == "op" and value in (",", ")"):
                        values.append("")
                    else:
                        raise fail(f"found '{_tok_desc(toks[pos])}', expected: ',', or identifier")
                    vkind, value = toks[pos]
                    if vkind == "op" and value == ",":
                        pos += 1
                        continue
                    if vkind == "op" and value == ")":
                        pos += 1
                        break
                    raise fail(f"found '{_tok_desc(toks[pos])}', expected: ',' or ')'")
                reqs.append(Requirement(key, op, tuple(values)))
            else:
                raise fail(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        else:
            raise fail(f"found '{val}', expected: !, identifier, or 'end of string'")
        kind, val = toks[pos]
        if kind == "end":
            break
        if kind == "op" and val == ",":
            pos += 1
            continue
        raise fail(f"found '{val}', expected: ',' or 'end of string'")
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...]

    def matches(self, fields: Callable[[str], str]) -> bool:
        for r in self.requirements:
            got = fields(r.field)
            if (got == r.value) != (r.op == "="):
                return False
        return True


def parse_field_selector(
    text: str | None, supported: frozenset[str], aliases: Mapping[str, str] | None = None
) -> FieldSelector:
    """Parse a fieldSelector; `aliases` renames old field labels (the kind's field label conversion func) and
    fields outside `supported` give the real 400."""
    if not text:
        return FieldSelector(())
    reqs: list[FieldRequirement] = []
    for part in _split_unescaped(text, ","):
        if not part:
            continue
        for op in ("!=", "==", "="):
            idx = part.find(op)
            if idx >= 0:
                field, value = part[:idx].strip(), _unescape(part[idx + len(op) :])
                field = (aliases or {}).get(field, field)
                reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
    for r in reqs:
        if r.field not in supported:
            raise bad_request(f"field label not supported: {r.field}")
    return FieldSelector(tuple(reqs))


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, esc = [], [], False
    for ch in text:
        if esc:
            cur.append("\\" + ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _unescape(value: str) -> str:
    return value.replace("\\,", ",").replace("\\=", "=").replace("\\\\", "\\")


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares: dotted path into the object, '' when absent, bools lowercase."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)
