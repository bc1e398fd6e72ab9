"""What NVIDIA's k8s-device-plugin advertises for a node's GPUs under a MIG strategy. Pure.

Takes the node's TwinGpus (read only) and a strategy string, returns the resources, the devices behind each
resource (for the twin's kubelet to allocate) or the error the real plugin exits with. Followed from the
source (NVIDIA/k8s-device-plugin@1b826ac, ASSUMPTIONS-operator.md "Device plugin"):

* `internal/rm/device_map.go` `buildDeviceMapFromConfigResources`, in its order: `buildGPUDeviceMap` (whole
  GPUs; MIG-enabled GPUs skipped unless the strategy is none), `buildMigDeviceMap` (MIG devices matched to
  the resource patterns), `assertAllMigDevicesAreValid` (a MIG-enabled GPU without MIG devices: error under
  single, warning under mixed; then under single one device type), and only then the same-migEnabled check.
* `internal/rm/rm.go` `AddDefaultResourcesToConfig`: single → pattern `*` named `gpu`; mixed → one pattern per
  GPU-instance profile with C == G (`nvidia.com/mig-<profile>`, `+` → `.`), so a compute-instance profile
  such as `1c.3g.71gb` matches no pattern and the plugin exits.
* `internal/rm/nvml_manager.go` `NewNVMLResourceManagers`: a resource with no device gets no plugin, so
  `nvidia.com/gpu` is registered only where there is a whole GPU (or, under single, a MIG device). The `0`
  a node shows for it after MIG is enabled is the kubelet's (the twin's node status keeps it).
* Error chains: the wrappers of `main.go` `start`/`startPlugins`, `plugin-manager.go` `GetPlugins`,
  `internal/plugin/factory.go` `New`, `nvml_manager.go` and `device_map.go`, with go-nvlib's visitor
  prefixes (`pkg/nvlib/device/device.go` `devicelib.VisitDevices`, `devicelib.VisitMigDevices`,
  `device.VisitMigDevices`: the MIG-device prefix is added twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.twin.gpus import TwinGpu
from reconciler.twin.operator.sharing import ConfigError, Replicated

__all__ = ["Advertised", "Unit", "config_failure", "device_id", "evaluate", "replicate", "resource_for_profile"]

GPU_RESOURCE = "nvidia.com/gpu"
STRATEGIES = ("none", "single", "mixed")

# main.go start → startPlugins → GetPlugins → plugin.New → NewNVMLResourceManagers → deviceMapBuilder.build
_OUTER = (
    "error starting plugins: error getting plugins: unable to create plugins: failed to construct resource "
    "managers: error building device map: error building device map from config.resources: "
)
# main.go start → startPlugins → validateFlags
_FLAGS = "error starting plugins: unable to validate flags: "
# main.go start → startPlugins → loadConfig → spec.NewConfig → parseConfig
_LOAD = (
    "error starting plugins: unable to load config: unable to finalize config: unable to parse config file: "
    "error parsing config file: "
)
# main.go start → startPlugins → GetPlugins → plugin.New → devicePluginForResource → getMPSOptions
_MPS_MIG = (
    "error starting plugins: error getting plugins: unable to create plugins: failed to create plugin: "
    "sharing using MPS is not supported for MIG devices"
)
_MPS_MIXED = "using --mig-strategy=mixed is not supported with MPS"
# devicelib.VisitMigDevices → devicelib.VisitDevices → device.VisitMigDevices → the closure: what a check
# run inside VisitMigDevices is wrapped in.
_VISIT_MIG = (
    "error visiting devices: error visiting device: error visiting device: error visiting MIG device: "
    "error visiting MIG device: "
)
# devicelib.VisitDevices alone (assertAllMigDevicesAreValid's first pass)
_VISIT_GPU = "error visiting device: "
_INVALID = "invalid MIG configuration: "
_NOT_CONFIGURED = "at least one device with migEnabled=true was not configured correctly: "
MORE_THAN_ONE_TYPE = "more than one MIG device type present on node"
SAME_MIG_ENABLED = "all devices on the node must be configured with the same migEnabled value"
NO_DEVICES = "No devices found. Waiting indefinitely."


@dataclass(frozen=True, slots=True)
class Unit:
    """One allocatable device: a whole GPU (gi_id None) or a MIG device."""

    gpu_index: int
    gi_id: int | None = None
    ci_id: int | None = None
    replica: int | None = None  # the i of `<id>::<i>` when the config shares the device (sharing.py)


@dataclass(frozen=True, slots=True)
class Advertised:
    strategy: str
    resources: dict[str, int] = field(default_factory=dict)  # only resources the plugin registers (count > 0)
    units: dict[str, tuple[Unit, ...]] = field(default_factory=dict)
    error: str | None = None  # the plugin's fatal error (pod not ready, nothing advertised)
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


def device_id(gpu: TwinGpu, unit: Unit) -> str | None:
    """The ID the plugin registers a unit under, which the kubelet allocates and PodResources lists.

    `internal/rm/devices.go` `BuildDevice`: `dev.ID = uuid`, the device's NVML UUID — `nvmlDevice.GetUUID` for a
    whole GPU (`GPU-…`), `nvmlMigDevice.GetUUID` (NVML's UUID of the MIG device handle, `MIG-…`) for a MIG
    device (`internal/rm/nvml_devices.go`), under every strategy: the strategy only decides which units exist
    and under which resource name (`evaluate`). A replica of a shared device is `<id>::<i>`
    (`internal/rm/device_map.go` `NewAnnotatedID`, `updateDeviceMapWithReplicas`). None when the unit no longer
    exists."""
    if unit.gi_id is None:
        base: str | None = gpu.uuid
    else:
        gi = gpu.gpu_instances.get(unit.gi_id)
        ci = gi.compute_instances.get(unit.ci_id or 0) if gi is not None else None
        base = ci.uuid if ci is not None else None
    if base is None or unit.replica is None:
        return base
    return f"{base}::{unit.replica}"


def resource_for_profile(profile: str) -> str:
    return "nvidia.com/mig-" + profile.replace("+", ".")


def is_compute_instance_profile(profile: str) -> bool:
    """`1c.3g.71gb` (C != G): go-nvlib's MigProfileInfo.String() prints the `<C>c.` part only then."""
    head = profile.split(".", 1)[0]
    return head.endswith("c")


def _fail(strategy: str, message: str) -> Advertised:
    return Advertised(strategy=strategy, error=message)


def _registered(strategy: str, by_res: dict[str, list[Unit]], warnings: list[str]) -> Advertised:
    """NewNVMLResourceManagers: a resource manager (and so a registered plugin) only per non-empty entry."""
    kept = {k: tuple(v) for k, v in by_res.items() if v}
    return Advertised(strategy, {k: len(v) for k, v in kept.items()}, kept, warnings=tuple(warnings))


def evaluate(gpus: Sequence[TwinGpu], strategy: str) -> Advertised:
    if strategy not in STRATEGIES:
        return _fail(strategy, _FLAGS + f"unknown MIG strategy: {strategy}")
    # buildGPUDeviceMap: `if migEnabled && *b.migStrategy != spec.MigStrategyNone { return nil }`
    whole = [Unit(g.index) for g in gpus if strategy == "none" or not g.mig_current]
    if strategy == "none":
        return _registered(strategy, {GPU_RESOURCE: whole}, [])
    # buildMigDeviceMap: every MIG device must match a pattern (single: `*`; mixed: C == G profiles only)
    mig: dict[str, list[Unit]] = {}
    for g in gpus:
        for d in g.mig_devices():
            if strategy == "mixed" and is_compute_instance_profile(d.profile):
                return _fail(
                    strategy,
                    _OUTER
                    + "error building MIG device map: "
                    + _VISIT_MIG
                    + f"MIG profile '{d.profile}' does not match any resource patterns",
                )
            name = GPU_RESOURCE if strategy == "single" else resource_for_profile(d.profile)
            mig.setdefault(name, []).append(Unit(g.index, d.gi_id, d.ci_id))
    # assertAllMigDevicesAreValid, first pass (VisitDevices)
    warnings: list[str] = []
    for g in gpus:
        if g.mig_current and not g.mig_devices():
            text = f"device {g.index} has no MIG devices configured"
            if strategy == "single":
                return _fail(strategy, _OUTER + _INVALID + _NOT_CONFIGURED + _VISIT_GPU + text)
            warnings.append(text)  # klog.Warningf under mixed
    if strategy == "single":
        # second pass (VisitMigDevices): every MIG device's attributes equal the first's. The twin compares
        # the profile on the GPU's model, which fixes the attributes (slices, memory, engines).
        kinds = {(g.model.key, d.profile) for g in gpus for d in g.mig_devices()}
        if len(kinds) > 1:
            return _fail(strategy, _OUTER + _INVALID + _VISIT_MIG + MORE_THAN_ONE_TYPE)
        # `requireUniformMIGDevices && !deviceMap.isEmpty() && !migDeviceMap.isEmpty()`, after the MIG checks
        if whole and mig:
            return _fail(strategy, _OUTER + SAME_MIG_ENABLED)
        return _registered(strategy, {GPU_RESOURCE: whole + mig.get(GPU_RESOURCE, [])}, warnings)
    by_res: dict[str, list[Unit]] = {GPU_RESOURCE: whole}
    by_res.update(mig)  # deviceMap.merge(migDeviceMap)
    return _registered(strategy, by_res, warnings)


def config_failure(strategy: str, error: ConfigError) -> Advertised:
    """The plugin exits at loadConfig: nothing is advertised."""
    return _fail(strategy, _LOAD + str(error))


def replicate(adv: Advertised, sharing: Replicated) -> Advertised:
    """`updateDeviceMapWithReplicas` on what `evaluate` built: each replicated resource's units become `replicas`
    annotated units under its rename (a name listed twice: the replicas are keyed by `<id>::<i>`, so the larger count
    stands); other resources are copied. MPS is refused with the mixed strategy (`validateFlags`, checked before any
    device is read) and on any MIG device (`getMPSOptions`)."""
    if not adv.ok or sharing.strategy == "none":
        return adv
    if sharing.strategy == "mps":
        if adv.strategy == "mixed":
            return _fail(adv.strategy, _FLAGS + _MPS_MIXED)
        if any(u.gi_id is not None for units in adv.units.values() for u in units):
            return _fail(adv.strategy, _MPS_MIG)
    names = {name for name, _, _ in sharing.resources}
    out: dict[str, dict[Unit, None]] = {r: dict.fromkeys(us) for r, us in adv.units.items() if r not in names}
    for name, replicas, rename in sharing.resources:
        units = adv.units.get(name, ())
        if not units:
            continue  # "Skip any resources not matched in oDevices"
        target = out.setdefault(rename or name, {})
        for u in units:
            for i in range(replicas):
                target[Unit(u.gpu_index, u.gi_id, u.ci_id, i)] = None
    kept = {r: tuple(us) for r, us in out.items() if us}
    return Advertised(adv.strategy, {r: len(us) for r, us in kept.items()}, kept, warnings=adv.warnings)
