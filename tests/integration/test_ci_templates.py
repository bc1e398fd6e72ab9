"""The shipped CI integrations, run as their CI would run them: the GitLab template's job script and the
GitHub workflow's step, in bash, in a clone of an inventory repository, posting to fake GitLab and GitHub
APIs on loopback (tests/integration/forgeapis.py). Two pushes make one comment, updated; an invalid
inventory fails the job and still updates the comment; the token is never printed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from forgeapis import FakeForge, serve
from gitserver import git, make_bare, node_yaml
from test_plan_review import INVENTORY, RECUT, _report

from reconciler.model.revisions import Revision

ROOT = Path(__file__).parents[2]
GITLAB_TEMPLATE = ROOT / "ci/gitlab/migplan.gitlab-ci.yml"
GITHUB_WORKFLOW = ROOT / ".github/workflows/migplan-review.yml"
BIN = Path(sys.executable).parent
TOKEN = "glpat-CI-SECRET-42"
GH_TOKEN = "ghs_CI_SECRET_42"


def _origin(tmp_path: Path) -> tuple[Path, Path, str]:
    """A bare `origin` with main (the example inventory), migplan-reports (a drift report with running pods)
    and feature (the article's node re-cut); returns (bare, a work clone, the base commit)."""
    bare = make_bare(tmp_path / "srv", "inv")
    work = tmp_path / "seed"
    git("clone", "-q", str(bare), str(work))
    git("checkout", "-q", "-B", "main", cwd=work)
    for entry in INVENTORY.iterdir():
        (shutil.copytree if entry.is_dir() else shutil.copy)(entry, work / entry.name)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "base", cwd=work)
    base = git("rev-parse", "HEAD", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    when = f"{int(time.time()) - 3600} +0000"
    git("checkout", "-q", "--orphan", "migplan-reports", cwd=work)
    git("rm", "-rq", "--cached", ".", cwd=work)
    (work / "reports").mkdir()
    (work / "reports/drift.yaml").write_bytes(_report(Revision("main", base)))
    git("add", "reports/drift.yaml", cwd=work)
    git("commit", "-q", "-m", "report", cwd=work, env={"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when})
    git("push", "-q", "origin", "migplan-reports", cwd=work)
    shutil.rmtree(work / "reports")
    git("checkout", "-q", "-f", "main", cwd=work)
    git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "nodes/gpu-h200-01.yaml").write_text(RECUT)
    git("commit", "-q", "-am", "re-cut gpu-h200-01", cwd=work)
    git("push", "-q", "origin", "feature", cwd=work)
    return bare, work, base


def _job_clone(bare: Path, tmp_path: Path, name: str) -> Path:
    """What a CI runner checks out: the merge request's head, detached, full history, one remote."""
    job = tmp_path / name
    if job.exists():
        shutil.rmtree(job)
    git("clone", "-q", "--no-tags", str(bare), str(job))
    git("checkout", "-q", "--detach", "origin/feature", cwd=job)
    git("update-ref", "-d", "refs/remotes/origin/migplan-reports", cwd=job)  # fetched by the script itself
    return job


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """As the runners do: bash without profiles, errexit and pipefail on (the scripts turn errexit off)."""
    path = cwd / ".ci-step.sh"
    path.write_text(script)
    full = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HOME": str(cwd), "MIGPLAN_DEBUG": "",
            "GIT_CONFIG_NOSYSTEM": "1", **env}  # fmt: skip
    try:
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)], cwd=cwd, env=full,
                              capture_output=True, text=True, timeout=240, check=False)  # fmt: skip
    finally:
        path.unlink()


def _gitlab_job() -> tuple[dict[str, str], dict[str, Any]]:
    doc = yaml.safe_load(GITLAB_TEMPLATE.read_text())
    return {k: str(v) for k, v in doc["variables"].items()}, doc["migplan-review"]


def test_the_gitlab_template_is_an_mr_job_with_a_code_quality_report() -> None:
    variables, job = _gitlab_job()
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert job["artifacts"]["reports"]["codequality"] == "gl-code-quality-report.json"
    assert job["variables"]["GIT_DEPTH"] == "0" and variables["MIGPLAN_REPORTS_BRANCH"] == "migplan-reports"
    assert "MIGPLAN_GITLAB_TOKEN" not in variables  # a masked CI/CD variable, never in the file


def test_the_gitlab_template_posts_one_note_updated_on_each_push(tmp_path: Path) -> None:
    bare, work, base = _origin(tmp_path)
    variables, job = _gitlab_job()
    script = "\n".join(job["script"])
    forge = FakeForge("gitlab", tokens={TOKEN: "project_42_bot"}, projects={"42": 7})
    forge.add("please check GPU 0", "alice")
    with serve(forge):
        env = variables | {k: str(v) for k, v in job["variables"].items()} | {
            "MIGPLAN_INSTALL": "true", "CI_API_V4_URL": forge.api_url, "CI_PROJECT_ID": "42",
            "CI_MERGE_REQUEST_IID": "7", "CI_MERGE_REQUEST_DIFF_BASE_SHA": base, "MIGPLAN_GITLAB_TOKEN": TOKEN,
        }  # fmt: skip
        job_dir = _job_clone(bare, tmp_path, "job1")
        proc = _bash(script, job_dir, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        notes = [c for c in forge.comments.values() if c["body"].startswith("<!-- migplan:plan migplan -->")]
        assert len(notes) == 1 and notes[0]["author"] == "project_42_bot"
        first = notes[0]["body"]
        assert "mig-parted re-cuts GPU 0" in first and "search/embeddings-0" in first and "**1 h 0 min old**" in first
        assert "this merge removes the last free 3g.71gb" in first
        assert json.loads((job_dir / "gl-code-quality-report.json").read_text()) == []
        assert (job_dir / "migplan-plan.md").read_text() in first
        # a second push that breaks the inventory: the job fails, the same note says so
        (work / "nodes/gpu-h200-01.yaml").write_text(RECUT.replace("1g.18gb, owner: reranker", "9g.99gb"))
        git("commit", "-q", "-am", "oops", cwd=work)
        git("push", "-q", "origin", "feature", cwd=work)
        job_dir = _job_clone(bare, tmp_path, "job2")
        proc = _bash(script, job_dir, env)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        notes = [c for c in forge.comments.values() if c["body"].startswith("<!-- migplan:plan migplan -->")]
        assert len(notes) == 1 and "Target revision: **invalid**" in notes[0]["body"] and "MP302" in notes[0]["body"]
        quality = json.loads((job_dir / "gl-code-quality-report.json").read_text())
        assert [(q["check_name"], q["location"]["path"]) for q in quality] == [("MP302", "nodes/gpu-h200-01.yaml")]
    assert len(forge.comments) == 2  # alice's and migplan's
    assert TOKEN not in proc.stdout + proc.stderr


def test_the_gitlab_template_fails_with_exit_2_on_a_refused_token(tmp_path: Path) -> None:
    bare, _work, base = _origin(tmp_path)
    variables, job = _gitlab_job()
    forge = FakeForge("gitlab", tokens={TOKEN: "bot"}, projects={"42": 7})
    with serve(forge):
        env = variables | {"MIGPLAN_INSTALL": "true", "CI_API_V4_URL": forge.api_url, "CI_PROJECT_ID": "42",
                           "CI_MERGE_REQUEST_IID": "7", "CI_MERGE_REQUEST_DIFF_BASE_SHA": base,
                           "MIGPLAN_GITLAB_TOKEN": "glpat-expired"}  # fmt: skip
        proc = _bash("\n".join(job["script"]), _job_clone(bare, tmp_path, "job"), env)
    assert proc.returncode == 2 and "MP741" in proc.stderr and "glpat-expired" not in proc.stdout + proc.stderr


def _github_step() -> tuple[dict[str, Any], dict[str, Any]]:
    doc = yaml.safe_load(GITHUB_WORKFLOW.read_text())
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads the key `on` as true
    (job,) = doc["jobs"].values()
    (step,) = [s for s in job["steps"] if "post-comment" in s.get("run", "")]
    return on, job | {"step": step}


@pytest.mark.parametrize("path", ["", "."])
def test_the_github_workflow_comments_once_and_updates(tmp_path: Path, path: str) -> None:
    on, job = _github_step()
    assert "workflow_call" in on and job["permissions"] == {"contents": "read", "pull-requests": "write"}
    step = job["step"]
    assert set(step["env"]) == {"GITHUB_TOKEN", "MIGPLAN_PATH", "MIGPLAN_REPORTS_BRANCH", "BASE_SHA"}
    bare, work, base = _origin(tmp_path)
    forge = FakeForge("github", tokens={GH_TOKEN: "github-actions[bot]"}, projects={"acme/gpu-inventory": 12})
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"number": 12, "pull_request": {"number": 12, "base": {"sha": base}}}))
    summary = tmp_path / "summary.md"
    with serve(forge):
        # GITHUB_ACTIONS=true: every GitHub-hosted or self-hosted runner sets it (docs.github.com, "Default
        # environment variables"); post-comment then knows its comments are github-actions[bot]'s.
        env = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": GH_TOKEN, "MIGPLAN_PATH": path,
               "MIGPLAN_REPORTS_BRANCH": "migplan-reports",
               "BASE_SHA": base, "GITHUB_API_URL": forge.api_url, "GITHUB_REPOSITORY": "acme/gpu-inventory",
               "GITHUB_EVENT_PATH": str(event), "GITHUB_STEP_SUMMARY": str(summary)}  # fmt: skip
        for n in (1, 2):
            if n == 2:
                (work / "nodes/gpu-h200-02.yaml").write_text(
                    (work / "nodes/gpu-h200-02.yaml").read_text().replace("rack:", "team: x, rack:")
                )
                git("commit", "-q", "-am", "label", cwd=work)
                git("push", "-q", "origin", "feature", cwd=work)
            proc = _bash(step["run"], _job_clone(bare, tmp_path, f"gh{n}"), env)
            assert proc.returncode == 0, proc.stdout + proc.stderr
    ours = [c for c in forge.comments.values() if c["body"].startswith("<!-- migplan:plan migplan -->")]
    assert len(ours) == 1 and "inference/vllm-llama-70b-7d9f-abcde" in ours[0]["body"]
    assert [r.method for r in forge.requests if r.path != "/user"] == ["GET", "POST", "GET", "PATCH"]
    assert summary.read_text().count("### migplan plan") == 2
    assert GH_TOKEN not in proc.stdout + proc.stderr


def test_the_github_workflow_annotates_errors_and_fails(tmp_path: Path) -> None:
    _on, job = _github_step()
    bare, work, base = _origin(tmp_path)
    (work / "nodes/gpu-h200-01.yaml").write_text(node_yaml("gpu-h200-01", profile="9g.99gb"))
    git("commit", "-q", "-am", "broken", cwd=work)
    git("push", "-q", "origin", "feature", cwd=work)
    forge = FakeForge("github", tokens={GH_TOKEN: "bot"}, projects={"acme/gpu-inventory": 12})
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 12}}))
    with serve(forge):
        env = {"GITHUB_TOKEN": GH_TOKEN, "MIGPLAN_PATH": "", "MIGPLAN_REPORTS_BRANCH": "migplan-reports",
               "BASE_SHA": base, "GITHUB_API_URL": forge.api_url, "GITHUB_REPOSITORY": "acme/gpu-inventory",
               "GITHUB_EVENT_PATH": str(event), "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}  # fmt: skip
        proc = _bash(job["step"]["run"], _job_clone(bare, tmp_path, "gh"), env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "::error file=nodes/gpu-h200-01.yaml,line=" in proc.stdout and "MP302" in proc.stdout
    (comment,) = forge.comments.values()
    assert "Target revision: **invalid**" in comment["body"]
