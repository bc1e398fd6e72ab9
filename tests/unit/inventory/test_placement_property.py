"""Property test: the exact placement solver agrees with brute-force enumeration on every catalog
model with published or derived placements, and every arrangement it returns is valid."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from reconciler.catalog import GpuModel, load_catalog
from reconciler.logic.inventory.placement import Request, candidates, is_valid_arrangement, solve
from reconciler.model.inventory import Placement

CATALOG = load_catalog()
# Models whose placement tables are known, restricted to the profiles that have one (A100-80GB has
# one profile without a published table; the rest of it is still checkable).
MODELS = [m for m in CATALOG if any(p.placements is not None for p in m.profiles.values())]


def placeable(model: GpuModel) -> list[str]:
    return sorted(name for name, p in model.profiles.items() if p.placements is not None)


def brute_force(model: GpuModel, requests: Sequence[Request]) -> list[tuple[Placement, ...]]:
    """Every arrangement the hardware accepts, by trying every combination of candidate starts."""
    options = [candidates(model, r) for r in requests]
    return [combo for combo in itertools.product(*options) if is_valid_arrangement(model, requests, combo)]


@st.composite
def problems(draw: st.DrawFn) -> tuple[GpuModel, list[Request]]:
    model = draw(st.sampled_from(MODELS))
    names = placeable(model)
    n = draw(st.integers(min_value=1, max_value=model.memory_slices))
    requests = []
    for _ in range(n):
        name = draw(st.sampled_from(names))
        rule = model.profiles[name].placements
        assert rule is not None
        # Sometimes fix a start: a legal one, or one that is not in the table at all.
        fixed = draw(st.one_of(st.none(), st.sampled_from(rule.starts), st.integers(0, model.memory_slices - 1)))
        requests.append(Request(name, fixed))
    # Brute force is exponential (7 starts for each 1g slice: 7^8 arrangements for eight of them);
    # keep each example's enumeration small so the whole property runs in seconds.
    size = 1
    for r in requests:
        size *= len(candidates(model, r))
    assume(size <= 4000)
    return model, requests


def test_models_under_test_cover_the_catalog() -> None:
    keys = {m.key for m in MODELS}
    assert {"A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB"} <= keys


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(problems())
def test_solver_agrees_with_brute_force(problem: tuple[GpuModel, list[Request]]) -> None:
    model, requests = problem
    found = solve(model, requests)
    every = brute_force(model, requests)
    if not every:
        assert found is None
        return
    assert found is not None, f"solver missed a feasible arrangement, e.g. {every[0]}"
    assert is_valid_arrangement(model, requests, found)
    # Deterministic choice: the lexicographically smallest start list among all valid arrangements.
    assert [p.start for p in found] == min([p.start for p in combo] for combo in every)


def test_exhaustive_on_small_multisets() -> None:
    # Every multiset of up to 4 profiles of each model, no fixed placements: exact agreement.
    for model in MODELS:
        for k in range(1, 5):
            for combo in itertools.combinations_with_replacement(placeable(model), k):
                requests = [Request(name) for name in combo]
                found = solve(model, requests)
                every = brute_force(model, requests)
                assert (found is None) == (not every), (model.key, combo)
                if found is not None:
                    assert is_valid_arrangement(model, requests, found)
