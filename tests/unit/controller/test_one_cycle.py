"""One cycle, one outcome: `migplan run` (the loop and `--once`), `migplan reconcile --once --repo` and
`migplan demo` all run reconciler.gitops.run_gitops_cycle and read their exit code and metrics label from
the one CycleOutcome it returns (reconciler.outcome, reconciler.model.cycles).

The entry points are driven with the cycle replaced by one that returns a given outcome (and counts its
calls), so each status of the table goes through every entry point without a cluster or a Git server;
the real cycle behind them is exercised by the integration tests (test_controller*, test_report_cadence,
test_demo, test_cache_lock).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client

from reconciler import gitops
from reconciler.cli import cli
from reconciler.controller.loop import Controller, CycleContext, CycleFailed
from reconciler.controller.metrics import ControllerMetrics
from reconciler.model.cycles import CYCLE_RESULTS, EXIT_DRIFT, EXIT_ERROR, EXIT_IN_SYNC, SKIPPED, CycleStatus, judge
from reconciler.model.errors import MigplanError
from reconciler.outcome import CycleOutcome
from reconciler.settings import load_settings
from reconciler.sourcing import SourceResult

# The whole contract, written out once: README "Commands" (0 / 1 / 2) and deploy/README.md's
# `migplan_reconcile_total{result}` values, which the alerts and the dashboard read.
TABLE = {
    CycleStatus.SUCCESS: (0, "success"),
    CycleStatus.DRIFT: (1, "drift"),
    CycleStatus.FAILED: (2, "failed"),
}


def test_the_table_covers_every_status() -> None:
    assert set(TABLE) == set(CycleStatus)
    assert (EXIT_IN_SYNC, EXIT_DRIFT, EXIT_ERROR) == (0, 1, 2)


@pytest.mark.parametrize("status", list(CycleStatus))
def test_one_mapping_to_exit_code_and_metrics_label(status: CycleStatus) -> None:
    code, label = TABLE[status]
    assert status.exit_code == code
    assert status.metric_label == label
    assert CycleOutcome(status).exit_code == code


def test_every_label_is_exported_from_the_first_scrape() -> None:
    assert CYCLE_RESULTS == ("success", "drift", "failed", "skipped")
    metrics = ControllerMetrics()
    for label in CYCLE_RESULTS:
        assert metrics.registry.get_sample_value("migplan_reconcile_total", {"result": label}) == 0.0
    metrics.count_cycle(None)
    assert metrics.registry.get_sample_value("migplan_reconcile_total", {"result": SKIPPED}) == 1.0


@pytest.mark.parametrize(
    ("failed", "converged", "behind", "status"),
    [
        (False, True, False, CycleStatus.SUCCESS),
        (False, False, False, CycleStatus.DRIFT),
        (False, True, True, CycleStatus.DRIFT),  # in sync with an older revision is not in sync
        (False, False, True, CycleStatus.DRIFT),
        (True, True, False, CycleStatus.FAILED),
        (True, False, True, CycleStatus.FAILED),
    ],
)
def test_judge(failed: bool, converged: bool, behind: bool, status: CycleStatus) -> None:
    assert judge(failed=failed, converged=converged, behind=behind) is status


# --- the outcome of a GitOps cycle, judged ----------------------------------------------------------------


@dataclass(frozen=True)
class _Failure:
    code: str
    message: str = "m"


@dataclass(frozen=True)
class _Engine:
    """The two facts of the engine's record (reconciler.engine.CycleResult) the verdict reads."""

    errors: tuple[str, ...] = ()
    converged: bool = True


def _source(**kw: Any) -> SourceResult:
    return SourceResult(desired=None, revision=None, latest=None, changed=False, **kw)


@pytest.mark.parametrize(
    ("source", "result", "errors", "status"),
    [
        (_source(), _Engine(), (), CycleStatus.SUCCESS),
        (_source(), _Engine(converged=False), (), CycleStatus.DRIFT),
        (_source(), _Engine(errors=("apply_plan: MP601: refused",)), (), CycleStatus.FAILED),
        (_source(), _Engine(), ("report: MP702: no",), CycleStatus.FAILED),  # the report lost
        (_source(), None, (), CycleStatus.FAILED),  # no revision ever validated
        (_source(source_error=_Failure("MP701")), _Engine(), (), CycleStatus.DRIFT),  # remote down: the cache
        (_source(source_error=_Failure("MP702")), _Engine(), (), CycleStatus.DRIFT),
        (_source(source_error=_Failure("MP722")), _Engine(), (), CycleStatus.FAILED),  # not the remote's
        (_source(refused=object()), _Engine(), (), CycleStatus.DRIFT),  # a newer revision refused
    ],
)
def test_a_gitops_cycle_is_judged_once(
    source: SourceResult, result: Any, errors: tuple[str, ...], status: CycleStatus
) -> None:
    outcome = CycleOutcome.of_cycle(source, result, errors=errors)
    assert outcome.status is status
    assert outcome.exit_code == TABLE[status][0]
    assert bool(outcome.failures) == (status is CycleStatus.FAILED)


def test_an_aborted_cycle_fails_with_its_code() -> None:
    class Locked(MigplanError):
        code = "MP830"

    outcome = CycleOutcome.aborted(Locked("cache directory in use"))
    assert outcome.status is CycleStatus.FAILED and outcome.exit_code == 2
    assert outcome.source is None and outcome.result is None
    assert outcome.failures == ("MP830: cache directory in use",)


# --- the entry points -------------------------------------------------------------------------------------


class _FakeCycle:
    """Stands in for reconciler.gitops.run_gitops_cycle: returns the outcome it is given, counts its calls."""

    def __init__(self, outcome: CycleOutcome) -> None:
        self.outcome = outcome
        self.calls = 0

    def __call__(self, **kw: Any) -> CycleOutcome:
        self.calls += 1
        return self.outcome


def _outcome(status: CycleStatus) -> CycleOutcome:
    # A Git source was read (so the commands render it), nothing observed: the status alone decides.
    return CycleOutcome(status, source=_source(), notes=("a note",), errors=("a step failed",) * (status == "failed"))


@pytest.fixture
def shared_cycle(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[CycleStatus], _FakeCycle]]:
    def install(status: CycleStatus) -> _FakeCycle:
        fake = _FakeCycle(_outcome(status))
        monkeypatch.setattr(gitops, "run_gitops_cycle", fake)
        return fake

    yield install


class _Cluster:
    def close(self) -> None:
        pass


@pytest.mark.parametrize("status", list(CycleStatus))
@pytest.mark.parametrize("output", ["text", "json"])
def test_reconcile_once_repo_exits_with_the_cycles_code(
    status: CycleStatus,
    output: str,
    shared_cycle: Callable[[CycleStatus], _FakeCycle],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    fake = shared_cycle(status)
    monkeypatch.setattr("reconciler.commands.reconcile._connect", lambda kubeconfig, context: _Cluster())
    argv = ["reconcile", "--once", "--repo", str(tmp_path / "repo"), "--cache-dir", str(tmp_path / "c"), "-o", output]
    got = CliRunner().invoke(cli, argv)
    assert got.exception is None or isinstance(got.exception, SystemExit), repr(got.exception)
    assert fake.calls == 1
    assert got.exit_code == TABLE[status][0], got.output
    if output == "json":
        assert json.loads(got.stdout)["exitCode"] == TABLE[status][0]


@pytest.mark.parametrize("status", list(CycleStatus))
def test_run_once_exits_with_the_cycles_code(
    status: CycleStatus,
    shared_cycle: Callable[[CycleStatus], _FakeCycle],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    fake = shared_cycle(status)
    monkeypatch.setattr("reconciler.controller.loop.kube_configuration", lambda path: client.Configuration())
    monkeypatch.setattr(gitops.GitCycle, "_kube", lambda self, api_client: _Cluster())
    argv = [
        "run",
        "--once",
        "--repo",
        str(tmp_path / "repo"),
        "--cache-dir",
        str(tmp_path / "c"),
        "--listen",
        "127.0.0.1:0",
    ]
    got = CliRunner().invoke(cli, argv, env={"MIGPLAN_DEBUG": "false"})
    assert got.exception is None or isinstance(got.exception, SystemExit), repr(got.exception)
    assert fake.calls == 1, got.output
    assert got.exit_code == TABLE[status][0], got.output
    assert got.stdout.startswith(f"{TABLE[status][1]}:"), got.stdout


@pytest.mark.parametrize("status", list(CycleStatus))
def test_the_controller_counts_the_cycle_under_its_label(
    status: CycleStatus, shared_cycle: Callable[[CycleStatus], _FakeCycle], tmp_path: Path
) -> None:
    """The loop around GitCycle: metrics label, backoff (a failed cycle raises CycleFailed and counts as
    a consecutive failure), last success, from the outcome's status alone."""
    fake = shared_cycle(status)
    settings = load_settings(
        env={},
        flags={
            "repo": str(tmp_path / "repo"),
            "cache_dir": str(tmp_path / "c"),
            "leader_election": False,
            "listen": "127.0.0.1:0",
        },
    )
    cycle = gitops.GitCycle(settings)
    cycle._kube = lambda api_client: _Cluster()  # type: ignore[method-assign]
    config = client.Configuration()
    config.host = "http://127.0.0.1:1"  # never contacted: the outcome has no report to publish
    controller = Controller(settings, cycle, kube_config=config)
    runs: list[CycleContext] = []
    seen = controller._cycle_fn

    collecting: list[bool] = []

    def spy(ctx: CycleContext) -> CycleOutcome:
        runs.append(ctx)
        collecting.append(gc.isenabled())
        return seen(ctx)

    controller._cycle_fn = spy
    if status is CycleStatus.FAILED:
        with pytest.raises(CycleFailed, match="a step failed"):
            controller._run_cycle("test")
    else:
        controller._run_cycle("test")
    assert fake.calls == 1 and len(runs) == 1
    # The collector is off while the cycle runs and back on after it, a failed cycle included (gcpolicy.py).
    assert collecting == [False] and gc.isenabled()
    sample = controller.metrics.registry.get_sample_value
    for other in CycleStatus:
        want = 1.0 if other is status else 0.0
        assert sample("migplan_reconcile_total", {"result": TABLE[other][1]}) == want
    failed = status is CycleStatus.FAILED
    assert sample("migplan_consecutive_failures") == (1.0 if failed else 0.0)
    assert (sample("migplan_last_success_timestamp_seconds") or 0.0) > 0.0 or failed
