"""The feature-gate string as k8s.io/component-base/featuregate `featureGate.Set` reads it."""

from __future__ import annotations

import pytest

from reconciler.logic.codecs import featuregates


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("DynamicMIG=true,", {"DynamicMIG": True}),  # the driver chart's rendering: trailing comma
        ("DynamicMIG=false", {"DynamicMIG": False}),
        (" DynamicMIG = True ,MPSSupport=0", {"DynamicMIG": True, "MPSSupport": False}),
        ("DynamicMIG=t,DynamicMIG=F", {"DynamicMIG": False}),  # the later item wins, as in Go's map
        ("", {}),
        (",,", {}),
    ],
)
def test_what_the_component_accepts(value: str, expected: dict[str, bool]) -> None:
    assert featuregates.parse(value) == expected


@pytest.mark.parametrize(
    "value", ["DynamicMIG", "DynamicMIG=yes", "DynamicMIG=", "DynamicMIG=true,Other", "DynamicMIG=tRue", "x" * 5000]
)
def test_what_the_component_refuses_is_an_error(value: str) -> None:
    with pytest.raises(featuregates.FeatureGateError):
        featuregates.parse(value)
