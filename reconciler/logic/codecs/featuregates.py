"""A Kubernetes component's feature-gate string, read as the component reads it. Pure.

NVIDIA's DRA driver takes its gates from `--feature-gates` or the FEATURE_GATES env (pkg/flags/featuregates.go:
the flag's value is component-base's `featureGate`), so the format is k8s.io/component-base/featuregate
`featureGate.Set`: comma-separated `Name=value`, empty items skipped (the driver's chart renders a trailing comma),
name and value trimmed, the value read by Go's `strconv.ParseBool`. Anything else makes the component refuse to
start; migplan reports it (it cannot know what the driver runs with) instead of guessing.
"""

from __future__ import annotations

# strconv.ParseBool's accepted spellings, exactly.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
MAX_LENGTH = 4096  # longer than any real gate list; a hostile value is refused, not scanned


class FeatureGateError(ValueError):
    """The string is not a feature-gate list the component would accept."""


def parse(value: str) -> dict[str, bool]:
    """name -> enabled for every gate the string sets (a later item overrides an earlier one, as in Go's map)."""
    if len(value) > MAX_LENGTH:
        raise FeatureGateError(f"longer than {MAX_LENGTH} characters")
    gates: dict[str, bool] = {}
    for item in value.split(","):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {name!r}")
        raw = raw.strip()
        if raw in _TRUE:
            gates[name] = True
        elif raw in _FALSE:
            gates[name] = False
        else:
            raise FeatureGateError(f"invalid value of {name}={raw[:40]!r}")
    return gates
