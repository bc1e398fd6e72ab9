"""Why the controller is not reconciling, said once, loudly, with the fix — then quietly, until it is gone.

A controller that cannot do its job used to retry a failing Lease round every 2 s at INFO level while /readyz
answered 200: from the outside it looked healthy. Each condition that keeps `migplan run` from reconciling is now a
`Wait` with a registered code and the fix a person applies:

  MP980  the controller's namespace does not exist (the Lease cannot be created in it)
  MP981  the API server refuses a request the controller needs (RBAC, HTTP 403)
  MP982  the inventory repository cannot be read and no revision was ever read from it
  MP983  this replica lost the leadership it held (another replica leads, or the Lease could not be renewed)
  MP984  the API server cannot be reached

`WaitBoard` keeps the active ones: a new one is logged at WARNING with its fix, the same one again only every
`cadence` seconds (so a 2 s retry loop does not flood the log), and its end once at INFO. The controller exports
them as `migplan_waiting{code}`, writes an Event for each new one where one can be written (the cycle-level ones:
the Lease-level ones happen exactly when the controller may not write), and answers /readyz false while any of
MP980-MP982 or MP984 lasts. A standby replica (MP983 while another replica leads) is ready: its job is to take over.

`classify_api_failure` and `classify_source` are pure: an error's code and message, or a cycle's source state, in;
a `Wait` or None out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

NAMESPACE_MISSING = "MP980"
FORBIDDEN = "MP981"
REPOSITORY_UNREACHABLE = "MP982"
LEADERSHIP_LOST = "MP983"
API_UNREACHABLE = "MP984"
ALL = (NAMESPACE_MISSING, FORBIDDEN, REPOSITORY_UNREACHABLE, LEADERSHIP_LOST, API_UNREACHABLE)
NOT_READY = frozenset({NAMESPACE_MISSING, FORBIDDEN, REPOSITORY_UNREACHABLE, API_UNREACHABLE})
DEFAULT_CADENCE_S = 300.0  # "still waiting" at most every five minutes per reason
# Who saw it: the Lease round and the cycle each clear only what they saw, so one's success does not hide the other's.
LEASE, CYCLE = "lease", "cycle"

# The codes reconciler.adapters.kube.cluster gives the API server's answers (reconciler.model.codes, family kubernetes).
_API_REFUSED, _API_NOT_FOUND, _API_BUSY, _API_TRANSPORT = "MP550", "MP551", "MP554", "MP555"
_REMOTE = frozenset({"MP701", "MP702", "MP703", "MP704"})  # the Git remote's own failures


@dataclass(frozen=True, slots=True)
class Wait:
    """One reason the controller waits: a registered code, what is wrong, and what a person does about it."""

    code: str
    what: str
    fix: str

    def line(self) -> str:
        return f"{self.code}: {self.what}; fix: {self.fix}"


def classify_api_failure(code: str, message: str, *, namespace: str) -> Wait | None:
    """The Wait behind a failed request to the API server, or None for a failure worth a plain retry (409)."""
    if code == _API_NOT_FOUND and f'namespaces "{namespace}" not found' in message:
        return Wait(
            NAMESPACE_MISSING,
            f"namespace {namespace} does not exist ({message})",
            f"create it (`kubectl create namespace {namespace}`, or `kubectl apply -k deploy/base` which does), "
            "or run with --namespace naming the one migplan is installed in",
        )
    if code == _API_REFUSED and ("HTTP 403" in message or "forbidden" in message.lower()):
        return Wait(
            FORBIDDEN,
            f"the API server refuses the controller's request ({message})",
            "grant the controller's ServiceAccount the verbs deploy/base/rbac-controller.yaml lists "
            "(`kubectl apply -k deploy/base`), or check that it runs as that ServiceAccount",
        )
    if code in (_API_TRANSPORT, _API_BUSY):
        return Wait(
            API_UNREACHABLE,
            f"the API server cannot be reached ({message})",
            "check --kubeconfig (or the in-cluster service account and KUBERNETES_SERVICE_HOST) and the network "
            "path to the API server",
        )
    return None


def classify_source(*, has_revision: bool, error_code: str | None, error_message: str, repo: str) -> Wait | None:
    """MP982 when the repository gave the controller nothing to act on (no revision ever read), else None: with a
    cached revision the cycle goes on and says it is behind (drift), which is not waiting."""
    if has_revision or error_code is None:
        return None
    hint = {
        "MP701": "check the URL and that the controller's network reaches it",
        "MP702": "create the credentials Secret (`kubectl apply -k deploy/overlays/credentials`), check its access",
        "MP703": "add the host key to known_hosts (or fix the TLS trust)",
        "MP704": "check --branch: the remote has no such branch",
    }.get(error_code, "check --repo, --branch and the credentials")
    return Wait(REPOSITORY_UNREACHABLE, f"the inventory repository {repo} cannot be read ({error_message})", hint)


class WaitBoard:
    """The active Waits: logged once at WARNING with the fix, then every `cadence` seconds, their end once."""

    def __init__(
        self,
        *,
        log: logging.Logger,
        cadence: float = DEFAULT_CADENCE_S,
        mono: Callable[[], float] = time.monotonic,
        on_change: Callable[[str, bool], None] | None = None,
    ) -> None:
        self._log = log
        self._cadence = cadence
        self._mono = mono
        self._on_change = on_change  # (code, active): the metric
        self._lock = threading.Lock()
        # (code, scope) -> (the Wait, when it was last logged)
        self._active: dict[tuple[str, str], tuple[Wait, float]] = {}

    def hold(self, wait: Wait, *, scope: str) -> bool:
        """Record that `wait` holds now, as `scope` saw it; True when it is new (the caller may write an Event)."""
        now = self._mono()
        key = (wait.code, scope)
        with self._lock:
            seen = self._active.get(key)
            due = seen is None or now - seen[1] >= self._cadence
            self._active[key] = (wait, now if due or seen is None else seen[1])
            first_of_code = seen is None and not any(c == wait.code and k != scope for c, k in self._active)
        if seen is None:
            self._log.warning("waiting: %s", wait.line(), extra={"code": wait.code})
            if first_of_code and self._on_change is not None:
                self._on_change(wait.code, True)
        elif due:
            self._log.warning("still waiting: %s", wait.line(), extra={"code": wait.code})
        return seen is None

    def clear(self, *codes: str, scope: str) -> None:
        """`scope` no longer sees these codes."""
        for code in codes:
            with self._lock:
                gone = self._active.pop((code, scope), None)
                last_of_code = not any(c == code for c, _k in self._active)
            if gone is not None:
                self._log.info("no longer waiting: %s", gone[0].what, extra={"code": code})
                if last_of_code and self._on_change is not None:
                    self._on_change(code, False)

    def active(self) -> tuple[Wait, ...]:
        with self._lock:
            return tuple(w for w, _at in self._active.values())

    def blocking(self) -> Wait | None:
        """The first active Wait that makes the controller not ready, or None."""
        return next((w for w in self.active() if w.code in NOT_READY), None)
