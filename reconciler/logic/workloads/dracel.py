"""DRA device selectors (CEL) evaluated as Kubernetes' scheduler evaluates them, against devices the plan will publish.

Pure: an expression and a device description in, a verdict out; never an exception. The environment is the one
k8s.io/dynamic-resource-allocation/cel/compile.go (`newCompiler`, `DeviceMatches`) declares, on a maintained CEL
library (cel-python):
- one variable `device` with `driver`, `attributes` and `capacity`; attributes and capacities are grouped by domain
  (`device.attributes["gpu.nvidia.com"].profile`), an unqualified name being in the driver's domain
  (`parseQualifiedName`); a domain the device does not have is an empty map (`newStringInterfaceMapWithDefault`), a
  name the domain does not have is a runtime error ("no such key");
- version attributes are semantic versions, capacities are quantities, with Kubernetes' CEL libraries for both:
  `semver()`, `isSemver()`, `quantity()`, `isQuantity()`, `compareTo`, `isGreaterThan`, `isLessThan`, `major`,
  `minor`, `patch`, `asInteger`, `asApproximateFloat`, `isInteger`, `sign`, `add`, `sub`
  (k8s.io/apiserver/pkg/cel/library semver.go and quantity.go), and the common string extensions;
- the result must be a boolean (`DeviceMatches`: "could not be converted to bool").

Bounds, as the API server refuses selectors (resource/v1 types.go: `CELSelectorExpressionMaxLength` 10 Ki characters,
`CELSelectorExpressionMaxCost` 1,000,000) and beyond, so a hostile manifest costs little: the text is measured before
it is parsed, bracket nesting and the parse tree's depth are bounded (a deep tree would exhaust Python's stack), and
the worst-case cost is estimated from the parse tree (a comprehension multiplies its body by the size of what it
ranges over: a literal list's length, else the 32 attributes a device may have) before anything runs. Regular
expressions run on RE2 (cel-python's `matches`), so no pattern backtracks exponentially.

What the plan cannot know (a device's UUID, the driver's version, SM counts) is an `UNKNOWN` value: a selector that
reads one and whose result depends on it is `Verdict.UNKNOWN` (the caller assumes a match and says so), where one
that only tests its presence (`has(...)`) or does not depend on it (`x || true`) is decided as usual.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reconciler.model.quantities import QuantityError, parse_quantity

MAX_EXPRESSION_LENGTH = 10 * 1024  # resource/v1 CELSelectorExpressionMaxLength
MAX_COST = 1_000_000  # resource/v1 CELSelectorExpressionMaxCost
# cel-python interprets: about 0.1 ms per cost unit. A selector costing more than this is valid but not evaluated by
# migplan (real selectors cost tens), and a run evaluates at most EVAL_BUDGET cost units in all (callers count).
MAX_EVAL_COST = 2_000
EVAL_BUDGET = 500_000
MAX_NESTING = 24  # brackets inside brackets: a selector is a few levels deep
MAX_TREE_DEPTH = 300  # parse-tree levels (each CEL nesting level is about a dozen grammar levels)
MAX_ELEMENTS = 32  # resource/v1 ResourceSliceMaxAttributesAndCapacitiesPerDevice: the size of an attribute map
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


class Verdict(enum.Enum):
    MATCH = "match"
    NO_MATCH = "no match"
    UNKNOWN = "unknown"  # depends on a value only the node knows
    ERROR = "error"  # the scheduler's evaluation fails: the allocation fails


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    unknown: tuple[str, ...] = ()  # the unknown values the result depends on
    message: str = ""  # why, for ERROR


@dataclass(frozen=True, slots=True)
class Version:
    """A semantic version as blang/semver parses it (MAJOR.MINOR.PATCH[-pre][+build])."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    def key(self) -> tuple[Any, ...]:
        # A release sorts after its pre-releases; numeric identifiers sort before alphanumeric ones.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)


_SEMVER = re.compile(
    r"(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)


def parse_version(text: str) -> Version | None:
    if len(text) > 64:  # resource/v1 DeviceAttributeMaxValueLength
        return None
    m = _SEMVER.fullmatch(text)
    if m is None:
        return None
    pre = tuple(int(p) if p.isdigit() else p for p in (m.group(4) or "").split(".") if p)
    return Version(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre)


class UnknownValue:
    """A value the node has but the plan cannot know: every operation on it fails (as a CEL error), and the
    failure is recorded, so the verdict can say the result depends on it."""

    __slots__ = ("name", "touched")

    def __init__(self, name: str, touched: list[str]) -> None:
        self.name = name
        self.touched = touched

    def _fail(self, *_: object) -> Any:
        self.touched.append(self.name)
        raise TypeError(f"{self.name} is known only on the node")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _fail
    __add__ = __radd__ = __sub__ = __mul__ = __contains__ = __len__ = __iter__ = __bool__ = _fail

    def __getattr__(self, name: str) -> Any:  # a string method (startswith, lower...) cel-python reaches for
        self.touched.append(self.name)
        raise AttributeError(name)

    __hash__ = object.__hash__


UNKNOWN = object()  # in a device description: the attribute or capacity exists, its value is not known


@dataclass(frozen=True, slots=True)
class Device:
    """A device as a selector sees it: driver, qualified attribute names -> bool | int | str | Version | UNKNOWN,
    qualified capacity names -> Fraction | UNKNOWN. Hashable (sorted pairs): devices alike are evaluated once."""

    driver: str
    attributes: tuple[tuple[str, Any], ...]
    capacity: tuple[tuple[str, Any], ...] = ()
    digest: int = field(default=0, compare=False, repr=False)  # the hash, computed once (devices are looked up often)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", hash((self.driver, self.attributes, self.capacity)))

    def __hash__(self) -> int:
        return self.digest

    @classmethod
    def of(cls, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any] | None = None) -> Device:
        return cls(driver, tuple(sorted(attributes.items())), tuple(sorted((capacity or {}).items())))


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a selector is refused before it runs (the API server refuses it too)."""

    message: str


class Selector:
    """One compiled selector expression; build with `compile_selector`."""

    __slots__ = ("_cache", "_program", "cost", "expression")

    def __init__(self, expression: str, program: Any, cost: int) -> None:
        self.expression = expression
        self.cost = cost
        self._program = program
        self._cache: dict[Device, Outcome] = {}

    def knows(self, device: Device) -> bool:
        """Whether `device` was evaluated already (evaluating it again costs nothing)."""
        return device in self._cache

    def evaluate(self, device: Device) -> Outcome:
        """The verdict on one device; the same device description is evaluated once."""
        cached = self._cache.get(device)
        if cached is None:
            cached = self._cache[device] = _evaluate(self._program, device)
        return cached


def _depth_of_brackets(text: str) -> int:
    depth = deepest = 0
    quote: str | None = None
    escaped = False
    for ch in text:
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def compile_selector(expression: Any) -> Selector | Problem:
    """A selector ready to evaluate, or why the API server (or migplan's bounds) refuse it."""
    if not isinstance(expression, str) or not expression.strip():
        return Problem("the CEL expression is empty or not a string")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        return Problem(f"the CEL expression is {len(expression)} characters long, more than {MAX_EXPRESSION_LENGTH}")
    if _depth_of_brackets(expression) > MAX_NESTING:
        return Problem(f"the CEL expression nests brackets more than {MAX_NESTING} deep")
    import lark  # lazily: `migplan validate` and the manifests without claims never load the CEL library
    from celpy.celparser import CELParseError

    env = _environment()
    try:
        tree = env.compile(expression)
    except (CELParseError, lark.exceptions.LarkError, RecursionError, ValueError) as exc:
        first = " ".join(str(exc).split())[:160]
        return Problem(f"the CEL expression does not compile: {first}")
    depth = _tree_depth(tree)
    if depth > MAX_TREE_DEPTH:
        return Problem(f"the CEL expression is nested too deeply ({depth} levels; at most {MAX_TREE_DEPTH})")
    cost = _cost(tree)
    if cost > MAX_COST:
        return Problem(f"the CEL expression is too costly (estimated cost {cost}; the API server allows {MAX_COST})")
    try:
        program = env.program(tree, functions=_FUNCTIONS)
    except Exception as exc:
        return Problem(f"the CEL expression does not compile: {' '.join(str(exc).split())[:160]}")
    return Selector(expression, program, cost)


_ENV: list[Any] = []


def _environment() -> Any:
    if not _ENV:
        import celpy

        _ENV.append(celpy.Environment())
    return _ENV[0]


def _tree_depth(tree: Any) -> int:
    import lark

    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_TREE_DEPTH:
            return deepest
        if isinstance(node, lark.Tree):
            stack.extend((c, depth + 1) for c in node.children)
    return deepest


def _size(node: Any) -> int:
    """How many elements what a comprehension ranges over may have."""
    import lark

    while isinstance(node, lark.Tree) and len(node.children) == 1 and isinstance(node.children[0], lark.Tree):
        if node.data == "list_lit":
            break
        node = node.children[0]
    if isinstance(node, lark.Tree):
        if node.data == "list_lit":
            items = node.children[0] if node.children else None
            return len(items.children) if isinstance(items, lark.Tree) else 0
        if node.data == "member_dot_arg" and len(node.children) >= 2 and str(node.children[1]) in ("map", "filter"):
            return _size(node.children[0])
    return MAX_ELEMENTS


def _cost(tree: Any) -> int:
    """The worst-case cost, in evaluation steps: one per operation (a grammar level that only wraps another costs
    nothing), a comprehension's body once per element of what it ranges over."""
    import lark

    if not isinstance(tree, lark.Tree):
        return 1
    if tree.data == "member_dot_arg" and len(tree.children) == 3 and str(tree.children[1]) in _MACROS:
        member, _name, args = tree.children
        return 1 + _cost(member) + _size(member) * _cost(args)
    total = 0 if len(tree.children) == 1 else 1
    for c in tree.children:
        total += _cost(c)
        if total > MAX_COST:
            break
    return total


# --- the device as the CEL program sees it --------------------------------------------------------


def _celpy_input(device: Device, touched: list[str]) -> Any:
    import celpy.celtypes as ct

    class DomainMap(ct.MapType):
        """A domain the device does not have is an empty map (compile.go `mapper.Find`)."""

        def __getitem__(self, key: Any) -> Any:
            if super().__contains__(key):
                return super().__getitem__(key)
            return ct.MapType()

    def value(name: str, raw: Any, *, capacity: bool) -> Any:
        if raw is UNKNOWN:
            return UnknownValue(name, touched)
        if capacity:
            return Quantity(raw)
        if isinstance(raw, bool):
            return ct.BoolType(raw)
        if isinstance(raw, int):
            return ct.IntType(raw)
        if isinstance(raw, Version):
            return raw
        return ct.StringType(str(raw))

    def grouped(values: tuple[tuple[str, Any], ...], *, capacity: bool) -> Any:
        domains: dict[str, dict[Any, Any]] = {}
        for name, raw in values:
            domain, _, short = name.rpartition("/")
            domains.setdefault(domain or device.driver, {})[ct.StringType(short)] = value(name, raw, capacity=capacity)
        return DomainMap({ct.StringType(d): ct.MapType(v) for d, v in domains.items()})

    return ct.MapType(
        {
            ct.StringType("driver"): ct.StringType(device.driver),
            ct.StringType("attributes"): grouped(device.attributes, capacity=False),
            ct.StringType("capacity"): grouped(device.capacity, capacity=True),
        }
    )


def _evaluate(program: Any, device: Device) -> Outcome:
    import celpy.celtypes as ct

    touched: list[str] = []
    try:
        result = program.evaluate({"device": _celpy_input(device, touched)})
    except RecursionError:
        return Outcome(Verdict.ERROR, message="the expression is nested too deeply to evaluate")
    except Exception as exc:
        if touched:
            return Outcome(Verdict.UNKNOWN, tuple(dict.fromkeys(touched)))
        detail = str(exc.args[0] if exc.args else exc)
        cause = exc.args[2] if len(exc.args) >= 3 else None  # cel-python keeps the raising function's own words
        if isinstance(cause, tuple) and cause and isinstance(cause[0], str):
            detail = f"{detail}: {cause[0]}"
        text = " ".join(detail.split())[:160]
        return Outcome(Verdict.ERROR, message=f"CEL runtime error: {text}")
    if isinstance(result, UnknownValue):
        return Outcome(Verdict.UNKNOWN, (result.name,))
    if not isinstance(result, ct.BoolType):
        if touched:
            return Outcome(Verdict.UNKNOWN, tuple(dict.fromkeys(touched)))
        return Outcome(Verdict.ERROR, message=f"the expression returns {type(result).__name__}, not a boolean")
    return Outcome(Verdict.MATCH if bool(result) else Verdict.NO_MATCH)


# --- Kubernetes' CEL libraries: quantities, semantic versions, string extensions ----------------


class Quantity:
    """A resource.Quantity in CEL (k8s.io/apiserver/pkg/cel/library/quantity.go): exact, compared by value."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            raise TypeError("no such overload")
        return self.value == other.value

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.value)


def _bool(v: bool) -> Any:
    import celpy.celtypes as ct

    return ct.BoolType(v)


def _int(v: int) -> Any:
    import celpy.celtypes as ct

    if not -(2**63) <= v < 2**63:
        raise ValueError("integer overflow")
    return ct.IntType(v)


def _text(arg: Any) -> str:
    if not isinstance(arg, str):
        raise TypeError("no such overload")
    return str(arg)


def _quantity(arg: Any) -> Quantity:
    try:
        return Quantity(parse_quantity(_text(arg)))
    except QuantityError as exc:
        raise ValueError(f"quantity({str(arg)[:40]!r}): {exc}") from exc


def _is_quantity(arg: Any) -> Any:
    try:
        parse_quantity(_text(arg))
    except QuantityError:
        return _bool(False)
    return _bool(True)


def _semver(arg: Any, normalize: Any = False) -> Version:
    text = _text(arg)
    if normalize:  # library.SemverLib's normalize: a leading v, missing minor/patch and leading zeros accepted
        text = text.removeprefix("v")
        cut = min((i for i in (text.find("-"), text.find("+")) if i >= 0), default=len(text))
        parts = text[:cut].split(".")
        if len(parts) <= 3 and all(p.isdigit() and len(p) <= 18 for p in parts):
            text = ".".join([*(str(int(p)) for p in parts), *(["0"] * (3 - len(parts)))]) + text[cut:]
    version = parse_version(text)
    if version is None:
        raise ValueError(f"semver({text[:40]!r}): not a semantic version")
    return version


def _is_semver(arg: Any, normalize: Any = False) -> Any:
    try:
        _semver(arg, normalize)
    except ValueError:
        return _bool(False)
    return _bool(True)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        x, y = a.value, b.value
        return (x > y) - (x < y)
    if isinstance(a, Version) and isinstance(b, Version):
        p, q = a.key(), b.key()
        return (p > q) - (p < q)
    raise TypeError("no such overload")


def _as_integer(q: Any) -> Any:
    if not isinstance(q, Quantity):
        raise TypeError("no such overload")
    if q.value.denominator != 1:
        raise ValueError("cannot convert value to integer")
    return _int(q.value.numerator)


def _arith(sign: int) -> Callable[[Any, Any], Quantity]:
    def op(q: Any, other: Any) -> Quantity:
        if not isinstance(q, Quantity):
            raise TypeError("no such overload")
        amount = other.value if isinstance(other, Quantity) else Fraction(int(other))
        return Quantity(q.value + sign * amount)

    return op


def _version_part(index: int) -> Callable[[Any], Any]:
    def part(v: Any) -> Any:
        if not isinstance(v, Version):
            raise TypeError("no such overload")
        return _int((v.major, v.minor, v.patch)[index])

    return part


def _string_fn(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any) -> Any:
        import celpy.celtypes as ct

        out = fn(*(_text(a) if isinstance(a, str) else a for a in args))
        if isinstance(out, list):
            return ct.ListType([ct.StringType(s) for s in out[: MAX_ELEMENTS * 32]])
        return ct.StringType(out) if isinstance(out, str) else out

    return wrapped


def _join(items: Any, sep: Any = "") -> Any:
    import celpy.celtypes as ct

    return ct.StringType(_text(sep).join(_text(i) for i in items))


def _index_of(s: Any, sub: Any) -> Any:
    return _int(_text(s).find(_text(sub)))


def _known(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A library function applied to a value only the node knows fails, and says which value it needed."""

    def checked(*args: Any) -> Any:
        for a in args:
            if isinstance(a, UnknownValue):
                a.touched.append(a.name)
                raise TypeError(f"{a.name} is known only on the node")
        return fn(*args)

    return checked


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": lambda a, b: _int(_compare(a, b)),
    "isGreaterThan": lambda a, b: _bool(_compare(a, b) > 0),
    "isLessThan": lambda a, b: _bool(_compare(a, b) < 0),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: __import__("celpy").celtypes.DoubleType(float(q.value)),
    "isInteger": lambda q: _bool(isinstance(q, Quantity) and q.value.denominator == 1),
    "sign": lambda q: _int((q.value > 0) - (q.value < 0)),
    "add": _arith(1),
    "sub": _arith(-1),
    "major": _version_part(0),
    "minor": _version_part(1),
    "patch": _version_part(2),
    "lowerAscii": _string_fn(lambda s: "".join(c.lower() if c.isascii() else c for c in s)),
    "upperAscii": _string_fn(lambda s: "".join(c.upper() if c.isascii() else c for c in s)),
    "trim": _string_fn(lambda s: s.strip()),
    "replace": _string_fn(lambda s, old, new: s.replace(old, new)),
    "split": _string_fn(lambda s, sep: s.split(sep)),
    "indexOf": _index_of,
    "join": _join,
}
_FUNCTIONS = {name: _known(fn) for name, fn in _FUNCTIONS.items()}
