"""The node agent's process (`migplan agent`): its adapters wired to the agent's and the observer's passes, run
once or every interval under the scheduling shell.

Every pass opens NVML and reads the kubelet's PodResources API. Observe-only (apply modes gpu-operator and
report-only), a pass publishes the node's observation and nothing else. Otherwise it also applies the layout the
controller published for the node (reconciler.agent.actuate_once), publishing the observation first when NVML
cannot be opened; a failed pass counts towards the backoff (MP920).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from reconciler.adapters.kube.agentmode import KubeNodeState
from reconciler.adapters.kube.gpuclients import KubeGpuClients
from reconciler.adapters.nvml import NvmlGpu
from reconciler.adapters.podresources import KubeletPodResources
from reconciler.agent import actuate_once
from reconciler.logic.planning.agentplan import MigState
from reconciler.model.errors import MigplanError
from reconciler.observer import publish_pass
from reconciler.scheduling import CycleRunner, Scheduler, install_signal_handlers
from reconciler.settings import Settings

log = logging.getLogger("migplan.agent")

# `--once` exit codes by the pass's final state: 0 success (or no layout to apply), 1 pending, 2 anything else.
_ONCE_EXIT = {MigState.SUCCESS: 0, MigState.PENDING: 1, None: 0}


class NodeAgent:
    """One node's agent: `api` is a CoreV1Api (reconciler.adapters.kube.client) for this node's own Node only."""

    def __init__(
        self, settings: Settings, api: Any, *, open_gpus: Callable[[], AbstractContextManager[NvmlGpu]] = NvmlGpu
    ) -> None:
        self.settings = settings
        # How a pass opens NVML: the adapter over pynvml (or PYNVML_MODULE's module); the demo hands each node's
        # agent its twin NVML object, the same pynvml surface in the same process.
        self.open_gpus = open_gpus
        self.node_state = KubeNodeState(api, heartbeat_seconds=settings.observe_heartbeat_seconds)
        self.holders = KubeletPodResources(
            settings.pod_resources_socket, timeout_seconds=settings.pod_resources_timeout_seconds
        )
        self.clients = KubeGpuClients(
            api,
            namespace=settings.gpu_operator_namespace,
            device_plugin_daemonset=settings.device_plugin_daemonset,
            wait_seconds=settings.gpu_clients_wait_seconds,
        )
        self._last: list[Any] = []  # the last pass's observation (observe-only) or outcome
        self.runner = CycleRunner(
            self._observe_pass if settings.observe_only else self._pass,
            backoff_base=settings.backoff_base_seconds,
            backoff_max=settings.backoff_max_seconds,
        )

    def _observe_pass(self, trigger: str) -> None:
        obs = publish_pass(
            open_gpus=self.open_gpus, holders=self.holders, node_state=self.node_state, node=self.settings.node_name
        )
        self._last[:] = [obs]
        log.info("observer pass", extra={"trigger": trigger, "sources": dict(obs.sources)})

    def _pass(self, trigger: str) -> None:
        node = self.settings.node_name
        with contextlib.ExitStack() as stack:
            try:
                gpus = stack.enter_context(self.open_gpus())
            except MigplanError:
                # NVML cannot be opened: say so on the Node (the observation), then fail the pass.
                publish_pass(open_gpus=self.open_gpus, holders=self.holders, node_state=self.node_state, node=node)
                raise
            outcome = actuate_once(
                gpus=gpus, node_state=self.node_state, node=node, holders=self.holders, clients=self.clients
            )
        self._last[:] = [outcome]
        log.info("agent pass", extra={"trigger": trigger, "state": str(outcome.state), "reason": outcome.reason})
        if outcome.state is MigState.FAILED:
            raise MigplanError(outcome.reason, code="MP920")  # counts towards the backoff

    def once(self) -> tuple[int, str | None]:
        """One pass: its exit code, and the line that says how it ended (None when the pass itself failed)."""
        record = self.runner.run("once")
        last = self._last[0] if self._last else None
        if last is None or record is None:
            return 2, None
        if self.settings.observe_only:
            return 0, "observed: " + ", ".join(f"{k} {v}" for k, v in sorted(last.sources.items()))
        return _ONCE_EXIT.get(last.state, 2), f"{last.state or 'no-layout'}: {last.reason}"

    def run_forever(self) -> int:
        """A pass every interval (with jitter) and on SIGHUP, until SIGTERM: 0 stopped cleanly, 1 a pass abandoned."""
        settings = self.settings
        scheduler = Scheduler(
            self.runner,
            interval=settings.interval_seconds,
            jitter=min(settings.jitter_seconds, settings.interval_seconds / 2),
        )
        stop: list[bool] = []
        install_signal_handlers(on_reload=lambda: scheduler.trigger("sighup"), on_stop=lambda: stop.append(True))
        scheduler.start()
        while not stop:
            time.sleep(0.5)
        return 0 if scheduler.shutdown(grace=settings.shutdown_grace_seconds) else 1
