"""`migplan check-workloads` over a chart's worth of DRA manifests, as CI runs it: the DeviceClass, the claim
templates and the workloads in separate files of a tree, every output format with the same codes, files and lines,
and stdin through a real pipe. The plan is the embedded example (two H200 nodes of two GPUs, each GPU cut
3g.71gb + 2g.35gb + 2 x 1g.18gb)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from helpers.sarif import sarif_problems

from reconciler.cli import cli

CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: h200-mig}
spec:
  selectors:
    - cel:
        expression: >-
          device.driver == 'gpu.nvidia.com' &&
          device.attributes['gpu.nvidia.com'].type == 'mig' &&
          device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'
"""

TEMPLATES = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big, namespace: llm}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: h200-mig
            selectors:
              - cel: {expression: "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) >= 0"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: pair, namespace: llm}
spec:
  spec:
    devices:
      requests:
        - name: small
          exactly:
            deviceClassName: h200-mig
            count: 2
            selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"}}]
      constraints:
        - matchAttribute: gpu.nvidia.com/parentUUID
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: typo, namespace: llm}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: h200-mig
            selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile = '3g.71gb'"}}]
"""

WORKLOADS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: chat, namespace: llm}
spec:
  replicas: 3
  template:
    spec:
      containers: [{name: vllm, resources: {claims: [{name: gpu}]}}]
      resourceClaims:
        - {name: gpu, resourceClaimTemplateName: big}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: batch, namespace: llm}
spec:
  replicas: 5
  template:
    spec:
      containers: [{name: w, resources: {claims: [{name: gpus}]}}]
      resourceClaims:
        - {name: gpus, resourceClaimTemplateName: pair}
---
apiVersion: v1
kind: Pod
metadata: {name: oops, namespace: llm}
spec:
  containers: [{name: c, resources: {claims: [{name: gpu}]}}]
  resourceClaims:
    - {name: gpu, resourceClaimTemplateName: typo}
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "class.yaml").write_text(CLASS)
    (root / "templates" / "claims.yaml").write_text(TEMPLATES)
    (root / "templates" / "workloads.yaml").write_text(WORKLOADS)
    return root


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["check-workloads", "--example", *args], catch_exceptions=False)
    return result.exit_code, result.stdout


def test_a_tree_of_claims_classes_and_workloads(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    code, out = _run(str(root), "-o", "json")
    assert code == 1
    doc = json.loads(out)
    found = sorted((d["code"], Path(d["file"]).name, d["line"]) for d in doc["errors"] + doc["warnings"])
    # chat: four planned devices of 60 GiB or more (the 3g.71gb), three pods: fits. batch: two 1g.18gb per GPU,
    # four GPUs: four pods, not five. oops: `=` is no CEL operator, said where it is written.
    assert found == [("MP613", "workloads.yaml", 18), ("MP629", "claims.yaml", 39)], found
    by_name = {w["name"]: w for w in doc["workloads"]}
    assert by_name["chat"]["claims"] == {
        "perPod": ["ResourceClaimTemplate llm/big"], "shared": [], "planFits": 3, "fleetFits": 3,
    }  # fmt: skip
    assert by_name["batch"]["claims"]["planFits"] == 4
    code, text = _run(str(root))
    assert code == 1
    where = (root / "templates" / "workloads.yaml").as_posix()
    assert f"{where}:18: error MP613: StatefulSet llm/batch: 5 pods" in text


def test_every_output_format_says_the_same(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    _, out = _run(str(root), "-o", "json")
    doc = json.loads(out)
    want = sorted((d["code"], d["file"], d["line"]) for d in doc["errors"] + doc["warnings"])
    _, gh = _run(str(root), "-o", "github")
    got = []
    for line in gh.splitlines():
        props = dict(p.split("=", 1) for p in line.split(" ", 1)[1].split("::", 1)[0].split(","))
        got.append((props["title"], props["file"].replace("%3A", ":"), int(props["line"])))
    assert sorted(got) == want
    _, sarif = _run(str(root), "-o", "sarif")
    log = json.loads(sarif)
    assert sarif_problems(log) == []
    assert sorted(r["ruleId"] for r in log["runs"][0]["results"]) == sorted(w[0] for w in want)


def test_claims_on_stdin_through_a_pipe() -> None:
    rendered = "---\n".join((CLASS, TEMPLATES, WORKLOADS)).encode()
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler", "check-workloads", "--example", "-"],
        input=rendered, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()
    out = proc.stdout.decode()
    assert "error MP613: StatefulSet llm/batch" in out and "error MP629: ResourceClaimTemplate llm/typo" in out


def test_a_good_set_of_claims_exits_0(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    workloads = root / "templates" / "workloads.yaml"
    workloads.write_text(WORKLOADS.split("---\n")[0])
    (root / "templates" / "claims.yaml").write_text(TEMPLATES.split("---\n")[0])
    code, out = _run(str(root))
    assert code == 0, out
    assert "1 GPU workload(s) checked" in out and "0 error(s), 0 warning(s)" in out


RENDERED = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big, namespace: llm}
spec:
  spec:
    devices:
      requests:
        - {name: gpu, exactly: {deviceClassName: migplan-mig-3g.71gb}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: chat, namespace: llm}
spec:
  replicas: REPLICAS
  template:
    spec:
      containers: [{name: vllm, resources: {claims: [{name: gpu}]}}]
      resourceClaims:
        - {name: gpu, resourceClaimTemplateName: big}
"""


def test_a_claim_may_name_the_class_migplan_renders_from_the_plan(tmp_path: Path) -> None:
    """No manifest defines `migplan-mig-3g.71gb`: it is the class migplan renders for that profile. The example plan
    places one 3g.71gb on each of its four GPUs, so four replicas fit and a fifth does not (never MP628, not judged)."""
    fits, over = tmp_path / "fits.yaml", tmp_path / "over.yaml"
    fits.write_text(RENDERED.replace("REPLICAS", "4"))
    over.write_text(RENDERED.replace("REPLICAS", "5"))
    code, out = _run(str(fits), "-o", "json")
    assert code == 0, out
    assert not json.loads(out)["warnings"]
    code, out = _run(str(over), "-o", "json")
    doc = json.loads(out)
    assert code == 1 and [(d["code"], d["line"]) for d in doc["errors"]] == [("MP613", 16)], (
        out
    )  # the pod template, as for every claim
    assert "MP628" not in out
