"""The node observer: what `migplan agent` publishes about its node in every apply mode. Orchestration only.

Each pass reads the node's GPUs through NVML (every GPU's MIG mode, GPU instances with profile, placement
and ids, MIG device UUIDs and PIDs) and the kubelet's PodResources API (the device IDs allocated to each
pod's containers), joins them (reconciler.logic.observe.observejoin) and publishes one `NodeObservation` in the
annotation `migplan.io/mig-observed` of its own Node (codec: reconciler.logic.codecs.observedcodec), when it
changed or when the published one is a heartbeat old.

A source that cannot be read is not a crash and not a guess: its one-line reason (with its code) goes in
`sources`, the other source is still published, and the controller reads the reasons to know which facts
are measured. Observer codes (docs/reference/codes.md):

  MP930  the pod-resources socket is missing or not a socket
  MP931  the pod-resources socket is unreachable or did not answer within the timeout
  MP932  the kubelet's answer is not a PodResources v1 message
  MP933  the kubelet's answer is larger than the client's limit (gRPC max message size)
  MP934  any other gRPC error from the kubelet
  MP935  NVML cannot be read at all (init or device count): no GPU published
  MP936  NVML failed on some GPUs: those GPUs are left out, the others published
  MP937  the observation could not be published (the Kubernetes API refused or failed)
  MP938  the observation was over the annotation's size cap and was published without its detail
  MP939  allocations the kubelet listed carried values the annotation cannot hold: not published
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Protocol

from reconciler import __version__
from reconciler.logic.observe.observejoin import NVML, POD_RESOURCES, join
from reconciler.model import codes
from reconciler.model.errors import MigplanError
from reconciler.model.nodeobservation import SOURCE_OK, KubeletAllocation, NodeObservation, ObservedGpu

log = logging.getLogger("migplan.observer")

OBSERVER = f"migplan/{__version__}"
# The observer family of the one registry (reconciler.model.codes): code -> meaning.
CODES: Mapping[str, str] = {c.code: c.meaning for c in codes.family(codes.Family.OBSERVER)}


class GpuSurveyPort(Protocol):
    """The node's GPUs, read as far as NVML allows (reconciler.adapters.nvml.NvmlGpu)."""

    def survey(self) -> tuple[tuple[ObservedGpu, ...], tuple[str, ...]]: ...


class HoldersPort(Protocol):
    """The kubelet's allocations (reconciler.adapters.podresources.KubeletPodResources)."""

    def list_allocations(self) -> tuple[KubeletAllocation, ...]: ...


def reason(exc: MigplanError) -> str:
    """A source's reason: the code first, so a reader can look it up."""
    return f"{exc.code}: {exc.message}"


def read_holders(holders: HoldersPort | None) -> tuple[tuple[KubeletAllocation, ...], str]:
    """(allocations, source state); an unreadable kubelet is an empty list and the reason."""
    if holders is None:
        return (), "MP930: no pod-resources socket configured"
    try:
        return holders.list_allocations(), SOURCE_OK
    except MigplanError as exc:
        log.warning("pod-resources not read", extra={"code": exc.code, "reason": exc.message})
        return (), reason(exc)


def observation(
    gpus: Sequence[ObservedGpu],
    *,
    nvml_state: str,
    holders: HoldersPort | None,
    now: datetime,
) -> NodeObservation:
    """The node's observation from GPUs already read and the kubelet, read now."""
    allocations, kubelet_state = read_holders(holders)
    return join(
        gpus,
        allocations,
        sources={NVML: nvml_state, POD_RESOURCES: kubelet_state},
        observed_at=now,
        observer=OBSERVER,
    )


def survey(gpus: GpuSurveyPort | None, nvml_error: MigplanError | None = None) -> tuple[tuple[ObservedGpu, ...], str]:
    """(GPUs read, NVML source state): every GPU NVML could read, and why the others are missing."""
    if gpus is None:
        if nvml_error is None:
            return (), "MP935: NVML is not available"
        return (), f"MP935: {nvml_error.message} [{nvml_error.code}]"
    try:
        read, problems = gpus.survey()
    except MigplanError as exc:
        return (), f"MP935: {exc.message} [{exc.code}]"
    if problems:
        return read, f"MP936: {len(problems)} GPU(s) not read: " + "; ".join(problems)
    return read, SOURCE_OK


def observe(
    gpus: GpuSurveyPort | None,
    holders: HoldersPort | None,
    *,
    now: datetime,
    nvml_error: MigplanError | None = None,
) -> NodeObservation:
    """One observe-only pass's observation (`gpus` None when NVML could not even be opened)."""
    read, nvml_state = survey(gpus, nvml_error)
    return observation(read, nvml_state=nvml_state, holders=holders, now=now)


class ObservationSink(Protocol):
    """Where the observation goes (reconciler.adapters.kube.agentmode.KubeNodeState: its own Node)."""

    def publish_observed(self, node: str, observed: NodeObservation) -> None: ...


def _now() -> datetime:
    return datetime.now(UTC)


def publish_pass(
    *,
    open_gpus: Callable[[], AbstractContextManager[GpuSurveyPort]],
    holders: HoldersPort | None,
    node_state: ObservationSink,
    node: str,
    clock: Callable[[], datetime] = _now,
) -> NodeObservation:
    """One observe-only pass: open NVML (a failure is a reason, not a crash), read, join, publish.

    Raises MigplanError MP937 only when the Node cannot be written; an unreadable source is published."""
    with contextlib.ExitStack() as stack:
        gpus: GpuSurveyPort | None = None
        nvml_error: MigplanError | None = None
        try:
            gpus = stack.enter_context(open_gpus())
        except MigplanError as exc:
            nvml_error = exc
            log.warning("NVML not opened", extra={"code": exc.code, "reason": exc.message})
        obs = observe(gpus, holders, now=clock(), nvml_error=nvml_error)
    try:
        node_state.publish_observed(node, obs)
    except MigplanError as exc:
        raise MigplanError(f"node {node}: observation not published: {exc.message} [{exc.code}]", code="MP937") from exc
    return obs
