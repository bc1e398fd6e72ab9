"""The placement solver: find where each MIG partition of a GPU can sit, or prove none exists.

Pure. An exact search, not first-fit: on an H200, 3g.71gb + 2g.35gb + 1g.18gb + 1g.18gb fits only with
the 3g at memory slice 4, and a first-fit that tries the 3g at 0 first would wrongly call it
infeasible. A GPU has at most 8 memory slices, so the state (which requests are placed, which slices
are taken) is tiny; a depth-first search with memoised dead ends is exact and takes microseconds.

Results are deterministic: among the feasible arrangements the solver returns the one whose start
list (in the order of the requests as given) is lexicographically smallest, so a plan does not
reshuffle partitions between runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.catalog import GpuModel
from reconciler.model.inventory import Placement


@dataclass(frozen=True, slots=True)
class Request:
    profile: str
    start: int | None = None  # fixed by the user, or None for "solver picks"


class PlacementUnknown(Exception):
    """The model has no placement table for a requested profile: only slice counts can be checked."""


def candidates(model: GpuModel, request: Request) -> tuple[Placement, ...]:
    """Every placement the catalog allows for this request (all starts, or just the fixed one)."""
    profile = model.profiles.get(request.profile)
    if profile is None:
        raise KeyError(request.profile)
    if profile.placements is None:
        raise PlacementUnknown(request.profile)
    size = profile.placements.size
    starts = profile.placements.starts
    if request.start is not None:
        starts = tuple(s for s in starts if s == request.start)
    return tuple(Placement(s, size) for s in starts)


def _mask(p: Placement) -> int:
    return ((1 << p.size) - 1) << p.start


def solve(model: GpuModel, requests: Sequence[Request]) -> tuple[Placement, ...] | None:
    """Placements for all requests (aligned with `requests`), or None if no arrangement exists.

    Raises KeyError for a profile the model does not offer and PlacementUnknown when the model's
    placements are not known; callers check those first and report them as diagnostics.
    """
    options = [candidates(model, r) for r in requests]
    if any(not o for o in options):
        return None
    # Per-profile instance limits are part of feasibility: the hardware refuses the 8th 1g even if a
    # slice were free.
    counts: dict[str, int] = {}
    for r in requests:
        counts[r.profile] = counts.get(r.profile, 0) + 1
    for name, n in counts.items():
        if n > model.profiles[name].max_instances:
            return None
    if sum(model.profiles[r.profile].compute_slices for r in requests) > model.compute_slices:
        return None

    n = len(requests)
    chosen: list[Placement | None] = [None] * n
    dead: set[tuple[int, int]] = set()  # (next request index, occupied mask) known to fail

    def search(i: int, used: int) -> bool:
        if i == n:
            return True
        if (i, used) in dead:
            return False
        for p in options[i]:
            m = _mask(p)
            if used & m:
                continue
            chosen[i] = p
            if search(i + 1, used | m):
                return True
        dead.add((i, used))
        return False

    if not search(0, 0):
        return None
    return tuple(p for p in chosen if p is not None)


def is_valid_arrangement(model: GpuModel, requests: Sequence[Request], placements: Sequence[Placement]) -> bool:
    """True when `placements` is an arrangement the hardware accepts for `requests`."""
    if len(placements) != len(requests):
        return False
    used = 0
    for r, p in zip(requests, placements, strict=True):
        if p not in candidates(model, r):
            return False
        m = _mask(p)
        if used & m:
            return False
        used |= m
    counts: dict[str, int] = {}
    for r in requests:
        counts[r.profile] = counts.get(r.profile, 0) + 1
    if any(n > model.profiles[k].max_instances for k, n in counts.items()):
        return False
    return sum(model.profiles[r.profile].compute_slices for r in requests) <= model.compute_slices
