"""One simulated clock for a cluster twin and the migplan cycles run against it (instead of sleeping), and
the one-cycle helper the twin tests share.

migplan relabels a node to a config only once the ConfigMap holding it is `configPropagationSeconds` old
(default 150 s, the kubelet's ConfigMap volume refresh), and the twin's mig-manager reads the ConfigMap as the
kubelet has projected it by then. Both read this clock: the twin through `monotonic` (ClusterTwin(clock=...)),
migplan through `cycle_now()`, which moves the clock one controller interval (`step`) forward first, so each cycle
runs as a real controller's next cycle would, that much later.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.commands.reconcile import load_desired
from reconciler.engine import CycleResult, reconcile_once
from reconciler.model.inventory import CONFIG_PROPAGATION_SECONDS, DesiredState
from reconciler.twin.cluster import ClusterTwin


class TwinClock:
    """A clock the test moves: `monotonic()` for the twin, `cycle_now()` / `now()` for migplan."""

    def __init__(self, *, step: float = CONFIG_PROPAGATION_SECONDS, start: datetime | None = None) -> None:
        self.step = step
        # From the real time, so stamps a real-clock `migplan` process writes in the same test are in the past.
        self.start = start or datetime.now(UTC).replace(microsecond=0)
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.seconds)

    def advance(self, seconds: float) -> datetime:
        self.seconds += seconds
        return self.now()

    def cycle_now(self) -> datetime:
        """The next controller cycle's time: one step later."""
        return self.advance(self.step)

    def twin_kwargs(self) -> dict[str, object]:
        """ClusterTwin arguments that make the twin model the kubelet's delay on this clock."""
        return {"clock": self.monotonic, "config_propagation_seconds": float(CONFIG_PROPAGATION_SECONDS)}


def desired_from(root: Path) -> DesiredState:
    """The inventory at `root`, loaded as `migplan reconcile` loads it (it must be valid)."""
    desired, diagnostics = load_desired(root)
    assert desired is not None, [str(d) for d in diagnostics]
    return desired


def reconcile_cycle(twin: ClusterTwin, desired: DesiredState, clock: TwinClock) -> CycleResult:
    """One `reconcile_once` against the twin through the official client, at the clock's next cycle."""
    cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
    try:
        return reconcile_once(desired=desired, cluster=cluster, now=clock.cycle_now())
    finally:
        cluster.close()
