"""What a node change really destroys, by the component that applies it.

Pure. Two models, one per apply mode:

- `mig-parted` (apply.mode gpu-operator, and report-only, whose changes a person applies the same way):
  what the GPU Operator's mig-manager does when a node's `nvidia.com/mig.config` names a new config.
  Taken from NVIDIA/mig-parted (commit bd7160f4):
  * `pkg/mig/reconfigure/reconfigure.go` `Run`: when `assert` of the whole config passes
    (`isConfigAlreadyApplied`) nothing is touched; otherwise the state goes `pending` and
    `shutdownKubernetesGPUClients` sets every `nvidia.com/gpu.deploy.*` label of the node to
    `paused-for-mig-change` (device plugin, GFD, DCGM exporter, DCGM, NVSM, third-party clients) and
    deletes the CUDA and plugin validator pods, before anything is applied;
  * `cmd/nvidia-mig-parted/apply/apply.go` `ApplyMigConfigWithHooks`: the MIG mode first (only when
    `AssertMigMode` fails, i.e. some GPU's mode differs), then the devices;
  * `cmd/nvidia-mig-parted/apply/mode.go` `ApplyMigMode`: walks EVERY GPU of the config and calls
    `ClearMigConfig` on each one whose current mode is not Disabled, whether or not that GPU's mode
    changes; then, if any mode change is pending, `util.ResetAllGPUs()` runs `nvidia-smi -r -i` with the
    bus id of every GPU of the node (`cmd/nvidia-mig-parted/util/device.go` `nvmlResetAllGPUs`), which
    fails while a process uses any of them;
  * `cmd/nvidia-mig-parted/apply/config.go` `ApplyMigConfig`: per GPU, skipped when its profile counts
    already equal the config (`current.Equals`), else `SetMigConfig` (`pkg/mig/config/config.go`), which
    clears every instance of the GPU before creating the new set: a re-cut replaces the whole GPU's
    instances, never one partition.
  Placements are not part of mig-parted's v1 format: a change that only moves partitions leaves the
  counts equal and mig-parted does not touch the GPU.

- `nvml` (apply.mode agent): migplan's node agent destroys exactly the instances whose (profile,
  placement) is not desired (reconciler/logic/planning/agentplan.py); only a MIG mode change destroys the whole GPU.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.logic.codecs.migparted import GpuLayout
from reconciler.logic.observe.hosteffects import go_bool as go_bool  # how mig-manager reads WITH_REBOOT
from reconciler.model.inventory import ApplyMode

# The GPU clients mig-manager stops on the node while it applies a change (reconfigure.go
# shutdownKubernetesGPUClients / waitForPodsToBeDeleted), in the words a reader of the plan knows.
PAUSED_CLIENTS = (
    "device plugin",
    "GPU feature discovery",
    "DCGM exporter",
    "DCGM",
    "NVSM",
    "nvidia.com/gpu.deploy.client pods",
    "CUDA and plugin validators",
)


class Model(enum.StrEnum):
    """Which disruption model a plan uses (named in `migplan plan` text and JSON)."""

    MIG_PARTED = "mig-parted"  # GPU Operator mig-manager: whole GPU per re-cut, every MIG GPU on a mode flip
    NVML = "nvml"  # migplan's agent: only the partitions destroyed or moved


def model_for(mode: ApplyMode) -> Model:
    return Model.NVML if mode is ApplyMode.AGENT else Model.MIG_PARTED


def describe_model(model: Model) -> str:
    if model is Model.NVML:
        return (
            "apply.mode agent: the node agent destroys only the partitions that are destroyed or moved "
            "(a MIG mode change destroys that GPU's partitions)"
        )
    return (
        "apply.mode gpu-operator: mig-parted replaces every partition of a GPU it re-cuts, clears every "
        "MIG GPU of the node and may reset all of its GPUs when any GPU's MIG mode changes, and mig-manager "
        "stops the node's GPU clients (" + ", ".join(PAUSED_CLIENTS[:3]) + ", ...) while it applies"
    )


@dataclass(frozen=True, slots=True)
class NodeDisruption:
    """What mig-manager destroys on one node when it applies a new config."""

    gpus: frozenset[int] = frozenset()  # GPUs whose instances (or whole-GPU processes) are lost
    cleared: frozenset[int] = frozenset()  # MIG GPUs ClearMigConfig empties (mode flip) or SetMigConfig re-cuts
    mode_flips: frozenset[int] = frozenset()  # GPUs whose MIG mode changes
    reset: bool = False  # a mode flip: every GPU of the node may be reset (nvidia-smi -r)
    clients_paused: bool = False  # mig-manager stops the node's GPU clients while it applies

    @property
    def none(self) -> bool:
        return not (self.gpus or self.clients_paused)

    def describe(self) -> str:
        if self.none:
            return "nothing: mig-parted's assert passes"
        parts: list[str] = []
        if self.mode_flips:
            parts.append(
                f"MIG mode changes on GPU {_ids(self.mode_flips)}: mig-parted clears every MIG GPU "
                f"({_ids(self.cleared) or 'none'}) and may reset all GPUs of the node ({_ids(self.gpus)})"
            )
        elif self.gpus:
            parts.append(f"mig-parted re-cuts GPU {_ids(self.gpus)}: every partition of it is replaced")
        if self.clients_paused:
            parts.append("GPU clients stopped on the node while it applies (" + ", ".join(PAUSED_CLIENTS[:3]) + ")")
        return "; ".join(parts)


def _ids(indexes: frozenset[int]) -> str:
    return ", ".join(str(i) for i in sorted(indexes))


def mig_parted(old: Mapping[int, GpuLayout], new: Mapping[int, GpuLayout]) -> NodeDisruption:
    """What applying `new` over `old` destroys on a node (GPU index -> layout; the node's GPUs are the keys
    of either). A GPU missing from `old` is unknown and counted as re-cut."""
    indexes = frozenset(old) | frozenset(new)
    changed = frozenset(i for i in indexes if old.get(i) != new.get(i))
    if not changed:
        return NodeDisruption()  # isConfigAlreadyApplied: success without pausing anything
    # A GPU on one side only is unknown: count it as a mode flip (the worst case).
    flips = frozenset(i for i in indexes if i not in old or i not in new or old[i].mig_enabled != new[i].mig_enabled)
    if flips:
        # ApplyMigMode: ClearMigConfig on every GPU whose mode is not Disabled, then one reset of all GPUs.
        cleared = frozenset(i for i in indexes if (old.get(i) is None or old[i].mig_enabled))
        return NodeDisruption(gpus=indexes, cleared=cleared, mode_flips=flips, reset=True, clients_paused=True)
    # ApplyMigConfig: SetMigConfig clears and re-creates each GPU whose counts differ.
    recut = frozenset(i for i in changed if new[i].mig_enabled)
    return NodeDisruption(gpus=changed, cleared=recut, clients_paused=True)


def lost_resources(old: Mapping[int, GpuLayout], disruption: NodeDisruption) -> frozenset[str]:
    """The extended resources whose devices the disruption takes away (from the GPUs' old layouts)."""
    out: set[str] = set()
    for i in disruption.gpus:
        layout = old.get(i)
        if layout is not None:
            out |= layout.resources()
    return frozenset(out)


def advertised(layouts: Mapping[int, GpuLayout], strategy: str) -> dict[str, int]:
    """What the device plugin advertises for these GPU layouts under a strategy (none | single | mixed),
    as reconciler/logic/observe/occupancy.py's expected_resources does for a plan."""
    if strategy == "none":
        return {"nvidia.com/gpu": len(layouts)}
    whole = sum(1 for g in layouts.values() if not g.mig_enabled)
    if strategy == "single":
        return {"nvidia.com/gpu": whole + sum(n for g in layouts.values() if g.mig_enabled for _, n in g.devices)}
    out = {"nvidia.com/gpu": whole}
    for g in layouts.values():
        if g.mig_enabled:
            for profile, n in g.devices:
                r = "nvidia.com/mig-" + profile.replace("+", ".")
                out[r] = out.get(r, 0) + n
    return out


# What Kubernetes does while the kubelet is stopped (kubernetes/kubernetes pkg/controller/nodelifecycle
# node_lifecycle_controller.go `tryUpdateNodeHealth`, `doNoExecuteTaintingPass`; plugin/pkg/admission/
# defaulttolerationseconds): once no status or lease renewal has come for node-monitor-grace-period (40 s by default,
# 50 s from Kubernetes 1.32) the node's Ready condition turns Unknown and the node lifecycle controller taints it
# node.kubernetes.io/unreachable, NoSchedule and NoExecute; pods tolerate that NoExecute taint for 300 s by default
# (DefaultTolerationSeconds), so they are evicted only if the stop lasts longer. mig-manager stops the kubelet for
# at least the 30 s it sleeps before the mode change (reconfigure.go `Run`).
NOT_READY_WINDOW = (
    "host driver: mig-manager stops the kubelet (kubelet.service) for the MIG mode change, at least 30 s: past "
    "node-monitor-grace-period (40 s, 50 s from Kubernetes 1.32) the node turns NotReady (Ready=Unknown) and is "
    "tainted node.kubernetes.io/unreachable (NoSchedule, NoExecute): nothing new is scheduled there; its pods are "
    "not evicted unless the stop outlasts their toleration (300 s by default)"
)
REBOOT_EFFECT = "WITH_REBOOT: if the MIG mode change fails, mig-manager reboots the node and every pod on it ends"


def host_effects(what: NodeDisruption | None, *, with_reboot: bool, host_driver: bool) -> tuple[str, ...]:
    """What mig-manager does to the host around a change that flips the MIG mode (mig-parted
    pkg/mig/reconfigure/reconfigure.go `Run`): with WITH_REBOOT, a mode step that fails for any reason
    (`applyMigModeChange`: `apply --mode-only`, then `assert --mode-only`) reboots the node (every pod on it ends);
    with host GPU clients shut down (the operator's entrypoint exports WITH_SHUTDOWN_HOST_GPU_CLIENTS=$IS_HOST_DRIVER),
    `checkMigModeChangeRequired` adds the kubelet's service to them: the node is NotReady while the mode changes
    (NOT_READY_WINDOW). Empty when the change flips no MIG mode: the mode step then has nothing to do (mig-parted's
    `apply --mode-only` returns once `AssertMigMode` passes) and the kubelet is not stopped. `what` None: the previous
    layout is unknown, so a mode flip cannot be ruled out (the worse case)."""
    if what is not None and not what.mode_flips:
        return ()
    out = []
    if with_reboot:
        out.append(REBOOT_EFFECT)
    if host_driver:
        out.append(NOT_READY_WINDOW)
    return tuple(out)
