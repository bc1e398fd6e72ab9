"""Whether a node's GPUs offer every MIG profile its plan names, from what the node itself reports. Pure.

mig-parted does not refuse a config naming a profile the GPU does not have: `types.MigConfig.Flatten` and
`SetMigConfig` skip what they cannot create, leave the GPU empty and mig-manager reports `success`
(NVIDIA/mig-parted v0.15.0-2 `pkg/types/mig_config.go`, `pkg/mig/config/config.go`). And the names are not fixed
per model: the driver computes a profile's name from its memory (NVIDIA/go-nvlib `pkg/nvlib/device/mig_profile.go`
`String`), so a board or driver with other memory sizes names the same slice differently (GB200: `1g.24gb` or
`1g.23gb`). Validation checks the plan against the catalog's model; this module checks it against the node, before
migplan labels the node, and holds the node with a finding (MP564) when the node says its GPUs would not understand
the config. The node's word, in order of weight:

- GFD's `nvidia.com/gpu.product` (suffixes `-MIG-<profile>` and `-SHARED` stripped by the catalog): a node whose GPUs
  are another catalog model than the plan's offers that model's profiles;
- GFD's per-profile labels under `mixed` (`nvidia.com/mig-<profile>.count`) and the `-MIG-<profile>` product under
  `single`: the profiles the node holds now. A name the plan's model does not know means the driver names profiles
  otherwise than the catalog; then only the names the node itself uses are taken as offered.

A node that says nothing (no GFD label) is not held: nothing says its GPUs differ from the plan's model.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.catalog import Catalog, GpuModel
from reconciler.model.inventory import NodeSpec
from reconciler.model.observed import GPU_PRODUCT_LABEL

__all__ = ["reported_profiles", "unoffered"]

_MIG_LABEL = "nvidia.com/mig-"
_COUNT = ".count"
_MIG_INFIX = "-MIG-"


def _spelled(profile: str) -> str:
    """The spelling of a profile in labels and resource names (`1g.24gb+me` -> `1g.24gb.me`)."""
    return profile.replace("+", ".")


def reported_profiles(labels: Mapping[str, str]) -> frozenset[str]:
    """The MIG profiles GFD says the node holds now, spelled as in labels."""
    out = {
        k[len(_MIG_LABEL) : -len(_COUNT)]
        for k in labels
        if k.startswith(_MIG_LABEL) and k.endswith(_COUNT) and len(k) > len(_MIG_LABEL) + len(_COUNT)
    }
    product = labels.get(GPU_PRODUCT_LABEL, "")
    if _MIG_INFIX in product:
        tail = product.rsplit(_MIG_INFIX, 1)[1]
        if tail and tail != "INVALID":
            out.add(tail.removesuffix("-SHARED"))
    return frozenset(out)


def _plan_profiles(plan: NodeSpec) -> dict[str, set[str]]:
    """plan model key -> the profiles the plan cuts its GPUs of that model into."""
    out: dict[str, set[str]] = {}
    for g in plan.gpus:
        if g.mig_enabled and g.partitions:
            out.setdefault(g.model, set()).update(p.profile for p in g.partitions)
    return out


def unoffered(plan: NodeSpec, labels: Mapping[str, str], catalog: Catalog) -> str | None:
    """Why the node's GPUs would not offer every profile its plan names (one line), or None when nothing says so."""
    wanted = _plan_profiles(plan)
    if not wanted:
        return None
    product = labels.get(GPU_PRODUCT_LABEL)
    node_model: GpuModel | None = catalog.resolve(product) if product else None
    if node_model is not None:
        missing = sorted(p for ps in wanted.values() for p in ps if p not in node_model.profiles)
        if missing:
            return (
                f"its GPUs are {node_model.key} ({GPU_PRODUCT_LABEL}={product}), which offers no "
                f"{', '.join(missing)}: mig-parted would leave those GPUs empty and report success"
            )
    reported = reported_profiles(labels)
    for key, profiles in sorted(wanted.items()):
        model = catalog.get(key)
        if model is None:
            continue
        namings = [(i, frozenset(_spelled(n) for n in naming)) for i, naming in enumerate(model.namings())]
        fits = [(i, naming) for i, naming in namings if reported <= naming]
        if reported and fits and len(namings) > 1:
            # A model with two documented namings (GB200: 1g.23gb or 1g.24gb): the node's names say which one its
            # driver uses; when they fit both, only the names both share are sure to be understood.
            offered = frozenset.intersection(*(naming for _, naming in fits))
            missing = sorted(p for p in profiles if _spelled(p) not in offered)
            if missing:
                which = (
                    "the catalog's naming"
                    if [i for i, _ in fits] == [0]
                    else f"the {model.alternate_naming} naming"
                    if [i for i, _ in fits] == [1]
                    else "names both of its documented namings share"
                )
                return (
                    f"its GPUs name their MIG profiles {', '.join(sorted(reported))} (GFD labels), {key}'s {which}: "
                    f"the driver may not know {', '.join(missing)}; mig-parted would leave such a GPU empty "
                    "and report success"
                )
            continue
        known = frozenset().union(*(naming for _, naming in namings))
        foreign = sorted(reported - known)
        if not foreign:
            continue
        # The driver names this node's profiles otherwise than the catalog (memory-derived names): only the
        # names the node uses are believed.
        missing = sorted(p for p in profiles if _spelled(p) not in reported)
        if missing:
            return (
                f"its GPUs name their MIG profiles {', '.join(foreign)} (GFD labels), which {key} in the catalog "
                f"does not: the driver may not know {', '.join(missing)}; mig-parted would leave such a GPU empty "
                "and report success"
            )
    return None
