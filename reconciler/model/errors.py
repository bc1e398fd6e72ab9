"""Error kinds that decide retries and status (after Flux's Stalling / Waiting / Generic).

Adapters translate library exceptions (ApiException, GitError, NVMLError) into these at the edge;
nothing above the adapters catches a library exception. Every code, of every family, is declared once in
reconciler.model.codes; code that must tell errors apart branches on these types, never on a code string.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.diagnostics import Diagnostic


class MigplanError(Exception):
    """Base of every error migplan raises on purpose. `code` is stable and shown to users."""

    code = "MP000"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidInventory(MigplanError):
    """The user must fix the inventory; retrying the same revision is pointless (Stalled)."""

    code = "MP001"

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        errors = [d for d in diagnostics if d.is_error]
        super().__init__(f"inventory is invalid: {len(errors)} error(s)")
        self.diagnostics = tuple(diagnostics)


class Waiting(MigplanError):
    """Something outside migplan must happen first (pods to leave, a rollout to finish)."""

    code = "MP002"

    def __init__(self, reason: str, *, retry_after: float = 30.0) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class Transient(MigplanError):
    """A failure worth retrying with backoff: API 5xx or conflict, Git fetch failure, NVML Unknown."""

    code = "MP003"


class LeaseConflict(Transient):
    """Someone else created or renewed the leader Lease between our read and our write (HTTP 409).

    Its own type and code, so leader election branches on the type, never on a code string.
    """

    code = "MP821"


class EvictionRefused(Waiting):
    """The API server refused to evict a pod (policy/v1 Eviction): a PodDisruptionBudget allows no disruption
    now (429, its DisruptionBudget cause quoted) or the pod has more than one PDB (500). The drain waits and
    asks again next cycle; the pod is never deleted another way."""

    code = "MP825"

    def __init__(self, message: str, *, pod: str = "") -> None:
        super().__init__(message, retry_after=10.0)
        self.pod = pod  # namespace/name
