"""What NVIDIA's k8s-device-plugin advertises for a node's GPUs under a MIG strategy (stack-facts.md §1).

Pure: takes the node's TwinGpus (read only) and a strategy string, returns the resources, the devices behind
each resource (for the twin's kubelet to allocate) or the error the real plugin exits with.

* none: every GPU, MIG-enabled or not, is one `nvidia.com/gpu` (§1.3, buildGPUDeviceMap skips MIG GPUs only
  when the strategy is not none).
* single: every MIG device is `nvidia.com/gpu`; all MIG devices must be of one type and MIG-enabled and
  MIG-disabled GPUs must not be mixed, else the plugin fails with the texts of §1.4. A node with no MIG-enabled
  GPU advertises its full GPUs.
* mixed: `nvidia.com/mig-<profile>` with `+` → `.` per MIG device, full GPUs stay `nvidia.com/gpu` — which is
  always registered, so an all-MIG node shows `nvidia.com/gpu: 0` (§1.3, NVIDIA's OpenShift doc example);
  a MIG-enabled GPU without MIG devices is only a warning (§1.4 line 174).
* anything else: `unknown MIG strategy: <s>` at startup (§1.1).

The full error chain is stack-facts' reconstruction [inference there, too]: the outer wrappers of main.go,
plugin-manager.go, factory.go and nvml_manager.go around device_map.go's error, with go-nvlib's visitor
prefixes where the check runs inside VisitMigDevices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.twin.gpus import TwinGpu

__all__ = ["Advertised", "Unit", "evaluate", "resource_for_profile"]

GPU_RESOURCE = "nvidia.com/gpu"
STRATEGIES = ("none", "single", "mixed")

# device_map.go and its wrappers (stack-facts §1.4)
_OUTER = (
    "error starting plugins: error getting plugins: unable to create plugins: failed to construct resource "
    "managers: error building device map: error building device map from config.resources: "
)
_VISIT = "error visiting devices: error visiting device: error visiting device: error visiting MIG device: "
MORE_THAN_ONE_TYPE = "more than one MIG device type present on node"
SAME_MIG_ENABLED = "all devices on the node must be configured with the same migEnabled value"


@dataclass(frozen=True, slots=True)
class Unit:
    """One allocatable device: a whole GPU (gi_id None) or a MIG device."""

    gpu_index: int
    gi_id: int | None = None
    ci_id: int | None = None


@dataclass(frozen=True, slots=True)
class Advertised:
    strategy: str
    resources: dict[str, int] = field(default_factory=dict)
    units: dict[str, tuple[Unit, ...]] = field(default_factory=dict)
    error: str | None = None  # the plugin's fatal error (pod not ready, nothing advertised)
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


def resource_for_profile(profile: str) -> str:
    return "nvidia.com/mig-" + profile.replace("+", ".")


def _fail(strategy: str, message: str) -> Advertised:
    return Advertised(strategy=strategy, error=message)


def evaluate(gpus: Sequence[TwinGpu], strategy: str) -> Advertised:
    if strategy not in STRATEGIES:
        return _fail(strategy, f"unknown MIG strategy: {strategy}")
    whole = tuple(Unit(g.index) for g in gpus if strategy == "none" or not g.mig_current)
    if strategy == "none":
        return Advertised(strategy, {GPU_RESOURCE: len(whole)}, {GPU_RESOURCE: whole})
    mig_gpus = [g for g in gpus if g.mig_current]
    if strategy == "single":
        if not mig_gpus:
            return Advertised(strategy, {GPU_RESOURCE: len(whole)}, {GPU_RESOURCE: whole})
        if whole:
            return _fail(strategy, _OUTER + SAME_MIG_ENABLED)
        units: list[Unit] = []
        kinds: set[str] = set()
        for g in mig_gpus:
            devices = g.mig_devices()
            if not devices:
                return _fail(
                    strategy,
                    _OUTER + "invalid MIG configuration: error visiting devices: error visiting device: "
                    "at least one device with migEnabled=true was not configured correctly: "
                    f"device {g.index} has no MIG devices configured",
                )
            for d in devices:
                kinds.add(d.profile)
                if len(kinds) > 1:
                    return _fail(strategy, _OUTER + "invalid MIG configuration: " + _VISIT + MORE_THAN_ONE_TYPE)
                units.append(Unit(g.index, d.gi_id, d.ci_id))
        return Advertised(strategy, {GPU_RESOURCE: len(units)}, {GPU_RESOURCE: tuple(units)})
    # mixed
    by_res: dict[str, list[Unit]] = {GPU_RESOURCE: list(whole)}
    warnings = []
    for g in mig_gpus:
        devices = g.mig_devices()
        if not devices:
            warnings.append(f"device {g.index} has no MIG devices configured")
        for d in devices:
            if "c." in d.profile.split("g.", 1)[0]:  # a C != G compute-instance sub-division (1c.3g.40gb)
                return _fail(
                    strategy,
                    _OUTER.replace("error building device map from config.resources: ", "")
                    + f"error building MIG device map: MIG profile '{d.profile}' does not match any resource "
                    "patterns",
                )
            by_res.setdefault(resource_for_profile(d.profile), []).append(Unit(g.index, d.gi_id, d.ci_id))
    return Advertised(
        strategy,
        {k: len(v) for k, v in by_res.items()},
        {k: tuple(v) for k, v in by_res.items()},
        warnings=tuple(warnings),
    )
