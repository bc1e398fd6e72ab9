"""The twin operator's work queue: typed keys of dirty work, one worker thread, and `settle()`.

Like a controller-runtime work queue: a key marked twice before the worker takes it is done once; keys are taken
in the order they were first marked, except that the operator's ClusterPolicy rendering (`Job.OPERATOR`) always
goes first, since it changes what every node wants. `settle()` waits until the queue is empty, no key is being
worked on and no write is still on its way from the store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from reconciler.twin.operator.cache import PodKey

__all__ = ["DevicePluginPodGone", "Job", "MigManagerPodGone", "NodeWork", "ReleasePod", "Work", "WorkQueue"]

log = logging.getLogger(__name__)


class Job(StrEnum):
    """Cluster-wide work (the values are the keys `GpuOperator.mark` has always accepted)."""

    OPERATOR = "global"  # render the device-plugin DaemonSet from the ClusterPolicy
    DAEMONSET_STATUS = "dsstatus"  # DaemonSet statuses, then the ClusterPolicy's
    SCHEDULE = "sched"  # a scheduling pass over the pending pods


@dataclass(frozen=True, slots=True)
class NodeWork:
    """Reconcile one node (every per-node component, in order)."""

    node: str

    def __str__(self) -> str:
        return f"node:{self.node}"


@dataclass(frozen=True, slots=True)
class ReleasePod:
    """A pod left the store: the kubelet frees its devices."""

    pod: PodKey

    def __str__(self) -> str:
        return f"release:{self.pod}"


@dataclass(frozen=True, slots=True)
class DevicePluginPodGone:
    """A device-plugin pod left the store (the node's plugin stops advertising unless a new one took its place)."""

    node: str
    pod: str

    def __str__(self) -> str:
        return f"dpgone:{self.node}:{self.pod}"


@dataclass(frozen=True, slots=True)
class MigManagerPodGone:
    """A mig-manager pod left the store (its process, and any run in progress, died with it)."""

    node: str
    pod: str

    def __str__(self) -> str:
        return f"mmgone:{self.node}:{self.pod}"


Work = Job | NodeWork | ReleasePod | DevicePluginPodGone | MigManagerPodGone


class WorkQueue:
    """Ordered, de-duplicated dirty keys and the worker thread that drains them; thread-safe.

    `lock` is the shared cache's condition: the event callback marks keys under the same lock it updates the
    cache with, so a worker never sees a key before the cache change that made it dirty."""

    def __init__(self, lock: threading.Condition) -> None:
        self._cv = lock
        self._dirty: dict[Work, None] = {}
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None

    def add(self, *keys: Work) -> None:
        with self._cv:
            for k in keys:
                self._dirty[k] = None
            if keys:
                self._cv.notify_all()

    def start(self, work: Callable[[Work], None], errors: list[str]) -> None:
        """Run `work(key)` for each key on a daemon thread; an exception is logged and appended to `errors`."""
        self._thread = threading.Thread(target=self._run, args=(work, errors), name="twin-gpu-operator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def settle(self, version: Callable[[], object], timeout: float = 30.0) -> None:
        """Block until the queue is empty, no key is being worked on and `version()` (the store's resource
        version) stays put across a short pause: a write dispatched by another thread may still be on its way."""
        deadline = time.monotonic() + timeout
        while True:
            with self._cv:
                while self._dirty or self._busy:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        pending = [str(k) for k in list(self._dirty)[:5]]
                        raise TimeoutError(f"twin controllers did not settle within {timeout}s: {pending}")
                    self._cv.wait(left)
            rv = version()
            time.sleep(0.005)  # writes dispatched by another thread may still be on their way to us
            with self._cv:
                if not self._dirty and not self._busy and version() == rv:
                    return

    def _take(self) -> Work | None:
        with self._cv:
            while not self._dirty and not self._stop:
                self._cv.wait()
            if self._stop:
                return None
            key = Job.OPERATOR if Job.OPERATOR in self._dirty else next(iter(self._dirty))
            del self._dirty[key]
            self._busy = True
            return key

    def _run(self, work: Callable[[Work], None], errors: list[str]) -> None:
        while (key := self._take()) is not None:
            try:
                work(key)
            except Exception as exc:  # a controller bug must not kill the twin; tests assert errors == []
                log.exception("twin controller %s failed", key)
                errors.append(f"{key}: {type(exc).__name__}: {exc}")
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()
