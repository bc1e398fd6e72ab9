"""Build the packaged GPU catalog from reconciler/catalog/reference/gpu-profiles.yaml.

The reference is vendored beside this module (its origin is in reference/README.md). Run by hand when it changes:
    python -m reconciler.catalog._build > reconciler/catalog/data/gpu-catalog.yaml
A unit test rebuilds it from the reference and compares, so the packaged data can never drift from its
source silently.

The reference is prose-rich (fractions with comments, enum names with hex values); this turns it
into plain numbers and keeps every caveat as a marker instead of dropping it:
  * placements null in the reference -> `placements: null` per profile, `placement_source: unknown`;
  * the H200 takes the H100 80GB geometry (same GH100 die, same memory fractions), marked `derived`;
  * NVML enums missing in the reference are derived with go-nvlib's naming rule, marked `derived`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

MODELS = [
    "A30-24GB",
    "A100-40GB",
    "A100-80GB",
    "H100-80GB",
    "H100-94GB",
    "H100-96GB",
    "GH200-144GB",
    "H200-141GB",
    "B200-180GB",
    "GB200-186GB",
    "B300-288GB",
    "GB300-288GB",
    "RTX-PRO-6000-96GB",
]
# The H200 is the GH100 die with the H100 80GB's slice fractions; NVIDIA publishes its placements
# only as a diagram, so the geometry is borrowed and marked derived.
DERIVED_GEOMETRY = {"H200-141GB": "H100-80GB"}

# GFD gpu.product values (sanitised NVML names) per model. Seen in public repositories [reference S20, S26]
# unless marked "sanitise()": those are GFD's sanitise() (internal/lm/resource.go, S21) applied to an NVML name
# that was seen. The first entry is the twin's GFD label, so new names go at the end. Under `single` GFD
# appends "-MIG-<profile>" and with shared replicas "-SHARED"; Catalog.resolve strips both.
GFD_PRODUCTS = {
    "A30-24GB": ["NVIDIA-A30"],
    "A100-40GB": ["NVIDIA-A100-SXM4-40GB", "A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"],
    # "NVIDIA-A800-80GB-PCIe": sanitise() of the NVML name "NVIDIA A800 80GB PCIe" [S22]
    "A100-80GB": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe", "NVIDIA-A800-80GB-PCIe"],
    "H100-80GB": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe", "NVIDIA-H800"],
    "H100-94GB": ["NVIDIA-H100-NVL"],
    "H100-96GB": ["NVIDIA-GH200-480GB"],
    "GH200-144GB": [],
    "H200-141GB": ["NVIDIA-H200", "NVIDIA-H200-NVL"],
    "B200-180GB": ["NVIDIA-B200"],
    "GB200-186GB": ["NVIDIA-GB200"],
    "B300-288GB": [],  # not seen: resolved by PCI device id
    "GB300-288GB": [],  # not seen: resolved by PCI device id
    # "...-Workstation-Edition": sanitise() of the NVML name seen [S26]
    "RTX-PRO-6000-96GB": [
        "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
        "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition",
        "NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition",
    ],
}
NVML_NAMES = {
    "A30-24GB": ["NVIDIA A30"],
    "A100-40GB": ["NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"],
    "A100-80GB": ["NVIDIA A100-SXM4-80GB", "NVIDIA A800 80GB PCIe", "NVIDIA A100 80GB PCIe"],
    "H100-80GB": ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H800"],
    "H100-94GB": ["NVIDIA H100 NVL"],
    "H100-96GB": ["NVIDIA GH200 480GB"],
    "GH200-144GB": [],
    "H200-141GB": ["NVIDIA H200", "NVIDIA H200 NVL"],
    "B200-180GB": ["NVIDIA B200"],
    "GB200-186GB": ["NVIDIA GB200"],
    "B300-288GB": [],
    "GB300-288GB": [],
    "RTX-PRO-6000-96GB": [
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    ],
}
_ENUM_PREFIX = "NVML_GPU_INSTANCE_PROFILE_"


def _enums(ref: dict[str, Any]) -> dict[str, int]:
    """NVML_GPU_INSTANCE_PROFILE_* values from the reference's nvml.h table, without the prefix."""
    table = ref["nvml_gpu_instance_profile_enum"]
    return {k.removeprefix(_ENUM_PREFIX): int(v) for k, v in table.items() if not k.endswith("_COUNT")}


def _slices(text: Any) -> int:
    # "2/8 (doc table prints 1/8 -- ...; treat as 2/8)" -> 2 ; "1/8 (inferred)" -> 1
    s = str(text)
    m = re.search(r"treat as (\d+)/\d+", s) or re.match(r"\s*(\d+)/\d+", s)
    if not m:
        raise ValueError(f"cannot read slice fraction {text!r}")
    return int(m.group(1))


def _derive_enum(name: str, compute: int, memory: int) -> str:
    # go-nvlib naming rule read backwards: "+me" is REV1, "+me.all" ALL_ME, "+gfx" GFX, "-me" NO_ME;
    # a 1g profile with 2 memory slices is REV2.
    base = f"{compute}_SLICE"
    for suffix, enum_suffix in (("+me.all", "_ALL_ME"), ("+me", "_REV1"), ("+gfx", "_GFX"), ("-me", "_NO_ME")):
        if name.endswith(suffix):
            return base + enum_suffix
    if compute == 1 and memory == 2:
        return base + "_REV2"
    return base


def build(ref: dict[str, Any]) -> dict[str, Any]:
    by_key = {m["key"]: m for m in ref["models"]}
    enums = _enums(ref)
    out: dict[str, Any] = {}
    for key in MODELS:
        m = by_key[key]
        geometry_from = DERIVED_GEOMETRY.get(key)
        geo = (
            {
                p["name"].split(".")[0]
                + ("+me" if p["name"].endswith("+me") else "")
                + ("/2" if _slices(p["memory_slices"]) == 2 and p["name"].startswith("1g") else ""): p
                for p in by_key[geometry_from]["profiles"]
            }
            if geometry_from
            else {}
        )
        profiles = []
        for p in m["profiles"]:
            compute = int(str(p["compute_slices"]).split("/")[0])
            memory = _slices(p["memory_slices"])
            if "nvml_profile_enum" in p:
                enum_name, enum_derived = p["nvml_profile_enum"].split(" ")[0], False
            else:
                enum_name, enum_derived = _derive_enum(p["name"], compute, memory), True
            placements = p.get("placements")
            source = "published" if placements else "unknown"
            if placements is None and geometry_from:
                twin = geo.get(
                    p["name"].split(".")[0]
                    + ("+me" if p["name"].endswith("+me") else "")
                    + ("/2" if memory == 2 and p["name"].startswith("1g") else "")
                )
                if twin and twin.get("placements"):
                    placements, source = twin["placements"], f"derived:{geometry_from}"
            pid = p.get("nvidia_smi_profile_id")
            profiles.append(
                {
                    "name": p["name"],
                    "compute_slices": compute,
                    "memory_slices": memory,
                    "max_instances": int(p["max_instances"]),
                    "nvml_profile": enum_name,
                    "nvml_profile_value": enums[enum_name],
                    "nvml_profile_derived": enum_derived,
                    "profile_id": pid if isinstance(pid, int) else None,
                    # No source gave this profile's nvidia-smi ID: NVML on the node must say.
                    "profile_id_confirmed": isinstance(pid, int),
                    "memory_gib": p.get("lgip_memory_gib"),
                    "placements": (
                        {"starts": list(placements["starts"]), "size": int(placements["size"])} if placements else None
                    ),
                    "placement_source": source,
                }
            )
        out[key] = {
            "products": list(m.get("products", [])),
            "nvml_names": NVML_NAMES[key],
            "gfd_products": GFD_PRODUCTS[key],
            "pci_device_ids": [str(x).split(" ")[0] for x in m.get("pci_device_ids", [])],
            "compute_slices": int(m["compute_slices_total"]),
            "memory_slices": int(m["memory_slices_total"]),
            "placements_derived_from": geometry_from,
            "profiles": profiles,
        }
        alternate = m.get("alternate_naming")
        if alternate:
            names = {p["name"] for p in profiles}
            renames = {str(k): str(v) for k, v in alternate["profiles"].items()}
            unknown = sorted(set(renames) - names)
            clash = sorted(set(renames.values()) & names)
            if unknown or clash or len(set(renames.values())) != len(renames):
                raise ValueError(f"{key}: alternate_naming must rename profiles of the model to new, distinct names")
            # The same slices under the names another board/driver gives them (memory-derived names, go-nvlib
            # mig_profile.go): canonical name -> the other name.
            out[key]["alternate_naming"] = {"name": str(alternate["name"]), "profiles": renames}
    return {"schema_version": 1, "source": "reconciler/catalog/reference/gpu-profiles.yaml", "models": out}


HEADER = """\
# GPU catalog: MIG GPU-instance profiles per GPU model, as package data.
# GENERATED from reconciler/catalog/reference/gpu-profiles.yaml by `python -m reconciler.catalog._build`; do not edit
# by hand (tests/unit/catalog/test_catalog.py rebuilds it from the reference and compares).
# profile_id_confirmed: false where no source (real lgip output, NVIDIA text) gave the nvidia-smi profile ID.
# Memory slices marked "(inferred)" in the reference (GH200-144GB, GB200, B300, GB300, RTX PRO 6000) are inferred.
# placement_source: published (NVIDIA text or real nvidia-smi output) | derived:<model> (borrowed
# geometry, e.g. H200 <- H100-80GB, same GH100 die) | unknown (checked on slice counts only).
# Placements are in memory-slice units (nvmlGpuInstancePlacement_t start/size). On a node, NVML's
# nvmlDeviceGetGpuInstancePossiblePlacements_v2 is the truth; this file is the offline catalogue.
"""


def render(ref: dict[str, Any]) -> str:
    return HEADER + yaml.safe_dump(build(ref), sort_keys=False, width=120)


# The vendored reference, beside this module (not package data: only the generated catalog ships).
REFERENCE = Path(__file__).resolve().parent / "reference" / "gpu-profiles.yaml"


if __name__ == "__main__":
    with open(sys.argv[1] if len(sys.argv) > 1 else REFERENCE, "rb") as fh:
        sys.stdout.write(render(yaml.safe_load(fh)))
