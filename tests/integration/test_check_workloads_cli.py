"""`migplan check-workloads` as users run it: files, trees and stdin, every output format, the plan from a Git
revision with free partitions from the committed report, and the live cluster (the twin) — where a manifest
that passes must schedule."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from gitserver import GitDaemon, git, make_bare
from helpers.sarif import sarif_problems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.commands.checkworkloads import live_facts, load_plan
from reconciler.logic.workloads import workloads
from reconciler.logic.workloads.manifests import read_manifests
from reconciler.twin.cluster import ClusterTwin

TESTS = Path(__file__).resolve().parents[1]
INVENTORY = TESTS.parent / "inventory"
CORPUS = TESTS / "corpus-workloads"


def _plan_named(args: tuple[str, ...]) -> list[str]:
    """The example plan, by name, unless the test names another (the command has no default plan to fall to)."""
    return list(args) if {"--inventory", "--repo"} & set(args) else ["--example", *args]


def _run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["check-workloads", *_plan_named(args)], input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout


def test_a_good_manifest_passes_and_the_corpus_fails_with_every_finding() -> None:
    code, out = _run(str(CORPUS / "good-article-pod.yaml"))
    assert code == 0, out
    assert "1 GPU workload(s) checked" in out and "0 error(s)" in out
    code, out = _run(str(CORPUS), "-o", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["ok"] is False
    files = {e["file"] for e in doc["errors"] + doc["warnings"]}
    assert f"{CORPUS.as_posix()}/mp607-count-above-one.yaml" in files  # a tree is walked, paths as given
    assert not any(f and "good-" in f for f in files), files


def test_annotation_formats_carry_the_same_codes_files_and_lines() -> None:
    _, out = _run(str(CORPUS), "-o", "json")
    doc = json.loads(out)
    want = sorted((d["code"], d["file"], d["line"]) for d in doc["errors"] + doc["warnings"])
    code, gh = _run(str(CORPUS), "-o", "github")
    assert code == 1
    got = []
    for line in gh.splitlines():
        props = dict(p.split("=", 1) for p in line.split(" ", 1)[1].split("::", 1)[0].split(","))
        got.append((props["title"], props["file"].replace("%3A", ":"), int(props["line"])))
    assert sorted(got) == want
    code, sarif = _run(str(CORPUS), "-o", "sarif")
    log = json.loads(sarif)
    assert sarif_problems(log) == []
    results = log["runs"][0]["results"]
    assert sorted(r["ruleId"] for r in results) == sorted(w[0] for w in want)
    assert {r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]} >= set(workloads.CODES)
    code, cq = _run(str(CORPUS), "-o", "codequality")
    assert sorted(i["check_name"] for i in json.loads(cq)) == sorted(w[0] for w in want)


def test_stdin_through_a_real_pipe_like_helm_template() -> None:
    rendered = (CORPUS / "mp613-replicas.yaml").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler", "check-workloads", "--example", "-"],
        input=rendered, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    out = proc.stdout.decode()
    assert proc.returncode == 1, proc.stderr.decode()
    assert "<stdin>:10: error MP613:" in out
    assert "Traceback" not in proc.stderr.decode()


def test_an_invalid_plan_is_exit_2_and_nothing_checked(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(INVENTORY, inv)
    (inv / "nodes" / "gpu-h200-01.yaml").write_text("apiVersion: migplan/v1\nkind: Node\n")
    result = CliRunner().invoke(
        cli, ["check-workloads", str(CORPUS / "good-article-pod.yaml"), "--inventory", str(inv)]
    )
    assert result.exit_code == 2
    assert "error MP621" in result.stderr and "is invalid" in result.stderr


def test_a_fifo_is_a_finding_and_never_read(tmp_path: Path) -> None:
    import os

    (tmp_path / "m").mkdir()
    os.mkfifo(tmp_path / "m" / "pipe.yaml")
    shutil.copy(CORPUS / "good-article-pod.yaml", tmp_path / "m" / "pod.yaml")
    code, out = _run(str(tmp_path / "m"), "-o", "json")
    doc = json.loads(out)
    assert code == 1 and [e["code"] for e in doc["errors"]] == ["MP600"]
    assert doc["workloads"][0]["name"] == "llama-70b"


@pytest.fixture()
def repo_with_report(tmp_path: Path) -> Iterator[str]:
    """The example inventory on main and a committed report on migplan-reports, served by git daemon."""
    root = tmp_path / "srv"
    root.mkdir()
    bare = make_bare(root, "inv")
    work = tmp_path / "work"
    shutil.copytree(INVENTORY, work)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-qm", "inventory", cwd=work)
    git("push", "-q", str(bare), "main", cwd=work)
    git("checkout", "-q", "--orphan", "migplan-reports", cwd=work)
    git("rm", "-rqf", ".", cwd=work)
    (work / "reports").mkdir()
    # Both 3g.71gb of gpu-h200-01 are taken, one of gpu-h200-02 is left.
    (work / "reports" / "drift.yaml").write_text(
        "apiVersion: migplan/v1\nkind: DriftReport\nrevision: main@sha1:0123\nnodes:\n"
        "- name: gpu-h200-01\n  occupancy:\n  - {profile: 3g.71gb, total: 2, used: 2}\n"
        "- name: gpu-h200-02\n  occupancy:\n  - {profile: 3g.71gb, total: 2, used: 1}\n"
    )
    git("add", "-A", cwd=work)
    git("commit", "-qm", "report", cwd=work)
    git("push", "-q", str(bare), "migplan-reports", cwd=work)
    daemon = GitDaemon(root).start()
    try:
        yield daemon.url("inv")
    finally:
        daemon.stop()


def test_free_partitions_from_the_committed_report(repo_with_report: str, tmp_path: Path) -> None:
    deployment = (CORPUS / "mp613-replicas.yaml").read_text().replace("replicas: 5", "replicas: 2")
    args = ["-", "--repo", repo_with_report, "--rev", "main", "--reports-from-git", "--cache-dir", str(tmp_path / "c")]
    code, out = _run(*args, stdin=deployment)
    assert code == 0, out  # a warning only: pods wait, they do not fail
    assert "warning MP614" in out and "only 1 can be placed now" in out and "gpu-h200-02 (1)" in out
    assert "the report committed at migplan-reports@sha1:" in out


def test_no_reports_branch_is_exit_2(tmp_path: Path) -> None:
    root = tmp_path / "srv"
    root.mkdir()
    bare = make_bare(root, "inv")
    work = tmp_path / "work"
    shutil.copytree(INVENTORY, work)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-qm", "inventory", cwd=work)
    git("push", "-q", str(bare), "main", cwd=work)
    daemon = GitDaemon(root).start()
    try:
        result = CliRunner().invoke(
            cli, ["check-workloads", str(CORPUS / "good-article-pod.yaml"), "--repo", daemon.url("inv"),
                  "--rev", "main", "--reports-from-git", "--cache-dir", str(tmp_path / "c")],
        )  # fmt: skip
    finally:
        daemon.stop()
    assert result.exit_code == 2 and "error MP622" in result.stderr


# --- the live cluster: the twin ----------------------------------------------------------------


@pytest.fixture(scope="module")
def twin() -> Iterator[ClusterTwin]:
    with ClusterTwin.from_inventory(INVENTORY) as t:
        t.settle()
        yield t


def test_live_free_partitions_and_labels(twin: ClusterTwin) -> None:
    # The twin's workload pods hold both 3g.71gb of gpu-h200-01 (vllm-llama-70b): 2 left on gpu-h200-02.
    deployment = (CORPUS / "mp613-replicas.yaml").read_text().replace("replicas: 5", "replicas: 3")
    code, out = _run("-", "--kubeconfig", str(twin.kubeconfig), stdin=deployment)
    assert code == 0, out
    assert "warning MP614" in out and "only 2 can be placed now" in out and "gpu-h200-02 (2)" in out


SCHEDULED: list[int] = []  # pods created by the property test (the check below keeps it from being vacuous)
_OFFERED = ["nvidia.com/mig-1g.18gb", "nvidia.com/mig-2g.35gb", "nvidia.com/mig-3g.71gb", "nvidia.com/mig-3g.20gb",
            "nvidia.com/mig-4g.40gb", "nvidia.com/gpu"]  # fmt: skip
_SELECTORS: list[dict[str, str]] = [{}, {"zone": "par1-b"}, {"zone": "par1-a"}, {"zone": "par1-c"}, {"rack": "r12"},
                                    {"zone": "nowhere"}]  # fmt: skip


def _manifest(resource: str, count: int, replicas: int, selector: dict[str, str], n: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "cuda", "resources": {"limits": {resource: str(count)}}}],
    }
    if selector:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"prop-{n}", "namespace": "default"},
        "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": f"prop-{n}"}}, "spec": spec}},
    }


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    resource=st.sampled_from(_OFFERED),
    count=st.sampled_from([1, 1, 1, 2]),
    replicas=st.integers(min_value=0, max_value=4),
    selector=st.sampled_from(_SELECTORS),
)
def test_a_manifest_that_passes_schedules_on_the_twin(
    twin: ClusterTwin, resource: str, count: int, replicas: int, selector: dict[str, str]
) -> None:
    """Property: a manifest with no capacity finding is bound whole by the twin's scheduler; one that migplan
    says will (partly) wait, MP613 or MP614, is not."""
    doc = _manifest(resource, count, replicas, selector, n=abs(hash((resource, count, replicas, str(selector)))))
    manifests, read = read_manifests(json.dumps(doc).encode(), file="m.json")
    assert not read
    _label, desired = load_plan(INVENTORY, None, None, "", None)
    nodes = live_facts(str(twin.kubeconfig), None, desired, workloads.plan_nodes(desired, load_catalog()))
    diags, _ = workloads.check_workloads(manifests, desired=desired, nodes=nodes, free_source="the cluster now")
    codes = {d.code for d in diags}
    capacity = codes & {"MP613", "MP614"}
    if replicas == 0 or "MP617" in codes or any(d.is_error and d.code != "MP613" for d in diags):
        return  # refused for another reason than capacity: nothing the scheduler can tell
    api = client.CoreV1Api(config.new_client_from_config(str(twin.kubeconfig)))
    names = [f"{doc['metadata']['name']}-{i}" for i in range(replicas)]
    pod_spec = doc["spec"]["template"]["spec"]
    try:
        for name in names:
            api.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod",
                                                  "metadata": {"name": name}, "spec": pod_spec})  # fmt: skip
        twin.settle()
        bound = {p.metadata.name: p.spec.node_name for p in api.list_namespaced_pod("default").items}
        if capacity:  # migplan said some would wait: the scheduler agrees
            assert not all(bound.get(n) for n in names), (diags, bound)
        else:  # migplan said they fit: every replica is bound
            assert all(bound.get(n) for n in names), (diags, bound)
        SCHEDULED.append(len(names))
    finally:
        for name in names:
            with contextlib.suppress(ApiException):  # not created: the assertion above says why
                api.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        twin.settle()


def test_the_property_test_created_pods() -> None:
    assert len(SCHEDULED) >= 5 and sum(SCHEDULED) >= 10, SCHEDULED
