"""What the observed ClusterPolicy makes mig-manager do to a node's host around a MIG mode change. Pure.

mig-parted pkg/mig/reconfigure/reconfigure.go `Run`: with WITH_REBOOT (spec.migManager.env), a mode step that fails
reboots the node; with WITH_SHUTDOWN_HOST_GPU_CLIENTS, which the operator's mig-manager entrypoint exports as
$IS_HOST_DRIVER (spec.driver.enabled false), `checkMigModeChangeRequired` adds the kubelet's service to the host
services stopped for a mode change. The planner (reconciler/logic/planning/disruption.py) says what that takes; the
report carries it so a merge request's plan, read from the report, can say it too.
"""

from __future__ import annotations

from reconciler.model.drift import MigManagerHost
from reconciler.model.inventory import ApplyMode
from reconciler.model.observed import ObservedState

# strconv.ParseBool, which urfave/cli's BoolFlag uses for WITH_REBOOT (mig-parted cmd/nvidia-mig-manager/main.go).
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def go_bool(value: str | None) -> bool:
    """An env flag as mig-manager reads it; a value Go cannot parse is taken as true (the worse case)."""
    return value is not None and value not in _GO_FALSE


def mig_manager_host(observed: ObservedState, mode: ApplyMode) -> MigManagerHost | None:
    """What mig-manager does to the host, or None when it does nothing of the kind (or is not the applier: the
    node agent neither reboots nor stops the kubelet; no ClusterPolicy observed)."""
    cp = observed.cluster_policy
    if cp is None or mode is ApplyMode.AGENT:
        return None
    host = MigManagerHost(with_reboot=go_bool(cp.mig_manager_env.get("WITH_REBOOT")), host_driver=not cp.driver_enabled)
    return host if host.any else None
