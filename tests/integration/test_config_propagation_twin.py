"""The ConfigMap reaches mig-manager before the label does (issue 11 item 3), on a twin whose kubelet projects
the mig-parted ConfigMap into mig-manager's volume with the default delay (configPropagationSeconds, 150 s),
on a simulated clock the cycles share.

Normal path: the new config is written in one cycle, the node relabelled in the next, and no `failed` state ever
appears. Too early (a planner that relabels in the same cycle): mig-manager does not find the config in its
mounted file and fails with mig-parted's own words, and stays failed (it acts once per label value).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from helpers.twinclock import TwinClock, desired_from, reconcile_cycle

from reconciler.engine import CycleResult
from reconciler.model.inventory import CONFIG_PROPAGATION_SECONDS, DesiredState
from reconciler.model.plans import Kind
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
NODE = "gpu-h200-02"  # no pod holds a partition there: the change goes through
NOT_PRESENT = "rror selecting MIG config: selected mig-config not present: "  # capitalised in the log


def _inventory(root: Path, *, propagation: int | None = None) -> DesiredState:
    """The example inventory with GPU 1 of NODE cut into seven 1g.18gb (a config no node had)."""
    shutil.copytree(INVENTORY, root)
    node_file = root / "nodes" / f"{NODE}.yaml"
    text = node_file.read_text()
    gpu1 = text.index("    - index: 1")
    node_file.write_text(
        text[:gpu1]
        + "    - index: 1\n      model: H200-141GB\n      mig:\n        enabled: true\n        partitions:\n"
        + "".join("          - {profile: 1g.18gb}\n" for _ in range(7))
    )
    if propagation is not None:
        cluster = root / "cluster.yaml"
        cluster.write_text(
            cluster.read_text().replace("  apply:\n", f"  apply:\n    configPropagationSeconds: {propagation}\n", 1)
        )
    return desired_from(root)


def _run(twin: ClusterTwin, desired: DesiredState, clock: TwinClock) -> CycleResult:
    return reconcile_cycle(twin, desired, clock)


def _states(twin: ClusterTwin) -> list[str]:
    """Every nvidia.com/mig.config.state value NODE takes from now on."""
    seen: list[str] = []

    def cb(kind: str, obj: dict[str, Any]) -> None:
        if obj.get("kind") == "Node" and obj["metadata"]["name"] == NODE:
            state = (obj["metadata"].get("labels") or {}).get("nvidia.com/mig.config.state")
            if state and (not seen or seen[-1] != state):
                seen.append(state)

    twin.store.subscribe(cb)
    return seen


def test_default_delay_config_then_relabel_in_successive_cycles_and_never_failed(tmp_path: Path) -> None:
    assert CONFIG_PROPAGATION_SECONDS == 150
    desired = _inventory(tmp_path / "inventory")
    clock = TwinClock()
    with ClusterTwin.from_inventory(INVENTORY, **clock.twin_kwargs()) as twin:
        twin.settle()
        states = _states(twin)
        results = []
        for _ in range(6):
            results.append(_run(twin, desired, clock))
            twin.settle()
            if results[-1].converged:
                break
        assert results[-1].converged, [str(f) for f in results[-1].report.findings]  # type: ignore[union-attr]
        relabels = [
            (i, c)
            for i, r in enumerate(results)
            for c in r.applied
            if c.kind is Kind.NODE_MIG_CONFIG and NODE in c.subject
        ]
        config = results[-1].plan.node_configs[NODE]  # type: ignore[union-attr]
        first_cm = next(i for i, r in enumerate(results) if any(c.kind is Kind.MIG_CONFIG_MAP for c in r.applied))
        when = next(i for i, c in relabels if (c.after or {}).get("nvidia.com/mig.config") == config)
        assert when > first_cm  # the label comes a cycle after the ConfigMap that holds its config
        held = [c for c in results[first_cm].plan.changes if c.subject == f"node/{NODE}"]  # type: ignore[union-attr]
        assert [c.action.value for c in held] == ["skip"] and "mig-manager" in held[0].reason
        assert "failed" not in states, states
        assert states[-1] == "success"
        assert not any(NOT_PRESENT in line for line in twin.operator.mig_manager_log.get(NODE, []))
        alloc = twin.store.get("nodes", NODE)["status"]["allocatable"]
        assert int(alloc["nvidia.com/mig-1g.18gb"]) >= 7


def test_relabelled_in_the_same_cycle_mig_manager_fails_on_a_config_it_cannot_see_yet(tmp_path: Path) -> None:
    desired = _inventory(tmp_path / "inventory", propagation=0)  # a planner that does not wait
    clock = TwinClock()
    with ClusterTwin.from_inventory(INVENTORY, **clock.twin_kwargs()) as twin:  # the kubelet still takes its time
        twin.settle()
        states = _states(twin)
        first = _run(twin, desired, clock)
        config = first.plan.node_configs[NODE]  # type: ignore[union-attr]
        assert any(
            c.kind is Kind.NODE_MIG_CONFIG and (c.after or {}).get("nvidia.com/mig.config") == config
            for c in first.applied
        )
        twin.settle()
        assert states[-1] == "failed", states
        log = twin.operator.mig_manager_log[NODE]
        assert any(NOT_PRESENT in line and config in line for line in log), log[-5:]
        # mig-manager acts once per label value: a later projection does not rescue it by itself.
        clock.advance(CONFIG_PROPAGATION_SECONDS)
        twin.tick()
        assert twin.store.get("nodes", NODE)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "failed"
