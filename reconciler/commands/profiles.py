"""`migplan profiles [MODEL] [-o text|json]`: the GPU catalog migplan validates against, in the open.

Until now the catalog showed only inside error messages ("did you mean 3g.71gb"). This prints, per GPU model (all of
them, or the one MODEL names: a catalog key such as H200-141GB or any name the stack uses for it, e.g. the
`nvidia.com/gpu.product` label), each MIG profile with its memory, compute and memory slices, how many instances fit
on one GPU, where an instance may start (memory-slice indexes) and the extended resource a pod asks for under
`migStrategy: mixed`. A placement table borrowed from another model is said so (H200 <- H100-80GB).

Exit codes: 0 printed; 2 a MODEL the catalog does not know (MP301, as validate names it; the known keys are listed).
"""

from __future__ import annotations

import difflib
import re
import sys
from typing import Any

import click
import orjson

from reconciler.catalog import GpuModel, Profile, load_catalog

__all__ = ["command", "model_doc", "render_model"]


def _placements(p: Profile) -> str:
    if p.placements is None:
        return "not published (checked on slice counts only)"
    return ",".join(str(s) for s in p.placements.starts)


def _memory(p: Profile) -> str:
    """NVML's figure when the catalog has it, else the one the profile's name states (`3g.40gb`: 40 GB)."""
    if p.memory_gib is not None:
        return f"{p.memory_gib:g} GiB"
    named = re.search(r"\.(\d+)gb", p.name)
    return f"{named.group(1)} GB" if named else "?"


def render_model(model: GpuModel) -> str:
    """One model as a text table, profiles from the smallest slice up."""
    head = f"{model.key} ({', '.join(model.products) or model.key}): {model.compute_slices} compute slices, "
    head += f"{model.memory_slices} memory slices"
    if model.placements_derived_from:
        head += f"; placements derived from {model.placements_derived_from} (NVML on the node is the final word)"
    rows = [["profile", "memory", "compute", "mem slices", "max/GPU", "may start at", "resource (mixed)"]]
    for p in sorted(model.profiles.values(), key=lambda p: (p.memory_slices, p.compute_slices, p.name)):
        rows.append(
            [
                p.name,
                _memory(p),
                str(p.compute_slices),
                str(p.memory_slices),
                str(p.max_instances),
                _placements(p),
                p.resource_name,
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head] + ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def model_doc(model: GpuModel) -> dict[str, Any]:
    return {
        "model": model.key,
        "products": list(model.products),
        "computeSlices": model.compute_slices,
        "memorySlices": model.memory_slices,
        "placementsDerivedFrom": model.placements_derived_from,
        "profiles": [
            {
                "profile": p.name,
                "memoryGiB": p.memory_gib,
                "computeSlices": p.compute_slices,
                "memorySlices": p.memory_slices,
                "maxInstances": p.max_instances,
                "starts": list(p.placements.starts) if p.placements is not None else None,
                "placementSource": p.placement_source,
                "resource": p.resource_name,
            }
            for p in sorted(model.profiles.values(), key=lambda p: (p.memory_slices, p.compute_slices, p.name))
        ],
    }


@click.command("profiles")
@click.argument("model", required=False)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(model: str | None, output: str) -> None:
    """Print the MIG profiles of every GPU model migplan knows, or of MODEL."""
    catalog = load_catalog()
    if model is not None:
        found = catalog.resolve(model)
        if found is None:
            close = difflib.get_close_matches(model, catalog.keys, n=3, cutoff=0.4)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            click.echo(
                f"migplan profiles: error MP301: unknown GPU model {model!r}{hint}; known: {', '.join(catalog.keys)}",
                err=True,
            )
            sys.exit(2)
        models = [found]
    else:
        models = list(catalog)
    if output == "json":
        doc = [model_doc(m) for m in models]
        sys.stdout.buffer.write(orjson.dumps(doc if model is None else doc[0], option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    else:
        click.echo("\n".join(render_model(m) for m in models), nl=False)
