"""The article's rules for one container's GPU request, shared by the manifest check and the drift report.

Pure. "Nommer les partitions dans les manifestes, pas les cartes": a container asks for one MIG
profile, once, with requests equal to limits. The same function judges a container written in a
manifest (`migplan check-workloads`, before merge) and one running in the cluster (the drift report,
after the fact), so the two can never disagree on what a good request is.

Why each rule:
- more than one device of a MIG resource in a container: CUDA gives a process one MIG device; two
  3g.71gb do not make a 6g.142gb, the second sits idle (NVIDIA MIG user guide, "CUDA applications
  treat a MIG instance as a single device");
- two MIG profiles, or a MIG profile and a whole GPU, in one container: the same reason;
- requests different from limits, or limits missing: extended resources cannot be overcommitted, the
  API server refuses such a pod (pkg/apis/core/validation ValidateResourceRequirements: "must be
  equal to ... limit", "Limit must be set for non overcommitable resources").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from reconciler.model.observed import is_gpu_resource, is_mig_resource


class ProblemKind(enum.StrEnum):
    COUNT_ABOVE_ONE = "count-above-one"
    SEVERAL_DEVICES = "several-devices"
    REQUESTS_DIFFER = "requests-differ"
    LIMITS_MISSING = "limits-missing"


@dataclass(frozen=True, slots=True)
class Problem:
    kind: ProblemKind
    message: str  # names the container and the fix
    resource: str | None = None  # the resource concerned, where one is


class ContainerAsk(Protocol):
    """What the rules need of a container: its name and its GPU requests and limits (whole counts)."""

    @property
    def name(self) -> str: ...
    @property
    def requests(self) -> Mapping[str, int]: ...
    @property
    def limits(self) -> Mapping[str, int]: ...


def effective(c: ContainerAsk) -> dict[str, int]:
    """For extended resources Kubernetes copies limits into requests when requests are absent."""
    out = {k: v for k, v in c.limits.items() if is_gpu_resource(k)}
    out.update((k, v) for k, v in c.requests.items() if is_gpu_resource(k))
    return out


def container_problems(c: ContainerAsk) -> list[Problem]:
    """Everything wrong with one container's GPU request, in a stable order."""
    out: list[Problem] = []
    for res in sorted(r for r in c.requests if is_gpu_resource(r)):
        if res not in c.limits:
            out.append(
                Problem(
                    ProblemKind.LIMITS_MISSING,
                    f"container {c.name} requests {c.requests[res]} {res} without a limit: the API server refuses it "
                    f"(extended resources cannot be overcommitted); set limits {res}: {c.requests[res]}",
                    res,
                )
            )
        elif c.requests[res] != c.limits[res]:
            out.append(
                Problem(
                    ProblemKind.REQUESTS_DIFFER,
                    f"container {c.name} requests {c.requests[res]} {res} but limits {c.limits[res]}: "
                    "requests must equal limits for GPU resources",
                    res,
                )
            )
    want = effective(c)
    for res in sorted(r for r, n in want.items() if is_mig_resource(r) and n > 1):
        out.append(
            Problem(
                ProblemKind.COUNT_ABOVE_ONE,
                f"container {c.name} asks for {want[res]} {res}: CUDA uses one MIG device per process, the others "
                "would sit idle (MIG does not add up memory); ask for one partition of a larger profile, or run "
                f"{want[res]} containers or replicas",
                res,
            )
        )
    devices = sorted(r for r, n in want.items() if n > 0)
    if len(devices) > 1 and any(is_mig_resource(r) for r in devices):
        out.append(
            Problem(
                ProblemKind.SEVERAL_DEVICES,
                f"container {c.name} asks for {len(devices)} kinds of GPU device ({', '.join(devices)}): a container "
                "uses one MIG device; ask for one profile",
            )
        )
    return out


HOSTNAME_LABEL = "kubernetes.io/hostname"
_UUID_PREFIXES = ("GPU-", "MIG-")


def selector_pins(node_selector: Mapping[str, str]) -> list[tuple[str, str]]:
    """The (key, value) pairs of a node selector that pin a node or a card rather than ask for a profile:
    the hostname label, a GPU or MIG device UUID as a value, a `*.uuid` label. The article: "nommer les
    partitions dans les manifestes, pas les cartes". Shared by the manifest check and the drift report."""
    return [
        (k, v)
        for k, v in sorted(node_selector.items())
        if k == HOSTNAME_LABEL or k.endswith(".uuid") or v.strip().startswith(_UUID_PREFIXES)
    ]
