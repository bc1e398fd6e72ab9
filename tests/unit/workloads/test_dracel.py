"""The DRA CEL environment check-workloads evaluates selectors in: Kubernetes' libraries (quantity, semver), the
device's maps (unknown domain empty, unknown name an error), values only the node knows, and the bounds."""

from __future__ import annotations

from fractions import Fraction

import pytest

from reconciler.logic.workloads import dracel
from reconciler.logic.workloads.dracel import Verdict

DEVICE = dracel.Device.of(
    "gpu.nvidia.com",
    {
        "type": "mig",
        "profile": "3g.71gb",
        "cudaComputeCapability": dracel.parse_version("9.0.0"),
        "uuid": dracel.UNKNOWN,
        "driverVersion": dracel.UNKNOWN,
        "example.com/flag": True,
        "example.com/numa": 1,
    },
    {"memory": Fraction(69 * 2**30 + 2**29), "memorySlice4": Fraction(1), "multiprocessors": dracel.UNKNOWN},
)
A = "device.attributes['gpu.nvidia.com']"
C = "device.capacity['gpu.nvidia.com']"


def verdict(expression: str) -> dracel.Outcome:
    selector = dracel.compile_selector(expression)
    assert isinstance(selector, dracel.Selector), selector
    return selector.evaluate(DEVICE)


@pytest.mark.parametrize(
    ("expression", "want"),
    [
        (f"device.driver == 'gpu.nvidia.com' && {A}.type == 'mig'", Verdict.MATCH),
        (f"{A}.profile == '1g.18gb'", Verdict.NO_MATCH),
        (f"{C}.memory.compareTo(quantity('69Gi')) > 0", Verdict.MATCH),
        (f"{C}.memory.isLessThan(quantity('70Gi'))", Verdict.MATCH),
        (f"{C}.memory == quantity('69.5Gi')", Verdict.MATCH),
        (f"{C}.memorySlice4.asInteger() == 1", Verdict.MATCH),
        (f"{C}.memory.add(quantity('512Mi')).compareTo(quantity('70Gi')) == 0", Verdict.MATCH),
        (f"{C}.memory.sub(quantity('69.5Gi')).sign() == 0", Verdict.MATCH),
        ("isQuantity('1.5Gi') && !isQuantity('1.5GiB')", Verdict.MATCH),
        (f"{A}.cudaComputeCapability.isGreaterThan(semver('8.9.0'))", Verdict.MATCH),
        (f"{A}.cudaComputeCapability.compareTo(semver('9.0.0-rc.1')) == 1", Verdict.MATCH),
        (f"{A}.cudaComputeCapability.major() == 9 && {A}.cudaComputeCapability.minor() == 0", Verdict.MATCH),
        ("semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))", Verdict.MATCH),
        ("semver('1.0.0-2').isLessThan(semver('1.0.0-alpha'))", Verdict.MATCH),
        (
            "semver('v9', true).compareTo(semver('9.0.0')) == 0 && !isSemver('v9') && isSemver('v9', true)",
            Verdict.MATCH,
        ),
        ("device.attributes['example.com'].flag && device.attributes['example.com'].numa == 1", Verdict.MATCH),
        ("device.attributes['no.such.domain'].size() == 0 || true", Verdict.MATCH),
        (f"!has({A}.index)", Verdict.MATCH),
        (f"has({A}.uuid)", Verdict.MATCH),
        (f"{A}.uuid == 'x' || {A}.type == 'mig'", Verdict.MATCH),
        (f"{A}.uuid == 'x' && {A}.type == 'gpu'", Verdict.NO_MATCH),
        (f"{A}.profile.lowerAscii().startsWith('3g') && {A}.profile.split('.')[1] == '71gb'", Verdict.MATCH),
        (f"{A}.profile.matches('^[0-9]+g\\\\.[0-9]+gb$')", Verdict.MATCH),
        (f"{A}.all(k, k != '')", Verdict.MATCH),
    ],
)
def test_kubernetes_environment(expression: str, want: Verdict) -> None:
    got = verdict(expression)
    assert got.verdict is want, got


@pytest.mark.parametrize(
    ("expression", "unknown"),
    [
        (f"{A}.uuid.startsWith('MIG-')", ("uuid",)),
        (f"{A}.driverVersion.isGreaterThan(semver('550.0.0'))", ("driverVersion",)),
        (f"{C}.multiprocessors.compareTo(quantity('20')) >= 0", ("multiprocessors",)),
        (f"size({A}.uuid) > 0", ("uuid",)),
        (f"{A}.uuid", ("uuid",)),
    ],
)
def test_a_value_only_the_node_knows_is_unknown_not_false(expression: str, unknown: tuple[str, ...]) -> None:
    got = verdict(expression)
    assert got.verdict is Verdict.UNKNOWN and got.unknown == unknown, got


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (f"{A}.index == 0", "no such member"),
        (f"{A}.profile", "not a boolean"),
        ("quantity('1.5GiB') == quantity('1')", "quantity"),
        ("semver('1.0') == semver('1.0.0')", "not a semantic version"),
        (f"{C}.memory > quantity('1Gi')", "overload"),
        ("undefinedFunction(1)", "undeclared"),
        ("cel.bind(x, 1, x == 1)", ""),
        (f"{C}.memory.sub(quantity('1')).asInteger() == 1 || {C}.memory.add(quantity('500m')).asInteger() > 0", ""),
    ],
)
def test_what_fails_at_run_time_is_an_error_verdict(expression: str, message: str) -> None:
    got = verdict(expression)
    assert got.verdict is Verdict.ERROR and message in got.message, got


def test_the_same_device_description_is_evaluated_once() -> None:
    selector = dracel.compile_selector(f"{A}.type == 'mig'")
    assert isinstance(selector, dracel.Selector)
    twin = dracel.Device.of(DEVICE.driver, dict(DEVICE.attributes), dict(DEVICE.capacity))
    assert selector.evaluate(DEVICE) is selector.evaluate(twin)


@pytest.mark.parametrize(
    "expression",
    [
        None,
        42,
        "",
        "   ",
        "x" * (dracel.MAX_EXPRESSION_LENGTH + 1),
        "(" * (dracel.MAX_NESTING + 1) + "true" + ")" * (dracel.MAX_NESTING + 1),
        "-" * 1000 + "1 == 1",
        " && ".join(["true"] * 400),
        f"{A}.all(a, {A}.all(b, {A}.all(c, {A}.all(d, {A}.all(e, true)))))",
        "device.driver == 'x' &&",
        "'unterminated",
        "1 +* 2",
    ],
)
def test_refused_before_running(expression: object) -> None:
    assert isinstance(dracel.compile_selector(expression), dracel.Problem)


def test_bracket_counting_skips_quoted_text() -> None:
    deep_in_a_string = "'" + "(" * 100 + "' != ''"
    assert isinstance(dracel.compile_selector(deep_in_a_string), dracel.Selector)


def test_a_costly_but_allowed_comprehension_is_estimated_within_the_limit() -> None:
    selector = dracel.compile_selector(f"{A}.all(a, {A}.all(b, {A}.exists(c, a == b || b == c)))")
    assert isinstance(selector, dracel.Selector) and selector.cost <= dracel.MAX_COST
    assert selector.evaluate(DEVICE).verdict is Verdict.MATCH


@pytest.mark.parametrize("text", ["1.2.3", "0.0.0-rc.1+build.5", "10.20.30"])
def test_semantic_versions(text: str) -> None:
    assert dracel.parse_version(text) is not None


@pytest.mark.parametrize("text", ["1.2", "01.2.3", "1.2.3-", "v1.2.3", "1.2.3-a..b", "9" * 30 + ".0.0", "1.2.3\n"])
def test_not_semantic_versions(text: str) -> None:
    assert dracel.parse_version(text) is None
