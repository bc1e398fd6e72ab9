"""Kubernetes resource quantities, parsed as apimachinery's resource.Quantity parses them.

Pure: stdlib only. Ported from kubernetes/kubernetes
staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go (`parseQuantityString`,
`ParseQuantity`) and suffix.go (`quantitySuffixer.interpret`). The serialization format is

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <sign>            ::= "+" | "-"
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>   (an integer exponent)

so `1e3` is 1000, `2Ki` is 2048, `1000m` is 1, `1.5` is 3/2. As ParseQuantity does, a value finer than the nano
scale is rounded up (away from zero) to it: `1.5n` is 2n, `0.9999999999` is 1. Two deliberate differences, both
refusals: a sign or a dot with no digit at all (`+`, `.`; Go reads the first as 0), and a value
whose magnitude exceeds MAX_MAGNITUDE (Go caps BinarySI at 2^63-1; a GPU count that large is a
poisoned object, and refusing it early keeps `1e999999999` from costing a billion-digit integer).

Extended resources (nvidia.com/gpu, nvidia.com/mig-*) are whole, non-negative counts: the API
server refuses fractional ones (pkg/apis/core/validation ValidateResourceQuantityValue /
validateResourceName, "must be an integer"). `parse_count` applies that on top of `parse_quantity`.
"""

from __future__ import annotations

import functools
from fractions import Fraction

# suffix.go: decimal SI prefixes (base 10) and binary SI (base 2) with their exponents.
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# A quantity migplan reads is a device count; anything near 2^63 is not a count but an attack or a
# bug. Bounding the exponent before computing keeps parsing O(len(text)).
MAX_MAGNITUDE = 2**63 - 1
_MAX_EXPONENT = 30
_MAX_TEXT = 64  # Go accepts any length; a canonical count is a few characters
_NANO_PER_UNIT = 10**9


class QuantityError(ValueError):
    """The text is not a quantity (or not a device count); the message says why, in one line."""


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity string, or QuantityError (never another exception)."""
    if not isinstance(text, str):
        raise QuantityError(f"a quantity is a string, not {type(text).__name__}")
    if text == "":
        raise QuantityError("empty quantity")
    if len(text) > _MAX_TEXT:
        raise QuantityError(f"quantity of {len(text)} characters is too long")
    pos, end = 0, len(text)
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    whole = text[start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        fstart = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        frac = text[fstart:pos]
    if not whole and not frac:
        raise QuantityError(f"{text!r} has no digits")
    mantissa = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
    suffix = text[pos:]
    value = _round_up_to_nano(mantissa * _suffix_factor(suffix, text))
    if abs(value) > MAX_MAGNITUDE:
        raise QuantityError(f"{text!r} is too large")
    return -value if negative else value


def _round_up_to_nano(value: Fraction) -> Fraction:
    """ParseQuantity's `amount.Round(amount, Nano, inf.RoundUp)` for non-zero values (value is non-negative here)."""
    scaled = value * _NANO_PER_UNIT
    if scaled.denominator == 1:
        return value
    return Fraction(-(-scaled.numerator // scaled.denominator), _NANO_PER_UNIT)


def _suffix_factor(suffix: str, text: str) -> Fraction:
    if suffix in _DECIMAL_SI:
        return Fraction(10) ** _DECIMAL_SI[suffix]
    if suffix in _BINARY_SI:
        return Fraction(2 ** _BINARY_SI[suffix])
    if suffix[:1] in ("e", "E"):
        exp = suffix[1:]
        digits = exp[1:] if exp[:1] in ("+", "-") else exp
        if not digits or not (digits.isascii() and digits.isdigit()):
            raise QuantityError(f"{text!r}: exponent {suffix!r} is not an integer")
        n = int(exp)
        if abs(n) > _MAX_EXPONENT:
            raise QuantityError(f"{text!r}: exponent {n} is out of range")
        return Fraction(10) ** n
    raise QuantityError(f"{text!r}: unknown suffix {suffix!r}")


def parse_count(raw: object) -> int:
    """A device count (capacity, allocatable, requests or limits of an extended resource).

    Accepts what the API returns: a quantity string, or an integer (JSON numbers decode as one).
    Raises QuantityError for anything else: not a quantity, negative, fractional, too large."""
    if isinstance(raw, bool):
        raise QuantityError(f"a quantity is a string, not {raw!r}")
    if isinstance(raw, int):
        value = Fraction(raw)
        if abs(value) > MAX_MAGNITUDE:
            raise QuantityError("count is too large")
    elif isinstance(raw, float):
        # Quantity.UnmarshalJSON reads a bare JSON number through its text; NaN/Infinity are not JSON.
        if raw != raw or raw in (float("inf"), float("-inf")):
            raise QuantityError(f"{raw!r} is not a quantity")
        value = parse_quantity(repr(raw))
    elif isinstance(raw, str):
        return _count_text(raw)
    else:
        raise QuantityError(f"a quantity is a string, not {type(raw).__name__}")
    return _whole(raw, value)


@functools.lru_cache(maxsize=1024)
def _count_text(text: str) -> int:
    """parse_count of a string, memoised: a cluster repeats a handful of counts ("1", "7", "8") on every
    node and pod of every LIST. Only successes are kept (an exception is not cached), and a string is
    at most _MAX_TEXT characters before anything is parsed, so the cache holds at most ~64 KiB of keys."""
    return _whole(text, parse_quantity(text))


def _whole(raw: object, value: Fraction) -> int:
    if value < 0:
        raise QuantityError(f"{raw!r} is negative; a device count cannot be")
    if value.denominator != 1:
        raise QuantityError(f"{raw!r} is fractional; extended resources are whole numbers")
    return int(value)
