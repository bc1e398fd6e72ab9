"""GPU Feature Discovery labels for a twin node (stack-facts.md §1.5 and §2; NVIDIA/k8s-device-plugin@1b826ac
`internal/lm/mig-strategy.go` and `internal/lm/resource.go`, where GFD now lives). Pure.

Produced: `nvidia.com/gpu.count`, `gpu.product` (the catalog's GFD product string, i.e. the sanitised NVML
name), `gpu.memory`, `gpu.replicas`, `gpu.sharing-strategy`, `mig.capable`, `mig.strategy` (single/mixed only),
under single the `-MIG-<profile>` product with `gpu.slices.gi/ci`, or the `-MIG-INVALID` set of §1.5; under
mixed the per-profile `nvidia.com/mig-<name>.{count,memory,slices.gi,slices.ci,product,replicas,
sharing-strategy}`. Labels whose values the references do not give (gpu.family, compute capability, CUDA and
driver versions, multiprocessors, engines, gfd.timestamp, machine, mode, mps.capable) are left out rather
than invented [assumption, ASSUMPTIONS-operator.md]. Memory values come from the catalog (MiB) and are
approximate where it has no figure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from reconciler.twin.gpus import TwinGpu

__all__ = ["OWNED_PREFIXES", "gfd_labels", "is_gfd_label"]

OWNED_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/mig-", "nvidia.com/mig.strategy", "nvidia.com/mig.capable")
_NOT_GFD = ("nvidia.com/gpu.deploy.", "nvidia.com/gpu.present")


def is_gfd_label(key: str) -> bool:
    """Labels GFD writes (and so replaces wholesale on each run)."""
    return key.startswith(OWNED_PREFIXES) and not key.startswith(_NOT_GFD)


def sanitise(part: str) -> str:
    """internal/lm/resource.go `sanitise`: drop every character but `[A-Za-z0-9-_. ]`, join the words with `-`."""
    return "-".join(re.sub(r"[^A-Za-z0-9\-_. ]", "", part).split())


def mig_device_name(profile: str) -> str:
    """internal/resource/nvml-mig-device.go `GetName`: the MIG profile with `+` replaced by `.`."""
    return profile.replace("+", ".")


def _product(gpu: TwinGpu) -> str:
    return gpu.model.gfd_products[0] if gpu.model.gfd_products else sanitise(gpu.name)


def _full_memory(gpu: TwinGpu) -> int:
    full = max(gpu.profiles.values(), key=lambda p: (p.memory_slices, p.compute_slices), default=None)
    return full.memory_mb if full else 0


def _mig_memory(gpu: TwinGpu, profile: str) -> int:
    base = profile.split("c.", 1)[1] if "c." in profile.split("g.", 1)[0] else profile
    prof = gpu.profile_by_name(base)
    return prof.memory_mb if prof else 0


def gfd_labels(gpus: Sequence[TwinGpu], strategy: str) -> dict[str, str]:
    """The labels GFD writes for the node's GPUs under `strategy` (none of them without GPUs)."""
    if not gpus:
        return {}
    first = gpus[0]
    product = _product(first)
    # mig-strategy.go newGPULabelers: MIG-enabled GPUs are labelled without sharing (replicas 0,
    # NewGPUResourceLabelerWithoutSharing → resourceLabeler.getReplicas); a full GPU of the same name
    # overrides that with the configured replicas (1 without time-slicing). Under every strategy.
    all_mig = all(g.mig_current for g in gpus)
    labels = {
        "nvidia.com/gpu.count": str(len(gpus)),
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": str(_full_memory(first)),
        "nvidia.com/gpu.replicas": "0" if all_mig else "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true" if any(g.profiles for g in gpus) else "false",
    }
    if strategy not in ("single", "mixed"):
        return labels  # mig.strategy is never emitted for none (strategy.go)
    labels["nvidia.com/mig.strategy"] = strategy
    mig_gpus = [g for g in gpus if g.mig_current]
    if strategy == "single":
        if mig_gpus:
            labels.update(_single_labels(gpus, mig_gpus, product))
        return labels
    labels.update(_mixed_labels(mig_gpus, product))
    return labels


def _single_labels(gpus: Sequence[TwinGpu], mig_gpus: Sequence[TwinGpu], product: str) -> dict[str, str]:
    """newMigStrategySingleLabeler: the node's one MIG device type as its GPU, or the `-MIG-INVALID` set (§1.5)."""
    first = gpus[0]
    per_gpu = [g.mig_profiles() for g in mig_gpus]
    devices = [p for profiles in per_gpu for p in profiles]
    kinds = set(devices)
    invalid = (
        len(mig_gpus) != len(gpus)  # "devices with MIG enabled and disable detected"
        or any(not profiles for profiles in per_gpu)  # "at least one MIG device is enabled but empty"
        or len(kinds) > 1  # "more than one MIG device type present on node"
    )
    if invalid:
        return {
            "nvidia.com/gpu.product": f"{product}-MIG-INVALID",
            "nvidia.com/gpu.count": "0",
            "nvidia.com/gpu.replicas": "0",
            "nvidia.com/gpu.sharing-strategy": "",
            "nvidia.com/gpu.memory": "0",
        }
    (kind,) = kinds
    gi, ci = _slices(first, kind)
    # NewMIGResourceLabeler: baseLabeler(count, model, "MIG", GetName()) — the product joins the sanitised
    # parts with `-`, GetName has replaced `+` by `.` (1g.18gb+me → NVIDIA-H200-MIG-1g.18gb.me); the MIG
    # labeler has the config, so replicas is 1 again.
    return {
        "nvidia.com/gpu.product": f"{product}-MIG-{sanitise(mig_device_name(kind))}",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.count": str(len(devices)),
        "nvidia.com/gpu.memory": str(_mig_memory(first, kind)),
        "nvidia.com/gpu.slices.gi": str(gi),
        "nvidia.com/gpu.slices.ci": str(ci),
    }


def _mixed_labels(mig_gpus: Sequence[TwinGpu], product: str) -> dict[str, str]:
    """The mixed strategy's `nvidia.com/mig-<name>.*` set per MIG device profile present (no C == G filter)."""
    counts: dict[str, int] = {}
    owner: dict[str, TwinGpu] = {}
    for g in mig_gpus:
        for profile in g.mig_profiles():
            counts[profile] = counts.get(profile, 0) + 1
            owner.setdefault(profile, g)
    labels: dict[str, str] = {}
    for profile, n in sorted(counts.items()):
        name = mig_device_name(profile)
        gi, ci = _slices(owner[profile], profile)
        prefix = f"nvidia.com/mig-{name}"
        labels.update(
            {
                f"{prefix}.count": str(n),
                f"{prefix}.memory": str(_mig_memory(owner[profile], profile)),
                f"{prefix}.slices.gi": str(gi),
                f"{prefix}.slices.ci": str(ci),
                f"{prefix}.product": f"{product}-MIG-{sanitise(name)}",
                f"{prefix}.replicas": "1",
                f"{prefix}.sharing-strategy": "none",
            }
        )
    return labels


def _slices(gpu: TwinGpu, profile: str) -> tuple[int, int]:
    head = profile.split(".", 1)[0]  # "3g" or "1c"
    if head.endswith("c"):
        ci = int(head[:-1])
        gi = int(profile.split(".", 2)[1][:-1])
        return gi, ci
    g = int(head[:-1])
    return g, g


def diff_labels(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str | None]:
    """Merge-patch body turning the GFD labels in `current` into `wanted` (None deletes)."""
    patch: dict[str, str | None] = {k: None for k in current if k not in wanted and is_gfd_label(k)}
    patch.update({k: v for k, v in wanted.items() if current.get(k) != v})
    return patch
