"""Kubernetes resource.Quantity: parsing and the canonical form the real server stores and returns.

Pure. Ported from kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/api/resource:
- quantity.go `parseQuantityString` and `ParseQuantity`: the scanner, the three formats (DecimalSI, BinarySI,
  DecimalExponent), the int64 fast path that keeps the text it was given when that text is already canonical
  (`scale%3 == 0 && !HasSuffix(shifted, "000") && shifted[0] != '0'`, or for binary suffixes
  `exponent%10 == 0 && value&0x07 != 0`), and the slow path that rounds up to the nano scale and caps BinarySI
  at 2^63-1;
- quantity.go `CanonicalizeBytes` / `String`, amount.go `AsCanonicalBytes` / `AsCanonicalBase1024Bytes`: factors of
  ten (or 1024) move into the exponent, the exponent goes down to a multiple of three, the suffix comes from
  suffix.go's tables (`4000m` -> `4`, `0.5` -> `500m`, `1.5Gi` -> `1536Mi`, `1e3` -> `1e3`, `1000` -> `1k`);
- quantity.go `RoundUp`, which core/v1 `SetDefaults_ResourceList` applies with the milli scale to every
  ResourceList (requests, limits, capacity, allocatable, ...): `100u` in a ResourceList is stored as `1m`.

Amounts are kept as (unscaled integer, power of ten) like inf.Dec, so `1e999999999` costs nothing.
`parse_quantity` raises ValueError with the real decoder's message for text that is not a quantity.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal

QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
NUMERIC_ERROR = "unable to parse numeric part of quantity"
SUFFIX_ERROR = "unable to parse quantity's suffix"

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_DEC_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DEC_BY_EXP = {e: s for s, e in _DEC_SUFFIXES.items()}
_BIN_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BIN_BY_EXP = {e: s for s, e in _BIN_SUFFIXES.items()}
_MAX_INT64 = 2**63 - 1
_MAX_INT64_FACTORS = 18  # quantity.go maxInt64Factors
_NANO = -9
_MILLI = -3
_MAX_DIGITS = 4000  # Python's int <-> str limit is 4300 digits; Go has none (deviation, ASSUMPTIONS.md)


@dataclass(frozen=True)
class Quantity:
    """A parsed quantity: unscaled * 10**scale, its format, and the text Go keeps when it was canonical."""

    unscaled: int
    scale: int
    format: str
    text: str | None = None
    fast: bool = True  # the int64Amount form (False: the inf.Dec form of the slow path)

    def is_zero(self) -> bool:
        return self.unscaled == 0

    def as_decimal(self) -> Decimal:
        return Decimal(f"{self.unscaled}e{self.scale}")

    def __str__(self) -> str:
        return self.text if self.text is not None else _canonical(self)


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString: (positive, value, num, denom, suffix); raises ValueError(QUANTITY_ERROR)."""
    positive = True
    pos, end = 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] != "-"
        pos += 1
    while True:  # leading zeros
        if pos >= end:
            return positive, "0", "0", "", ""
        if text[pos] != "0":
            break
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return positive, text, text[start:], "", ""
    num = text[start:pos] or "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        dstart = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[dstart:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise ValueError(QUANTITY_ERROR)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """suffix.go interpret: (base, exponent, format); raises ValueError(SUFFIX_ERROR)."""
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in ("+", "-") else digits
        if not body or not set(body) <= _DIGITS:
            raise ValueError(SUFFIX_ERROR)
        parsed = int(digits)
        if not -(2**63) <= parsed <= _MAX_INT64:  # strconv.ParseInt(..., 64) range error
            raise ValueError(SUFFIX_ERROR)
        return 10, ((parsed + 2**31) % 2**32) - 2**31, DECIMAL_EXPONENT  # int32(parsed)
    raise ValueError(SUFFIX_ERROR)


@functools.lru_cache(maxsize=8192)
def parse(text: str) -> Quantity:
    """resource.ParseQuantity. Raises ValueError with Go's error text."""
    if text == "":
        raise ValueError(QUANTITY_ERROR)
    if text == "0":
        return Quantity(0, 0, DECIMAL_SI, "0")
    positive, value, num, denom, suffix = _scan(text)
    base, exponent, fmt = _interpret(suffix)
    precision = 0
    scale = 0
    mantissa = 1
    if fmt in (DECIMAL_EXPONENT, DECIMAL_SI):
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1
    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = num + denom
            parsed = int(shifted)
            if parsed > _MAX_INT64:
                raise ValueError(NUMERIC_ERROR)
            result = parsed * mantissa
            if result <= _MAX_INT64:  # int64Multiply did not overflow
                if not positive:
                    result = -result
                if fmt == BINARY_SI:
                    keep = exponent % 10 == 0 and (parsed & 0x07) != 0
                else:
                    keep = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
                return Quantity(result, scale, fmt, text if keep else None)
    # slow path (inf.Dec): the numeric part exactly, times the suffix, rounded up to nano, BinarySI capped
    digits = value.lstrip("+-")
    whole, _, frac = digits.partition(".")
    if not (whole + frac) or not set(whole + frac) <= _DIGITS or len(whole + frac) > _MAX_DIGITS:
        raise ValueError(NUMERIC_ERROR)
    unscaled = int(whole + frac or "0")
    dscale = -len(frac)
    if base == 10:
        dscale += exponent
    else:
        unscaled <<= exponent
    unscaled, dscale = _round_up_away(unscaled, dscale, _NANO)
    if fmt == BINARY_SI and _compare(unscaled, dscale, _MAX_INT64) > 0:
        unscaled, dscale = _MAX_INT64, 0
    if fmt == BINARY_SI and unscaled and _compare(unscaled, dscale, 1) < 0:
        fmt = DECIMAL_SI
    if value.startswith("-"):
        unscaled = -unscaled
    return Quantity(unscaled, dscale, fmt, None, fast=False)


def _round_up_away(unscaled: int, scale: int, target: int) -> tuple[int, int]:
    """inf.Dec Round(target, RoundUp) of a non-negative amount: away from zero, to at most `target` scale."""
    if scale >= target or unscaled == 0:
        return unscaled, scale
    shift = target - scale
    if shift > len(str(unscaled)):  # the amount is below one unit of the target scale
        return 1, target
    q, r = divmod(unscaled, 10**shift)
    return q + (1 if r else 0), target


def _compare(unscaled: int, scale: int, other: int) -> int:
    """Sign of (unscaled * 10**scale - other). Scales are >= -9 here (nano rounding), but may be huge and positive."""
    if unscaled == 0:
        return (other < 0) - (other > 0)
    if scale > 40:  # |amount| >= 10**40 exceeds every bound compared against
        return 1 if unscaled > 0 else -1
    lhs: int = unscaled * 10 ** max(scale, 0)
    rhs: int = other * 10 ** max(-scale, 0)
    return int(lhs > rhs) - int(lhs < rhs)


def round_up(q: Quantity, scale: int = _MILLI) -> Quantity:
    """Quantity.RoundUp(scale): the inf.Dec form always loses its kept text; the int64 form only when it moves."""
    if not q.fast:
        mag, sc = _round_up_away(abs(q.unscaled), q.scale, scale)
        return Quantity(-mag if q.unscaled < 0 else mag, sc, q.format, None, fast=False)
    if q.scale >= scale:
        return q
    shift = scale - q.scale
    quot, rem = divmod(abs(q.unscaled), 10**shift)
    value = -quot if q.unscaled < 0 else quot
    if rem and q.unscaled > 0:  # int64Amount.AsScale: Go's truncated remainder > 0 rounds up
        value += 1
    return Quantity(value, scale, q.format, None)


def _strip_tens(unscaled: int, scale: int) -> tuple[int, int]:
    mag = abs(unscaled)
    while mag >= 10 and mag % 10 == 0:
        mag //= 10
        scale += 1
    return (-mag if unscaled < 0 else mag), scale


def _canonical(q: Quantity) -> str:
    """CanonicalizeBytes + suffix: what String() and MarshalJSON emit when no text was kept."""
    if q.unscaled == 0:
        return "0"
    fmt = q.format
    if fmt == BINARY_SI:
        if _compare(q.unscaled, q.scale, -1024) > 0 and _compare(q.unscaled, q.scale, 1024) < 0:
            fmt = DECIMAL_SI
        elif q.scale < 0 and q.unscaled % 10**-q.scale != 0:
            fmt = DECIMAL_SI  # AsScale(0) is not exact: don't lose precision
    if fmt == BINARY_SI:
        value = q.unscaled * 10**q.scale if q.scale >= 0 else q.unscaled // 10**-q.scale
        mag, exp = abs(value), 0
        while mag >= 1024 and mag % 1024 == 0:
            mag //= 1024
            exp += 1
        return f"{-mag if value < 0 else mag}{_BIN_BY_EXP.get(exp * 10, '')}"
    amount, exponent = _strip_tens(q.unscaled, q.scale)
    while exponent % 3 != 0:
        amount *= 10
        exponent -= 1
    if fmt == DECIMAL_EXPONENT:
        return f"{amount}e{exponent}" if exponent else str(amount)
    # DecimalSI: an exponent beyond the table gets no suffix (suffix.go constructBytes reports !ok, ignored)
    return f"{amount}{_DEC_BY_EXP.get(exponent, '')}"


def unmarshal(raw: object) -> Quantity:
    """Quantity.UnmarshalJSON for a decoded JSON value: null is zero, numbers parse through their text."""
    if raw is None:
        return Quantity(0, 0, DECIMAL_SI)
    if isinstance(raw, str):
        return parse(raw.strip())
    if isinstance(raw, bool):
        raise ValueError(QUANTITY_ERROR)
    if isinstance(raw, int):
        return parse(str(raw))
    if isinstance(raw, float):
        return parse(repr(raw))
    raise ValueError(QUANTITY_ERROR)


def canonical(raw: object, *, resource_list: bool = False) -> str:
    """The string the real server stores and returns for this value; ValueError with Go's message if invalid.

    resource_list=True also applies SetDefaults_ResourceList's RoundUp to the milli scale."""
    if type(raw) is str:  # the usual form (numbers are not remembered: 1, 1.0 and True are equal dict keys)
        return _canonical_text(raw, resource_list)
    return _canonical_value(raw, resource_list)


@functools.lru_cache(maxsize=8192)
def _canonical_text(raw: str, resource_list: bool) -> str:
    return _canonical_value(raw, resource_list)


def _canonical_value(raw: object, resource_list: bool) -> str:
    q = unmarshal(raw)
    if resource_list:
        q = round_up(q, _MILLI)
    return str(q)


def parse_quantity(text: object) -> Decimal:
    """The numeric value of a quantity string (or JSON number), as the server reads it."""
    return unmarshal(text).as_decimal()


ZERO = Quantity(0, 0, DECIMAL_SI)
_MAX_ALIGN = 400  # digits: beyond this the smaller term cannot matter to any comparison the twin makes


def _aligned(a: Quantity, b: Quantity) -> tuple[int, int, int]:
    """Both amounts on a common scale. When the scales are absurdly far apart (`1e999999999` next to `1`) the
    smaller term is dropped instead of building a billion-digit integer (inf.Dec would, the twin must not hang)."""
    if abs(a.scale - b.scale) > _MAX_ALIGN:
        big, small = (a, b) if a.scale > b.scale else (b, a)
        if big.unscaled != 0:
            x = big.unscaled * 10**_MAX_ALIGN
            return (x, 0, big.scale - _MAX_ALIGN) if big is a else (0, x, big.scale - _MAX_ALIGN)
        x = small.unscaled
        return (0, x, small.scale) if small is b else (x, 0, small.scale)
    scale = min(a.scale, b.scale)
    return a.unscaled * 10 ** (a.scale - scale), b.unscaled * 10 ** (b.scale - scale), scale


def add(a: Quantity, b: Quantity) -> Quantity:
    """Quantity.Add: the sum keeps a's format, or b's when a is zero; the kept text is dropped."""
    x, y, scale = _aligned(a, b)
    fmt = b.format if a.unscaled == 0 else a.format
    return Quantity(x + y, scale, fmt, None, fast=a.fast and b.fast)


def compare(a: Quantity, b: Quantity) -> int:
    """Quantity.Cmp: -1, 0 or 1."""
    x, y, _ = _aligned(a, b)
    return (x > y) - (x < y)


def milli_value(q: Quantity) -> int:
    """Quantity.MilliValue, ceil(q * 1000): an int64Amount that overflows int64 reads as 0 (AsScaledInt64)."""
    shift = q.scale + 3
    if shift < 0:
        ceil: int = -(-q.unscaled // 10**-shift)
        return ceil
    if q.unscaled and shift > 19:
        return 0
    value: int = q.unscaled * 10**shift
    return value if abs(value) <= _MAX_INT64 else 0
