"""A merge request's plan in CI, without a cluster, names a DRA-static node's devices and claims (issue 30 item 4).

The controller runs against the DRA-static twin (tests/helpers/drastatictwin.py: node `n`, NVIDIA's DRA driver
publishing its static MIG devices, a pod holding the 2g.35gb through a ResourceClaim) and commits its report to the
reports branch through the real adapter (reconciler.adapters.git.reports.commit_report). `migplan plan` of a revision
re-cutting GPU 1 (which destroys the 2g.35gb) then reads that report from a git:// remote with no --kubeconfig and
shows the DRA table the live plan (--kubeconfig of the twin) shows: the device by the driver's name, the claim and
its pod.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from gitserver import GitDaemon, make_bare, seed
from helpers.drastatictwin import GPU0, GPU1_CUT, GPU1_RECUT, NODE, dra_static_twin

from reconciler.adapters.git.reports import commit_report
from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
from reconciler.cli import cli
from reconciler.logic.reports.reports import render_reports


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _plan(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["plan", *args])
    return result.exit_code, result.stdout + result.stderr


def _dra_rows(comment: str) -> list[str]:
    """The DRA table's rows (device names, claims, pods) of a comment."""
    return sorted(line for line in comment.splitlines() if line.startswith(f"| `{NODE}` |") and "-mig-" in line)


def test_the_plan_from_the_committed_report_names_the_dra_devices_and_the_claim(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    work = tmp_path / "w"
    daemon = GitDaemon(srv).start()
    try:
        with dra_static_twin(tmp_path / "twin") as dra:
            (device,) = dra.claim_pod("emb-0", "2g.35gb")
            dra.observe()
            desired = dra.desired("base", [GPU0, GPU1_CUT])
            base = seed(bare, work, _files(tmp_path / "twin" / "base"))
            # the re-cut under review, the next commit of main
            recut = yaml.safe_load((tmp_path / "twin" / "base" / "nodes" / f"{NODE}.yaml").read_text())
            recut["spec"]["gpus"] = [GPU0, GPU1_RECUT]
            seed(bare, work, {f"nodes/{NODE}.yaml": yaml.safe_dump(recut)}, message="re-cut", branch="main")

            result = dra.cycle(desired, 0)
            assert not result.errors and result.report is not None
            repo = InventoryRepo.open(GitRemote(daemon.url("inv"), tmp_path / "ctl", GitAuth(), timeout_ms=5000))
            assert isinstance(repo, InventoryRepo)
            outcome = commit_report(
                repo, settings=desired.cluster.reports, files=render_reports(result.report), message="report"
            )
            assert outcome.status == "committed" and outcome.commit is not None, outcome

            args = ["--repo", daemon.url("inv"), "--from", base, "--to", "main", "-o", "comment"]
            code, live = _plan(*args, "--cache-dir", str(tmp_path / "c1"), "--kubeconfig", str(dra.twin.kubeconfig))
            assert code == 0, live
        # the cluster is gone: CI has only the repository
        code, from_report = _plan(*args, "--cache-dir", str(tmp_path / "c2"), "--reports-from-git")
        code_json, doc_text = _plan(*args[:-2], "-o", "json", "--cache-dir", str(tmp_path / "c3"))
    finally:
        daemon.stop()
    assert code == 0 and code_json == 0, from_report
    assert f"`{outcome.commit[:12]}`" in from_report  # the plan says which report it read
    rows = _dra_rows(from_report)
    (destroyed,) = [r for r in rows if device in r]
    assert "destroy" in destroyed and "default/emb-0-gpu" in destroyed and "default/emb-0" in destroyed
    assert rows == _dra_rows(live) and rows  # the same table as the live plan's
    doc = json.loads(doc_text)
    assert doc["dra"]["claims"] == ["default/emb-0-gpu"] and doc["dra"]["pods"] == ["default/emb-0"]
    assert doc["dra"]["warnings"] == []  # the minors came with the report: no MP749
    assert device in {d["device"] for d in doc["dra"]["devices"] if d["change"] == "destroy"}
