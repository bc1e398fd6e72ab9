"""A placement-only change under `apply.mode: gpu-operator` will not happen: said as a warning, with the way to get it.

Pure. mig-parted's config (v1) has no placements: mig-manager compares a GPU's profile counts and leaves a GPU whose
counts stay as it is (reconciler/logic/review/revdiff.py `Disruptions.not_applied`). A merge request that only moves
partitions would then be merged, "applied", and change nothing on the node. Each such GPU becomes one MP414 warning
on the target's node file (the line of the first partition that moves), naming the moves and the way out: the node
agent (`apply.mode: agent`) places partitions through NVML.
"""

from __future__ import annotations

from reconciler.logic.review.revdiff import ChangeKind, Disruptions, RevisionDiff, diff_states, disruptions
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.inventory import DesiredState

CODE = "MP414"  # placement-only change that mig-parted does not apply (apply.mode gpu-operator)
MAX_MOVES_NAMED = 4


def placement_only_warnings(diff: RevisionDiff, disrupts: Disruptions, target: DesiredState) -> tuple[Diagnostic, ...]:
    """One warning per GPU whose only change is where its partitions sit, under the mig-parted model."""
    out: list[Diagnostic] = []
    for node, gpu in disrupts.not_applied:
        moves = [c for c in diff.changes if c.node == node and c.gpu == gpu and c.kind is ChangeKind.MOVE]
        spec = target.nodes.get(node)
        gpu_spec = spec.gpu(gpu) if spec is not None else None
        where = gpu_spec.source if gpu_spec is not None else None
        if gpu_spec is not None:  # the line of a moved partition, when the target wrote it
            moved = {(c.profile, c.after.start) for c in moves if c.after is not None}
            for p, pl in zip(gpu_spec.partitions, gpu_spec.placements, strict=False):
                if (p.profile, pl.start) in moved and p.source is not None:
                    where = p.source
                    break
        named = ", ".join(f"{c.profile} {c.before} → {c.after}" for c in moves[:MAX_MOVES_NAMED])
        more = f" and {len(moves) - MAX_MOVES_NAMED} more" if len(moves) > MAX_MOVES_NAMED else ""
        out.append(
            Diagnostic(
                CODE,
                f"node {node} GPU {gpu}: placement-only change ({named}{more}) will not happen under apply.mode "
                "gpu-operator: mig-parted's config has no placements, so mig-manager leaves this GPU as it is; "
                "to have partitions placed, set spec.apply.mode: agent in cluster.yaml (migplan's node agent places "
                "them through NVML)",
                file=where.file if where is not None else None,
                line=where.line if where is not None else None,
                severity=Severity.WARNING,
                extra={"node": node, "gpu": gpu},
            )
        )
    return tuple(out)


def placement_only_between(base: DesiredState, target: DesiredState) -> tuple[Diagnostic, ...]:
    """The same warnings from two revisions alone (`validate --base`): no cluster read, so no pods to name."""
    diff = diff_states(base, target)
    return placement_only_warnings(diff, disruptions(diff, base, target, None), target)
