"""Fuzz: cluster objects as the API server returns them, mutated (hypothesis), through the whole pure
path of a cycle: kubeobserve (JSON -> observed values) -> drift.analyze -> planner.plan ->
drift.build_report -> report rendering.

The base objects are listed from the cluster twin built from inventory/ with drift injected (a
recut GPU, a pending and a failed mig-manager, a stale device-plugin config, a pod asking for a GPU
that is not there). Each case edits 1-3 of them — node labels, annotations, capacity and allocatable,
pods and their requests, the ClusterPolicy, the device-plugin DaemonSet, the mig-parted ConfigMap —
keeping each value's JSON type (the API server validated the objects against their schemas; within a
type anything goes: `1e3`, `-1`, `2Ki`, timestamps without an offset, `Infinity`), and asserts that
nothing raises but a migplan error with a code, and that every finding has a registered code.
Log lines (a device plugin's, mig-manager's) are fuzzed as free text. Derandomized for CI.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import mutations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.adapters.kube import observe as kubeobserve
from reconciler.commands.reconcile import load_desired
from reconciler.logic.drift import drift
from reconciler.logic.planning import planner
from reconciler.logic.reports.reports import render_reports
from reconciler.model.errors import MigplanError
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
DRIFT = (
    "gpu-recut:gpu-h200-02",
    "mig-config-pending:gpu-h100-01",
    "mig-config-failed:gpu-a100-01",
    "stale-device-plugin-config",
    "pod-wants-gpu",
    "undocumented-node",
)
CLUSTER_CASES = 1200
NOW = datetime(2026, 1, 1, tzinfo=UTC)
CODE = re.compile(r"^MP\d{3}$")
DESIRED, _ = load_desired(INVENTORY)
assert DESIRED is not None
OPS = DESIRED.cluster.gpu_operator


def _capture() -> dict[str, Any]:
    with ClusterTwin.from_inventory(INVENTORY, strategy="single", drift=DRIFT) as twin:
        twin.settle()
        store = twin.store
        policies = [p for p in store.list("clusterpolicies.nvidia.com") if p["metadata"]["name"] == OPS.cluster_policy]
        daemonsets = store.list("daemonsets.apps", OPS.namespace)
        daemonsets = [d for d in daemonsets if d["metadata"]["name"] == OPS.device_plugin_daemonset]
        return {
            "nodes": store.list("nodes"),
            "pods": store.list("pods"),
            "cluster_policy": policies[0] if policies else None,
            "daemonset": daemonsets[0] if daemonsets else None,
            "config_maps": {c["metadata"]["name"]: c for c in store.list("configmaps", OPS.namespace)},
        }


BASE = _capture()


@st.composite
def mutated_clusters(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    # Only what is edited is copied (mutated() copies the object it edits): the base stays as it is.
    cluster = {k: (list(v) if isinstance(v, list) else v) for k, v in BASE.items()}
    targets = ["nodes", "pods", "cluster_policy", "daemonset", "config_maps"]
    for target in draw(st.lists(st.sampled_from(targets), min_size=1, max_size=3)):
        if cluster[target] is None:
            continue
        if target in ("nodes", "pods") and cluster[target]:
            i = draw(st.integers(0, len(cluster[target]) - 1))
            cluster[target][i] = draw(mutations.mutated(cluster[target][i], typed=True))
        else:
            cluster[target] = draw(mutations.mutated(cluster[target], typed=True))
    logs = (draw(st.text(max_size=60)), draw(st.sampled_from(mutations.NASTY_STRINGS)))
    return cluster, logs[0], logs[1]


def _observe(cluster: dict[str, Any], dp_log: str, mm_log: str) -> Any:
    config_maps = cluster["config_maps"] if isinstance(cluster["config_maps"], dict) else {}

    def config_map(name: str) -> Any:
        found = config_maps.get(name)
        return found if isinstance(found, dict) else None

    return kubeobserve.observed_state(
        OPS,
        nodes=cluster["nodes"],
        pods=cluster["pods"],
        cluster_policy=cluster["cluster_policy"],
        daemonset=cluster["daemonset"],
        config_map=config_map,
        device_plugin_log=lambda pod: kubeobserve.quote_log(dp_log, ("more than one MIG device type",)),
        mig_manager_log=lambda pod: kubeobserve.mig_manager_error(mm_log),
        max_log_reads=100,
    )


def test_the_unmutated_capture_goes_through_and_shows_the_injected_drift() -> None:
    observed = _observe(BASE, "", "")
    analysis = drift.analyze(DESIRED, observed, now=NOW)
    codes = {f.code for f in analysis.findings}
    # The base is not trivially in sync: the fuzz starts from a cluster with things to say.
    assert {"MP502", "MP507", "MP511"} <= codes, codes


@pytest.mark.timeout(120)
@settings(
    max_examples=CLUSTER_CASES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=mutated_clusters())
def test_mutated_cluster_objects_never_crash_the_cycle(case: tuple[dict[str, Any], str, str]) -> None:
    cluster, dp_log, mm_log = case
    assert DESIRED is not None
    try:
        observed = _observe(cluster, dp_log, mm_log)
        analysis = drift.analyze(DESIRED, observed, now=NOW)
        the_plan = planner.plan(DESIRED, observed, now=NOW, rendered=analysis.rendered)
        report = drift.build_report(DESIRED, observed, analysis, the_plan)
        render_reports(report)
    except MigplanError as exc:  # a registered error value is an answer, not a crash
        assert CODE.match(exc.code), exc.code
        return
    assert {f.code for f in report.findings} <= set(drift.FINDING_CODES)
    # Only nodes of the inventory are ever written to.
    written = {c.subject.split("/")[1] for c in the_plan.writes if c.subject.startswith("node/")}
    assert written <= set(DESIRED.nodes)
