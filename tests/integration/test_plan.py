"""`migplan plan --repo R --from A --to B`: the merge-request view, from real Git revisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from gitserver import GitDaemon, cluster_yaml, git, make_bare, node_yaml, seed

from reconciler.cli import cli

MOVED = """apiVersion: migplan/v1
kind: Node
metadata: {name: gpu-1}
spec:
  gpus:
    - index: 0
      model: H200-141GB
      mig:
        enabled: true
        partitions:
          - {profile: 3g.71gb, placement: 4, owner: svc-a}
          - {profile: 2g.35gb, placement: 2, owner: embeddings}
          - {profile: 1g.18gb, placement: 0}
          - {profile: 1g.18gb, placement: 1}
"""


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    work = tmp_path / "inv"
    git("init", "-q", "-b", "main", str(work))
    files = {"clusters/a/cluster.yaml": cluster_yaml()}
    files |= {f"clusters/a/nodes/gpu-{i}.yaml": node_yaml(f"gpu-{i}") for i in range(3)}
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "base", cwd=work)
    base = git("rev-parse", "HEAD", cwd=work)
    git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "clusters/a/nodes/gpu-0.yaml").write_text(node_yaml("gpu-0", owner="llama-405b"))
    (work / "clusters/a/nodes/gpu-1.yaml").write_text(MOVED)
    (work / "clusters/a/nodes/gpu-2.yaml").unlink()
    (work / "clusters/a/nodes/gpu-3.yaml").write_text(node_yaml("gpu-3", owner="svc-b"))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "feature", cwd=work)
    return work, base, git("rev-parse", "HEAD", cwd=work)


def _plan(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["plan", *args])
    return result.exit_code, result.output


def test_plan_markdown_lists_each_kind_of_change(repo: tuple[Path, str, str]) -> None:
    work, base, head = repo
    code, out = _plan("--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/a")
    assert code == 0, out
    assert f"main@sha1:{base}" in out and f"feature@sha1:{head}" in out
    assert "Target revision: **valid**" in out
    # Grouped by node as the merge-request comment is: one row per node, then each node's changes under it.
    assert "| `gpu-0` | 1 owner change(s), nothing re-cut for them" in out
    gpu0 = out.split("`gpu-0`: 1 partition change(s)", 1)[1].split("`gpu-1`:", 1)[0]
    assert "|     0 | new owner | 3g.71gb   | 4:4" in gpu0 and "svc-a → llama-405b" in gpu0
    gpu1 = out.split("`gpu-1`: 3 partition change(s)", 1)[1].split("`gpu-3`:", 1)[0]
    assert "|     0 | move     | 2g.35gb   | 0:2 → 2:2" in gpu1
    # gpu-2 leaves the inventory: migplan stops managing it and destroys nothing there
    assert "`gpu-2`: " not in out and out.split("`gpu-3`: 4 partition change(s)", 1)[1].count("| create") == 4
    # gpu-1 only moves partitions: under gpu-operator that will not happen, said as a warning with the way out
    assert "| nodes/gpu-1.yaml:12 | MP414  | node gpu-1 GPU 0: placement-only change" in out
    assert "set spec.apply.mode: agent" in out and "Target revision: **valid** (1 warning(s))." in out
    assert "node `gpu-3` added" in out
    assert "node `gpu-2` removed from the inventory: migplan stops managing it; nothing on it is destroyed" in out
    assert "4 created, 0 destroyed, 3 moved, 1 owner change(s) on 3 GPU(s)" in out


def test_plan_json(repo: tuple[Path, str, str]) -> None:
    work, _base, _head = repo
    code, out = _plan("--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/a", "-o", "json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["valid"] is True and doc["errors"] == []
    assert doc["summary"] == {"create": 4, "destroy": 0, "move": 3, "owner": 1, "gpus": 3}
    assert [(w["code"], w["file"], w["line"]) for w in doc["warnings"]] == [("MP414", "nodes/gpu-1.yaml", 12)]
    owner = [c for c in doc["changes"] if c["change"] == "owner"]
    assert owner == [
        {
            "node": "gpu-0",
            "gpu": 0,
            "change": "owner",
            "profile": "3g.71gb",
            "before": {"start": 4, "size": 4},
            "after": {"start": 4, "size": 4},
            "owner_before": "svc-a",
            "owner_after": "llama-405b",
        }
    ]


def test_plan_same_revision_is_empty(repo: tuple[Path, str, str]) -> None:
    work, base, _head = repo
    code, out = _plan("--repo", str(work), "--from", "main", "--to", base, "--path", "clusters/a")
    assert code == 0 and "No partition changes." in out


def test_plan_invalid_target_exits_1_with_errors(repo: tuple[Path, str, str]) -> None:
    work, _base, _head = repo
    (work / "clusters/a/nodes/gpu-0.yaml").write_text(node_yaml("gpu-0", profile="9g.99gb"))
    git("commit", "-q", "-am", "broken", cwd=work)
    code, out = _plan("--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/a")
    assert code == 1, out
    assert "Target revision: **invalid**" in out and "nodes/gpu-0.yaml:" in out and "MP302" in out
    code, out = _plan("--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/a", "-o", "json")
    doc = json.loads(out)
    assert code == 1 and doc["valid"] is False and doc["errors"][0]["file"] == "nodes/gpu-0.yaml"
    assert "changes" not in doc


def test_plan_unknown_revision_or_root_exits_2(repo: tuple[Path, str, str]) -> None:
    work, _base, _head = repo
    code, out = _plan("--repo", str(work), "--from", "main", "--to", "nope", "--path", "clusters/a")
    assert code == 2 and "MP704" in out
    code, out = _plan("--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/zz")
    assert code == 2 and "MP705" in out


def test_plan_from_a_remote(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    base = seed(bare, tmp_path / "w", {"cluster.yaml": cluster_yaml(), "nodes/gpu-0.yaml": node_yaml("gpu-0")})
    seed(bare, tmp_path / "w", {"nodes/gpu-0.yaml": node_yaml("gpu-0", owner="other")}, message="owner")
    daemon = GitDaemon(srv).start()
    try:
        code, out = _plan(
            "--repo",
            daemon.url("inv"),
            "--from",
            base,
            "--to",
            "main",
            "--cache-dir",
            str(tmp_path / "c"),
            "-o",
            "json",
        )
    finally:
        daemon.stop()
    assert code == 0, out
    assert json.loads(out)["summary"]["owner"] == 1


def _pod(name: str, node: str, resource: str, app: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: "1"}}}],
        },
    }


def _plan_against_pods(work: Path, tmp_path: Path) -> tuple[int, str, int, str]:
    from reconciler.twin.apiserver import ApiServerTwin

    with ApiServerTwin() as api:
        for node in ("gpu-0", "gpu-1", "gpu-2"):
            api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        # embeddings holds gpu-1's 2g (moved) and gpu-2's 2g (destroyed); svc-a holds gpu-0's 3g (new owner only)
        for name, node, res, app in (
            ("emb-1", "gpu-1", "nvidia.com/mig-2g.35gb", "embeddings"),
            ("emb-2", "gpu-2", "nvidia.com/mig-2g.35gb", "embeddings"),
            ("svc-a", "gpu-0", "nvidia.com/mig-3g.71gb", "svc-a"),
        ):
            api.store.create("pods", _pod(name, node, res, app), namespace="default")
            api.store.patch("pods", name, {"status": {"phase": "Running"}}, namespace="default", subresource="status")
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        args = ["--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/a"]
        code, out = _plan(*args, "--kubeconfig", str(kubeconfig), "-o", "json")
        code_md, md = _plan(*args, "--kubeconfig", str(kubeconfig))
    return code, out, code_md, md


def test_plan_with_kubeconfig_names_the_pods_disrupted_in_agent_mode(
    repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    """apply.mode agent: the node agent destroys exactly the partitions destroyed or moved (the finer model)."""
    work, _base, _head = repo
    (work / "clusters/a/cluster.yaml").write_text(
        cluster_yaml().replace("  migStrategy: mixed\n", "  migStrategy: mixed\n  apply: {mode: agent}\n")
    )
    git("commit", "-q", "-am", "agent mode", cwd=work)
    code, out, code_md, md = _plan_against_pods(work, tmp_path)
    assert code == 0, out
    doc = json.loads(out)
    assert doc["disruption"]["model"] == "nvml" and doc["disruption"]["gpus"] == []
    disrupted = {(c["node"], c["change"], c["profile"]): c["disrupts"] for c in doc["changes"] if c["disrupts"]}
    # emb-2 runs on gpu-2, which leaves the inventory: nothing is destroyed there
    assert disrupted == {("gpu-1", "move", "2g.35gb"): ["default/emb-1"]}
    assert code_md == 0 and "Pods disrupted by this change: **1**" in md and "default/emb-1" in md
    assert "default/emb-2" not in md
    assert "Disruption model: **nvml**" in md
    # the live pods give the capacity delta its usage, counted as the drift report counts it
    assert doc["capacity"]["usage_known"] is True and "asked live of the cluster" in md
    (p2g,) = [p for p in doc["capacity"]["profiles"] if p["profile"] == "2g.35gb"]
    assert (p2g["before"], p2g["after"], p2g["free_before"], p2g["free_after"]) == (3, 3, 1, 2)


def test_plan_with_kubeconfig_uses_the_mig_parted_model_in_gpu_operator_mode(
    repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    """apply.mode gpu-operator: mig-parted applies counts, not placements, so gpu-1's move is not applied and
    disrupts nobody; gpu-2 leaves the inventory and is not relabelled. The output says which model applies."""
    work, _base, _head = repo
    code, out, code_md, md = _plan_against_pods(work, tmp_path)
    assert code == 0 and code_md == 0, out
    doc = json.loads(out)
    assert doc["disruption"]["model"] == "mig-parted"
    assert doc["disruption"]["not_applied"] == [{"node": "gpu-1", "gpu": 0}]
    assert doc["disruption"]["pods"] == [] and all(c["disrupts"] == [] for c in doc["changes"])
    assert "Disruption model: **mig-parted**" in md and "Pods disrupted by this change: **0**" in md
    assert "`gpu-1` GPU 0: placement-only change" in md


def test_plan_with_unreachable_cluster_exits_2(repo: tuple[Path, str, str], tmp_path: Path) -> None:
    work, _base, _head = repo
    code, out = _plan(
        "--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/a",
        "--kubeconfig", str(tmp_path / "missing-kubeconfig"),
    )  # fmt: skip
    assert code == 2 and "cannot observe the cluster" in out


def test_plan_attaches_before_and_after_maps_of_the_changed_gpus(
    repo: tuple[Path, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re
    import xml.etree.ElementTree as ET

    work, base, head = repo
    monkeypatch.chdir(tmp_path)
    code, out = _plan(
        "--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/a", "--maps-dir", "plan-maps"
    )
    assert code == 0, out
    links = re.findall(r"!\[(before|after) (gpu-\d) GPU 0\]\(([^)]+)\)", out)
    # gpu-0 (new owner) and gpu-1 (moved): both sides; gpu-3 added: after only; gpu-2 removed: unchanged, no map
    assert links == [
        ("before", "gpu-0", "plan-maps/gpu-0-gpu0-before.svg"),
        ("after", "gpu-0", "plan-maps/gpu-0-gpu0-after.svg"),
        ("before", "gpu-1", "plan-maps/gpu-1-gpu0-before.svg"),
        ("after", "gpu-1", "plan-maps/gpu-1-gpu0-after.svg"),
        ("after", "gpu-3", "plan-maps/gpu-3-gpu0-after.svg"),
    ]
    assert sorted(p.name for p in (tmp_path / "plan-maps").iterdir()) == sorted(Path(x[2]).name for x in links)
    svg = "{http://www.w3.org/2000/svg}"
    after = ET.parse(tmp_path / "plan-maps/gpu-0-gpu0-after.svg").getroot()
    assert (after.findtext(f"{svg}title") or "").endswith(f"after: feature@sha1:{head}")
    titles = [t.text or "" for g in after.iter(f"{svg}g") for t in g.findall(f"{svg}title")]
    assert any(t.startswith("3g.71gb: memory slices 4-7 of 8; owner llama-405b") for t in titles)
    before = ET.parse(tmp_path / "plan-maps/gpu-0-gpu0-before.svg").getroot()
    assert (before.findtext(f"{svg}title") or "").endswith(f"before: main@sha1:{base}")
    assert not any("held" in t or "free" in t for t in titles)  # no occupancy claimed between revisions


def test_an_owner_change_of_a_partition_still_held_says_who_keeps_it(
    repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    """gpu-0's 3g goes from svc-a to llama-405b while svc-a's pod runs on it: nothing is re-cut, so that pod keeps
    the device until it ends and llama-405b's pods cannot have it before. The plan says so, in every format."""
    work, _base, _head = repo
    code, out, code_md, md = _plan_against_pods(work, tmp_path)
    assert code == 0 and code_md == 0, out
    doc = json.loads(out)
    (owner,) = [c for c in doc["changes"] if c["change"] == "owner"]
    assert owner["held_by"] == ["default/svc-a"] and owner["disrupts"] == []
    assert all("held_by" not in c for c in doc["changes"] if c["change"] != "owner")
    assert "owner change of a partition still held by 1: default/svc-a: it keeps the device until it ends" in md
    gpu0 = md.split("`gpu-0`: 1 partition change(s)", 1)[1].split("`gpu-1`:", 1)[0]
    assert "held by default/svc-a: keeps it" in gpu0


def _mig_device(name: str, profile: str) -> dict[str, object]:
    attrs = {"type": "mig", "profile": profile, "parentUUID": "GPU-1", "productName": "NVIDIA H200"}
    return {"name": name, "attributes": {k: {"string": v} for k, v in attrs.items()}}


def test_plan_with_kubeconfig_names_the_devices_and_claims_of_a_dra_static_node(
    repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    """gpu-1 is a DRA-static node (NVIDIA's DRA driver publishes its MIG devices); its 2g.35gb, moved, is allocated
    to claim ml/emb: the plan names each device destroyed and created as the driver does, and that claim's pod."""
    from reconciler.twin.apiserver import ApiServerTwin

    work, _base, _head = repo
    (work / "clusters/a/cluster.yaml").write_text(
        cluster_yaml().replace("  migStrategy: mixed\n", "  migStrategy: mixed\n  apply: {mode: agent}\n")
    )
    git("commit", "-q", "-am", "agent mode", cwd=work)
    published = [("gpu-0-mig-3g71gb-9-4", "3g.71gb"), ("gpu-0-mig-2g35gb-14-0", "2g.35gb")]
    published += [("gpu-0-mig-1g18gb-19-2", "1g.18gb"), ("gpu-0-mig-1g18gb-19-3", "1g.18gb")]
    with ApiServerTwin() as api:
        for node in ("gpu-0", "gpu-1"):
            api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        spec = {"driver": "gpu.nvidia.com", "nodeName": "gpu-1", "pool": {"name": "gpu-1", "generation": 1,
                "resourceSliceCount": 1}, "devices": [_mig_device(n, p) for n, p in published]}  # fmt: skip
        api.store.create("resourceslices.resource.k8s.io", {"metadata": {"name": "gpu-1-s"}, "spec": spec})
        api.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        claim = {"metadata": {"name": "emb"}, "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}}}  # fmt: skip
        api.store.create("resourceclaims.resource.k8s.io", claim, namespace="ml")
        result = {"request": "r", "driver": "gpu.nvidia.com", "pool": "gpu-1", "device": "gpu-0-mig-2g35gb-14-0"}
        status = {"allocation": {"devices": {"results": [result]}},
                  "reservedFor": [{"resource": "pods", "name": "emb-pod", "uid": "u1"}]}  # fmt: skip
        api.store.patch("resourceclaims.resource.k8s.io", "emb", {"status": status}, "ml", subresource="status")
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        args = ["--repo", str(work), "--from", "main", "--to", "feature", "--path", "clusters/a"]
        code, out = _plan(*args, "--kubeconfig", str(kubeconfig), "-o", "json")
        code_md, md = _plan(*args, "--kubeconfig", str(kubeconfig))
        code_c, comment = _plan(*args, "--kubeconfig", str(kubeconfig), "-o", "comment")
    assert code == 0 and code_md == 0 and code_c == 0, out + md + comment
    dra = json.loads(out)["dra"]
    assert dra["nodes"] == ["gpu-1"] and dra["claims"] == ["ml/emb"] and dra["pods"] == ["ml/emb-pod"]
    changes = {(d["change"], d["device"]) for d in dra["devices"]}
    assert changes == {
        ("destroy", "gpu-0-mig-2g35gb-14-0"),
        ("create", "gpu-0-mig-2g35gb-14-2"),
        ("destroy", "gpu-0-mig-1g18gb-19-2"),
        ("destroy", "gpu-0-mig-1g18gb-19-3"),
        ("create", "gpu-0-mig-1g18gb-19-0"),
        ("create", "gpu-0-mig-1g18gb-19-1"),
    }
    (emb,) = [d for d in dra["devices"] if d["claims"]]
    assert emb["device"] == "gpu-0-mig-2g35gb-14-0" and emb["pods"] == ["ml/emb-pod"]
    assert [w["code"] for w in dra["warnings"]] == ["MP749"]
    for text in (md, comment):
        row = next(line for line in text.splitlines() if "gpu-0-mig-2g35gb-14-0" in line)
        assert "destroy" in row and "ml/emb" in row and "ml/emb-pod" in row
        assert "gpu-0-mig-3g71gb-9-4" not in text  # it stays: never listed
