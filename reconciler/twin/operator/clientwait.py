"""mig-manager's wait for the GPU clients to leave the node, with its timeout (the twin's model).

From NVIDIA/mig-parted@bd7160f4 `pkg/mig/reconfigure/reconfigure.go`:

* `Run` calls `shutdownKubernetesGPUClients` (every `nvidia.com/gpu.deploy.*` label `maybeSetPaused`, after the
  state went `pending`) and then `waitForPodsToBeDeleted`. When that wait fails, `Run` returns
  `failed to wait for pods to be deleted: %w` **without** calling `setState`: unlike every other failure after
  `getCurrentNodeLabels`, the state stays `pending` and the labels stay `paused-for-mig-change`.
* `waitForPodsToBeDeleted` waits, one after the other, for the pods of each client to be gone from the node
  (`waitForPodDeletion`: `wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, ...)`, listing pods by label
  selector and `spec.nodeName`; a Terminating pod still lists). The first wait is the device plugin's
  (`app=nvidia-device-plugin-daemonset`, hard-coded), and its error is `device-plugin pod did not shutdown: %w`
  around apimachinery's `ctx.Err()`, `context deadline exceeded`.
* `cmd/nvidia-mig-manager/main.go` `start` logs `Error: %s` and goes back to `migConfig.Get()`, which blocks until
  the label takes another non-empty value (`SyncableMigConfig`): nothing retries on its own. A restarted
  mig-manager's informer `AddFunc` sets the current value again, so the new process runs it once
  (`getCurrentNodeLabels` then reads the paused values, and `setState` turns them back to `true`).

The GPU Operator does not undo the pause either: `controllers/state_manager.go` `addGPUStateLabels` honours an
existing non-empty `nvidia.com/gpu.deploy.*` value (gpu-operator@a22dbf67).

The twin models the device-plugin wait only (it has no GFD/DCGM pods). Its clock is the operator's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEVICE_PLUGIN_SELECTOR",
    "WAIT_TIMEOUT_SECONDS",
    "ClientWait",
    "wait_failed_line",
]

WAIT_TIMEOUT_SECONDS = 5 * 60.0  # reconfigure.go waitForPodsToBeDeleted: timeout := 5 * time.Minute
DEVICE_PLUGIN_SELECTOR = ("app", "nvidia-device-plugin-daemonset")  # reconfigure.go, hard-coded
_CONTEXT_DEADLINE = "context deadline exceeded"  # Go's context.DeadlineExceeded.Error()


@dataclass(slots=True)
class ClientWait:
    """One `waitForPodsToBeDeleted` in progress: when it began on the twin's clock."""

    started: float

    def expired(self, now: float) -> bool:
        return now - self.started >= WAIT_TIMEOUT_SECONDS


def wait_failed_line() -> str:
    """The line main.go `start` logs when the device-plugin wait times out (`log.Errorf("Error: %s", err)`)."""
    return f"Error: failed to wait for pods to be deleted: device-plugin pod did not shutdown: {_CONTEXT_DEADLINE}"
