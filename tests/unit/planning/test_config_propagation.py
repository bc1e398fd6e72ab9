"""The planner labels a node only once the ConfigMap content holding its config can have reached mig-manager."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.logic.codecs import migparted
from reconciler.logic.planning import planner
from reconciler.model.inventory import (
    ApplySettings,
    ClusterSpec,
    DesiredState,
    GpuSpec,
    MigStrategy,
    NodeSpec,
    Partition,
)
from reconciler.model.observed import (
    CONFIGS_ADDED_AT_ANNOTATION,
    MIG_CONFIG_LABEL,
    ConfigMapState,
    ObservedNode,
    ObservedState,
)
from reconciler.model.plans import Action, Kind, Plan

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def _desired(seconds: int = 120) -> DesiredState:
    gpu = GpuSpec(index=0, model="H200-141GB", mig_enabled=True, partitions=(Partition(profile="7g.141gb"),))
    return DesiredState(
        cluster=ClusterSpec(
            name="t", mig_strategy=MigStrategy.MIXED, apply=ApplySettings(config_propagation_seconds=seconds)
        ),
        nodes={"n": NodeSpec(name="n", gpus=(gpu,))},
    )


def _observed(text: str, annotations: dict[str, str] | None = None) -> ObservedState:
    node = ObservedNode(name="n", labels={MIG_CONFIG_LABEL: "all-disabled", "nvidia.com/mig.config.state": "success"})
    cm = ConfigMapState(
        namespace="gpu-operator",
        name="migplan-mig-parted-config",
        data={migparted.CONFIG_KEY: text},
        labels={"app.kubernetes.io/managed-by": "migplan"},
        annotations=annotations or {},
    )
    return ObservedState(nodes={"n": node}, mig_config_map=cm)


OLD = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n"


def _relabel(p: Plan) -> Action:
    (c,) = [c for c in p.changes if c.kind is Kind.NODE_MIG_CONFIG]
    return c.action


def test_configmap_write_that_adds_a_config_is_stamped_and_the_label_waits() -> None:
    p = planner.plan(_desired(), _observed(OLD), now=NOW)
    (cm,) = [c for c in p.changes if c.kind is Kind.MIG_CONFIG_MAP and c.action is Action.CONFIGURE]
    assert cm.patch is not None and cm.patch["metadata"]["annotations"] == {
        CONFIGS_ADDED_AT_ANNOTATION: "2026-12-02T10:00:00Z"
    }
    assert _relabel(p) is Action.SKIP


def test_label_goes_once_the_content_is_old_enough_and_not_before() -> None:
    text = migparted.render(_desired()).text
    stamp = {CONFIGS_ADDED_AT_ANNOTATION: "2026-12-02T10:00:00Z"}
    assert _relabel(planner.plan(_desired(), _observed(text, stamp), now=NOW + timedelta(seconds=119))) is Action.SKIP
    assert (
        _relabel(planner.plan(_desired(), _observed(text, stamp), now=NOW + timedelta(seconds=120))) is Action.CONFIGURE
    )


def test_a_write_that_only_drops_configs_keeps_the_old_stamp() -> None:
    text = migparted.render(_desired()).text
    extra = text + "\n  gone:\n    - devices: all\n      mig-enabled: false\n"
    p = planner.plan(_desired(), _observed(extra, {CONFIGS_ADDED_AT_ANNOTATION: "2026-12-02T09:00:00Z"}), now=NOW)
    (cm,) = [c for c in p.changes if c.kind is Kind.MIG_CONFIG_MAP and c.action is Action.CONFIGURE]
    assert cm.patch is not None and "annotations" not in cm.patch["metadata"]
    assert _relabel(p) is Action.CONFIGURE


def test_zero_seconds_keeps_the_same_cycle_relabel() -> None:
    assert _relabel(planner.plan(_desired(0), _observed(OLD), now=NOW)) is Action.CONFIGURE


def test_the_stamp_is_never_earlier_than_the_write() -> None:
    """Whole seconds, rounded up: a write at 10:00:00.4 is stamped 10:00:01, so the wait that starts at the stamp
    never ends before configPropagationSeconds after the write (rounding down ended it up to a second early, and
    mig-manager then saw a label before its mounted file held the config: `selected mig-config not present`)."""
    p = planner.plan(_desired(), _observed(OLD), now=NOW + timedelta(milliseconds=400))
    (cm,) = [c for c in p.changes if c.kind is Kind.MIG_CONFIG_MAP and c.action is Action.CONFIGURE]
    assert cm.patch is not None
    assert cm.patch["metadata"]["annotations"] == {CONFIGS_ADDED_AT_ANNOTATION: "2026-12-02T10:00:01Z"}
    text = migparted.render(_desired()).text
    stamp = cm.patch["metadata"]["annotations"]
    early = NOW + timedelta(seconds=120, milliseconds=399)  # 119.999 s after the write
    assert _relabel(planner.plan(_desired(), _observed(text, stamp), now=early)) is Action.SKIP
