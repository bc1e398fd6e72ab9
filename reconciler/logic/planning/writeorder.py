"""The order a plan's writes may go out in: stages one after another, ordered groups inside a stage in parallel.

Pure: a plan's writes (already in plan order, reconciler/logic/planning/planner.py) in, stages out. The
planner's order says what must come before what; this module says what may overlap:

- a write on anything but a Node (the mig-parted ConfigMap, the ClusterPolicy, the device-plugin
  DaemonSet, the ConfigMap clean-up at the end) is a stage of its own: it starts only once every
  write before it in the plan is made, and nothing after it starts before it is made;
- a run of consecutive Node writes is one stage, split into one group per node, each group
  holding that node's writes in plan order (cordon -> label -> uncordon, and whatever other per-node
  kinds a plan grows: they keep their plan order within their node's group). Groups of one stage
  touch different objects and none reads what another writes, so they may run in parallel; the
  writes of one group never overlap.

How many nodes are in flight (maxUnavailableNodes) is decided by the planner, not here: a node
the planner held back has no write in the plan at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.model.plans import Change

NODE_PREFIX = "node/"


@dataclass(frozen=True, slots=True)
class Stage:
    """Writes that may go out together: each group in order, the groups in parallel."""

    groups: tuple[tuple[Change, ...], ...]

    @property
    def writes(self) -> tuple[Change, ...]:
        return tuple(c for g in self.groups for c in g)

    @property
    def parallel(self) -> bool:
        return len(self.groups) > 1


def stages(writes: Sequence[Change]) -> tuple[Stage, ...]:
    """The writes cut into stages (see the module docstring); every write is in exactly one group."""
    out: list[Stage] = []
    run: dict[str, list[Change]] = {}  # node subject -> its writes, in plan order (dicts keep insertion order)
    for change in writes:
        if change.subject.startswith(NODE_PREFIX):
            run.setdefault(change.subject, []).append(change)
            continue
        if run:
            out.append(Stage(tuple(tuple(g) for g in run.values())))
            run = {}
        out.append(Stage(((change,),)))
    if run:
        out.append(Stage(tuple(tuple(g) for g in run.values())))
    return tuple(out)
