"""The merge-request view a reviewer reads: the article's node re-cut while pods run, with the pods taken
from the drift report committed on the reports branch (no cluster credentials), the capacity delta, the
verbs reconcile really applies, the comment's size cap and escaping, several clusters in one repository."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from gitserver import cluster_yaml, git, node_yaml

from reconciler.cli import cli
from reconciler.logic.reports.reports import render_drift_yaml
from reconciler.model.drift import DriftReport, Holder, NodeReport, NodeStatus, Occupancy
from reconciler.model.revisions import Revision

INVENTORY = Path(__file__).parents[2] / "inventory"

# The article's node, GPU 0 re-cut: its 3g.71gb goes, two 2g.35gb and three 1g.18gb take its place.
RECUT = """apiVersion: migplan/v1
kind: Node
metadata:
  name: gpu-h200-01
spec:
  gpus:
    - index: 0
      model: H200-141GB
      mig:
        enabled: true
        partitions:
          - {profile: 2g.35gb, owner: embeddings}
          - {profile: 2g.35gb, owner: whisper}
          - {profile: 1g.18gb, owner: reranker}
          - {profile: 1g.18gb}
          - {profile: 1g.18gb}
    - index: 1
      model: H200-141GB
      mig:
        enabled: true
        partitions:
          - {profile: 3g.71gb, owner: vllm-llama-70b, purpose: chat inference (prod replica)}
          - {profile: 2g.35gb, owner: whisper, purpose: speech to text}
          - {profile: 1g.18gb, owner: guardrails, purpose: prompt safety classifier}
          - {profile: 1g.18gb, owner: ci-gpu-tests, purpose: CI smoke tests}
"""


def _report(revision: Revision) -> bytes:
    """What the controller commits: the real drift.yaml writer over an occupancy with running pods."""

    def occ(node: str, profile: str, total: int, holders: list[tuple[str, str | None]]) -> Occupancy:
        hs = tuple(Holder(pod=p, count=1, owner=o) for p, o in holders)
        return Occupancy(node=node, profile=profile, total=total, used=len(hs), holders=hs)

    nodes = (
        NodeReport("gpu-h200-01", NodeStatus.IN_SYNC, occupancy=(
            occ("gpu-h200-01", "3g.71gb", 2, [("inference/vllm-llama-70b-7d9f-abcde", "vllm-llama-70b")]),
            occ("gpu-h200-01", "2g.35gb", 2, [("search/embeddings-0", "embeddings")]),
            occ("gpu-h200-01", "1g.18gb", 4, [("search/reranker-5c6d-xyz12", "reranker")]),
        )),
        NodeReport("gpu-h200-02", NodeStatus.IN_SYNC, occupancy=(
            occ("gpu-h200-02", "3g.71gb", 2, [("pool/inference-a", None), ("pool/inference-b", None)]),
        )),
    )  # fmt: skip
    return render_drift_yaml(DriftReport("par1-prod", revision, "mixed", nodes))


def _commit_report(work: Path, data: bytes, *, age_s: int) -> str:
    when = f"{int(time.time()) - age_s} +0000"
    env = {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
    git("checkout", "-q", "--orphan", "migplan-reports", cwd=work)
    git("rm", "-rq", "--cached", ".", cwd=work)
    side = work / "reports"
    side.mkdir(exist_ok=True)
    (side / "drift.yaml").write_bytes(data)
    git("add", "reports/drift.yaml", cwd=work)
    git("commit", "-q", "-m", "drift report", cwd=work, env=env)
    sha = git("rev-parse", "HEAD", cwd=work)
    shutil.rmtree(side)
    git("checkout", "-q", "-f", "main", cwd=work)
    return sha


@pytest.fixture()
def article(tmp_path: Path) -> tuple[Path, str]:
    """The embedded example inventory at the top level of a repository; `feature` re-cuts gpu-h200-01."""
    work = tmp_path / "inv"
    shutil.copytree(INVENTORY, work)
    git("init", "-q", "-b", "main", str(work))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "base", cwd=work)
    base = git("rev-parse", "HEAD", cwd=work)
    git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "nodes/gpu-h200-01.yaml").write_text(RECUT)
    git("commit", "-q", "-am", "re-cut gpu-h200-01 GPU 0", cwd=work)
    git("checkout", "-q", "main", cwd=work)
    return work, base


def _plan(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["plan", *args])
    return result.exit_code, result.stdout, result.stderr


def test_the_article_recut_names_the_pods_from_the_committed_report(article: tuple[Path, str]) -> None:
    work, base = article
    report_sha = _commit_report(work, _report(Revision("main", base)), age_s=2 * 3600 + 300)
    code, comment, err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment")
    assert code == 0, err
    # which report, against which revision, how old
    assert f"`{report_sha[:12]}`" in comment and "**2 h 5 min old**" in comment and f"main@sha1:{base}" in comment
    assert "`migplan-reports`" in comment
    # the whole GPU 0 is re-cut under the mig-parted model: every pod on it is named
    row = next(line for line in comment.splitlines() if line.startswith("| `gpu-h200-01`"))
    assert "mig-parted re-cuts GPU 0: every partition of it is replaced" in row
    for pod in ("inference/vllm-llama-70b-7d9f-abcde", "search/embeddings-0", "search/reranker-5c6d-xyz12"):
        assert pod in row
    assert "**3** pod(s) would lose their devices" in comment
    # capacity: before -> after, and the last free 3g.71gb
    assert "| `3g.71gb` | 4 → 3 | 0 (was 1): **this merge removes the last free 3g.71gb** |" in comment
    assert "| `1g.18gb` | 8 → 9 |" in comment and "| vllm\\-llama\\-70b | 2 → 1 |" not in comment
    assert "| vllm-llama-70b | 2 → 1 |" in comment
    # per node in a collapsed block
    assert "<details><summary><code>gpu-h200-01</code>: " in comment and comment.count("</details>") == 1
    code, out, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "json")
    doc = json.loads(out)
    assert doc["pods_from"]["report_commit"] == report_sha and doc["pods_from"]["report_branch"] == "migplan-reports"
    assert sorted(doc["disruption"]["pods"]) == [
        "inference/vllm-llama-70b-7d9f-abcde", "search/embeddings-0", "search/reranker-5c6d-xyz12",
    ]  # fmt: skip
    (p3g,) = [p for p in doc["capacity"]["profiles"] if p["profile"] == "3g.71gb"]
    assert p3g == {"profile": "3g.71gb", "before": 4, "after": 3, "free_before": 1, "free_after": 0,
                   "last_free_removed": True}  # fmt: skip


def test_no_reports_branch_says_the_pods_are_unknown(article: tuple[Path, str]) -> None:
    work, _base = article
    code, comment, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment")
    assert code == 0 and "Pods: not known (no drift report on the reports branch and no --kubeconfig)." in comment
    assert "(no usage known" in comment
    code, comment, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment",
                                "--reports-from-git")  # fmt: skip
    assert code == 0 and "no reports branch 'migplan-reports' in the repository" in comment


@pytest.mark.parametrize(
    "damage",
    [
        b"a: &x [1]\nb: *x\n",  # aliases: never written by migplan
        b"kind: DriftReport\nnodes: " + b"[" * 40 + b"]" * 40 + b"\n",
        b"\xff\xfe not yaml",
        b"- just\n- a list\n",
    ],
)
def test_a_damaged_report_is_mp746_and_the_plan_goes_on(article: tuple[Path, str], damage: bytes) -> None:
    work, _base = article
    _commit_report(work, damage, age_s=60)
    code, comment, err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment")
    assert code == 0, err
    assert "MP746" in comment and "Pods: not known" in comment and "Traceback" not in comment + err


def test_hostile_holders_are_skipped_and_strings_escaped(article: tuple[Path, str]) -> None:
    work, base = article
    doc = _report(Revision("main", base)).decode()
    doc = doc.replace("search/embeddings-0", "search/x|<img src=x>@team")  # not a pod name: skipped
    _commit_report(work, doc.encode(), age_s=60)
    code, comment, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment")
    assert code == 0 and "<img" not in comment and "@team" not in comment
    assert "**2** pod(s) would lose their devices" in comment


def test_removed_renamed_and_layout_changes_in_words(tmp_path: Path) -> None:
    work = tmp_path / "inv"
    git("init", "-q", "-b", "main", str(work))
    shutil.copytree(INVENTORY / "layouts", work / "layouts")
    (work / "nodes").mkdir()
    (work / "cluster.yaml").write_text(cluster_yaml())
    for name in ("gpu-0", "gpu-1", "old-name"):
        (work / f"nodes/{name}.yaml").write_text(node_yaml(name, owner=f"team-{name}"))
    layout_user = (INVENTORY / "nodes/gpu-h200-02.yaml").read_text()
    (work / "nodes/gpu-h200-02.yaml").write_text(layout_user)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "base", cwd=work)
    (work / "nodes/gpu-1.yaml").unlink()
    (work / "nodes/old-name.yaml").rename(work / "nodes/new-name.yaml")
    (work / "nodes/new-name.yaml").write_text(node_yaml("new-name", owner="team-old-name"))
    layout = work / "layouts/h200-balanced.yaml"
    layout.write_text(layout.read_text().replace("purpose: shared inference pool}", "owner: pool-a}", 1))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "change", cwd=work)
    code, comment, err = _plan("--repo", str(work), "--from", "HEAD~1", "--to", "HEAD", "-o", "comment")
    assert code == 0, err
    assert (
        "| `gpu-1` | removed from the inventory: migplan stops managing it; nothing on it is destroyed | — |" in comment
    )
    assert "| `old-name` → `new-name` | renamed (same GPUs, partitions and owners): nothing re-cut | — |" in comment
    assert "layout `h200-balanced` changed: it affects 2 GPU(s) on 1 node(s) (`gpu-h200-02`)" in comment
    assert "<summary><code>gpu-1</code>" not in comment and "<summary><code>new-name</code>" not in comment
    code, out, _err = _plan("--repo", str(work), "--from", "HEAD~1", "--to", "HEAD", "-o", "json")
    doc = json.loads(out)
    assert doc["renamed"] == [{"from": "old-name", "to": "new-name"}] and doc["nodes_removed"] == ["gpu-1"]
    assert doc["summary"]["destroy"] == 0 and doc["layouts"][0]["nodes"] == ["gpu-h200-02"]
    assert {c["node"] for c in doc["changes"]} == {"gpu-h200-02"}  # the owner given by the layout


def _multi_repo(tmp_path: Path) -> Path:
    work = tmp_path / "multi"
    git("init", "-q", "-b", "main", str(work))
    for cluster in ("prod", "staging"):
        root = work / "clusters" / cluster
        (root / "nodes").mkdir(parents=True)
        (root / "cluster.yaml").write_text(cluster_yaml().replace("name: test", f"name: {cluster}"))
        (root / "nodes/gpu-0.yaml").write_text(node_yaml("gpu-0"))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "two clusters", cwd=work)
    git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "clusters/staging/nodes/gpu-0.yaml").write_text(node_yaml("gpu-0", owner="new-team"))
    git("commit", "-q", "-am", "staging owner", cwd=work)
    return work


def test_several_clusters_one_section_each(tmp_path: Path) -> None:
    work = _multi_repo(tmp_path)
    code, comment, err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment")
    assert code == 0, err
    assert "### migplan plan — cluster `prod` (`clusters/prod`)" in comment
    assert "### migplan plan — cluster `staging` (`clusters/staging`)" in comment
    code, out, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "json")
    doc = json.loads(out)
    assert [r["root"] for r in doc["roots"]] == ["clusters/prod", "clusters/staging"]
    assert [r["summary"]["owner"] for r in doc["roots"]] == [0, 1]
    # one invalid root makes the whole answer invalid (exit 1), the other is still planned
    (work / "clusters/prod/nodes/gpu-0.yaml").write_text(node_yaml("gpu-0", profile="9g.99gb"))
    git("commit", "-q", "-am", "break prod", cwd=work)
    code, comment, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment")
    assert code == 1 and "MP302" in comment and "cluster `staging`" in comment
    # --path keeps the single-root output
    code, out, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/staging")
    assert code == 0 and out.startswith("### migplan plan: ")


def test_a_roots_file_lists_the_clusters(tmp_path: Path) -> None:
    work = _multi_repo(tmp_path)
    (work / "migplan-roots.yaml").write_text("roots: [clusters/staging]\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "only staging", cwd=work)
    code, out, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "json")
    assert code == 0 and "roots" not in json.loads(out) and json.loads(out)["summary"]["owner"] == 1
    (work / "migplan-roots.yaml").write_text("roots: [../etc]\n")
    git("commit", "-q", "-am", "bad roots", cwd=work)
    code, _out, err = _plan("--repo", str(work), "--from", "main", "--to", "feature")
    assert code == 2 and "MP747" in err


def test_comment_escapes_every_user_string(tmp_path: Path) -> None:
    work = tmp_path / "inv"
    git("init", "-q", "-b", "main", str(work))
    (work / "nodes").mkdir()
    (work / "cluster.yaml").write_text(cluster_yaml())
    (work / "nodes/gpu-0.yaml").write_text(node_yaml("gpu-0"))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "base", cwd=work)
    evil = "'x</details><img src=x onerror=alert(1)>|@admins [a](http://evil)'"
    (work / "nodes/gpu-0.yaml").write_text(node_yaml("gpu-0", owner=evil))
    git("commit", "-q", "-am", "evil owner", cwd=work)
    code, comment, _err = _plan("--repo", str(work), "--from", "HEAD~1", "--to", "HEAD", "-o", "comment")
    # The owner is refused (MP205), and the message quoting it is inert Markdown: no HTML, no link, no mention.
    assert code == 1 and "MP205" in comment
    assert "<img" not in comment and "&lt;img" in comment and "</details>" not in comment
    assert "[a](" not in comment and "\\[a\\](http" in comment and "@admins" not in comment


def _validate(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["validate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_validate_finds_every_root_of_a_revision_and_of_a_directory(tmp_path: Path) -> None:
    work = _multi_repo(tmp_path)
    code, out, err = _validate("--repo", str(work), "--rev", "feature")
    assert code == 0, err
    assert "# inventory root clusters/prod\n" in out and "# inventory root clusters/staging\n" in out
    assert out.endswith("2 inventory roots: 2 valid, 0 invalid\n")
    (work / "clusters/prod/nodes/gpu-0.yaml").write_text(node_yaml("gpu-0", profile="9g.99gb"))
    git("commit", "-q", "-am", "break prod", cwd=work)
    code, out, _err = _validate("--repo", str(work), "--rev", "feature", "-o", "json")
    doc = json.loads(out)
    assert code == 1 and doc["valid"] is False and [r["valid"] for r in doc["roots"]] == [False, True]
    assert [(e["code"], e["file"]) for e in doc["errors"]] == [("MP302", "clusters/prod/nodes/gpu-0.yaml")]
    code, out, _err = _validate("--repo", str(work), "--rev", "feature", "-o", "github")
    assert code == 1 and "::error file=clusters/prod/nodes/gpu-0.yaml,line=" in out
    code, out, _err = _validate("--repo", str(work), "--rev", "feature", "-o", "codequality")
    assert [i["location"]["path"] for i in json.loads(out) if i["check_name"] == "MP302"] == [
        "clusters/prod/nodes/gpu-0.yaml"
    ]
    # the work tree (checked out at feature) as a directory: same roots, same verdict
    code, out, _err = _validate(str(work))
    assert code == 1 and "# inventory root clusters/prod" in out and "2 inventory roots: 1 valid, 1 invalid" in out
    # --path keeps the single-root output
    code, out, _err = _validate("--repo", str(work), "--rev", "feature", "--path", "clusters/staging")
    assert code == 0 and "# inventory root" not in out and "inventory roots" not in out


def test_validate_refuses_a_bad_roots_file(tmp_path: Path) -> None:
    work = _multi_repo(tmp_path)
    for bad in ("roots: [/etc]\n", "roots: 3\n", "roots: [a, a]\n", "{{{\n"):
        (work / "migplan-roots.yaml").write_text(bad)
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", "roots", cwd=work)
        code, _out, err = _validate("--repo", str(work), "--rev", "feature")
        assert code == 2 and "MP747" in err, (bad, err)
        code, _out, err = _validate(str(work))
        assert code == 2 and "MP747" in err, (bad, err)


def test_the_same_report_under_the_agent_model_disrupts_only_what_changes(article: tuple[Path, str]) -> None:
    """apply.mode agent: the node agent destroys only the partitions destroyed or moved, so the embeddings
    pod (its 2g.35gb stays where it is) keeps running, where mig-parted would have re-cut the whole GPU."""
    work, base = article
    _commit_report(work, _report(Revision("main", base)), age_s=600)
    git("checkout", "-q", "feature", cwd=work)
    cluster = (work / "cluster.yaml").read_text().replace("mode: gpu-operator", "mode: agent")
    (work / "cluster.yaml").write_text(cluster)
    git("commit", "-q", "-am", "agent mode", cwd=work)
    git("checkout", "-q", "main", cwd=work)
    code, out, err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["disruption"]["model"] == "nvml" and doc["disruption"]["gpus"] == []
    assert doc["disruption"]["pods"] == ["inference/vllm-llama-70b-7d9f-abcde", "search/reranker-5c6d-xyz12"]
    code, comment, _err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment")
    assert "A **move** destroys the partition and creates it at its new place" in comment
    assert "search/embeddings-0" not in comment and "**10 min old**" in comment


def test_pods_from_the_reports_branch_of_a_remote(tmp_path: Path) -> None:
    """A remote repository (git daemon): the reports branch comes with the fetch into the cache."""
    from gitserver import GitDaemon, make_bare, seed

    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    base = seed(bare, tmp_path / "w", {"cluster.yaml": cluster_yaml(), "nodes/gpu-0.yaml": node_yaml("gpu-0")})
    occ = Occupancy("gpu-0", "3g.71gb", 1, 1, (Holder("ml/svc-a-0", 1, "svc-a"),))
    report = render_drift_yaml(
        DriftReport(
            "test", Revision("main", base), "mixed", (NodeReport("gpu-0", NodeStatus.IN_SYNC, occupancy=(occ,)),)
        )
    )
    report_sha = seed(bare, tmp_path / "w", {"reports/drift.yaml": report.decode()}, branch="migplan-reports")
    git("checkout", "-q", "main", cwd=tmp_path / "w")
    seed(bare, tmp_path / "w", {"nodes/gpu-0.yaml": node_yaml("gpu-0", owner="svc-b")}, message="owner")
    daemon = GitDaemon(srv).start()
    try:
        args = ["--repo", daemon.url("inv"), "--from", base, "--to", "main", "--cache-dir", str(tmp_path / "c")]
        code, out, err = _plan(*args, "-o", "json")
        code_c, comment, _err = _plan(*args, "-o", "comment")
    finally:
        daemon.stop()
    assert code == 0 and code_c == 0, err
    doc = json.loads(out)
    assert doc["pods_from"]["report_commit"] == report_sha and doc["pods_from"]["report_branch"] == "migplan-reports"
    assert doc["disruption"]["pods"] == []  # a new owner re-cuts nothing: svc-a's pod keeps its device
    assert "A **new owner** only changes who may use a partition" in comment and "**0** pod(s)" in comment
    assert "| svc-a | 1 → 0 |" in comment and "| svc-b | 0 → 1 |" in comment


def test_a_cluster_the_merge_request_adds_is_planned_from_nothing(tmp_path: Path) -> None:
    work = _multi_repo(tmp_path)
    root = work / "clusters/dev"
    (root / "nodes").mkdir(parents=True)
    (root / "cluster.yaml").write_text(cluster_yaml().replace("name: test", "name: dev"))
    (root / "nodes/gpu-9.yaml").write_text(node_yaml("gpu-9"))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "a dev cluster", cwd=work)
    code, comment, err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "comment")
    assert code == 0, err
    dev = comment.split("cluster `dev`", 1)[1].split("### migplan plan", 1)[0]
    assert "A **new inventory root**" in dev and "4 created" in dev
    assert "| `gpu-9` | added to the inventory: 4 partition(s) created |" in dev
    # named explicitly, a root missing at the base is still an error (exit 2)
    code, _out, err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/dev")
    assert code == 2 and "MP705" in err


def test_a_cluster_the_merge_request_adds_is_planned_from_an_empty_base(tmp_path: Path) -> None:
    work = _multi_repo(tmp_path)
    root = work / "clusters" / "edge"
    (root / "nodes").mkdir(parents=True)
    (root / "cluster.yaml").write_text(cluster_yaml().replace("name: test", "name: edge"))
    (root / "nodes/gpu-0.yaml").write_text(node_yaml("gpu-0"))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "a new cluster", cwd=work)
    code, out, err = _plan("--repo", str(work), "--from", "main", "--to", "feature", "-o", "json")
    assert code == 0, err
    roots = {r["root"]: r for r in json.loads(out)["roots"]}
    assert sorted(roots) == ["clusters/edge", "clusters/prod", "clusters/staging"]
    # Its base is the empty inventory (MP705 at --from is not an error for a discovered root): gpu-0 is added.
    assert "MP705" not in err and "MP705" not in out
    assert roots["clusters/edge"]["summary"]["create"] == 4 and roots["clusters/edge"]["nodes_added"] == ["gpu-0"]
